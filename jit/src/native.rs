//! Native CPU code for elementwise kernels of the kernel IR, from whichever back end serves this
//! machine best: the AVX-512 emitter ([`crate::x64`], sixteen lanes a vector) on CPUs with
//! AVX-512F, Cranelift ([`crate::cranelift`], four lanes) elsewhere or for kernels the emitter
//! declines. Both compute the interpreter's bits exactly, so the choice changes only the speed;
//! `DLC_NATIVE=cranelift` forces Cranelift, to measure the two apart.
//!
//! Both follow the calling convention of [`crate::convention`].

pub use crate::convention::{input_count, key, supports};
use crate::kir::Elementwise;

/// Whether `e` has a compiled form on `backend`: the AVX-512 back end also rounds to bf16
/// (`Round(BF16, _)`, which Cranelift does not), so bf16 kernels run natively there.
pub fn supports_on(e: &Elementwise, backend: Backend) -> bool {
    match backend {
        Backend::Cranelift => supports(e),
        Backend::Avx512 => crate::convention::supports_with_bf16_rounding(e),
    }
}

/// Whether `e` has a compiled form on this machine's back end.
pub fn compilable(e: &Elementwise) -> bool {
    supports_on(e, Backend::preferred())
}

/// Which back end made a kernel's code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Avx512,
    Cranelift,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Avx512 => "avx512",
            Backend::Cranelift => "cranelift",
        }
    }

    /// The back end this machine's kernels are compiled with: AVX-512 where the CPU has it,
    /// unless `DLC_NATIVE` says otherwise.
    pub fn preferred() -> Backend {
        match std::env::var("DLC_NATIVE").as_deref() {
            Ok("cranelift") => Backend::Cranelift,
            _ if avx512() => Backend::Avx512,
            _ => Backend::Cranelift,
        }
    }
}

fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    return crate::x64::available();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

enum Code {
    Cranelift(Box<crate::cranelift::Compiled>),
    #[cfg(target_arch = "x86_64")]
    X64(crate::x64::Compiled),
}

/// A compiled kernel.
pub struct Native {
    code: Code,
    pub backend: Backend,
    /// Seconds spent compiling.
    pub compile_s: f64,
}

impl Native {
    /// Compute elements `0..len`: `inputs[k]` and `outputs[j]` each point at `len` f32 values
    /// (at least one for a parameter only read as a splat; a parameter only read through
    /// buffers is not read), in the order `crate::convention` gives.
    ///
    /// # Safety
    /// The pointers must be valid for those elements, as many as [`input_count`] and the
    /// kernel's outputs, and the outputs must not overlap anything else the kernel reads.
    pub unsafe fn call(&self, inputs: &[*const f32], outputs: &[*mut f32], len: usize) {
        match &self.code {
            Code::Cranelift(c) => unsafe { c.call(inputs, outputs, len) },
            #[cfg(target_arch = "x86_64")]
            Code::X64(c) => unsafe { c.call(inputs, outputs, len) },
        }
    }
}

impl Native {
    /// Whether [`Native::call_streaming`] stores non-temporally (else it is [`Native::call`]).
    pub fn streams(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        return matches!(self.code, Code::X64(_));
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// As [`Native::call`], with outputs that are 64-byte aligned and larger than the caches:
    /// full vectors stored non-temporally where the back end can ([`Native::streams`]); the
    /// caller fences (`sfence`) before another thread reads the outputs.
    ///
    /// # Safety
    /// As [`Native::call`]; and every output pointer must be 64-byte aligned.
    pub unsafe fn call_streaming(&self, inputs: &[*const f32], outputs: &[*mut f32], len: usize) {
        match &self.code {
            Code::Cranelift(c) => unsafe { c.call(inputs, outputs, len) },
            #[cfg(target_arch = "x86_64")]
            Code::X64(c) => unsafe { c.call_streaming(inputs, outputs, len) },
        }
    }
}

/// Compile `e` with `backend` (AVX-512 falls back to Cranelift for a kernel it declines, such as
/// one that needs more than 32 vector registers).
pub fn compile_with(e: &Elementwise, backend: Backend) -> Result<Native, String> {
    #[cfg(target_arch = "x86_64")]
    if backend == Backend::Avx512 {
        if let Ok(c) = crate::x64::compile(e) {
            let compile_s = c.compile_s;
            return Ok(Native { code: Code::X64(c), backend, compile_s });
        }
    }
    let c = crate::cranelift::compile(e)?;
    let compile_s = c.compile_s;
    Ok(Native { code: Code::Cranelift(Box::new(c)), backend: Backend::Cranelift, compile_s })
}

/// Compile `e` with this machine's preferred back end.
pub fn compile(e: &Elementwise) -> Result<Native, String> {
    compile_with(e, Backend::preferred())
}

#[cfg(test)]
mod tests {
    use super::{compile_with, Backend};

    /// A body the AVX-512 back end declines (more live values than its 32 registers) is still
    /// compiled, by Cranelift, and says so.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_kernel_the_emitter_declines_is_compiled_by_cranelift() {
        let e = crate::x64::tests::too_wide();
        let c = compile_with(&e, Backend::Avx512).expect("compiled");
        assert_eq!(c.backend, Backend::Cranelift);
        let x: Vec<f32> = (0..8).map(|i| i as f32).collect();
        let mut y = vec![0f32; 8];
        // SAFETY: one input and one output of 8 values.
        unsafe { c.call(&[x.as_ptr()], &[y.as_mut_ptr()], 8) };
        assert_eq!(y, x.iter().map(|v| v * 40.0).collect::<Vec<_>>());
    }
}
