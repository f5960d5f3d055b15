//! The DL front end: source text to checked graph IR.
//!
//! Architecture invariant: this crate does no IO and names no backend. Everything it learns about the
//! outside world (module sources, what `print` does) comes through the [`eval::Host`] trait, and
//! everything it reports is a [`diag::Diagnostic`] value that the CLI renders.

pub mod diag;
pub mod eval;
pub mod format;
pub mod habits;
pub mod ir;
pub mod passes;
pub mod span;
pub mod stdlib;
pub mod syntax;
pub mod types;

pub use diag::{Diagnostic, Label, Severity};
pub use span::{FileId, SourceMap, Span};
