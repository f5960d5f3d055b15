//! The calling convention of native CPU kernels, which every back end follows (`crate::native`
//! chooses among them): every buffer holds f32 values, whatever the kernel IR's storage type
//! (the caller widens inputs and narrows outputs, as the chunk interpreter does). The inputs are
//! first the kernel's parameters, in order: a parameter loaded at the output's index is passed
//! at the chunk's first element, one only read as a broadcast scalar ([`Index::Splat`]) at its
//! element 0. Then, for every broadcast load with strides ([`Index::Strided`]) in body order, a
//! buffer the caller filled with that load's values for the chunk. The outputs are the kernel's
//! outputs, in order, each at the chunk's first element. Also here: which kernels have a
//! compiled form, and the key that native code is shared by.

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

/// Whether every instruction of `e` has a compiled form on every back end.
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

/// Whether `e` has a compiled form where bf16 rounding (`Round(BF16, _)`) has one too (the
/// AVX-512 back end).
pub fn supports_with_bf16_rounding(e: &Elementwise) -> bool {
    let without: Vec<Inst> =
        e.body.iter().map(|i| if matches!(i, Inst::Round(crate::kir::Ty::BF16, _)) { Inst::Const(0.0) } else { i.clone() }).collect();
    supports(&Elementwise { body: without, ..e.clone() })
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
