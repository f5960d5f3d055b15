//! Reductions with their elementwise prologue: a sum over any axes whose input is computed by a
//! fused region for it alone (batch norm's `(x - mean) ** 2` and its backward's `dy * xhat`, a
//! bias gradient's masked `dy`, a loss's `(pred - y) ** 2`) becomes one kernel that computes the
//! input chunk by chunk as it sums it. The input is never written out and read back: one memory
//! pass instead of three. Last-axis reductions with neighbours on both sides are row kernels
//! (rows.rs), which run first; this pass takes the sums they leave.

use super::fusion::Kernel;
use crate::ir::{Graph, NodeId, Op, ReduceOp};
use crate::types::DType;
use std::collections::HashMap;

pub use crate::ir::plan::ReduceKernel;

/// The f32 sum node a kernel is, if it is one.
fn f32_sum(g: &Graph, k: &Kernel) -> Option<NodeId> {
    let Kernel::Library(n) = k else { return None };
    let node = g.node(*n);
    let is_sum = matches!(node.op, Op::Reduce(ReduceOp::Sum, _));
    (is_sum && node.dtype == DType::F32 && g.node(node.src[0]).dtype == DType::F32).then_some(*n)
}

/// Merge each f32 sum with the region that computes its input, when nothing else reads the
/// input (the region's other outputs, such as batch norm's `x - mean` beside its square, are
/// still written).
pub fn fuse_prologues(g: &Graph, kernels: Vec<Kernel>, roots: &[NodeId]) -> Vec<Kernel> {
    let mut readers: HashMap<NodeId, usize> = HashMap::new();
    for k in &kernels {
        for r in k.reads(g) {
            *readers.entry(r).or_default() += 1;
        }
    }
    let producer: HashMap<NodeId, usize> = kernels
        .iter()
        .enumerate()
        .filter_map(|(i, k)| match k {
            Kernel::Fused(r) => Some(r.outputs.iter().map(move |o| (*o, i))),
            _ => None,
        })
        .flatten()
        .collect();
    // Which region each sum takes (by kernel index).
    let mut taken: HashMap<usize, usize> = HashMap::new();
    for (i, k) in kernels.iter().enumerate() {
        let Some(n) = f32_sum(g, k) else { continue };
        let input = g.node(n).src[0];
        let Some(&j) = producer.get(&input) else { continue };
        // (One sum per region: a second one reading the same region stays a library kernel.)
        if readers.get(&input) == Some(&1) && !roots.contains(&input) && !taken.contains_key(&j) {
            taken.insert(j, i);
        }
    }
    // The merged kernel runs where the region ran: the sum reads nothing else, and readers of
    // the region's other outputs may come before the sum did.
    let sums: std::collections::HashSet<usize> = taken.values().copied().collect();
    let mut out = Vec::with_capacity(kernels.len());
    for (i, k) in kernels.iter().enumerate() {
        if sums.contains(&i) {
            continue;
        }
        match (k, taken.get(&i)) {
            (Kernel::Fused(prologue), Some(&s)) => {
                let node = f32_sum(g, &kernels[s]).expect("a sum");
                out.push(Kernel::Reduce(ReduceKernel { prologue: prologue.clone(), input: g.node(node).src[0], node }));
            }
            _ => out.push(k.clone()),
        }
    }
    super::inline_written::inline_written(g, out, roots)
}
