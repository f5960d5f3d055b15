//! Fusion: partition the nodes a computation needs into kernels. Chains of elementwise ops over
//! one index space become one *region*, executed as one kernel that reads its inputs once and
//! writes one output, with no intermediate tensors (the tuning guide's "fuse pointwise
//! operations"). Everything else is a library kernel (matrix products, convolutions, reductions,
//! copies) or free (inputs, parameters, constants, reshapes, which are views).
//!
//! The rule is greedy, from the outputs back: an elementwise node joins the region of its users
//! when all of its users are in that one region and it has the region's shape; otherwise it ends a
//! region of its own (its value is needed elsewhere, so it is materialised once). A region has
//! one output. `Expand` (broadcast) joins as a broadcasting load of its source, and a 0-d
//! constant is inlined.
//!
//! Only f32 values and bools are fused today (the dtypes the CPU kernels compute in); f16/bf16
//! storage rounding and integer arithmetic run as library kernels.

use crate::ir::{BinaryOp, Graph, NodeId, Op, UnaryOp};
use crate::types::DType;
use std::collections::{HashMap, HashSet};

pub use crate::ir::plan::{Kernel, Plan, Region};

/// Nodes that cost nothing to "run".
pub fn is_free(op: &Op) -> bool {
    matches!(op, Op::Input(_) | Op::Param(_) | Op::Const(_) | Op::Literal(_) | Op::Reshape | Op::Detach | Op::Recompute)
}

/// Whether a node can be computed inside a fused elementwise kernel.
pub fn is_fusible(g: &Graph, id: NodeId) -> bool {
    let n = g.node(id);
    let known = n.shape.iter().all(|d| d.as_known().is_some());
    // f32 and the low precisions stored as f32 (each op's result rounded, as the eager
    // interpreter rounds it), and bools as 0/1.
    let f32_or_bool = |t: DType| matches!(t, DType::F32 | DType::BF16 | DType::F16 | DType::Bool);
    let float = |t: DType| matches!(t, DType::F32 | DType::BF16 | DType::F16);
    if !known || !f32_or_bool(n.dtype) || !n.src.iter().all(|s| f32_or_bool(g.node(*s).dtype)) {
        return false;
    }
    let is_bool = n.dtype == DType::Bool;
    match &n.op {
        Op::Unary(UnaryOp::Not) => is_bool,
        Op::Unary(_) => !is_bool,
        Op::Binary(b) => match b {
            BinaryOp::CmpLt | BinaryOp::CmpLe | BinaryOp::CmpEq | BinaryOp::CmpNe => true,
            BinaryOp::And | BinaryOp::Or => is_bool,
            // Bool arithmetic wraps to 0/1 in the eager interpreter: keep it there.
            _ => !is_bool && n.src.iter().all(|s| float(g.node(*s).dtype)),
        },
        Op::Where => g.node(n.src[1]).dtype == n.dtype,
        Op::Cast => true,
        Op::Expand => true,
        _ => false,
    }
}

/// Values cheaper to recompute in each region that reads them than to write out and read back:
/// broadcasts (a broadcast load), and masks (a comparison; a bool tensor is stored as i64, so a
/// mask read back costs twice its f32 source). The guide's rematerialisation, for free ops.
fn rematerialise(g: &Graph, n: NodeId) -> bool {
    let node = g.node(n);
    match node.op {
        Op::Expand => true,
        Op::Binary(BinaryOp::CmpLt | BinaryOp::CmpLe | BinaryOp::CmpEq | BinaryOp::CmpNe) | Op::Unary(UnaryOp::Not) => {
            node.dtype == DType::Bool
        }
        _ => false,
    }
}

/// Whether `n` is a cast of an f32 value to bf16 (what autocast puts before a product's operand).
pub fn is_bf16_rounding(g: &Graph, n: NodeId) -> bool {
    let node = g.node(n);
    matches!(node.op, Op::Cast) && node.dtype == DType::BF16 && g.node(node.src[0]).dtype == DType::F32
}

/// Whether a bf16 product reads cast `n` as its source, rounding it as it reads it: an
/// f32-to-bf16 cast the executor has no value for (`computed`), because the plan left it to the
/// products (`fold_casts`) or computed the transpose of it that the product reads in place.
pub fn is_folded_cast(g: &Graph, n: NodeId, computed: impl Fn(NodeId) -> bool) -> bool {
    is_bf16_rounding(g, n) && !computed(n)
}

/// How many casts `plan` left to the products that read them (views of a cast: `fold_casts`).
pub fn folded_casts(g: &Graph, plan: &Plan) -> usize {
    plan.kernels.iter().filter(|k| matches!(k, Kernel::View(n) if matches!(g.node(*n).op, Op::Cast))).count()
}

/// A product with a dim of at most 16 (m, n or k: a classifier's 10 outputs and their
/// gradients). The bf16 kernels waste most of a tile on it, so the f32 kernels often run it
/// faster (the tuner measures both), and an f32 kernel reads a folded cast's operand through a
/// rounded copy: such a product keeps its casts. (Unknown dims count as large.)
fn thin_product(g: &Graph, product: NodeId) -> bool {
    let node = g.node(product);
    let last_two = |id: NodeId| {
        let shape = &g.node(id).shape;
        shape[shape.len().saturating_sub(2)..].iter().map(|d| d.as_known().unwrap_or(i64::MAX)).collect::<Vec<_>>()
    };
    // [.., m, k] @ [.., k, n] -> [.., m, n]: the left operand's dims and the output's n.
    last_two(node.src[0]).into_iter().chain(last_two(product).into_iter().skip(1)).any(|d| d <= 16)
}

/// A permutation that swaps the last two axes and keeps the others (a batched transpose).
pub fn is_transpose(op: &Op) -> bool {
    match op {
        Op::Permute(p) => {
            let r = p.len();
            r >= 2 && p[r - 2] == r - 1 && p[r - 1] == r - 2 && p[..r - 2].iter().enumerate().all(|(i, x)| *x == i)
        }
        _ => false,
    }
}

/// Partition what `roots` need into kernels: fused regions, library calls, views. With `fuse`
/// false every working node is its own kernel (the eager interpreter's plan, for `--no-fuse`
/// and for comparison). The driver (driver.rs) runs rows and prologue after it, then
/// [`group_independent`].
///
/// `fold_casts` (with `fuse`, where the device's products round f32 operands to bf16 as they
/// pack them: the CPU's bf16 kernels): a cast of an f32 value to bf16 that only bf16 products
/// read, directly or through a transpose they read in place, becomes a view
/// ([`is_folded_cast`]); the product reads the f32 value and rounds it itself, so the cast's
/// pass over memory (a read and a write of every value) is never made.
pub fn plan(g: &Graph, roots: &[NodeId], fuse: bool, fold_casts: bool) -> Vec<Kernel> {
    let mut p = Partition::new(g, roots);
    if fuse {
        if fold_casts {
            p.folded = p.order.iter().copied().filter(|&n| p.foldable_cast(n)).collect();
        }
        for &n in p.order.clone().iter().rev() {
            if is_fusible(g, n) && !p.folded.contains(&n) {
                p.assign(n);
            }
        }
    }
    let kernels = p.kernels(fuse);
    debug_assert!({
        kernels.iter().all(|k| match k {
            Kernel::Fused(r) => r.inputs.iter().all(|i| p.pos[i] < p.pos[&r.output()]),
            _ => true,
        })
    });
    kernels
}

/// The partition being built: the nodes in run order, who reads what, and each fused node's
/// region.
struct Partition<'g> {
    g: &'g Graph,
    roots: &'g [NodeId],
    /// Creation order (a node's sources are always older than it): the forward pass as
    /// written, then backward as autodiff made it, from the loss back, each weight's gradient
    /// as soon as backward reaches its layer, as PyTorch's autograd engine orders it. A depth-
    /// first order from the roots would leave every weight gradient, and every activation it
    /// reads, to the end.
    order: Vec<NodeId>,
    users: HashMap<NodeId, Vec<NodeId>>,
    pos: HashMap<NodeId, usize>,
    /// Region index of each fused node, decided from the outputs back, and where each region's
    /// output sits in the order (where the region runs).
    region_of: HashMap<NodeId, usize>,
    out_pos: Vec<usize>,
    /// Broadcasts read by several regions: recomputed inside each (a broadcast load costs no
    /// memory pass) rather than materialised at full size.
    inlined: HashSet<NodeId>,
    /// Casts to bf16 left to the products that read them (`plan`'s `fold_casts`).
    folded: HashSet<NodeId>,
}

impl<'g> Partition<'g> {
    fn new(g: &'g Graph, roots: &'g [NodeId]) -> Partition<'g> {
        let mut order = g.topo(roots);
        order.sort_unstable();
        let mut users: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
        for &n in &order {
            for &s in &g.node(n).src {
                users.entry(s).or_default().push(n);
            }
        }
        let pos = order.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        Partition {
            g,
            roots,
            order,
            users,
            pos,
            region_of: HashMap::new(),
            out_pos: vec![],
            inlined: HashSet::new(),
            folded: HashSet::new(),
        }
    }

    /// A transpose the matrix products read in place (`kernels` makes it a view).
    fn transpose_view(&self, n: NodeId) -> bool {
        let g = self.g;
        is_transpose(&g.node(n).op)
            && !self.roots.contains(&n)
            && self.users.get(&n).is_some_and(|us| us.iter().all(|u| matches!(g.node(*u).op, Op::MatMul)))
    }

    /// An f32-to-bf16 cast that is no root and is read only by bf16 matrix products none of
    /// whose dims is thin ([`thin_product`]), directly or through transposes they read in place.
    fn foldable_cast(&self, n: NodeId) -> bool {
        let g = self.g;
        let bf16_product = |u: &NodeId| matches!(g.node(*u).op, Op::MatMul) && g.node(*u).dtype == DType::BF16 && !thin_product(g, *u);
        is_bf16_rounding(g, n)
            && !self.roots.contains(&n)
            && self
                .users
                .get(&n)
                .is_some_and(|us| us.iter().all(|u| bf16_product(u) || (self.transpose_view(*u) && self.users[u].iter().all(bf16_product))))
    }

    /// The kernels' readers of a value: its users, an inlined user replaced by its own readers.
    fn readers(&self, n: NodeId) -> Vec<NodeId> {
        let mut out = vec![];
        let mut stack: Vec<NodeId> = self.users.get(&n).cloned().unwrap_or_default();
        while let Some(u) = stack.pop() {
            if self.inlined.contains(&u) {
                stack.extend(self.users.get(&u).cloned().unwrap_or_default());
            } else if !out.contains(&u) {
                out.push(u);
            }
        }
        out.sort_by_key(|u| self.pos[u]);
        out
    }

    /// Put fusible node `n` (its readers decided already) in a region: its readers' when they
    /// share one, inlined into each reader when it is cheap to recompute, the first reader's
    /// when the others run after it, else a region of its own.
    fn assign(&mut self, n: NodeId) {
        let g = self.g;
        let direct = self.users.get(&n).map(|v| v.as_slice()).unwrap_or(&[]);
        let us = &self.readers(n);
        let joined = if us.is_empty() {
            None
        } else {
            let region_of = &self.region_of;
            let first = region_of.get(&us[0]).copied();
            let same = first.is_some() && us.iter().all(|u| region_of.get(u).copied() == first);
            // An expand's source is loaded with broadcasting, so it is never a member itself.
            let into_expand = direct.iter().any(|u| matches!(g.node(*u).op, Op::Expand));
            let same_shape = us.iter().all(|u| g.node(*u).shape == g.node(n).shape);
            let all_fused = us.iter().all(|u| region_of.contains_key(u));
            if into_expand {
                None
            } else if same && same_shape {
                // A root joins its users' region too (as an extra output of it).
                first
            } else if rematerialise(g, n) && all_fused && same_shape && !self.roots.contains(&n) {
                self.inlined.insert(n);
                return;
            } else {
                self.first_reader_region(n, us)
            }
        };
        let r = joined.unwrap_or_else(|| {
            self.out_pos.push(self.pos[&n]);
            self.out_pos.len() - 1
        });
        self.region_of.insert(n, r);
    }

    /// Read by several kernels (a forward value the backward pass reads again): the first of
    /// its readers' regions to run, which it joins as an extra output, when every other reader
    /// runs after that region.
    fn first_reader_region(&self, n: NodeId, us: &[NodeId]) -> Option<usize> {
        let (g, region_of, out_pos) = (self.g, &self.region_of, &self.out_pos);
        let candidate =
            us.iter().filter_map(|u| region_of.get(u).copied().filter(|_| g.node(*u).shape == g.node(n).shape)).min_by_key(|r| out_pos[*r]);
        candidate.filter(|&c| {
            us.iter().all(|u| match region_of.get(u) {
                Some(&r) => r == c || out_pos[r] > out_pos[c],
                None => self.pos[u] > out_pos[c],
            })
        })
    }

    /// Each region's nodes in order; an inlined node goes in just before its first reader in
    /// the region (after its own inlined sources).
    fn members(&self) -> Vec<Vec<NodeId>> {
        fn add_inlined(g: &Graph, inlined: &HashSet<NodeId>, s: NodeId, into: &mut Vec<NodeId>) {
            if !inlined.contains(&s) || into.contains(&s) {
                return;
            }
            for &t in &g.node(s).src {
                add_inlined(g, inlined, t, into);
            }
            into.push(s);
        }
        let mut members: Vec<Vec<NodeId>> = vec![vec![]; self.out_pos.len()];
        for &n in &self.order {
            if let Some(&r) = self.region_of.get(&n) {
                for &s in &self.g.node(n).src {
                    add_inlined(self.g, &self.inlined, s, &mut members[r]);
                }
                members[r].push(n);
            }
        }
        members
    }

    /// Region `r` (whose last node is `n`): what it reads from outside, and what it writes (its
    /// last node, roots, and values read outside it).
    fn region(&self, r: usize, n: NodeId, nodes: &[NodeId]) -> Region {
        let g = self.g;
        let mut inputs = vec![];
        for &m in nodes {
            for &s in &g.node(m).src {
                let inside = self.region_of.get(&s) == Some(&r) || (self.inlined.contains(&s) && nodes.contains(&s));
                let inlined = matches!(g.node(s).op, Op::Const(_));
                if !inside && !inlined && !inputs.contains(&s) {
                    inputs.push(s);
                }
            }
        }
        let outputs = nodes
            .iter()
            .copied()
            .filter(|m| {
                !self.inlined.contains(m)
                    && (*m == n || self.roots.contains(m) || self.readers(*m).iter().any(|u| self.region_of.get(u) != Some(&r)))
            })
            .collect();
        Region { nodes: nodes.to_vec(), inputs, outputs }
    }

    /// The kernels in dependency order: a region goes where its output sits in the order; a
    /// region nothing else reads (an optimiser update) waits for the end, so that all of them
    /// can run as one launch.
    fn kernels(&self, fuse: bool) -> Vec<Kernel> {
        let (g, users) = (self.g, &self.users);
        let members = self.members();
        let mut kernels = vec![];
        let mut sinks = vec![];
        for &n in &self.order {
            match self.region_of.get(&n) {
                Some(&r) => {
                    let nodes = &members[r];
                    if *nodes.last().expect("non-empty") != n {
                        continue;
                    }
                    let region = self.region(r, n, nodes);
                    let read_outside = |o: &NodeId| users.get(o).is_some_and(|us| us.iter().any(|u| self.region_of.get(u) != Some(&r)));
                    if !region.outputs.iter().any(read_outside) {
                        sinks.push(Kernel::Fused(region));
                    } else {
                        kernels.push(Kernel::Fused(region));
                    }
                }
                None if self.inlined.contains(&n) => {}
                None if is_free(&g.node(n).op) => kernels.push(Kernel::Free(n)),
                // A transpose read only by matrix products: they take it as strides (with `fuse`);
                // a folded cast: they round its source as they read it.
                None if (fuse && self.transpose_view(n)) || self.folded.contains(&n) => kernels.push(Kernel::View(n)),
                None => kernels.push(Kernel::Library(n)),
            }
        }
        kernels.append(&mut sinks);
        kernels
    }
}

/// Merge runs of fused regions that do not read each other's outputs into one launch. Free
/// kernels in between that do not depend on the run are moved before it; anything else ends it.
pub fn group_independent(g: &Graph, kernels: Vec<Kernel>) -> Vec<Kernel> {
    let mut out = vec![];
    let mut run: Vec<Region> = vec![];
    let mut hoisted: Vec<Kernel> = vec![];
    let mut produced: std::collections::HashSet<NodeId> = Default::default();
    let flush =
        |out: &mut Vec<Kernel>, run: &mut Vec<Region>, hoisted: &mut Vec<Kernel>, produced: &mut std::collections::HashSet<NodeId>| {
            out.append(hoisted);
            match run.len() {
                0 => {}
                1 => out.push(Kernel::Fused(run.pop().expect("one region"))),
                _ => out.push(Kernel::Group(std::mem::take(run))),
            }
            produced.clear();
        };
    for k in kernels {
        match k {
            Kernel::Fused(r) => {
                if r.inputs.iter().any(|i| produced.contains(i)) {
                    flush(&mut out, &mut run, &mut hoisted, &mut produced);
                }
                produced.extend(r.outputs.iter().copied());
                run.push(r);
            }
            Kernel::Free(n) | Kernel::View(n) if !g.node(n).src.iter().any(|s| produced.contains(s)) => {
                if run.is_empty() {
                    out.push(k);
                } else {
                    hoisted.push(k);
                }
            }
            other => {
                flush(&mut out, &mut run, &mut hoisted, &mut produced);
                out.push(other);
            }
        }
    }
    flush(&mut out, &mut run, &mut hoisted, &mut produced);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{Mode, Session};

    fn printed_plan(src: &str, fuse: bool) -> (Plan, Graph) {
        let mut s = Session::new(Mode::Check);
        assert!(s.run_source("t.dl", src, &mut crate::eval::host::NullHost), "{:?}", s.diagnostics());
        let crate::eval::Value::Tensor(root) = s.t.lookup("y").expect("y is bound") else { panic!("y is not a tensor") };
        let g = s.t.graph.clone();
        (crate::passes::driver::plan(&g, &[root], fuse).expect("verified").plan, g)
    }

    #[test]
    fn the_guides_gelu_is_one_kernel() {
        let src = "let x = randn(f32[1000], seed: 0)\nlet y = x * 0.5 * (1.0 + erf(x / 1.41421))\n";
        let (p, _) = printed_plan(src, true);
        let regions: Vec<&Region> = p.regions().collect();
        assert_eq!(regions.len(), 1);
        assert!(regions[0].nodes.len() >= 5, "{:?}", regions[0]);
        // randn is a library kernel, the five elementwise ops (and the constants' broadcasts) one region.
        assert_eq!(p.kernel_count(), 2, "{p:?}");
        let (eager, _) = printed_plan(src, false);
        assert!(eager.kernel_count() >= 6, "eager: randn + 5 ops + broadcasts, got {}", eager.kernel_count());
    }

    /// A mask read on both sides of a matrix product (as relu's is, in forward and backward) is
    /// recomputed in each region instead of written out as a bool tensor; so is a broadcast.
    #[test]
    fn masks_and_broadcasts_are_recomputed_where_they_are_read() {
        let src = "let x = randn(f32[8, 8], seed: 0)\nlet m = x > 0.5\nlet p = where(m, x, 0.0) @ x\nlet y = where(m, p, 1.0)\n";
        let (p, g) = printed_plan(src, true);
        let regions: Vec<&Region> = p.regions().collect();
        assert_eq!(regions.len(), 2, "{p:?}");
        for r in &regions {
            assert!(r.nodes.iter().any(|n| matches!(g.node(*n).op, Op::Binary(BinaryOp::CmpLt))), "each region compares: {r:?}");
            assert!(r.outputs.iter().all(|o| g.node(*o).dtype != DType::Bool), "no mask is written out: {r:?}");
            assert!(r.inputs.iter().all(|i| !matches!(g.node(*i).op, Op::Expand)), "no broadcast is materialised: {r:?}");
        }
        // randn, the first region, the product, the second region.
        assert_eq!(p.kernel_count(), 4, "{p:?}");
    }

    #[test]
    fn a_value_used_by_a_library_op_is_materialised() {
        // h feeds both the matmul and the elementwise tail: it ends its own region.
        let src = "let x = randn(f32[4, 8], seed: 0)\nlet h = tanh(x) * 2.0\nlet y = exp(h @ transpose(h, 0, 1)) + 1.0\n";
        let (p, g) = printed_plan(src, true);
        let regions: Vec<&Region> = p.regions().collect();
        assert_eq!(regions.len(), 2, "{p:?}");
        for r in regions {
            for &i in &r.inputs {
                assert!(!r.nodes.contains(&i));
            }
            assert!(r.nodes.iter().all(|n| is_fusible(&g, *n)));
        }
    }
}
