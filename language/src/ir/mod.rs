//! The graph IR: a small, closed op set (see docs/ir.md). Graphs are hash-consed, so building the
//! same expression twice gives the same node (common subexpressions are shared for free).

pub mod graph;
pub mod op;
pub mod plan;
pub mod print;
pub mod verify;

pub use graph::{Graph, InputInfo, Node, NodeId, ParamInfo};
pub use op::{BinaryOp, Init, Op, PoolKind, RandDist, ReduceOp, UnaryOp};
