//! Batch-norm folding for evaluation: in `evaluate` (and `infer`) batch norm uses its running
//! statistics, so after a convolution or a linear layer it is a per-channel affine map,
//! `(p - mean) / sqrt(var + eps) * weight + bias`, whose coefficients are constants of the
//! evaluation. The guide's advice (PyTorch's `fuse_conv_bn_eval`) is to fold it into the
//! product: `conv(x, W) * a + c = conv(x, W * a) + c`, with `a = weight / sqrt(var + eps)` per
//! output channel and `c = (b - mean) * a + bias`. `W * a` and `c` depend on the parameters
//! alone, so evaluation specialisation (`invariant.rs`) computes them once per evaluation and
//! each batch runs the product and one kernel (the shift and whatever activation follows).
//!
//! The pass is general over such chains: any run of `+ v`, `- v`, `* v`, `/ v` applied to a
//! convolution's output (or a matrix product's), where each `v` is constant during evaluation
//! and varies at most along the output channels (axis 1 of a convolution, the last axis of a
//! matrix product), and where every value of the chain but the last is read by the chain alone.
//! The result differs from the unfolded form by rounding only (the products are summed with
//! scaled weights), as PyTorch's folding does.

use super::rewrite::{rebuild, Memo};
use crate::ir::{BinaryOp, Graph, Node, NodeId, Op};
use crate::span::Span;
use crate::types::Dim;
use std::collections::{HashMap, HashSet};

/// One folded chain: the product's span and the span of the chain's last op.
#[derive(Clone, Copy, Debug)]
pub struct Fold {
    pub product: Span,
    pub chain: Span,
    /// How many elementwise ops of the chain were folded away.
    pub ops: usize,
}

/// The rewrite of an evaluation's roots.
pub struct BnFold {
    memo: Memo,
    /// Nodes that depend on a batch input (everything else is a constant of the evaluation).
    varying: HashSet<NodeId>,
    /// Each node's readers, within the roots' graph; a root also counts as read from outside.
    users: HashMap<NodeId, Vec<Option<NodeId>>>,
    pub folds: Vec<Fold>,
}

type Users = HashMap<NodeId, Vec<Option<NodeId>>>;

/// One op of a chain: the op, and the per-channel operand (before its broadcast).
struct Step {
    op: BinaryOp,
    operand: NodeId,
}

impl BnFold {
    /// Prepare to rewrite these roots (all of them: use counts are taken over their union).
    /// What varies from call to call is the batch inputs and `data` (an `infer` block's input,
    /// which may be any tensor expression, `randn(...)` or a literal).
    pub fn new(g: &Graph, roots: &[NodeId], data: &[NodeId]) -> BnFold {
        let mut varying = HashSet::new();
        let mut users = Users::new();
        for n in g.topo(roots) {
            let node = g.node(n);
            if matches!(node.op, Op::Input(_)) || data.contains(&n) || node.src.iter().any(|s| varying.contains(s)) {
                varying.insert(n);
            }
            for s in &node.src {
                let u = users.entry(*s).or_default();
                if !u.contains(&Some(n)) {
                    u.push(Some(n));
                }
            }
        }
        // A root is read from outside: never fold through it.
        for r in roots {
            users.entry(*r).or_default().push(None);
        }
        BnFold { memo: Memo::new(), varying, users, folds: vec![] }
    }

    /// The node that replaces `root`.
    pub fn map(&mut self, g: &mut Graph, root: NodeId) -> NodeId {
        let BnFold { memo, varying, users, folds } = self;
        let (varying, users) = (&*varying, &*users);
        rebuild(g, root, memo, |g, old, _, span, memo| fold(g, old, span, memo, varying, users, folds))
    }
}

/// Fold every chain under `roots`: the roots that replace them and the folds made.
pub fn fold_all(g: &mut Graph, roots: &[NodeId]) -> (Vec<NodeId>, Vec<Fold>) {
    fold_all_over(g, roots, &[])
}

/// `fold_all`, with `data` varying as batch inputs do (see `BnFold::new`).
pub fn fold_all_over(g: &mut Graph, roots: &[NodeId], data: &[NodeId]) -> (Vec<NodeId>, Vec<Fold>) {
    let mut f = BnFold::new(g, roots, data);
    let new = roots.iter().map(|r| f.map(g, *r)).collect();
    (new, f.folds)
}

/// The axis a product's channels are on: 1 for a convolution, the last for a matrix product.
fn channel_axis(op: &Op, rank: usize) -> Option<usize> {
    match op {
        Op::Conv2d(_) if rank == 4 => Some(1),
        Op::MatMul if rank >= 2 => Some(rank - 1),
        _ => None,
    }
}

/// `n`'s single reader, if it has exactly one and is not a root.
fn only_user(users: &Users, n: NodeId) -> Option<NodeId> {
    match users.get(&n).map(|u| u.as_slice()) {
        Some([Some(u)]) => Some(*u),
        _ => None,
    }
}

/// `(varying source, step)` when `n` is `x op v` with `v` a constant of the evaluation of `n`'s
/// rank and dtype (before its broadcast, if it has one) that varies along `axis` at most; with
/// no axis, along any axes (a first walk, before the product's channel axis is known).
fn chain_step(g: &Graph, n: NodeId, varying: &HashSet<NodeId>, axis: Option<usize>) -> Option<(NodeId, Step)> {
    let node = g.node(n);
    let Op::Binary(op) = node.op else { return None };
    let sides: &[(usize, usize)] = match op {
        BinaryOp::Add | BinaryOp::Mul => &[(0, 1), (1, 0)],
        BinaryOp::Sub | BinaryOp::Div => &[(0, 1)],
        _ => return None,
    };
    sides.iter().find_map(|&(x, v)| {
        let (x, v) = (node.src[x], node.src[v]);
        if !varying.contains(&x) || varying.contains(&v) || g.node(x).shape != node.shape {
            return None;
        }
        let vn = g.node(v);
        let operand = if vn.op == Op::Expand { vn.src[0] } else { v };
        let on = g.node(operand);
        let per_channel = on.shape.len() == node.shape.len()
            && on.dtype == node.dtype
            && on.shape.iter().enumerate().all(|(i, d)| axis.is_none() || d.is_one() || (Some(i) == axis && *d == node.shape[i]));
        per_channel.then_some((x, Step { op, operand }))
    })
}

/// The folded replacement of `top` when it ends a chain over a product.
fn fold(
    g: &mut Graph,
    top: NodeId,
    span: Span,
    memo: &Memo,
    varying: &HashSet<NodeId>,
    users: &Users,
    folds: &mut Vec<Fold>,
) -> Option<NodeId> {
    let rank = g.node(top).shape.len();
    // Walk down the chain to the product, whatever its channel axis; check the axis after.
    let mut steps = vec![];
    let mut cur = top;
    while let Some((x, _)) = chain_step(g, cur, varying, None) {
        if cur != top && only_user(users, cur).is_none() {
            break;
        }
        steps.push(cur);
        cur = x;
    }
    // Where the walk stopped must be the product, read by the chain alone.
    let product = g.node(cur).clone();
    let axis = channel_axis(&product.op, rank)?;
    let (input, weight) = (product.src[0], product.src[1]);
    if steps.is_empty() || only_user(users, cur).is_none() || varying.contains(&weight) || !varying.contains(&input) {
        return None;
    }
    // A matrix product's channels are its right operand's columns only when that operand is a
    // matrix (`x @ v` with a vector `v` ends in the left operand's rows).
    let w_shape = &g.node(weight).shape;
    if matches!(product.op, Op::MatMul) && (w_shape.len() < 2 || w_shape.last() != product.shape.last()) {
        return None;
    }
    // Every step must vary along this product's channel axis at most, and some step must scale.
    let steps: Vec<Step> = steps.into_iter().map(|n| chain_step(g, n, varying, Some(axis)).map(|(_, s)| s)).collect::<Option<_>>()?;
    if !steps.iter().any(|s| matches!(s.op, BinaryOp::Mul | BinaryOp::Div)) {
        return None;
    }
    // The top must end the chain: if its only reader continues it, fold there instead.
    if let Some(u) = only_user(users, top) {
        if chain_step(g, u, varying, Some(axis)).is_some_and(|(x, _)| x == top) {
            return None;
        }
    }
    let dtype = product.dtype;
    let coeff_shape: Vec<Dim> = (0..rank).map(|i| if i == axis { product.shape[axis].clone() } else { Dim::known(1) }).collect();
    let bin = |g: &mut Graph, op: BinaryOp, a: NodeId, b: NodeId| {
        g.add(Node { op: Op::Binary(op), dtype, shape: coeff_shape.clone(), src: vec![a, b] }, span)
    };
    // y = p * scale + shift, built from the innermost step out.
    let (mut scale, mut shift): (Option<NodeId>, Option<NodeId>) = (None, None);
    for s in steps.iter().rev() {
        let v = memo[&s.operand];
        match s.op {
            BinaryOp::Add => shift = Some(shift.map_or(v, |c| bin(g, BinaryOp::Add, c, v))),
            BinaryOp::Sub => {
                shift = Some(match shift {
                    Some(c) => bin(g, BinaryOp::Sub, c, v),
                    None => g.add(Node { op: Op::Unary(crate::ir::UnaryOp::Neg), dtype, shape: coeff_shape.clone(), src: vec![v] }, span),
                })
            }
            BinaryOp::Mul | BinaryOp::Div => {
                let op = s.op;
                scale = Some(match scale {
                    Some(a) => bin(g, op, a, v),
                    None if op == BinaryOp::Mul => v,
                    None => {
                        let one = constant(g, 1.0, dtype, &coeff_shape, span);
                        bin(g, BinaryOp::Div, one, v)
                    }
                });
                shift = shift.map(|c| bin(g, op, c, v));
            }
            _ => unreachable!("chain_step accepts + - * / only"),
        }
    }
    let scale = scale?;
    // The weight scaled along the product's output channels: axis 0 of a convolution's weight,
    // the last axis of a matrix product's right operand.
    let w = g.node(weight).clone();
    let w_axis = if axis == 1 && matches!(product.op, Op::Conv2d(_)) { 0 } else { w.shape.len() - 1 };
    let per_w: Vec<Dim> = (0..w.shape.len()).map(|i| if i == w_axis { w.shape[i].clone() } else { Dim::known(1) }).collect();
    let a = g.add(Node { op: Op::Reshape, dtype, shape: per_w, src: vec![scale] }, span);
    let a = g.add(Node { op: Op::Expand, dtype, shape: w.shape.clone(), src: vec![a] }, span);
    let w2 = g.add(Node { op: Op::Binary(BinaryOp::Mul), dtype, shape: w.shape.clone(), src: vec![memo[&weight], a] }, span);
    let p2 = g.add(Node { src: vec![memo[&input], w2], ..product.clone() }, g.span(cur));
    let out = match shift {
        Some(c) => {
            let shape = g.node(top).shape.clone();
            let c = g.add(Node { op: Op::Expand, dtype, shape: shape.clone(), src: vec![c] }, span);
            g.add(Node { op: Op::Binary(BinaryOp::Add), dtype, shape, src: vec![p2, c] }, span)
        }
        None => p2,
    };
    folds.push(Fold { product: g.span(cur), chain: span, ops: steps.len() });
    Some(out)
}

/// A 0-d constant broadcast to `shape`.
fn constant(g: &mut Graph, v: f64, dtype: crate::types::DType, shape: &[Dim], span: Span) -> NodeId {
    let k = g.add(Node { op: Op::Const(v.to_bits()), dtype, shape: vec![], src: vec![] }, span);
    let ones = vec![Dim::known(1); shape.len()];
    let k = g.add(Node { op: Op::Reshape, dtype, shape: ones, src: vec![k] }, span);
    g.add(Node { op: Op::Expand, dtype, shape: shape.to_vec(), src: vec![k] }, span)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::DType;

    fn node(g: &mut Graph, op: Op, shape: &[i64], src: Vec<NodeId>) -> NodeId {
        crate::ir::test_node(g, op, DType::F32, shape, src)
    }

    /// `p * expand(s)` with `s` a parameter of shape `s_shape`, `p` the product.
    fn scaled(g: &mut Graph, p: NodeId, s_shape: &[i64]) -> NodeId {
        let shape: Vec<i64> = g.node(p).shape.iter().map(|d| d.as_known().unwrap()).collect();
        let s = node(g, Op::Param(9), s_shape, vec![]);
        let e = node(g, Op::Expand, &shape, vec![s]);
        node(g, Op::Binary(BinaryOp::Mul), &shape, vec![p, e])
    }

    #[test]
    fn a_scale_on_a_products_columns_is_folded_into_its_weight() {
        let mut g = Graph::default();
        let x = node(&mut g, Op::Input(0), &[4, 3], vec![]);
        let w = node(&mut g, Op::Param(0), &[3, 5], vec![]);
        let p = node(&mut g, Op::MatMul, &[4, 5], vec![x, w]);
        let y = scaled(&mut g, p, &[1, 5]);
        let (out, folds) = fold_all(&mut g, &[y]);
        assert_eq!(folds.len(), 1);
        // The result is the product of x with a scaled weight: x @ (w * expand(s)).
        let prod = g.node(out[0]).clone();
        assert_eq!((prod.op.clone(), prod.src[0]), (Op::MatMul, x));
        let w2 = g.node(prod.src[1]).clone();
        assert_eq!((w2.op.clone(), w2.src[0]), (Op::Binary(BinaryOp::Mul), w));
        assert_eq!(crate::ir::verify::graph(&g, &out, "bn-fold"), Ok(()));
    }

    #[test]
    fn a_scale_on_the_left_operands_rows_is_not_folded() {
        // [2, 4, 3] @ [3]: the result's last axis is the left operand's rows, not a column of v.
        let mut g = Graph::default();
        let x = node(&mut g, Op::Input(0), &[2, 4, 3], vec![]);
        let v = node(&mut g, Op::Param(0), &[3], vec![]);
        let p = node(&mut g, Op::MatMul, &[2, 4], vec![x, v]);
        let y = scaled(&mut g, p, &[1, 4]);
        let (out, folds) = fold_all(&mut g, &[y]);
        assert!(folds.is_empty());
        assert_eq!(out, vec![y]);
        // Nor a scale that varies along a batch axis, nor one on a product of two inputs.
        let w = node(&mut g, Op::Param(1), &[3, 5], vec![]);
        let p = node(&mut g, Op::MatMul, &[2, 4, 5], vec![x, w]);
        let y = scaled(&mut g, p, &[2, 1, 5]);
        assert!(fold_all(&mut g, &[y]).1.is_empty());
        let x2 = node(&mut g, Op::Input(1), &[3, 5], vec![]);
        let p = node(&mut g, Op::MatMul, &[2, 4, 5], vec![x, x2]);
        let y = scaled(&mut g, p, &[1, 1, 5]);
        assert!(fold_all(&mut g, &[y]).1.is_empty());
    }
}
