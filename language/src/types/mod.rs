//! Dtypes, symbolic dimensions, tensor types, and the shape rules of every primitive.

pub mod dtype;
pub mod rules;
pub mod shape;

pub use dtype::DType;
pub use shape::{Dim, Shape, TensorTy};
