//! Memory planning: from a plan's kernel order, when each value dies (its last reader has run)
//! and the peak of what is live at once, known before anything runs. The executor drops each
//! value at its death, so the memory of a step is what this plan says, not the sum of every
//! intermediate; freed blocks are then reused by the allocator for the next kernels and the next
//! step (the guide's "preallocate and reuse", by liveness).
//!
//! Views (reshapes, detaches, transposes the matrix products read in place) own no memory: a
//! read of a view is a read of the value it shows, which therefore lives as long as the view.

use super::fusion::{Kernel, Plan};

use crate::ir::{Graph, NodeId, Op};
use crate::types::DType;
use std::collections::{HashMap, HashSet};

/// Bytes a value of this dtype takes per element in the runtime (bf16/f16 are stored as f32,
/// bools and integers as i64).
pub fn element_bytes(d: DType) -> usize {
    match d {
        DType::F64 | DType::I64 | DType::I32 | DType::U8 | DType::Bool => 8,
        _ => 4,
    }
}

fn bytes(g: &Graph, n: NodeId) -> usize {
    let node = g.node(n);
    let numel: i64 = node.shape.iter().map(|d| d.as_known().unwrap_or(1)).product();
    numel.max(1) as usize * element_bytes(node.dtype)
}

pub use crate::ir::plan::MemoryPlan;

/// A value and, when it is a view, what it shows, down to the value that owns the storage:
/// reading any of them keeps all of them alive.
fn chain(g: &Graph, views: &HashSet<NodeId>, mut n: NodeId) -> Vec<NodeId> {
    let mut out = vec![n];
    while matches!(g.node(n).op, Op::Reshape | Op::Detach | Op::Recompute) || views.contains(&n) {
        n = g.node(n).src[0];
        out.push(n);
    }
    out
}

/// Values that own no memory worth counting (held elsewhere, views, constants).
pub(super) fn owns_nothing(op: &Op) -> bool {
    matches!(op, Op::Param(_) | Op::Input(_) | Op::Reshape | Op::Detach | Op::Recompute | Op::Const(_) | Op::Literal(_))
}

/// The values of `plan` that are views (`Kernel::View`): they own no memory.
pub(super) fn views(plan: &Plan) -> HashSet<NodeId> {
    plan.kernels.iter().filter_map(|k| if let Kernel::View(n) = k { Some(*n) } else { None }).collect()
}

/// Liveness over `plan`: which kernel frees what, and the peak.
pub fn plan_memory(g: &Graph, plan: &Plan) -> MemoryPlan {
    let views = views(plan);
    // What each kernel reads and writes.
    let mut reads: Vec<Vec<NodeId>> = vec![];
    let mut writes: Vec<Vec<NodeId>> = vec![];
    for k in &plan.kernels {
        let (r, w) = match k {
            // A view owns nothing; its readers read (and keep alive) what it shows.
            Kernel::View(_) => (vec![], vec![]),
            _ => {
                let mut r = k.reads(g);
                // A matrix product reads a transposed operand from its source (in place).
                if matches!(k, Kernel::Gemm(_)) || matches!(k, Kernel::Library(n) if matches!(g.node(*n).op, Op::MatMul)) {
                    r.extend(r.clone().into_iter().filter(|s| super::fusion::is_transpose(&g.node(*s).op)).map(|s| g.node(s).src[0]));
                }
                (r, k.writes())
            }
        };
        reads.push(r.into_iter().flat_map(|n| chain(g, &views, n)).collect());
        writes.push(w);
    }
    let roots: HashSet<NodeId> = plan.roots.iter().flat_map(|r| chain(g, &views, *r)).collect();
    let mut last: HashMap<NodeId, usize> = HashMap::new();
    for (i, r) in reads.iter().enumerate() {
        for n in r {
            last.insert(*n, i);
        }
    }
    let mut out = MemoryPlan { release: vec![vec![]; plan.kernels.len()], ..Default::default() };
    let mut live = 0usize;
    let mut live_set: HashSet<NodeId> = HashSet::new();
    for (i, w) in writes.iter().enumerate() {
        for &n in w {
            let b = bytes(g, n);
            match g.node(n).op {
                Op::Param(_) => out.parameters += b,
                Op::Input(_) => out.inputs += b,
                ref op if owns_nothing(op) => {}
                _ => {
                    live += b;
                    out.without_reuse += b;
                    live_set.insert(n);
                }
            }
        }
        if live > out.peak_intermediates {
            out.peak_intermediates = live;
            out.live_at_peak = live_set.clone();
        }
        // A value nobody reads after this kernel (and that is not a result) dies here; one
        // written and never read dies at once.
        let dead: Vec<NodeId> = w
            .iter()
            .chain(&reads[i])
            .copied()
            .filter(|n| !roots.contains(n) && last.get(n).is_none_or(|l| *l <= i))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        for &n in &dead {
            if !owns_nothing(&g.node(n).op) && !views.contains(&n) {
                live -= bytes(g, n).min(live);
                live_set.remove(&n);
            }
        }
        out.release[i] = dead;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Node, UnaryOp};
    use crate::span::Span;
    use crate::types::Dim;

    /// x -> matmul -> exp -> matmul: the first product dies once the exp has read it, so the
    /// peak holds two [64, 64] values, not three.
    #[test]
    fn a_value_dies_after_its_last_reader() {
        let mut g = Graph::default();
        let s = Span::default();
        let sh = || vec![Dim::known(64), Dim::known(64)];
        let x = g.add(Node { op: Op::Input(0), dtype: DType::F32, shape: sh(), src: vec![] }, s);
        let a = g.add(Node { op: Op::MatMul, dtype: DType::F32, shape: sh(), src: vec![x, x] }, s);
        let e = g.add(Node { op: Op::Unary(UnaryOp::Exp), dtype: DType::F32, shape: sh(), src: vec![a] }, s);
        let b = g.add(Node { op: Op::MatMul, dtype: DType::F32, shape: sh(), src: vec![e, e] }, s);
        let plan = crate::passes::driver::plan(&g, &[b], true).expect("verified").plan;
        let m = plan_memory(&g, &plan);
        let one = 64 * 64 * 4;
        assert_eq!(m.inputs, one);
        assert_eq!(m.without_reuse, 3 * one);
        assert_eq!(m.peak_intermediates, 2 * one);
        // `a` is released by the exp's kernel, `e` by the second product's; `b` (the root) never.
        let released: Vec<NodeId> = m.release.iter().flatten().copied().collect();
        assert!(released.contains(&a) && released.contains(&e) && !released.contains(&b));
    }
}
