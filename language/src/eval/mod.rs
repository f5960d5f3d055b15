//! Name resolution, type/shape checking and lowering, as one walk: the *tracer* evaluates the AST
//! over [`value::Value`]s whose tensors are nodes of a [`crate::ir::Graph`]. With symbolic inputs
//! the walk is the checker (shapes like `f32[B, 784]`); with concrete inputs it is the lowering
//! that the interpreter executes. One set of shape rules serves both.

pub mod annot;
pub mod builtin_impl;
pub mod builtins;
pub mod call;
pub mod data;
pub mod data_fields;
pub mod data_sequences;
pub mod expr;
pub mod host;
mod index;
mod layer_hint;
pub mod model;
pub mod ops;
pub mod recipe;
pub mod session;
pub mod spec;
pub mod tracer;
pub mod value;

pub use host::Host;
pub use session::{ModelSummary, Session};
pub use tracer::Mode;
pub use value::Value;

/// An error was already reported as a diagnostic; unwind to the enclosing item.
#[derive(Debug, Clone, Copy)]
pub struct Reported;
pub type R<T> = Result<T, Reported>;
