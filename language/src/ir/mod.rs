//! The graph IR: a small, closed op set (see docs/ir.md). Graphs are hash-consed, so building the
//! same expression twice gives the same node (common subexpressions are shared for free).

pub mod graph;
pub mod op;
pub mod plan;
pub mod print;
pub mod verify;

pub use graph::{Graph, InputInfo, Node, NodeId, ParamInfo};
pub use op::{BinaryOp, Init, Op, PoolKind, RandDist, ReduceOp, UnaryOp};

/// A node of known shape added to `g`: for tests that build graphs by hand.
#[cfg(test)]
pub(crate) fn test_node(g: &mut Graph, op: Op, dtype: crate::types::DType, shape: &[i64], src: Vec<NodeId>) -> NodeId {
    let shape = shape.iter().map(|d| crate::types::Dim::known(*d)).collect();
    g.add(Node { op, dtype, shape, src }, crate::span::Span::default())
}
