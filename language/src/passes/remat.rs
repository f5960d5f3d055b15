//! Automatic rematerialisation: which forward values backward recomputes instead of keeping
//! (the tuning guide's activation checkpointing, chosen by the compiler for cheap ops, as
//! `torch.compile`'s partitioner does).
//!
//! After a first backward pass, the *saved* values are the forward values that backward nodes
//! read. A saved value is recomputed when it is elementwise and its recomputation reads only
//! other saved values (which stay kept), constants and parameters, through a few more
//! elementwise ops: e.g. `gelu(h)`, read by the next layer's weight gradient, recomputed from
//! `h`, which gelu's own gradient keeps anyway. Nothing new is kept, so the saved set only
//! shrinks; the trainer keeps the result only when the step's planned peak is lower.

use super::fusion::is_fusible;
use crate::ir::{Graph, NodeId, Op};
use std::collections::{BTreeSet, HashSet};

/// The values backward recomputes, and every node their recomputation builds again.
#[derive(Clone, Debug, Default)]
pub struct Remat {
    /// Saved values that backward recomputes.
    pub values: HashSet<NodeId>,
    /// Those values and the intermediate ops and views between them and what they are
    /// recomputed from.
    pub clones: HashSet<NodeId>,
}

/// At most this many ops are recomputed for one value.
const MAX_OPS: usize = 16;

/// A value made of constants and parameters only (a broadcast constant, a reshaped bias): read
/// as it is, never recomputed or kept alive for backward.
pub fn constant_like(g: &Graph, mut n: NodeId) -> bool {
    loop {
        let node = g.node(n);
        match node.op {
            Op::Const(_) | Op::Literal(_) | Op::Param(_) => return true,
            Op::Expand | Op::Reshape => n = node.src[0],
            _ => return false,
        }
    }
}

/// Views that cost nothing to build again (and must not be materialised to be read).
fn is_view(op: &Op) -> bool {
    matches!(op, Op::Expand | Op::Reshape)
}

/// Elementwise work cheap enough to redo in backward.
fn cheap(g: &Graph, n: NodeId) -> bool {
    !is_view(&g.node(n).op) && is_fusible(g, n)
}

/// Choose what to recompute, given the forward nodes (ids below `forward`) and the gradients a
/// first backward pass built.
pub fn choose(g: &Graph, forward: u32, grads: &[NodeId]) -> Remat {
    let saved: BTreeSet<NodeId> =
        g.topo(grads).into_iter().filter(|n| n.0 >= forward).flat_map(|n| g.node(n).src.clone()).filter(|s| s.0 < forward).collect();
    let mut out = Remat::default();
    // Values others are recomputed from: they stay kept.
    let mut pinned: HashSet<NodeId> = HashSet::new();
    for &s in saved.iter().rev() {
        if pinned.contains(&s) || !cheap(g, s) || constant_like(g, s) {
            continue;
        }
        let mut inner = vec![s];
        let mut frontier = vec![];
        let mut stack = vec![s];
        let mut ok = true;
        while let Some(t) = stack.pop() {
            for &u in &g.node(t).src {
                if constant_like(g, u) || inner.contains(&u) || frontier.contains(&u) {
                    continue;
                }
                if saved.contains(&u) && !is_view(&g.node(u).op) {
                    ok &= !out.values.contains(&u);
                    frontier.push(u);
                } else if is_view(&g.node(u).op) || cheap(g, u) {
                    inner.push(u);
                    stack.push(u);
                } else {
                    ok = false;
                }
            }
            if !ok || inner.len() > MAX_OPS {
                ok = false;
                break;
            }
        }
        if ok {
            out.values.insert(s);
            out.clones.extend(inner);
            pinned.extend(frontier);
        }
    }
    out
}
