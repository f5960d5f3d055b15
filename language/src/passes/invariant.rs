//! Evaluation specialisation: in `evaluate` and `infer` the parameters are constants, so every
//! value computed from parameters and constants alone (batch norm's per-channel scale
//! `weight / sqrt(running_var + eps)` and shift, a transposed weight, ...) is the same for every
//! batch. It is computed once per evaluation and given to each batch's kernels as a ready input,
//! which leaves a convolution followed by batch norm and relu as the convolution plus one fused
//! kernel per batch.

use super::fusion::{self, Kernel, Plan};
use crate::ir::{Graph, NodeId, Op};
use std::collections::HashSet;

/// The values of a computation that do not depend on its inputs.
pub struct Invariant {
    /// Every node that depends on no `Input` (and no per-step random draw).
    pub nodes: HashSet<NodeId>,
    /// Those a batch-dependent node reads (or that are results), and that cost work: compute
    /// these once, then preset them.
    pub frontier: Vec<NodeId>,
}

/// Split what `roots` need into what depends on the inputs and what does not.
pub fn invariant(g: &Graph, roots: &[NodeId]) -> Invariant {
    let order = g.topo(roots);
    let mut nodes = HashSet::new();
    for &n in &order {
        let node = g.node(n);
        let varies = matches!(node.op, Op::Input(_)) || node.src.iter().any(|s| !nodes.contains(s));
        if !varies {
            nodes.insert(n);
        }
    }
    let costs_nothing = |n: NodeId| fusion::is_free(&g.node(n).op);
    let mut frontier = vec![];
    let mut seen = HashSet::new();
    for &n in &order {
        if nodes.contains(&n) {
            continue;
        }
        for &s in &g.node(n).src {
            if nodes.contains(&s) && !costs_nothing(s) && seen.insert(s) {
                frontier.push(s);
            }
        }
    }
    for &r in roots {
        if nodes.contains(&r) && !costs_nothing(r) && seen.insert(r) {
            frontier.push(r);
        }
    }
    Invariant { nodes, frontier }
}

/// The kernels a batch runs once the frontier is preset: the plan without the kernels that
/// only compute invariant values (parameters' free kernels stay: they bind the values).
pub fn per_batch(plan: &Plan, inv: &Invariant) -> Plan {
    let kernels = plan
        .kernels
        .iter()
        .filter(|k| match k {
            Kernel::Fused(r) => !r.outputs.iter().all(|o| inv.nodes.contains(o)),
            Kernel::Group(rs) => !rs.iter().all(|r| r.outputs.iter().all(|o| inv.nodes.contains(o))),
            Kernel::Free(_) => true,
            Kernel::Library(n) | Kernel::View(n) => !inv.nodes.contains(n),
        })
        .cloned()
        .collect();
    Plan { kernels, roots: plan.roots.clone() }
}
