//! A fused reduction's other outputs recomputed by the regions that read them, when that reads
//! no more than writing them out would cost.
//!
//! Batch norm's variance sums `(x - mean)²` and its region also wrote `x - mean` for the
//! normalisation; its backward pass sums values of `dy` and `x` (its gradient's paths through
//! the weight, the variance and the mean), and the sums' regions also wrote the values the next
//! kernels read: `dy · w` and the gradient through `x - mean`, 8 MiB each in the conv-BN step.
//! Each such value is computed from a few full-size tensors that exist anyway and per-channel
//! broadcasts, so the region that reads it can compute it from those instead: the write (and the
//! read of it) saved for at most one more tensor read.

use super::fusion::{Kernel, Region};
use crate::ir::{Graph, NodeId, Op};
use std::collections::HashSet;

/// The members of `r` that `o` is computed from (itself included), in member order, and the
/// values from outside `r` they read, in first-use order.
fn computation_of(g: &Graph, r: &Region, o: NodeId) -> (Vec<NodeId>, Vec<NodeId>) {
    let members: HashSet<NodeId> = r.nodes.iter().copied().collect();
    let mut needed = HashSet::from([o]);
    let mut stack = vec![o];
    while let Some(n) = stack.pop() {
        for s in &g.node(n).src {
            if members.contains(s) && needed.insert(*s) {
                stack.push(*s);
            }
        }
    }
    let nodes: Vec<NodeId> = r.nodes.iter().copied().filter(|n| needed.contains(n)).collect();
    let mut reads = vec![];
    for n in &nodes {
        for s in &g.node(*n).src {
            if !needed.contains(s) && !reads.contains(s) {
                reads.push(*s);
            }
        }
    }
    (nodes, reads)
}

/// `reader` computing `o` itself: the computation's members it lacks joined to its own, all in
/// node order (a member the reader shares with the computation, such as a mask each region
/// recomputes, may come after the reader's first members) with its last member kept last; its
/// inputs the values from outside its members read, in first-use order, `o` no longer among
/// them. `None` when that order puts a member before one of its sources (a graph's nodes are
/// added after their sources, so it does not).
fn inlined(g: &Graph, reader: &Region, o: NodeId, nodes: &[NodeId], reads: &[NodeId]) -> Option<Region> {
    let last = reader.output();
    let mut members: Vec<NodeId> = nodes.iter().copied().filter(|n| !reader.nodes.contains(n)).collect();
    members.extend(reader.nodes.iter().copied());
    members.sort_unstable_by_key(|n| (*n == last, n.0));
    let inside: HashSet<NodeId> = members.iter().copied().collect();
    let outside: HashSet<NodeId> = reads.iter().chain(&reader.inputs).copied().filter(|s| *s != o && !inside.contains(s)).collect();
    let mut inputs = vec![];
    let mut done = HashSet::new();
    for n in &members {
        for s in &g.node(*n).src {
            if inside.contains(s) && !done.contains(s) {
                return None;
            }
            if outside.contains(s) && !inputs.contains(s) {
                inputs.push(*s);
            }
        }
        done.insert(*n);
    }
    let outputs = reader.outputs.clone();
    Some(Region { nodes: members, inputs, outputs })
}

/// A fused region's or a fused reduction's region.
fn region(k: &Kernel) -> &Region {
    match k {
        Kernel::Fused(r) => r,
        Kernel::Reduce(rk) => &rk.prologue,
        _ => unreachable!("every reader is a region"),
    }
}

/// Each `Kernel::Reduce`'s written outputs (not roots, not its last member) whose readers are
/// all regions (fused, or a fused reduction's) computed by them instead, when the full-size
/// tensors its computation reads that a reader does not read already number, over all the
/// readers, at most one more than the readers (each read `o` before; a write costs about two
/// reads), and none is a product's output.
pub fn inline_written(g: &Graph, mut kernels: Vec<Kernel>, roots: &[NodeId]) -> Vec<Kernel> {
    for i in 0..kernels.len() {
        let Kernel::Reduce(rk) = &kernels[i] else { continue };
        let (prologue, summed) = (rk.prologue.clone(), rk.input);
        let written: Vec<NodeId> = prologue.outputs.iter().copied().filter(|o| *o != summed && *o != prologue.output()).collect();
        for o in written {
            let readers: Vec<usize> = (0..kernels.len()).filter(|j| kernels[*j].reads(g).contains(&o)).collect();
            let all_fused = readers.iter().all(|j| matches!(kernels[*j], Kernel::Fused(_) | Kernel::Reduce(_)));
            if roots.contains(&o) || readers.is_empty() || !all_fused {
                continue;
            }
            let (nodes, reads) = computation_of(g, &prologue, o);
            // A product's output read by a second region would no longer be its bias add's
            // alone (epilogue.rs takes the add into the product's kernel).
            if reads.iter().any(|s| matches!(g.node(*s).op, Op::MatMul)) {
                continue;
            }
            let full = |s: &&NodeId| g.node(**s).shape == g.node(o).shape;
            let extra: usize = readers
                .iter()
                .map(|j| {
                    let r = region(&kernels[*j]);
                    reads.iter().filter(full).filter(|s| !r.inputs.contains(s)).count()
                })
                .sum();
            if extra > readers.len() + 1 {
                continue;
            }
            let Some(new) = readers.iter().map(|j| inlined(g, region(&kernels[*j]), o, &nodes, &reads)).collect::<Option<Vec<_>>>() else {
                continue;
            };
            for (j, r) in readers.into_iter().zip(new) {
                match &mut kernels[j] {
                    Kernel::Fused(region) => *region = r,
                    Kernel::Reduce(rk) => rk.prologue = r,
                    _ => unreachable!("every reader is a region"),
                }
            }
            let Kernel::Reduce(rk) = &mut kernels[i] else { unreachable!("kernel {i} is a reduction") };
            rk.prologue.outputs.retain(|x| *x != o);
        }
    }
    kernels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{Mode, Session};
    use crate::ir::plan::{Plan, ReduceKernel};
    use crate::ir::BinaryOp;

    /// The fused plan of `src`'s `y`, its graph, and `y`.
    fn planned(src: &str) -> (Plan, Graph, NodeId) {
        let mut session = Session::new(Mode::Check);
        assert!(session.run_source("t.dl", src, &mut crate::eval::host::NullHost), "{:?}", session.diagnostics());
        let crate::eval::Value::Tensor(root) = session.t.lookup("y").expect("y is bound") else { panic!("y is not a tensor") };
        let graph = session.t.graph.clone();
        (crate::passes::driver::plan(&graph, &[root], true).expect("verified").plan, graph, root)
    }

    /// The plan's fused reductions.
    fn sums(plan: &Plan) -> Vec<&ReduceKernel> {
        plan.kernels.iter().filter_map(|k| if let Kernel::Reduce(rk) = k { Some(rk) } else { None }).collect()
    }

    /// `g = d * w` is summed with `x` (its region written out beside the sum) and read again
    /// after the sum: the later region computes it from `d` and `w` instead, and no kernel
    /// writes it. (Checked to fail without the pass: the reduction wrote `g`.)
    #[test]
    fn a_value_a_sum_wrote_is_computed_by_its_reader() {
        let (plan, graph, root) = planned(
            "let x = randn(f32[4, 3, 5, 5], seed: 0)\n\
             let d = randn(f32[4, 3, 5, 5], seed: 1)\n\
             let w = randn(f32[1, 3, 1, 1], seed: 2)\n\
             let g = d * w\n\
             let s = sum(g * x, axis: (0, 2, 3), keepdim: true)\n\
             let y = g + s\n",
        );
        let product = |n: &NodeId| matches!(graph.node(*n).op, Op::Binary(BinaryOp::Mul));
        assert_eq!(sums(&plan).len(), 1, "{plan:?}");
        let full = |n: &NodeId| graph.node(*n).shape == graph.node(root).shape;
        for k in &plan.kernels {
            assert!(!k.writes().iter().any(|n| product(n) && full(n)), "no kernel writes d * w: {k:?}");
        }
        let last = plan.kernels.iter().rev().find_map(|k| if let Kernel::Fused(r) = k { Some(r) } else { None }).expect("y's region");
        assert!(last.nodes.iter().any(product), "y's region computes d * w: {last:?}");
    }

    /// Batch norm's `x - mean` (x written by a library kernel, the mean broadcast), written
    /// beside its square by the variance's sum, is recomputed by the region that normalises:
    /// the sum then writes nothing but its sums. (Checked to fail without the pass.)
    #[test]
    fn batch_norms_difference_is_recomputed_where_it_is_read() {
        let (plan, graph, root) = planned(
            "let x = randn(f32[4, 3, 5, 5], seed: 0)\n\
             let mu = mean(x, axis: (0, 2, 3), keepdim: true)\n\
             let v = mean((x - mu) ** 2, axis: (0, 2, 3), keepdim: true)\n\
             let y = (x - mu) / sqrt(v + 1e-5)\n",
        );
        let difference =
            |n: &NodeId| matches!(graph.node(*n).op, Op::Binary(BinaryOp::Sub)) && graph.node(*n).shape == graph.node(root).shape;
        for k in &plan.kernels {
            assert!(!k.writes().iter().any(difference), "no kernel writes x - mu: {k:?}");
        }
        let sums = sums(&plan);
        assert_eq!(sums.len(), 1, "the variance's sum computes its input: {plan:?}");
        assert_eq!(sums[0].outputs().len(), 1, "and writes only its sums: {:?}", sums[0]);
    }
}
