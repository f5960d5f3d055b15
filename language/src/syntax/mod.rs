//! Source text to AST: a hand-written lexer, a layout pass that decides which line breaks end a
//! statement, and a chumsky parser with error recovery. Comments and blank lines are kept beside
//! the AST as trivia, for the formatter and the language server.

pub mod ast;
pub mod depth;
pub mod layout;
pub mod lexer;
pub mod parser;
pub mod token;
pub mod trivia;

pub use parser::parse;
