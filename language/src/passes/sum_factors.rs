//! Factors constant along a sum's axes, multiplied in after the sum instead of before it: the
//! sums backward makes for a broadcast value (autodiff's rule for `Expand`) are
//! `sum(dy * w * q / s, axes)` with `w` and `s` per-channel, and written as
//! `sum(dy * q, axes) * w / s` the inner sum is the same node (hash-consed) as the sum another
//! gradient already needs. Batch norm's backward so takes sum(dy) and sum(dy * x̂) only, as
//! PyTorch's closed form does, where it took two more full-size sums a layer (d/ds and d/dmu).
//! Exact in real arithmetic; in floating point each value is rounded differently (fewer
//! products before the sum), on every back end alike, since it is the graph that changes.

use crate::ir::{BinaryOp, Graph, Node, NodeId, Op, ReduceOp, UnaryOp};
use crate::span::Span;
use crate::types::{DType, Dim};

/// `sum(a, axes)` (sizes kept as 1) with `a`'s factors that are constant along `axes` taken out
/// of the sum, or `None` when `a` has no such factor (or nothing else).
pub fn factored_sum(g: &mut Graph, a: NodeId, axes: &[usize], span: Span) -> Option<NodeId> {
    let node = g.node(a).clone();
    if !matches!(node.dtype, DType::F32 | DType::F64) {
        return None;
    }
    let mut parts = Parts::default();
    split(g, a, axes, &mut parts);
    if (parts.over.is_empty() && parts.under.is_empty()) || parts.full.is_empty() {
        return None;
    }
    let (dtype, full_shape) = (node.dtype, node.shape.clone());
    let binary = |g: &mut Graph, op: BinaryOp, x: NodeId, y: NodeId, shape: Vec<Dim>| {
        g.add(Node { op: Op::Binary(op), dtype, shape, src: vec![x, y] }, span)
    };
    let mut inner = parts.full[0];
    for f in &parts.full[1..] {
        inner = binary(g, BinaryOp::Mul, inner, *f, full_shape.clone());
    }
    let shape: Vec<Dim> = full_shape.iter().enumerate().map(|(i, d)| if axes.contains(&i) { Dim::known(1) } else { d.clone() }).collect();
    let mut out = g.add(Node { op: Op::Reduce(ReduceOp::Sum, axes.to_vec()), dtype, shape: shape.clone(), src: vec![inner] }, span);
    let factors = parts.over.iter().map(|c| (*c, BinaryOp::Mul)).chain(parts.under.iter().map(|c| (*c, BinaryOp::Div)));
    for (c, op) in factors.collect::<Vec<_>>() {
        // A factor also constant along kept axes (a scalar's broadcast) is broadcast to the
        // sum's shape again.
        let c = if g.node(c).shape == shape { c } else { g.add(Node { op: Op::Expand, dtype, shape: shape.clone(), src: vec![c] }, span) };
        out = binary(g, op, out, c, shape.clone());
    }
    if parts.negate {
        out = g.add(Node { op: Op::Unary(UnaryOp::Neg), dtype, shape, src: vec![out] }, span);
    }
    Some(out)
}

/// A product's factors: full-size ones (in the order met, so that equal products are equal
/// nodes), constants multiplied (`over`) and divided by (`under`), and the sign.
#[derive(Default)]
struct Parts {
    full: Vec<NodeId>,
    over: Vec<NodeId>,
    under: Vec<NodeId>,
    negate: bool,
}

/// The value `n` broadcasts, when it is of `n`'s dtype and rank and of size 1 on every summed axis.
fn constant_along(g: &Graph, n: NodeId, axes: &[usize]) -> Option<NodeId> {
    let node = g.node(n);
    if node.op != Op::Expand {
        return None;
    }
    let c = g.node(node.src[0]);
    let fits =
        c.dtype == node.dtype && c.shape.len() == node.shape.len() && axes.iter().all(|a| c.shape.get(*a).is_some_and(|d| d.is_one()));
    fits.then_some(node.src[0])
}

/// `n` (of the sum's shape) as factors: through negations, products and divisions by a constant.
fn split(g: &Graph, n: NodeId, axes: &[usize], parts: &mut Parts) {
    let node = g.node(n);
    let same = |s: &NodeId| g.node(*s).shape == node.shape && g.node(*s).dtype == node.dtype;
    match node.op {
        Op::Unary(UnaryOp::Neg) if same(&node.src[0]) => {
            parts.negate = !parts.negate;
            split(g, node.src[0], axes, parts);
        }
        Op::Binary(BinaryOp::Mul) if node.src.iter().all(same) => {
            split(g, node.src[0], axes, parts);
            split(g, node.src[1], axes, parts);
        }
        Op::Binary(BinaryOp::Div) if node.src.iter().all(same) && constant_along(g, node.src[1], axes).is_some() => {
            split(g, node.src[0], axes, parts);
            parts.under.extend(constant_along(g, node.src[1], axes));
        }
        _ => match constant_along(g, n, axes) {
            Some(c) => parts.over.push(c),
            None => parts.full.push(n),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(g: &mut Graph, op: Op, shape: &[i64], src: Vec<NodeId>) -> NodeId {
        crate::ir::test_node(g, op, DType::F32, shape, src)
    }

    fn expand(g: &mut Graph, param: u32, from: &[i64], to: &[i64]) -> NodeId {
        let c = node(g, Op::Param(param), from, vec![]);
        node(g, Op::Expand, to, vec![c])
    }

    /// Batch norm's d/ds: -sum(dy * w * (q / s)) over (N, H, W) is -(sum(dy * q) * w / s), its
    /// inner sum the very node dw's sum(dy * q) is.
    #[test]
    fn per_channel_factors_leave_the_sum_and_equal_inner_sums_are_one_node() {
        let (full, chan, axes) = ([2, 3, 4, 4], [1, 3, 1, 1], vec![0, 2, 3]);
        let mut g = Graph::default();
        let dy = node(&mut g, Op::Input(0), &full, vec![]);
        let q = node(&mut g, Op::Input(1), &full, vec![]);
        let (w, s) = (expand(&mut g, 0, &chan, &full), expand(&mut g, 1, &chan, &full));
        let mul = Op::Binary(BinaryOp::Mul);
        let dq = node(&mut g, mul.clone(), &full, vec![dy, w]);
        let qs = node(&mut g, Op::Binary(BinaryOp::Div), &full, vec![q, s]);
        let t = node(&mut g, mul.clone(), &full, vec![dq, qs]);
        let neg = node(&mut g, Op::Unary(UnaryOp::Neg), &full, vec![t]);
        let ds = factored_sum(&mut g, neg, &axes, Span::default()).expect("factored");
        let dyq = node(&mut g, mul, &full, vec![dy, q]);
        let dw = factored_sum(&mut g, dyq, &axes, Span::default());
        assert_eq!(dw, None, "nothing to factor out of dy * q");
        let dw = node(&mut g, Op::Reduce(ReduceOp::Sum, axes.clone()), &chan, vec![dyq]);
        // -(((sum(dy * q)) * w') / s'), w' and s' the parameters themselves (already [1, 3, 1, 1]).
        let n = g.node(ds).clone();
        assert_eq!(n.op, Op::Unary(UnaryOp::Neg));
        let over_s = g.node(n.src[0]).clone();
        assert_eq!((over_s.op, g.node(over_s.src[1]).op.clone()), (Op::Binary(BinaryOp::Div), Op::Param(1)));
        let times_w = g.node(over_s.src[0]).clone();
        assert_eq!((times_w.op, g.node(times_w.src[1]).op.clone()), (Op::Binary(BinaryOp::Mul), Op::Param(0)));
        assert_eq!(times_w.src[0], dw);
        assert_eq!(crate::ir::verify::graph(&g, &[ds, dw], "sum-factors"), Ok(()));
    }

    /// A factor that varies along a summed axis stays inside; a scalar's broadcast comes out,
    /// broadcast again to the sum's shape.
    #[test]
    fn only_factors_constant_along_the_summed_axes_leave() {
        let mut g = Graph::default();
        let x = node(&mut g, Op::Input(0), &[4, 5], vec![]);
        let rows = expand(&mut g, 0, &[4, 1], &[4, 5]);
        let p = node(&mut g, Op::Binary(BinaryOp::Mul), &[4, 5], vec![x, rows]);
        assert_eq!(factored_sum(&mut g, p, &[0], Span::default()), None);
        let scalar = expand(&mut g, 1, &[1, 1], &[4, 5]);
        let p = node(&mut g, Op::Binary(BinaryOp::Mul), &[4, 5], vec![p, scalar]);
        let out = factored_sum(&mut g, p, &[0], Span::default()).expect("the scalar leaves");
        let n = g.node(out).clone();
        assert_eq!(n.shape, vec![Dim::known(1), Dim::known(5)]);
        let factor = g.node(n.src[1]).clone();
        assert_eq!((factor.op, factor.shape), (Op::Expand, vec![Dim::known(1), Dim::known(5)]));
        let inner = g.node(g.node(n.src[0]).src[0]).clone();
        assert_eq!(inner.src, vec![x, rows]);
        assert_eq!(crate::ir::verify::graph(&g, &[out], "sum-factors"), Ok(()));
    }
}
