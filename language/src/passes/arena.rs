//! A plan's intermediate values as offsets into one allocation (an arena), decided before
//! anything runs: each value that is written by a kernel of the plan and dies within it (the
//! memory plan's `release`) gets an offset, and two values share bytes only when one is dead
//! before the other is written. A device executor allocates the arena once per plan and hands
//! each kernel its output at the planned offset, so the memory a step holds is the arena's size,
//! known in advance, and every value sits at the same address in every step (what a captured
//! CUDA graph needs).
//!
//! Results of the plan (its roots, which outlive it) and values that own no memory (parameters,
//! inputs, constants, views) are not placed.
//!
//! Placement is greedy by size, largest first, each value at the lowest aligned offset that
//! overlaps no placed value alive at the same time: the heuristic of TensorFlow Lite's and ONNX
//! Runtime's arena planners, within a few percent of the peak of live bytes on training steps.

use super::fusion::{Kernel, Plan};
use super::memory::{owns_nothing, views, MemoryPlan};
use crate::ir::{Graph, NodeId};
use std::collections::HashMap;

/// Offsets and the arena's size, in bytes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Arena {
    pub offsets: HashMap<NodeId, usize>,
    pub size: usize,
    /// The most bytes of placed values alive at once (the least any arena could be).
    pub live_peak: usize,
}

/// A placed value: its bytes and the kernels from its writer to its last reader (inclusive).
#[derive(Clone, Copy, Debug)]
struct Span {
    node: NodeId,
    bytes: usize,
    first: usize,
    last: usize,
}

impl Span {
    fn alive_with(&self, o: &Span) -> bool {
        self.first <= o.last && o.first <= self.last
    }
}

/// Place the intermediates of `plan` (with its memory plan `memory`), each taking `bytes(n)`
/// bytes, at offsets that are multiples of `align`.
pub fn plan_arena(g: &Graph, plan: &Plan, memory: &MemoryPlan, bytes: &dyn Fn(NodeId) -> usize, align: usize) -> Arena {
    let views = views(plan);
    let mut first: HashMap<NodeId, usize> = HashMap::new();
    for (i, k) in plan.kernels.iter().enumerate() {
        if matches!(k, Kernel::View(_) | Kernel::Free(_)) {
            continue;
        }
        for n in k.writes() {
            let owns = !views.contains(&n) && !owns_nothing(&g.node(n).op);
            if owns {
                first.entry(n).or_insert(i);
            }
        }
    }
    let mut spans: Vec<Span> = vec![];
    for (i, dead) in memory.release.iter().enumerate() {
        for n in dead {
            if let Some(f) = first.get(n) {
                spans.push(Span { node: *n, bytes: bytes(*n).max(1), first: *f, last: i });
            }
        }
    }
    // Largest first; ties by birth, then node, so the placement is deterministic.
    spans.sort_by_key(|s| (std::cmp::Reverse(s.bytes), s.first, s.node.0));
    let align = align.max(1);
    let mut placed: Vec<(Span, usize)> = vec![];
    let mut arena = Arena::default();
    for s in spans {
        let mut busy: Vec<(usize, usize)> = placed.iter().filter(|(p, _)| p.alive_with(&s)).map(|(p, off)| (*off, off + p.bytes)).collect();
        busy.sort_unstable();
        let mut off = 0;
        for (start, end) in busy {
            if off + s.bytes <= start {
                break;
            }
            off = off.max(end.div_ceil(align) * align);
        }
        arena.size = arena.size.max(off + s.bytes);
        arena.offsets.insert(s.node, off);
        placed.push((s, off));
    }
    arena.size = arena.size.div_ceil(align) * align;
    arena.live_peak = live_peak(&placed);
    arena
}

/// The most bytes alive at once among the placed values.
fn live_peak(placed: &[(Span, usize)]) -> usize {
    let end = placed.iter().map(|(s, _)| s.last).max().map_or(0, |l| l + 1);
    (0..end).map(|k| placed.iter().filter(|(s, _)| s.first <= k && k <= s.last).map(|(s, _)| s.bytes).sum()).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Node, Op, UnaryOp};
    use crate::span::Span as SrcSpan;
    use crate::types::{DType, Dim};

    /// A chain x -> exp -> exp -> ... -> exp: each value dies when the next is computed, so
    /// two slots suffice whatever the length, and no two values alive together overlap.
    #[test]
    fn a_chain_reuses_two_slots() {
        let mut g = Graph::default();
        let s = SrcSpan::default();
        let sh = || vec![Dim::known(32), Dim::known(32)];
        let x = g.add(Node { op: Op::Input(0), dtype: DType::F32, shape: sh(), src: vec![] }, s);
        let mut v = x;
        for _ in 0..8 {
            v = g.add(Node { op: Op::Unary(UnaryOp::Exp), dtype: DType::F32, shape: sh(), src: vec![v] }, s);
            v = g.add(Node { op: Op::MatMul, dtype: DType::F32, shape: sh(), src: vec![v, v] }, s);
        }
        let plan = crate::passes::driver::plan(&g, &[v], true).expect("verified").plan;
        let memory = super::super::memory::plan_memory(&g, &plan);
        let arena = plan_arena(&g, &plan, &memory, &|_| 32 * 32 * 4, 256);
        assert!(!arena.offsets.is_empty());
        assert_eq!(arena.size, 2 * 32 * 32 * 4, "{arena:?}");
        assert!(arena.size >= arena.live_peak);
        assert!(!arena.offsets.contains_key(&v), "the result outlives the plan and is not placed");
    }

    /// Values of several sizes with long and short lives (a residual kept across a chain, two
    /// branches joined): no two values alive at the same kernel share a byte, and the arena is
    /// no smaller than what is alive at once.
    #[test]
    fn values_alive_together_never_share_bytes() {
        let mut g = Graph::default();
        let s = SrcSpan::default();
        let sh = |n: i64| vec![Dim::known(n), Dim::known(n)];
        let x = g.add(Node { op: Op::Input(0), dtype: DType::F32, shape: sh(16), src: vec![] }, s);
        let mut v = x;
        for i in 0..6 {
            let a = g.add(Node { op: Op::Unary(UnaryOp::Exp), dtype: DType::F32, shape: sh(16), src: vec![v] }, s);
            let b = g.add(Node { op: Op::MatMul, dtype: DType::F32, shape: sh(16), src: vec![a, v] }, s);
            let c =
                g.add(Node { op: Op::MatMul, dtype: if i % 2 == 0 { DType::F32 } else { DType::BF16 }, shape: sh(16), src: vec![b, a] }, s);
            let d = g.add(Node { op: Op::Unary(UnaryOp::Tanh), dtype: DType::F32, shape: sh(16), src: vec![c] }, s);
            v = g.add(Node { op: Op::MatMul, dtype: DType::F32, shape: sh(16), src: vec![d, v] }, s);
        }
        let plan = crate::passes::driver::plan(&g, &[v], true).expect("verified").plan;
        let memory = super::super::memory::plan_memory(&g, &plan);
        // Sizes that differ per value, so placement is not a matter of equal slots.
        let bytes = |n: NodeId| 1000 + 37 * (n.0 as usize % 11);
        let arena = plan_arena(&g, &plan, &memory, &bytes, 64);
        let mut first: HashMap<NodeId, usize> = HashMap::new();
        for (i, k) in plan.kernels.iter().enumerate() {
            for n in k.writes() {
                first.entry(n).or_insert(i);
            }
        }
        let last: HashMap<NodeId, usize> = memory.release.iter().enumerate().flat_map(|(i, d)| d.iter().map(move |n| (*n, i))).collect();
        let placed: Vec<(NodeId, usize)> = arena.offsets.iter().map(|(n, o)| (*n, *o)).collect();
        assert!(placed.len() >= 12, "{placed:?}");
        for (i, (a, oa)) in placed.iter().enumerate() {
            assert_eq!(oa % 64, 0);
            assert!(oa + bytes(*a) <= arena.size);
            for (b, ob) in &placed[i + 1..] {
                let together = first[a] <= last[b] && first[b] <= last[a];
                let share = *oa < ob + bytes(*b) && *ob < oa + bytes(*a);
                assert!(!(together && share), "{a:?} at {oa} and {b:?} at {ob} are alive together and overlap");
            }
        }
        assert!(arena.size >= arena.live_peak && arena.live_peak > 0);
    }
}
