//! The AVX-512 CPU back end: an elementwise kernel of the kernel IR written as x86-64 machine
//! code by our own encoder (asm.rs), sixteen f32 lanes a vector, every intermediate in a `zmm`
//! register, the remainder under an opmask. It exists because Cranelift has no vectors wider than
//! 128 bits on x86-64: at four lanes its code is bound by instruction count (the guide's gelu took
//! 1.54 ms for 1M values against the chunk interpreter's 0.72-0.90 on a Zen 4).
//!
//! It computes what the Cranelift back end computes, bit for bit (the same operations in the
//! same order, see math.rs), with its calling convention and its `supports` (crate::convention),
//! so either can serve a kernel and the tests compare them lane for lane. Used on CPUs with
//! AVX-512F (checked at run time, with the OS saving `zmm` state), for kernels whose values fit
//! in the 32 vector registers.

mod asm;
pub mod bf16_gemm;
mod codegen;
mod math;
mod memory;

use crate::kir::Elementwise;

type KernelFn = unsafe extern "sysv64" fn(*const *const f32, *const *mut f32, u64);

/// Whether this CPU (and OS) runs AVX-512F code.
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// A compiled kernel; the code lives as long as this value.
pub struct Compiled {
    code: memory::Code,
    /// The same kernel storing its full vectors non-temporally (see [`Compiled::call_streaming`]).
    streaming: memory::Code,
    inputs: usize,
    outputs: usize,
    /// Seconds spent generating and mapping the code.
    pub compile_s: f64,
}

impl Compiled {
    /// Compute elements `0..len` (see `crate::native::Native::call`).
    ///
    /// # Safety
    /// As `Native::call`; and the CPU must have AVX-512F ([`available`]).
    pub unsafe fn call(&self, inputs: &[*const f32], outputs: &[*mut f32], len: usize) {
        debug_assert_eq!(inputs.len(), self.inputs);
        debug_assert_eq!(outputs.len(), self.outputs);
        // SAFETY: the code was generated for exactly this signature (System V, as `KernelFn`).
        let f = unsafe { std::mem::transmute::<*const u8, KernelFn>(self.code.entry()) };
        unsafe { f(inputs.as_ptr(), outputs.as_ptr(), len as u64) }
    }

    /// As [`Compiled::call`], but full vectors go to memory with non-temporal stores (no read
    /// of the lines they overwrite, and the caches kept for the inputs): for outputs larger than
    /// the caches. The caller orders them (`sfence`) before another thread reads the outputs.
    ///
    /// # Safety
    /// As [`Compiled::call`]; and every output pointer must be 64-byte aligned.
    pub unsafe fn call_streaming(&self, inputs: &[*const f32], outputs: &[*mut f32], len: usize) {
        debug_assert!(outputs.iter().all(|o| *o as usize % 64 == 0));
        // SAFETY: as `call`.
        let f = unsafe { std::mem::transmute::<*const u8, KernelFn>(self.streaming.entry()) };
        unsafe { f(inputs.as_ptr(), outputs.as_ptr(), len as u64) }
    }
}

/// Compile `e` for this CPU: an error when the CPU lacks AVX-512F, an op has no compiled form,
/// or the body needs more than 32 vector registers.
pub fn compile(e: &Elementwise) -> Result<Compiled, String> {
    if !available() {
        return Err("this CPU has no AVX-512F".into());
    }
    if !crate::convention::supports_with_bf16_rounding(e) {
        return Err("the kernel uses an op the JIT does not compile".into());
    }
    let started = std::time::Instant::now();
    let code = memory::Code::new(&codegen::generate(e, false)?)?;
    let streaming = memory::Code::new(&codegen::generate(e, true)?)?;
    Ok(Compiled {
        code,
        streaming,
        inputs: crate::convention::input_count(e),
        outputs: e.outputs.len(),
        compile_s: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
pub(crate) mod tests;
