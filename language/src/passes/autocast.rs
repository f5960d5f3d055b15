//! Autocast: matrix products and convolutions compute in a low precision (bf16 or f16) with f32
//! accumulation; everything else stays f32. The pass rewrites the forward graph of a step before
//! autodiff, so the backward products inherit the low precision from the rules for `Cast` and
//! `MatMul`, exactly as under `torch.autocast`.
//!
//! Each f32 `MatMul`/`Conv2d` becomes `Cast(f32) ∘ op[low] ∘ (Cast(low) operands)`: the
//! operands are rounded to the low precision, the products (exact in f32: 8- or 11-bit
//! mantissas multiply into at most 22 bits) are summed in f32, and the result is rounded to the
//! low precision as PyTorch's autocast returns it, then widened back for the f32 consumers. What
//! stays f32 (reductions, softmax, normalisation, losses, the optimiser, master weights) is
//! written down in docs/precision.md with PyTorch's lists beside it.
//!
//! A `precision DTYPE { ... }` block overrides the recipe for the products built inside it, as
//! a nested `torch.autocast` region does: `precision f32 { head(h) }` keeps a sensitive layer in
//! f32 in a bf16 recipe, and `precision bf16 { body(x) }` lowers part of an f32 recipe.

use super::rewrite::{rebuild, Memo};
use crate::ir::{Graph, Node, NodeId, Op};
use crate::span::Span;
use crate::types::DType;

/// One product's precision.
#[derive(Clone, Debug)]
pub struct Decision {
    /// `matmul` or `conv2d`.
    pub op: &'static str,
    pub span: Span,
    /// The precision it computes in: bf16 or f16 when lowered, f32 when a `precision f32`
    /// block kept it in a low-precision recipe.
    pub dtype: DType,
    /// Whether a `precision` block decided it (rather than the recipe).
    pub by_block: bool,
}

/// The rewrite, shared by every root of a step so that common subgraphs are rewritten once.
pub struct Autocast {
    /// The recipe's precision: f32, bf16 or f16.
    pub default: DType,
    memo: Memo,
    /// Every product lowered, and every product a block kept in f32 against the recipe.
    pub decisions: Vec<Decision>,
}

/// The ops autocast lowers, by name (for reports and docs).
pub const LOWERED: [&str; 2] = ["matmul", "conv2d"];

impl Autocast {
    /// `default` (the recipe's precision) is `f32`, `bf16` or `f16`.
    pub fn new(default: DType) -> Autocast {
        assert!(matches!(default, DType::F32 | DType::BF16 | DType::F16), "autocast computes products in f32, bf16 or f16");
        Autocast { default, memo: Memo::new(), decisions: vec![] }
    }

    /// The node that replaces `root`: the same value computed under the policy.
    pub fn map(&mut self, g: &mut Graph, root: NodeId) -> NodeId {
        let (default, decisions) = (self.default, &mut self.decisions);
        rebuild(g, root, &mut self.memo, |g, old, node, span, memo| match node.op {
            Op::MatMul | Op::Conv2d(_) if node.dtype == DType::F32 => {
                let block = g.precision_of(old);
                let low = block.unwrap_or(default);
                let op = if matches!(node.op, Op::MatMul) { "matmul" } else { "conv2d" };
                if low == DType::F32 {
                    if default != DType::F32 {
                        decisions.push(Decision { op, span, dtype: low, by_block: true });
                    }
                    return None;
                }
                let ops: Vec<NodeId> = node.src.iter().map(|s| lower(g, low, memo[s], span)).collect();
                let product = g.add(Node { op: node.op.clone(), dtype: low, shape: node.shape.clone(), src: ops }, span);
                decisions.push(Decision { op, span, dtype: low, by_block: block.is_some() });
                Some(g.add(Node { op: Op::Cast, dtype: DType::F32, shape: node.shape.clone(), src: vec![product] }, span))
            }
            _ => None,
        })
    }
}

/// Every root under the policy of `precision` (the recipe's f32, bf16 or f16), rewritten once:
/// what an evaluation or an `infer` block computes, as a training step's forward does.
pub fn lower_all(g: &mut Graph, roots: &[NodeId], precision: DType) -> Vec<NodeId> {
    let mut ac = Autocast::new(precision);
    roots.iter().map(|r| ac.map(g, *r)).collect()
}

/// `x` rounded to the low precision. A transpose is rounded below the transpose, so that the
/// product still reads it in place; a value just widened from the low precision is used as it
/// was (widening is exact, so rounding it again changes nothing).
fn lower(g: &mut Graph, low: DType, x: NodeId, span: Span) -> NodeId {
    let n = g.node(x).clone();
    if n.dtype == low {
        return x;
    }
    if matches!(n.op, Op::Cast) && g.node(n.src[0]).dtype == low {
        return n.src[0];
    }
    if crate::passes::fusion::is_transpose(&n.op) {
        let inner = lower(g, low, n.src[0], span);
        return g.add(Node { op: n.op, dtype: low, shape: n.shape, src: vec![inner] }, span);
    }
    if !n.dtype.is_float() {
        return x;
    }
    g.add(Node { op: Op::Cast, dtype: low, shape: n.shape, src: vec![x] }, span)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Dim, Shape};

    fn shape(d: &[i64]) -> Shape {
        d.iter().map(|k| Dim::known(*k)).collect()
    }

    #[test]
    fn a_product_is_lowered_and_widened_and_the_rest_is_kept() {
        let mut g = Graph::default();
        let s = Span::default();
        let x = g.add(Node { op: Op::Input(0), dtype: DType::F32, shape: shape(&[4, 3]), src: vec![] }, s);
        let w = g.add(Node { op: Op::Input(1), dtype: DType::F32, shape: shape(&[2, 3]), src: vec![] }, s);
        let wt = g.add(Node { op: Op::Permute(vec![1, 0]), dtype: DType::F32, shape: shape(&[3, 2]), src: vec![w] }, s);
        let y = g.add(Node { op: Op::MatMul, dtype: DType::F32, shape: shape(&[4, 2]), src: vec![x, wt] }, s);
        let e = g.add(Node { op: Op::Unary(crate::ir::UnaryOp::Exp), dtype: DType::F32, shape: shape(&[4, 2]), src: vec![y] }, s);
        let mut ac = Autocast::new(DType::BF16);
        let out = ac.map(&mut g, e);
        assert_ne!(out, e);
        assert_eq!(ac.decisions.len(), 1);
        // exp(f32) of a widened bf16 product of bf16 operands; the transpose stays a transpose.
        let exp = g.node(out).clone();
        assert_eq!((exp.op.clone(), exp.dtype), (Op::Unary(crate::ir::UnaryOp::Exp), DType::F32));
        let widen = g.node(exp.src[0]).clone();
        assert_eq!((widen.op.clone(), widen.dtype), (Op::Cast, DType::F32));
        let mm = g.node(widen.src[0]).clone();
        assert_eq!((mm.op.clone(), mm.dtype), (Op::MatMul, DType::BF16));
        assert_eq!(g.node(mm.src[0]).op, Op::Cast);
        assert_eq!(g.node(mm.src[1]).op, Op::Permute(vec![1, 0]));
        assert_eq!(g.node(g.node(mm.src[1]).src[0]).op, Op::Cast);
        // Mapping again reuses the rewrite.
        assert_eq!(ac.map(&mut g, e), out);
        assert_eq!(ac.decisions.len(), 1);
    }
}
