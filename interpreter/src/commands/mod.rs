//! One module per command, each over the shared `session` (loading, diagnostics) and `reports`;
//! no command imports another.

pub mod bench;
pub mod check;
pub mod explain;
pub mod fmt;
pub mod kernels;
pub mod lsp;
pub mod plot;
pub mod repl;
pub mod run;
pub mod tune;
