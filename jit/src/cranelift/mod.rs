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
//! The calling convention is `crate::convention`'s.

mod codegen;
mod math;

pub use codegen::{compile, Compiled};

pub use crate::convention::{input_count, key, supports};
use crate::convention::{read, Read};

#[cfg(test)]
pub(crate) mod tests;
