//! Native CPU code for elementwise kernels of the kernel IR, from whichever back end serves this
//! machine best: the AVX-512 emitter ([`crate::x64`], sixteen lanes a vector) on CPUs with
//! AVX-512F, Cranelift ([`crate::cranelift`], four lanes) elsewhere or for kernels the emitter
//! declines. Both compute the interpreter's bits exactly, so the choice changes only the speed;
//! `DLC_NATIVE=cranelift` (or `avx512`) forces one, to measure them apart.
//!
//! The calling convention both follow (see [`Native::call`]): every buffer holds f32 values,
//! whatever the kernel IR's storage type (the caller widens inputs and narrows outputs, as the
//! chunk interpreter does). The inputs are first the kernel's parameters, in order: a parameter
//! loaded at the output's index is passed at the chunk's first element, one only read as a
//! broadcast scalar ([`Index::Splat`]) at its element 0. Then, for every broadcast load with
//! strides ([`Index::Strided`]) in body order, a buffer the caller filled with that load's values
//! for the chunk. The outputs are the kernel's outputs, in order, each at the chunk's first
//! element.

use crate::kir::{Buf, Elementwise, Index, Inst};
use dlc_language::ir::{BinaryOp, UnaryOp};

/// How the native code reads a load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// At the current element, from the parameter's pointer.
    Chunk,
    /// Element 0 of the parameter, the same at every element.
    Splat,
    /// At the current element, from a buffer the caller filled (a broadcast with strides).
    Buffer,
}

pub(crate) fn read(index: &Index) -> Read {
    match index {
        Index::Linear => Read::Chunk,
        Index::Splat => Read::Splat,
        // (All-zero strides broadcast one value: a splat, as the chunk interpreter takes it.)
        Index::Strided(s) if s.iter().all(|s| *s == 0) => Read::Splat,
        Index::Strided(_) => Read::Buffer,
    }
}

/// How many input pointers the native code takes: the parameters, then a buffer per broadcast
/// load with a non-zero stride.
pub fn input_count(e: &Elementwise) -> usize {
    e.inputs.len() + e.body.iter().filter(|i| matches!(i, Inst::Load { index, .. } if read(index) == Read::Buffer)).count()
}

/// Whether every instruction of `e` has a compiled form on both back ends.
pub fn supports(e: &Elementwise) -> bool {
    e.body.iter().all(|i| match i {
        Inst::Load { from, .. } => matches!(from, Buf::Param(_)),
        Inst::Unary(op, _) => matches!(
            op,
            UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sqrt | UnaryOp::Recip | UnaryOp::Exp | UnaryOp::Erf | UnaryOp::Tanh | UnaryOp::Log
        ),
        Inst::Binary(op, _, _) => !matches!(op, BinaryOp::Mod | BinaryOp::Pow),
        // (Rounding to bf16/f16 has no native form yet: such kernels stay interpreted.)
        Inst::Round(..) => false,
        Inst::Const(_) | Inst::Where(..) | Inst::ToBool(_) => true,
    })
}

/// Whether `e` has a compiled form on `backend`: the AVX-512 back end also rounds to bf16
/// (`Round(BF16, _)`, which Cranelift does not), so bf16 kernels run natively there.
pub fn supports_on(e: &Elementwise, backend: Backend) -> bool {
    let bf16_round = |i: &Inst| matches!(i, Inst::Round(crate::kir::Ty::BF16, _));
    match backend {
        Backend::Cranelift => supports(e),
        Backend::Avx512 => {
            let without: Vec<Inst> = e.body.iter().map(|i| if bf16_round(i) { Inst::Const(0.0) } else { i.clone() }).collect();
            supports(&Elementwise { body: without, ..e.clone() })
        }
    }
}

/// Whether `e` has a compiled form on this machine's back end.
pub fn compilable(e: &Elementwise) -> bool {
    supports_on(e, Backend::preferred())
}

/// The text of what the native code of `e` depends on, and nothing else: its body with each load
/// as how it is read (not the shape, the buffers' lengths and storage, or a broadcast's
/// strides, which the caller handles), and its output registers. Kernels with the same key share
/// native code, so a body run over many shapes (an optimiser update over every parameter) is
/// compiled once.
pub fn key(e: &Elementwise) -> String {
    let body: Vec<String> = e
        .body
        .iter()
        .map(|i| match i {
            Inst::Load { from, index } => format!("Load({from:?}, {:?})", read(index)),
            other => format!("{other:?}"),
        })
        .collect();
    let outputs: Vec<usize> = e.outputs.iter().map(|o| o.0).collect();
    format!("inputs {} body [{}] outputs {outputs:?}", e.inputs.len(), body.join(", "))
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
    /// buffers is not read), in the order this module's doc gives.
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
