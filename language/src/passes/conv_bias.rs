//! Conv-bias elimination: a convolution's bias followed by batch norm in training mode is
//! subtracted again with the batch mean, so adding it to the whole activation (and summing the
//! activation's gradient for it) is dead work; the guide's advice is `bias=False` before
//! BatchNorm. This pass applies it to the step's forward graph, before autodiff:
//!
//! - `(conv + b) - mean(conv + b)` over (N, H, W) becomes `conv - mean(conv)`: equal, since `b`
//!   is constant over those axes;
//! - any other sum of `conv + b` over (N, H, W) (the batch mean the running statistics keep)
//!   becomes `sum(conv) + N·H·W·b`, on the small per-channel tensor.
//!
//! The bias then gets no gradient (PyTorch computes one that is zero up to rounding), and the
//! running mean still includes it, so evaluation, which adds the bias, is unchanged.

use super::rewrite::{rebuild, Memo};
use crate::ir::{BinaryOp, Graph, Node, NodeId, Op, ReduceOp};
use crate::span::Span;

const NHW: [usize; 3] = [0, 2, 3];

/// The rewrite, shared by every root of a step.
#[derive(Default)]
pub struct ConvBias {
    memo: Memo,
    /// The convolutions whose bias add was removed, with their spans.
    pub removed: Vec<(NodeId, Span)>,
}

/// `(conv, bias)` when `a` is `conv2d(...) + broadcast(bias)` with `bias` of shape [1, C, 1, 1].
fn biased_conv(g: &Graph, a: NodeId) -> Option<(NodeId, NodeId)> {
    let n = g.node(a);
    if n.op != Op::Binary(BinaryOp::Add) {
        return None;
    }
    [(n.src[0], n.src[1]), (n.src[1], n.src[0])].into_iter().find_map(|(c, e)| {
        let (cn, en) = (g.node(c), g.node(e));
        if !matches!(cn.op, Op::Conv2d(_)) || en.op != Op::Expand || cn.shape.len() != 4 {
            return None;
        }
        let r = en.src[0];
        let rs = &g.node(r).shape;
        let one = |d: &crate::types::Dim| d.as_known() == Some(1);
        (rs.len() == 4 && one(&rs[0]) && one(&rs[2]) && one(&rs[3]) && rs[1] == cn.shape[1]).then_some((c, r))
    })
}

impl ConvBias {
    /// The node that replaces `root`.
    pub fn map(&mut self, g: &mut Graph, root: NodeId) -> NodeId {
        let removed = &mut self.removed;
        rebuild(g, root, &mut self.memo, |g, _, node, span, memo| rewrite(g, node, span, memo, removed))
    }
}

fn rewrite(g: &mut Graph, node: &Node, span: Span, memo: &Memo, removed: &mut Vec<(NodeId, Span)>) -> Option<NodeId> {
    match &node.op {
        // (conv + b) - broadcast(sum(conv + b) / k)  ->  conv - broadcast(sum(conv) / k)
        Op::Binary(BinaryOp::Sub) => {
            let (a, x) = (node.src[0], node.src[1]);
            let (c, _) = biased_conv(g, a)?;
            let xn = g.node(x).clone();
            if xn.op != Op::Expand {
                return None;
            }
            // The mean, through the `stop_grad` the variance's centring puts on it
            // (`BatchNorm2d`'s `x - stop_grad(mu)`).
            let detach = Some(g.node(xn.src[0]).clone()).filter(|d| d.op == Op::Detach);
            let mn = g.node(detach.as_ref().map_or(xn.src[0], |d| d.src[0])).clone();
            if mn.op != Op::Binary(BinaryOp::Div) {
                return None;
            }
            let sn = g.node(mn.src[0]).clone();
            if sn.op != Op::Reduce(ReduceOp::Sum, NHW.to_vec()) || sn.src[0] != a {
                return None;
            }
            let (c2, k2) = (memo[&c], memo[&mn.src[1]]);
            let s2 = g.add(Node { src: vec![c2], ..sn }, span);
            let mut m2 = g.add(Node { src: vec![s2, k2], ..mn }, span);
            if let Some(d) = detach {
                m2 = g.add(Node { src: vec![m2], ..d }, span);
            }
            let x2 = g.add(Node { src: vec![m2], ..xn }, span);
            if !removed.iter().any(|(n, _)| *n == c) {
                removed.push((c, g.span(a)));
            }
            Some(g.add(Node { op: node.op.clone(), dtype: node.dtype, shape: node.shape.clone(), src: vec![c2, x2] }, span))
        }
        // sum(conv + b) over (N, H, W)  ->  sum(conv) + N·H·W·b
        Op::Reduce(ReduceOp::Sum, axes) if *axes == NHW.to_vec() => {
            let a = node.src[0];
            let (c, r) = biased_conv(g, a)?;
            let shape = &g.node(a).shape;
            let count: i64 = NHW.iter().map(|d| shape[*d].as_known()).product::<Option<i64>>()?;
            let s2 = g.add(Node { src: vec![memo[&c]], ..node.clone() }, span);
            let k = g.add(Node { op: Op::Const((count as f64).to_bits()), dtype: node.dtype, shape: vec![], src: vec![] }, span);
            let ones = vec![crate::types::Dim::known(1); 4];
            let k = g.add(Node { op: Op::Reshape, dtype: node.dtype, shape: ones, src: vec![k] }, span);
            let k = g.add(Node { op: Op::Expand, dtype: node.dtype, shape: node.shape.clone(), src: vec![k] }, span);
            let nb =
                g.add(Node { op: Op::Binary(BinaryOp::Mul), dtype: node.dtype, shape: node.shape.clone(), src: vec![memo[&r], k] }, span);
            Some(g.add(Node { op: Op::Binary(BinaryOp::Add), dtype: node.dtype, shape: node.shape.clone(), src: vec![s2, nb] }, span))
        }
        _ => None,
    }
}
