//! The Cranelift CPU back end: an elementwise kernel of the kernel IR ([`Elementwise`]) compiled
//! to one native function that loops over a range of elements four at a time (`f32x4`: Cranelift
//! has no wider vectors on x86-64) with a scalar tail, every intermediate in a register. The
//! caller splits the index space into chunks and runs them on all cores.
//!
//! Every op computes exactly what the interpreter's f32 kernels compute (the same operations in
//! the same order, fused multiply-adds exactly where the interpreter calls `mul_add`, the same
//! polynomial `exp` and `log`, rational `erf` and `tanh`), so native code and interpreter agree
//! bit for bit; kernels with an op that has no such twin here (`sin`, `cos`, `pow`, `mod`, ...,
//! and the bf16/f16 rounding `Round`) are not compiled and stay on the interpreter
//! ([`supports`]).
//!
//! The calling convention (see [`Compiled::call`]): every buffer holds f32 values, whatever the
//! kernel IR's storage type (the caller widens inputs and narrows outputs, as the chunk
//! interpreter does). The inputs are first the kernel's parameters, in order: a parameter loaded
//! at the output's index is passed at the chunk's first element, one only read as a broadcast
//! scalar ([`Index::Splat`]) at its element 0. Then, for every broadcast load with strides
//! ([`Index::Strided`]) in body order, a buffer the caller filled with that load's values for the
//! chunk. The outputs are the kernel's outputs, in order, each at the chunk's first element.

mod codegen;
mod math;

pub use codegen::{compile, Compiled};

use crate::kir::{Buf, Elementwise, Index, Inst};
use dlc_language::ir::{BinaryOp, UnaryOp};

/// How the native code reads a load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    /// At the current element, from the parameter's pointer.
    Chunk,
    /// Element 0 of the parameter, the same at every element.
    Splat,
    /// At the current element, from a buffer the caller filled (a broadcast with strides).
    Buffer,
}

fn read(index: &Index) -> Read {
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

/// Whether every instruction of `e` has a compiled form.
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

#[cfg(test)]
mod tests;
