//! dlc's runtime and front door: tensors, the eager executor of the graph IR, printing, the
//! diagnostics renderer, and the library API the CLI and REPL are thin clients of.

pub mod api;
pub mod backend;
pub mod compile;
pub mod device;
pub mod exec;
pub mod kernels;
pub mod lsp;
pub mod parallel;
pub mod paths;
pub mod pipeline;
pub mod plot;
pub mod render;
pub mod roofline;
pub mod runner;
pub mod runtime;
pub mod train;

pub use api::{ExecMode, Program, RunOutput};
pub use dlc_language::types::DType;
pub use runtime::tensor::{Data, Tensor};
