//! Kernel back ends for dlc. Today: the Cranelift CPU back end for fused elementwise regions.
//!
//! A [`Kernel`] is a straight-line program over f32 values (the fusion pass's region, with
//! broadcasts already resolved into inputs by the caller). [`compile`] turns it into one native
//! function that loops over a range of elements four at a time (`f32x4`: Cranelift has no wider
//! vectors on x86-64) with a scalar tail, every intermediate in a register. The caller splits
//! the index space into chunks and runs them on all cores.
//!
//! Every op computes exactly what the interpreter's f32 kernels compute (the same operations in
//! the same order, fused multiply-adds exactly where the interpreter calls `mul_add`, the same
//! polynomial `exp` and `log`, rational `erf` and `tanh`), so JIT and interpreter agree bit for
//! bit; ops without such a twin here (`sin`, `cos`, `pow`, ...) are not compiled and their
//! regions stay on the interpreter ([`supports`]).

mod codegen;
pub mod coeffs;
pub mod cuda;
pub mod kir;
mod math;
pub mod render;

pub use codegen::{compile, Compiled};
pub use dlc_language::ir::{BinaryOp, UnaryOp};

/// Where an instruction reads a value: an earlier instruction's result, or input `k` (an array
/// the caller passes, read at the current element).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Src {
    Reg(usize),
    Input(usize),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Inst {
    /// The value of an input (or a register) at the current element.
    Load(Src),
    /// Element 0 of input `k`, the same for every element (a broadcast scalar).
    Splat(usize),
    Const(f32),
    Unary(UnaryOp, Src),
    /// Comparisons give 1.0 or 0.0; `and`/`or` take 0/non-0 operands.
    Binary(BinaryOp, Src, Src),
    /// `cond != 0 ? a : b`.
    Where(Src, Src, Src),
    /// `x != 0 ? 1 : 0`.
    ToBool(Src),
}

/// A fused elementwise kernel: instructions over registers (register i is instruction i's
/// result); `outputs` are the registers written to the output arrays, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub insts: Vec<Inst>,
    pub inputs: usize,
    pub outputs: Vec<usize>,
}

/// Whether every instruction of `k` has a compiled form.
pub fn supports(k: &Kernel) -> bool {
    k.insts.iter().all(|i| match i {
        Inst::Unary(op, _) => matches!(
            op,
            UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sqrt | UnaryOp::Recip | UnaryOp::Exp | UnaryOp::Erf | UnaryOp::Tanh | UnaryOp::Log
        ),
        Inst::Binary(op, _, _) => !matches!(op, BinaryOp::Mod | BinaryOp::Pow),
        _ => true,
    })
}

/// The back ends this build can execute the graph IR with.
pub fn backends() -> &'static [&'static str] {
    &["eager-cpu", "jit-cpu"]
}
