//! `dlc lsp`, the language server: the real parser's (partial) trees and the checker's
//! `Session::check_partial`, the shapes it infers, and `dlc fmt`'s formatter, served over LSP.
//! `main_loop` is the transport, `server` the state, `handlers` the dispatch; each feature is
//! its own module over one document's `analysis`. docs/editors.md describes what each does.

mod actions;
mod analysis;
mod completion;
mod describe;
mod diagnostics;
mod docs;
mod document;
mod formatting;
mod handlers;
mod hover;
mod inlay;
mod lens;
mod line_index;
mod main_loop;
mod navigate;
mod rename;
mod resolve;
mod run;
mod scopes;
mod server;
mod signature;
mod stdlib;
mod symbols;
mod uri;
mod walk;

pub use analysis::{analyze, Analysis};
pub use line_index::LineIndex;
pub use main_loop::{capabilities, run_stdio};
pub use server::{Server, DEBOUNCE};
pub use uri::{from_path as uri_from_path, to_path as uri_to_path};
