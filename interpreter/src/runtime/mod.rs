//! Runtime state: tensors, random streams, and the error type of everything that runs.

pub mod cpu;
pub mod data;
pub mod format;

pub mod rng;
pub mod tensor;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{0}")]
    Unsupported(String),
    #[error("input `{0}` has no value bound")]
    UnboundInput(String),
    #[error("shape is not known at run time: {0}")]
    SymbolicShape(String),
    #[error("{0}")]
    Io(String),
    /// A data file failed to load: the message names the file (and row), the span the source
    /// expression in the program that asked for it.
    #[error("{message}")]
    Data { message: String, span: dlc_language::Span },
    /// Training stopped by Ctrl-C (after saving a checkpoint when the recipe names a directory).
    #[error("interrupted")]
    Interrupted,
    /// The program asks for something this version checks but does not execute yet.
    #[error("{0}")]
    NotExecutedYet(String),
    /// A checkpoint could not be read or written.
    #[error("{0}")]
    Checkpoint(String),
    /// Training would write into a checkpoint directory or metrics file that holds an earlier
    /// run (`--resume` continues it, `--overwrite` moves it aside and starts over).
    #[error("{} holds an earlier run", .0.display())]
    RunExists(std::path::PathBuf),
    /// The device could not be opened or failed.
    #[error("{0}")]
    Device(String),
}

/// A pass that broke an IR invariant stops the run with the verifier's message (an internal
/// compiler error naming the pass and the node).
impl From<dlc_language::ir::verify::VerifyError> for RuntimeError {
    fn from(e: dlc_language::ir::verify::VerifyError) -> Self {
        RuntimeError::Unsupported(e.to_string())
    }
}

/// When the process started, as the binary records it first thing in `main` (unset when dlc is
/// used as a library): the time to the first training step is measured from it.
pub static PROCESS_STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Seconds since `PROCESS_STARTED`, when the binary set it.
pub fn seconds_since_start() -> Option<f64> {
    PROCESS_STARTED.get().map(|t| t.elapsed().as_secs_f64())
}
