//! The one interface every back end implements: evaluate a node of a (growing) graph.
//! Today there is one, the eager interpreter; the Cranelift JIT and the CUDA back end will sit
//! behind the same trait, and the eager interpreter stays the reference they are tested against.

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
