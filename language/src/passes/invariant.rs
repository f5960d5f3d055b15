//! Evaluation specialisation: in `evaluate` and `infer` the parameters are constants, so every
//! value computed from parameters and constants alone (batch norm's per-channel scale
//! `weight / sqrt(running_var + eps)` and shift, a transposed weight, ...) is the same for every
//! batch. It is computed once per evaluation and given to each batch's kernels as a ready input,
//! which leaves a convolution followed by batch norm and relu as the convolution plus one fused
//! kernel per batch.

use super::fusion::{self, Kernel, Plan};
use crate::ir::{Graph, NodeId, Op};
use std::collections::HashSet;

/// Split `plan` into what each batch runs and what is computed once. A value is invariant when
/// it depends on no `Input`. The kernels that only compute invariant values leave the per-batch
/// plan (parameters' free kernels stay: they bind the values). Returns the frontier (the
/// invariant values that cost work and that a remaining kernel reads, or that are results:
/// compute these once, then preset them) and the per-batch plan.
pub fn specialise(g: &Graph, plan: &Plan) -> (Vec<NodeId>, Plan) {
    let order = g.topo(&plan.roots);
    let mut nodes = HashSet::new();
    for &n in &order {
        let node = g.node(n);
        let varies = matches!(node.op, Op::Input(_)) || node.src.iter().any(|s| !nodes.contains(s));
        if !varies {
            nodes.insert(n);
        }
    }
    let invariant = |outs: &[NodeId]| outs.iter().all(|o| nodes.contains(o));
    let kernels: Vec<Kernel> = plan.kernels.iter().filter(|k| matches!(k, Kernel::Free(_)) || !invariant(&k.writes())).cloned().collect();
    let costs_nothing = |n: NodeId| fusion::is_free(&g.node(n).op);
    let mut frontier = vec![];
    let mut seen = HashSet::new();
    let mut need = |s: NodeId, frontier: &mut Vec<NodeId>| {
        if nodes.contains(&s) && !costs_nothing(s) && seen.insert(s) {
            frontier.push(s);
        }
    };
    for k in &kernels {
        for s in k.reads(g) {
            need(s, &mut frontier);
        }
    }
    for &r in &plan.roots {
        need(r, &mut frontier);
    }
    (frontier, Plan { kernels, roots: plan.roots.clone() })
}
