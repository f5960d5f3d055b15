//! Kernel back ends for dlc (Cranelift on the CPU, emitted CUDA C on GPUs).
//!
//! Nothing is compiled here yet: this milestone executes the graph IR with the eager interpreter
//! in `dlc` (interpreter/src/exec). The crate exists now so that the dependency direction
//! interpreter → jit → language is fixed from the start; the fusion scheduler and the Cranelift
//! translator arrive with the optimising-compiler milestone.

/// The back ends this build can execute the graph IR with.
pub fn backends() -> &'static [&'static str] {
    &["eager-cpu"]
}
