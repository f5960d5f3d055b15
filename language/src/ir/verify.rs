//! The IR verifier, run after every pass that builds or rewrites a step (autocast, conv-bias
//! elimination, autodiff and rematerialisation, batch-norm folding) and on every kernel plan
//! (fusion, evaluation specialisation, memory planning). A pass that breaks an invariant is a
//! compiler bug: the verifier names the pass, the node and what is wrong, so it is caught where
//! it happens and not as a wrong number or a panic three kernels later.
//!
//! What a graph must satisfy: sources older than their node (ids are a topological order); each
//! op's arity; the node's dtype and shape are what the op's rule gives for its sources' (the same
//! rules the checker applies: `types::rules`), with broadcasts explicit (`Expand`), so the
//! operands of an elementwise op have the node's shape. What a plan must satisfy: every kernel
//! reads values an earlier kernel wrote (or values bound from outside), every root is written,
//! and the memory plan never releases a value that a later kernel reads.

use super::graph::{Graph, NodeId};
use super::op::{BinaryOp, Op, ReduceOp, UnaryOp};
use crate::ir::plan::{MemoryPlan, Plan};
use crate::types::{rules, DType, Dim};
use std::collections::HashSet;

/// A broken invariant: which pass, which node (if one), and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    pub pass: &'static str,
    pub node: Option<NodeId>,
    pub message: String,
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.node {
            Some(n) => write!(f, "internal compiler error after the `{}` pass: %{}: {}", self.pass, n.0, self.message),
            None => write!(f, "internal compiler error after the `{}` pass: {}", self.pass, self.message),
        }
    }
}

/// Check every node the roots depend on.
pub fn graph(g: &Graph, roots: &[NodeId], pass: &'static str) -> Result<(), VerifyError> {
    let fail = |n: NodeId, message: String| VerifyError { pass, node: Some(n), message };
    for n in g.topo(roots) {
        let node = g.node(n);
        if let Some(s) = node.src.iter().find(|s| s.0 >= n.0) {
            return Err(fail(n, format!("reads %{}, which is not older than it", s.0)));
        }
        node_rule(g, n).map_err(|m| fail(n, format!("{} : {}: {m}", node.op.name(), node.ty())))?;
    }
    Ok(())
}

/// Dims that may be equal: a wildcard or a symbol is not a contradiction.
fn same(a: &[Dim], b: &[Dim]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.compatible(y))
}

fn shape_str(s: &[Dim]) -> String {
    crate::types::shape::shape_str(s)
}

/// The op's rule for one node: `Err` says what does not hold.
fn node_rule(g: &Graph, n: NodeId) -> Result<(), String> {
    let node = g.node(n);
    let src: Vec<_> = node.src.iter().map(|s| g.node(*s)).collect();
    let arity = |k: usize| if src.len() == k { Ok(()) } else { Err(format!("takes {k} operand(s), has {}", src.len())) };
    let shape_is = |want: &[Dim], what: &str| {
        if same(&node.shape, want) {
            Ok(())
        } else {
            Err(format!("{what} gives {}, the node says {}", shape_str(want), shape_str(&node.shape)))
        }
    };
    match &node.op {
        Op::Input(_) | Op::Param(_) | Op::Literal(_) | Op::Iota => arity(0),
        // In a training step a random op reads the step's draw counter (new masks each step).
        Op::Rand { .. } if src.len() <= 1 => Ok(()),
        Op::Rand { .. } => Err(format!("takes at most a draw counter, has {} operands", src.len())),
        Op::Const(_) => {
            arity(0)?;
            if node.shape.is_empty() {
                Ok(())
            } else {
                Err("a constant is 0-d (broadcast with expand)".into())
            }
        }
        Op::Cast | Op::Detach => {
            arity(1)?;
            shape_is(&src[0].shape, "its operand")
        }
        Op::Unary(u) => {
            arity(1)?;
            shape_is(&src[0].shape, "its operand")?;
            let want = if *u == UnaryOp::Not { DType::Bool } else { src[0].dtype };
            if node.dtype == want {
                Ok(())
            } else {
                Err(format!("operand {} gives {want}", src[0].dtype))
            }
        }
        Op::Binary(b) => {
            arity(2)?;
            for s in &src {
                if !same(&s.shape, &node.shape) {
                    return Err(format!("operand {} is not the node's shape (broadcasts must be explicit)", s.ty()));
                }
            }
            if src[0].dtype != src[1].dtype {
                return Err(format!("operands {} and {} differ in dtype", src[0].dtype, src[1].dtype));
            }
            let compare = matches!(b, BinaryOp::CmpLt | BinaryOp::CmpLe | BinaryOp::CmpEq | BinaryOp::CmpNe);
            let want = if compare { DType::Bool } else { src[0].dtype };
            if node.dtype == want {
                Ok(())
            } else {
                Err(format!("operands {} give {want}", src[0].dtype))
            }
        }
        Op::Where => {
            arity(3)?;
            if src[0].dtype != DType::Bool {
                return Err(format!("the condition is {}, not bool", src[0].dtype));
            }
            for s in &src {
                if !same(&s.shape, &node.shape) {
                    return Err(format!("operand {} is not the node's shape", s.ty()));
                }
            }
            if src[1].dtype != node.dtype || src[2].dtype != node.dtype {
                return Err(format!("branches {} and {} for a {} node", src[1].dtype, src[2].dtype, node.dtype));
            }
            Ok(())
        }
        Op::Reduce(r, axes) => {
            arity(1)?;
            if let Some(a) = axes.iter().find(|a| **a >= src[0].shape.len()) {
                return Err(format!("axis {a} of a rank-{} operand", src[0].shape.len()));
            }
            shape_is(&rules::reduce_keepdim(&src[0].shape, axes), "reducing its operand")?;
            let want = if *r == ReduceOp::ArgMax { DType::I64 } else { src[0].dtype };
            if node.dtype == want {
                Ok(())
            } else {
                Err(format!("reducing {} gives {want}", src[0].dtype))
            }
        }
        Op::Reshape => {
            arity(1)?;
            let (a, b) = (crate::types::shape::numel(&src[0].shape), crate::types::shape::numel(&node.shape));
            if a.compatible(&b) {
                Ok(())
            } else {
                Err(format!("{} elements reshaped to {}", a, b))
            }
        }
        Op::Permute(p) => {
            arity(1)?;
            let mut seen = p.clone();
            seen.sort_unstable();
            if seen != (0..src[0].shape.len()).collect::<Vec<_>>() {
                return Err(format!("{p:?} is not a permutation of a rank-{} operand's axes", src[0].shape.len()));
            }
            let want: Vec<Dim> = p.iter().map(|i| src[0].shape[*i].clone()).collect();
            shape_is(&want, "permuting its operand")
        }
        Op::Expand => {
            arity(1)?;
            let s = &src[0].shape;
            let ok = s.len() == node.shape.len() && s.iter().zip(&node.shape).all(|(a, b)| a.is_one() || a.compatible(b));
            if ok {
                Ok(())
            } else {
                Err(format!("cannot broadcast {} to it", shape_str(s)))
            }
        }
        Op::MatMul => {
            arity(2)?;
            shape_is(&rules::matmul(&src[0].shape, &src[1].shape).map_err(|e| e.message)?, "the matmul rule")
        }
        Op::Conv2d(a) => {
            arity(2)?;
            shape_is(&rules::conv2d(&src[0].shape, &src[1].shape, a).map_err(|e| e.message)?, "the conv2d rule")
        }
        Op::Conv2dGradInput(a) => {
            arity(2)?;
            // Its output is the input's shape: the forward rule from it must give grad_out's.
            let fwd = rules::conv2d(&node.shape, &src[1].shape, a).map_err(|e| e.message)?;
            if same(&fwd, &src[0].shape) {
                Ok(())
            } else {
                Err(format!("the forward convolution of it gives {}, its gradient is {}", shape_str(&fwd), src[0].ty()))
            }
        }
        Op::Conv2dGradWeight(a) => {
            arity(2)?;
            let fwd = rules::conv2d(&src[0].shape, &node.shape, a).map_err(|e| e.message)?;
            if same(&fwd, &src[1].shape) {
                Ok(())
            } else {
                Err(format!("the forward convolution with it gives {}, its gradient is {}", shape_str(&fwd), src[1].ty()))
            }
        }
        Op::Pool2d { kernel, stride, padding, channels_last, .. } => {
            arity(1)?;
            if *channels_last {
                // [N, H, W, C]: the rule on its NCHW form, its result channels-last again.
                if src[0].shape.len() != 4 {
                    return Err(format!("a channels-last pooling reads a 4-d array, found {}", src[0].ty()));
                }
                let nchw = rules::permuted(&src[0].shape, &rules::TO_NCHW);
                let out = rules::pool2d(&nchw, *kernel, *stride, *padding).map_err(|e| e.message)?;
                return shape_is(&rules::permuted(&out, &rules::TO_CHANNELS_LAST), "the pooling rule, channels-last");
            }
            shape_is(&rules::pool2d(&src[0].shape, *kernel, *stride, *padding).map_err(|e| e.message)?, "the pooling rule")
        }
        Op::Pool2dGrad { .. } => {
            arity(2)?;
            shape_is(&src[0].shape, "its input")
        }
        Op::Concat(axis) => {
            if src.is_empty() {
                return Err("concatenates nothing".into());
            }
            let shapes: Vec<_> = src.iter().map(|s| s.shape.clone()).collect();
            shape_is(&rules::concat(&shapes, *axis).map_err(|e| e.message)?, "the concat rule")
        }
        Op::Slice { start, step } | Op::Unslice { start, step } => {
            arity(1)?;
            let rank = src[0].shape.len();
            if start.len() != rank || step.len() != rank || node.shape.len() != rank {
                return Err(format!("per-axis starts and steps for a rank-{rank} operand: {start:?}, {step:?}"));
            }
            Ok(())
        }
        Op::Take => {
            arity(2)?;
            if matches!(src[1].dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16) {
                Err(format!("indices are {}", src[1].dtype))
            } else {
                Ok(())
            }
        }
        Op::TakeGrad | Op::Recompute => arity(2),
    }
}

/// Check a kernel plan: every kernel reads values written before it or bound from outside
/// (`bound`, e.g. an evaluation's values computed once), and every root is written.
pub fn plan(g: &Graph, plan: &Plan, bound: &[NodeId], pass: &'static str) -> Result<(), VerifyError> {
    let mut written: HashSet<NodeId> = bound.iter().copied().collect();
    for (i, k) in plan.kernels.iter().enumerate() {
        if let Some(r) = k.reads(g).into_iter().find(|r| !written.contains(r)) {
            return Err(VerifyError { pass, node: Some(r), message: format!("kernel {i} reads it before any kernel writes it") });
        }
        written.extend(k.writes());
    }
    match plan.roots.iter().find(|r| !written.contains(r)) {
        Some(r) => Err(VerifyError { pass, node: Some(*r), message: "a result no kernel writes".into() }),
        None => Ok(()),
    }
}

/// Check a memory plan against its kernel plan: a value is released only after its last reader.
pub fn memory(g: &Graph, plan: &Plan, mem: &MemoryPlan) -> Result<(), VerifyError> {
    let pass = "memory";
    if mem.release.len() != plan.kernels.len() {
        return Err(VerifyError {
            pass,
            node: None,
            message: format!("{} release lists for {} kernels", mem.release.len(), plan.kernels.len()),
        });
    }
    let mut released: HashSet<NodeId> = HashSet::new();
    for (i, k) in plan.kernels.iter().enumerate() {
        if let Some(r) = k.reads(g).into_iter().find(|r| released.contains(r)) {
            return Err(VerifyError { pass, node: Some(r), message: format!("kernel {i} reads it after it was released") });
        }
        released.extend(mem.release[i].iter().copied());
    }
    match plan.roots.iter().find(|r| released.contains(r)) {
        Some(r) => Err(VerifyError { pass, node: Some(*r), message: "a result is released before the end".into() }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::test_node as node;
    use crate::passes::{fusion, memory::plan_memory};

    /// x [2, 3] and a bias [3] broadcast by expand: the well-formed graph passes.
    fn well_formed() -> (Graph, NodeId, NodeId, NodeId) {
        let mut g = Graph::default();
        let x = node(&mut g, Op::Input(0), DType::F32, &[2, 3], vec![]);
        let b = node(&mut g, Op::Param(0), DType::F32, &[3], vec![]);
        let b2 = node(&mut g, Op::Reshape, DType::F32, &[1, 3], vec![b]);
        let e = node(&mut g, Op::Expand, DType::F32, &[2, 3], vec![b2]);
        let y = node(&mut g, Op::Binary(BinaryOp::Add), DType::F32, &[2, 3], vec![x, e]);
        (g, x, b, y)
    }

    #[test]
    fn a_well_formed_graph_and_its_plans_pass() {
        let (mut g, x, _, y) = well_formed();
        let z = node(&mut g, Op::Unary(UnaryOp::Exp), DType::F32, &[2, 3], vec![y]);
        let w = node(&mut g, Op::Input(1), DType::F32, &[3, 4], vec![]);
        let p = node(&mut g, Op::MatMul, DType::F32, &[2, 4], vec![z, w]);
        let s = node(&mut g, Op::Reduce(ReduceOp::Sum, vec![0, 1]), DType::F32, &[1, 1], vec![p]);
        assert_eq!(graph(&g, &[s, x], "test"), Ok(()));
        for fuse in [true, false] {
            let plan = crate::passes::driver::plan(&g, &[s], fuse).expect("verified").plan;
            assert_eq!(super::plan(&g, &plan, &[], "fusion"), Ok(()));
            assert_eq!(memory(&g, &plan, &plan_memory(&g, &plan)), Ok(()));
        }
    }

    #[test]
    fn broken_graphs_are_caught_at_the_node() {
        // An implicit broadcast: the bias added without its expand.
        let (mut g, x, b, _) = well_formed();
        let bad = node(&mut g, Op::Binary(BinaryOp::Add), DType::F32, &[2, 3], vec![x, b]);
        let e = graph(&g, &[bad], "autocast").unwrap_err();
        assert_eq!((e.pass, e.node), ("autocast", Some(bad)));
        assert!(e.message.contains("broadcasts must be explicit"), "{e}");
        // Operands of two dtypes.
        let h = node(&mut g, Op::Input(2), DType::BF16, &[2, 3], vec![]);
        let mixed = node(&mut g, Op::Binary(BinaryOp::Mul), DType::F32, &[2, 3], vec![x, h]);
        assert!(graph(&g, &[mixed], "t").unwrap_err().message.contains("differ in dtype"));
        // A comparison that is not bool, a reshape that loses elements, a matmul off its rule.
        let cmp = node(&mut g, Op::Binary(BinaryOp::CmpLt), DType::F32, &[2, 3], vec![x, x]);
        assert!(graph(&g, &[cmp], "t").unwrap_err().message.contains("give bool"));
        let r = node(&mut g, Op::Reshape, DType::F32, &[5], vec![x]);
        assert!(graph(&g, &[r], "t").unwrap_err().message.contains("6 elements reshaped to 5"));
        let mm = node(&mut g, Op::MatMul, DType::F32, &[2, 2], vec![x, x]);
        assert!(graph(&g, &[mm], "t").unwrap_err().message.contains("inner dimensions"));
        // A reduction that does not keep its axes, an expand that cannot broadcast.
        let s = node(&mut g, Op::Reduce(ReduceOp::Sum, vec![1]), DType::F32, &[2], vec![x]);
        let m = graph(&g, &[s], "t").unwrap_err().message;
        assert!(m.contains("reducing its operand gives"), "{m}");
        let ex = node(&mut g, Op::Expand, DType::F32, &[4, 3], vec![x]);
        assert!(graph(&g, &[ex], "t").unwrap_err().message.contains("cannot broadcast"));
    }

    #[test]
    fn broken_plans_are_caught() {
        let (g, x, _, y) = well_formed();
        let good = fusion::Plan { kernels: fusion::plan(&g, &[y], false, false), roots: vec![y] };
        // The first kernel that does work moved before the inputs it reads.
        let mut bad = good.clone();
        let i = bad.kernels.iter().position(|k| matches!(k, fusion::Kernel::Library(_) | fusion::Kernel::Fused(_))).unwrap();
        let k = bad.kernels.remove(i);
        bad.kernels.insert(0, k);
        assert!(plan(&g, &bad, &[], "fusion").unwrap_err().message.contains("before any kernel writes it"));
        // Bound from outside, the same reads are fine.
        let all: Vec<NodeId> = g.topo(&[y]);
        assert_eq!(plan(&g, &bad, &all, "invariant"), Ok(()));
        // A result that nothing writes.
        let mut none = good.clone();
        none.kernels.retain(|k| !k.writes().contains(&y));
        assert_eq!(plan(&g, &none, &[], "fusion").unwrap_err().node, Some(y));
        // A memory plan that releases the input before its reader.
        let mut mem = plan_memory(&g, &good);
        mem.release[0].push(x);
        let reader = good.kernels.iter().position(|k| k.reads(&g).contains(&x)).unwrap();
        assert!(reader > 0, "the input is bound by its own kernel first");
        assert_eq!(memory(&g, &good, &mem).unwrap_err().node, Some(x));
    }
}
