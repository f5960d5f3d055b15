//! How a program's top-level statements and the REPL evaluate nodes of a (growing) graph, one
//! at a time: the interpreter (fused, with native code (AVX-512 or Cranelift) for large regions when
//! asked). Planned computations (training steps, evaluations, `infer` blocks) do not come
//! through here: they run through `crate::runner::Runner`, on any device of the registry. The
//! eager interpreter is the reference both are tested against.

use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use dlc_language::ir::{Graph, NodeId};

pub trait Backend {
    /// A short name for messages and benchmarks (`eager-cpu`, later `jit-cpu`, `cuda`).
    fn name(&self) -> &'static str;
    /// The value of `node`, computing what it depends on. Results may be cached: graphs only grow.
    fn eval(&mut self, graph: &Graph, node: NodeId) -> Result<Tensor, RuntimeError>;
    /// The values of several nodes, computed together (a fusing back end plans them as one
    /// computation). By default, one after the other.
    fn eval_many(&mut self, graph: &Graph, nodes: &[NodeId]) -> Result<Vec<Tensor>, RuntimeError> {
        nodes.iter().map(|n| self.eval(graph, *n)).collect()
    }
}

impl Backend for crate::exec::Executor {
    fn name(&self) -> &'static str {
        "eager-cpu"
    }
    fn eval(&mut self, graph: &Graph, node: NodeId) -> Result<Tensor, RuntimeError> {
        crate::exec::Executor::eval(self, graph, node)
    }
    fn eval_many(&mut self, graph: &Graph, nodes: &[NodeId]) -> Result<Vec<Tensor>, RuntimeError> {
        crate::exec::Executor::eval_many(self, graph, nodes)
    }
}
