//! The one set of NVRTC options every generated translation unit is compiled with, by the
//! launcher and by `dlc kernels --check cuda` alike, so what is checked is what runs.
//!
//! Multiply-adds are not contracted (`--fmad=false`): the CPU's kernels (the chunk interpreter,
//! Cranelift, the C check) round every product before the add, and NVRTC's default contraction
//! made the first run on a GPU (an H200, 2026-11-26) differ from the CPU in the low bits of most
//! elements of the Adam and layer-norm kernels, far beyond rounding wherever a difference cancels.
//! Division and square root stay IEEE-rounded (NVRTC's defaults, stated here so that a change of
//! default cannot move results), and denormals are kept as the CPU keeps them.

/// The options for `virt` (`compute_90`), with `name` for NVRTC's messages.
pub fn compile_options(virt: &'static str, name: Option<String>) -> cudarc::nvrtc::CompileOptions {
    cudarc::nvrtc::CompileOptions {
        arch: Some(virt),
        name,
        fmad: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        ftz: Some(false),
        use_fast_math: Some(false),
        ..Default::default()
    }
}

/// What the options are, as text for the PTX cache's key: a change of options compiles anew.
pub const SIGNATURE: &str = "fmad=false prec-div prec-sqrt no-ftz";
