//! Source text to AST: a lexer and a hand-written recursive-descent parser with error recovery.

pub mod ast;
pub mod lexer;
pub mod parser;
pub mod token;

pub use parser::parse;
