//! The graph: an arena of interned nodes plus side tables (spans, literals, parameters, inputs).

use super::op::{Init, Op};
use crate::span::Span;
use crate::types::{DType, Shape, TensorTy};
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub op: Op,
    pub dtype: DType,
    pub shape: Shape,
    pub src: Vec<NodeId>,
}

impl Node {
    pub fn ty(&self) -> TensorTy {
        TensorTy::new(self.dtype, self.shape.clone())
    }
}

#[derive(Clone, Debug)]
pub struct ParamInfo {
    /// Dotted path, e.g. `fc1.weight`.
    pub path: String,
    pub ty: TensorTy,
    pub init: Init,
    pub span: Span,
    /// False for buffers (running statistics): checkpointed but never updated by the optimiser.
    pub trainable: bool,
}

#[derive(Clone, Debug)]
pub struct InputInfo {
    pub name: String,
    pub ty: TensorTy,
}

#[derive(Clone, Debug, Default)]
pub struct Graph {
    nodes: Vec<Node>,
    /// The source of each node (the first expression that built it).
    spans: Vec<Span>,
    intern: HashMap<Node, NodeId>,
    pub literals: Vec<Vec<f64>>,
    pub params: Vec<ParamInfo>,
    pub inputs: Vec<InputInfo>,
    /// The `checkpoint { ... }` blocks met while tracing, by source span.
    pub checkpoints: Vec<Span>,
    /// The block (index into `checkpoints`) whose tracing built or met each node: its value is
    /// recomputed in backward instead of kept from the forward pass.
    checkpoint_of: HashMap<NodeId, usize>,
    /// The outermost block being traced now: every node added meanwhile belongs to it.
    pub active_checkpoint: Option<usize>,
    /// The precision of the innermost `precision DTYPE { ... }` block that built or met each
    /// node (autocast reads it for matrix products and convolutions).
    precision_of: HashMap<NodeId, crate::types::DType>,
    /// The innermost `precision` block being traced now.
    pub active_precision: Option<crate::types::DType>,
    /// Backward's recomputed copies of checkpointed values: copy -> the forward value.
    pub recomputed: HashMap<NodeId, NodeId>,
}

impl Graph {
    pub fn add(&mut self, node: Node, span: Span) -> NodeId {
        let id = match self.intern.get(&node) {
            Some(id) => *id,
            None => {
                let id = NodeId(self.nodes.len() as u32);
                self.nodes.push(node.clone());
                self.spans.push(span);
                self.intern.insert(node, id);
                id
            }
        };
        // A node met again inside a block (hash-consed from another trace of the same model)
        // belongs to it too. Recomputing a value is always correct (every op is pure, and
        // random ops are counter-based); this only decides what is kept and what is redone.
        if let Some(block) = self.active_checkpoint {
            self.checkpoint_of.entry(id).or_insert(block);
        }
        // The innermost block decides, as nested `torch.autocast` regions do.
        if let Some(p) = self.active_precision {
            self.precision_of.insert(id, p);
        }
        id
    }
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }
    pub fn span(&self, id: NodeId) -> Span {
        self.spans[id.0 as usize]
    }
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
    pub fn ty(&self, id: NodeId) -> TensorTy {
        self.node(id).ty()
    }
    pub fn add_literal(&mut self, values: Vec<f64>) -> u32 {
        self.literals.push(values);
        self.literals.len() as u32 - 1
    }
    pub fn add_param(&mut self, info: ParamInfo) -> u32 {
        self.params.push(info);
        self.params.len() as u32 - 1
    }
    pub fn add_input(&mut self, name: impl Into<String>, ty: TensorTy) -> u32 {
        self.inputs.push(InputInfo { name: name.into(), ty });
        self.inputs.len() as u32 - 1
    }

    /// The `checkpoint` block (index into `checkpoints`) that `id` belongs to.
    pub fn checkpoint_of(&self, id: NodeId) -> Option<usize> {
        self.checkpoint_of.get(&id).copied()
    }

    /// The precision a `precision DTYPE { ... }` block asks of `id`, if it was built in one.
    pub fn precision_of(&self, id: NodeId) -> Option<crate::types::DType> {
        self.precision_of.get(&id).copied()
    }

    /// Every node `roots` depend on, in topological order (sources first).
    pub fn topo(&self, roots: &[NodeId]) -> Vec<NodeId> {
        let mut seen = vec![false; self.nodes.len()];
        let mut order = vec![];
        let mut stack: Vec<(NodeId, bool)> = roots.iter().rev().map(|r| (*r, false)).collect();
        while let Some((id, expanded)) = stack.pop() {
            let i = id.0 as usize;
            if expanded {
                order.push(id);
                continue;
            }
            if seen[i] {
                continue;
            }
            seen[i] = true;
            stack.push((id, true));
            for s in self.nodes[i].src.iter().rev() {
                if !seen[s.0 as usize] {
                    stack.push((*s, false));
                }
            }
        }
        order
    }
}
