//! Kernels for dlc: the kernel IR and the back ends that consume it. It does not depend on the
//! interpreter (which depends on it).
//!
//! - [`kir`]: the kernel IR, every kernel a fusion plan runs described once and independently of
//!   the device (elementwise regions, groups of them, row kernels, sums over axes), lowered from
//!   the graph IR's fusion plan with the choices the CPU interpreter makes.
//! - [`render`]: the kernel IR rendered as source, CUDA C for NVRTC or plain C that runs the same
//!   grid as loops (to check the bodies against the interpreter on the CPU).
//! - [`cuda`]: the GPU through the CUDA driver (loaded at run time): NVRTC compiles with an
//!   on-disk PTX cache, device buffers and launches.
//! - [`cranelift`]: elementwise kernels of the kernel IR compiled to native CPU code, bit for bit
//!   equal to the interpreter (used with `--jit`, or per region when it measures faster).
//! - [`x64`]: the same kernels as AVX-512 machine code from our own encoder (sixteen lanes, where
//!   Cranelift has four), on CPUs with AVX-512F; [`native`] chooses between the two.
//! - [`coeffs`]: the coefficients of `exp`, `log`, `erf` and `tanh`, shared by the interpreter,
//!   the renderers and the Cranelift back end so that all compute the same values.

pub mod coeffs;
pub mod convention;
pub mod cranelift;
pub mod cuda;
pub mod kir;
pub mod native;
pub mod render;
#[cfg(target_arch = "x86_64")]
pub mod x64;
