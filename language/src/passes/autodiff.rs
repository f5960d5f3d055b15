//! Reverse-mode automatic differentiation at compile time: the backward pass is built as more
//! nodes of the same graph, from rules for the primitive ops alone (every stdlib function gets its
//! gradient for free, and later passes fuse backward work like forward work).
//!
//! Gradients are *written*, not accumulated into zeroed buffers: each parameter's gradient is one
//! node, the sum of its contributions (the tuning guide's `grad = None`, by construction).

use super::remat::Remat;
use crate::ir::{BinaryOp, Graph, Node, NodeId, Op, ReduceOp, UnaryOp};
use crate::span::Span;
use crate::types::{DType, Dim, Shape};
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq)]
pub enum GradError {
    /// The loss is not a float scalar.
    NotScalar(String),
    /// A primitive on the path from a parameter to the loss has no gradient rule.
    NoRule(String),
}

/// Gradients of the scalar `loss` with respect to each node of `wrt` (in order). A node the loss
/// does not depend on gets a zero gradient.
pub fn grad(g: &mut Graph, loss: NodeId, wrt: &[NodeId]) -> Result<Vec<NodeId>, GradError> {
    grad_with(g, loss, wrt, &Remat::default())
}

/// `grad`, with the cheap forward values that backward would keep recomputed instead
/// (passes::remat chooses them from a first backward pass).
pub fn grad_rematerialised(g: &mut Graph, loss: NodeId, wrt: &[NodeId]) -> Result<Vec<NodeId>, GradError> {
    let forward = g.len() as u32;
    let plain = grad(g, loss, wrt)?;
    let remat = super::remat::choose(g, forward, &plain);
    if remat.values.is_empty() {
        return Ok(plain);
    }
    grad_with(g, loss, wrt, &remat)
}

fn grad_with(g: &mut Graph, loss: NodeId, wrt: &[NodeId], remat: &Remat) -> Result<Vec<NodeId>, GradError> {
    let lt = g.ty(loss);
    if lt.rank() != 0 || !lt.dtype.is_float() {
        return Err(GradError::NotScalar(lt.to_string()));
    }
    let order = g.topo(&[loss]);
    // Only nodes on a path from some `wrt` node to the loss need adjoints.
    let mut needed = vec![false; g.len()];
    for &w in wrt {
        needed[w.0 as usize] = true;
    }
    for &id in &order {
        let n = g.node(id);
        if matches!(n.op, Op::Detach) {
            continue;
        }
        if n.src.iter().any(|s| needed[s.0 as usize]) {
            needed[id.0 as usize] = true;
        }
    }
    let mut b = Builder { g };
    let mut adj: HashMap<NodeId, NodeId> = HashMap::new();
    let mut copies: HashMap<usize, Recomputation> = HashMap::new();
    // Automatically recomputed values (and what their recomputation builds), by original.
    let mut auto: HashMap<NodeId, NodeId> = HashMap::new();
    let span = b.g.span(loss);
    let one = b.constant(1.0, lt.dtype, span);
    adj.insert(loss, one);
    for &id in order.iter().rev() {
        let Some(&dy) = adj.get(&id) else { continue };
        if !needed[id.0 as usize] {
            continue;
        }
        let node = b.g.node(id).clone();
        let span = b.g.span(id);
        // In a `checkpoint` block the rule reads recomputed copies of the block's values, made
        // from the block's inputs once backward reaches the block (after `dy`, the adjoint of
        // the first of its values backward meets), so the forward values die after forward.
        let (rid, rnode) = match b.g.checkpoint_of(id) {
            Some(block) => {
                let copy = copies.entry(block).or_insert_with(|| Recomputation { after: dy, memo: HashMap::new() });
                let r = b.copy_of(id, &|g, n| g.checkpoint_of(n) == Some(block), copy);
                (r, b.g.node(r).clone())
            }
            // A rule that reads a value chosen for recomputation reads its copy, made once
            // backward reaches the first such rule.
            None if remat.clones.contains(&id) || node.src.iter().any(|s| remat.values.contains(s)) => {
                let mut copy = Recomputation { after: dy, memo: std::mem::take(&mut auto) };
                let chosen = |_: &Graph, n: NodeId| remat.clones.contains(&n);
                let r = if remat.clones.contains(&id) { b.copy_of(id, &chosen, &mut copy) } else { id };
                let rnode = if r != id {
                    b.g.node(r).clone()
                } else {
                    let src =
                        node.src.iter().map(|s| if remat.values.contains(s) { b.copy_of(*s, &chosen, &mut copy) } else { *s }).collect();
                    Node { src, ..node.clone() }
                };
                auto = copy.memo;
                (r, rnode)
            }
            None => (id, node.clone()),
        };
        for (i, contrib) in b.rule(rid, &rnode, dy, span)? {
            let src = node.src[i];
            if !needed[src.0 as usize] {
                continue;
            }
            let total = match adj.get(&src) {
                Some(&prev) => b.binary(BinaryOp::Add, prev, contrib, span),
                None => contrib,
            };
            adj.insert(src, total);
        }
    }
    Ok(wrt
        .iter()
        .map(|w| match adj.get(w) {
            Some(&d) => d,
            None => {
                let t = b.g.ty(*w);
                let span = b.g.span(*w);
                let z = b.constant(0.0, t.dtype, span);
                b.expand_to(z, &t.shape, span)
            }
        })
        .collect())
}

struct Builder<'g> {
    g: &'g mut Graph,
}

/// Recomputed copies of forward values (one `checkpoint` block's, or the automatically
/// rematerialised ones), built as backward needs them.
struct Recomputation {
    /// What the recomputation waits for: the adjoint where backward first needed a copy.
    after: NodeId,
    /// Original value -> its copy.
    memo: HashMap<NodeId, NodeId>,
}

impl Builder<'_> {
    /// The copy of `n` that backward reads in place of a forward value: the nodes `rebuilt`
    /// names (a checkpoint block's, or the values `passes::remat` chose and the ops between them
    /// and what they are recomputed from) and views are built again; kept values are read
    /// through `Recompute` views ordered after `copy.after`; constants and parameters, and values
    /// made from them alone, are read as they are.
    fn copy_of(&mut self, n: NodeId, rebuilt: &dyn Fn(&Graph, NodeId) -> bool, copy: &mut Recomputation) -> NodeId {
        if let Some(&c) = copy.memo.get(&n) {
            return c;
        }
        let node = self.g.node(n).clone();
        let span = self.g.span(n);
        if super::remat::constant_like(self.g, n) {
            return n;
        }
        if !rebuilt(self.g, n) && !matches!(node.op, Op::Expand | Op::Reshape) {
            // (Not memoised: a later rule's copy waits for its own gradient; hash-consing
            // shares the view between copies made at the same point.)
            return self.add(Op::Recompute, node.dtype, node.shape, vec![n, copy.after], span);
        }
        let src = node.src.iter().map(|s| self.copy_of(*s, rebuilt, copy)).collect();
        let c = self.add(node.op, node.dtype, node.shape, src, span);
        if c != n {
            self.g.recomputed.insert(c, n);
        }
        copy.memo.insert(n, c);
        c
    }

    fn add(&mut self, op: Op, dtype: DType, shape: Shape, src: Vec<NodeId>, span: Span) -> NodeId {
        self.g.add(Node { op, dtype, shape, src }, span)
    }
    fn ty_of(&self, n: NodeId) -> (DType, Shape) {
        let node = self.g.node(n);
        (node.dtype, node.shape.clone())
    }
    fn constant(&mut self, v: f64, dtype: DType, span: Span) -> NodeId {
        self.add(Op::Const(v.to_bits()), dtype, vec![], vec![], span)
    }
    fn reshape(&mut self, n: NodeId, shape: &[Dim], span: Span) -> NodeId {
        let (dt, s) = self.ty_of(n);
        if s == shape {
            return n;
        }
        self.add(Op::Reshape, dt, shape.to_vec(), vec![n], span)
    }
    /// Broadcast to `shape` (prepend size-1 dims, then expand).
    fn expand_to(&mut self, n: NodeId, shape: &[Dim], span: Span) -> NodeId {
        let (dt, s) = self.ty_of(n);
        if s == shape {
            return n;
        }
        let mut cur = n;
        if s.len() < shape.len() {
            let mut s2 = vec![Dim::known(1); shape.len() - s.len()];
            s2.extend(s.iter().cloned());
            cur = self.reshape(cur, &s2, span);
        }
        if self.ty_of(cur).1 == shape {
            return cur;
        }
        self.add(Op::Expand, dt, shape.to_vec(), vec![cur], span)
    }
    /// `a op b`, broadcasting scalars/smaller operands of the same rank structure to `a`'s shape.
    fn binary(&mut self, op: BinaryOp, a: NodeId, b: NodeId, span: Span) -> NodeId {
        let (da, sa) = self.ty_of(a);
        let (_, sb) = self.ty_of(b);
        let shape = if sa.len() >= sb.len() { sa } else { sb };
        let a = self.expand_to(a, &shape, span);
        let b = self.expand_to(b, &shape, span);
        let out = if matches!(op, BinaryOp::CmpLt | BinaryOp::CmpLe | BinaryOp::CmpEq | BinaryOp::CmpNe) { DType::Bool } else { da };
        self.add(Op::Binary(op), out, shape, vec![a, b], span)
    }
    fn unary(&mut self, op: UnaryOp, a: NodeId, span: Span) -> NodeId {
        let (dt, s) = self.ty_of(a);
        self.add(Op::Unary(op), dt, s, vec![a], span)
    }
    fn mul(&mut self, a: NodeId, b: NodeId, span: Span) -> NodeId {
        self.binary(BinaryOp::Mul, a, b, span)
    }
    fn scale(&mut self, a: NodeId, k: f64, span: Span) -> NodeId {
        let dt = self.ty_of(a).0;
        let c = self.constant(k, dt, span);
        self.mul(a, c, span)
    }
    fn neg(&mut self, a: NodeId, span: Span) -> NodeId {
        self.unary(UnaryOp::Neg, a, span)
    }
    fn where_(&mut self, c: NodeId, a: NodeId, b: NodeId, span: Span) -> NodeId {
        let (dt, s) = self.ty_of(a);
        let b = self.expand_to(b, &s, span);
        self.add(Op::Where, dt, s, vec![c, a, b], span)
    }
    fn zeros_like(&mut self, a: NodeId, span: Span) -> NodeId {
        let (dt, s) = self.ty_of(a);
        let z = self.constant(0.0, dt, span);
        self.expand_to(z, &s, span)
    }
    fn permute(&mut self, a: NodeId, perm: &[usize], span: Span) -> NodeId {
        let (dt, s) = self.ty_of(a);
        if perm.iter().enumerate().all(|(i, p)| i == *p) {
            return a;
        }
        // A permutation of a permutation: compose them (the transpose of `x.T` is `x`), so
        // backward does not transpose what forward transposed.
        if let Op::Permute(inner) = &self.g.node(a).op {
            let composed: Vec<usize> = perm.iter().map(|p| inner[*p]).collect();
            let src = self.g.node(a).src[0];
            return self.permute(src, &composed, span);
        }
        // The transpose of a product is the product of the transposes the other way round:
        // (x^T dy)^T = dy^T x. A weight's gradient then comes out of gemm in the weight's own
        // layout, reading both operands through strides, instead of being transposed after.
        let r = perm.len();
        let swaps_last_two =
            r >= 2 && perm[r - 2] == r - 1 && perm[r - 1] == r - 2 && perm[..r - 2].iter().enumerate().all(|(i, p)| i == *p);
        if swaps_last_two && matches!(self.g.node(a).op, Op::MatMul) {
            let (x, y) = (self.g.node(a).src[0], self.g.node(a).src[1]);
            let (yt, xt) = (self.transpose_last(y, span), self.transpose_last(x, span));
            return self.matmul(yt, xt, span);
        }
        let shape = perm.iter().map(|p| s[*p].clone()).collect();
        self.add(Op::Permute(perm.to_vec()), dt, shape, vec![a], span)
    }
    /// Swap the last two dims.
    fn transpose_last(&mut self, a: NodeId, span: Span) -> NodeId {
        let r = self.ty_of(a).1.len();
        let mut p: Vec<usize> = (0..r).collect();
        p.swap(r - 2, r - 1);
        self.permute(a, &p, span)
    }
    fn matmul(&mut self, a: NodeId, b: NodeId, span: Span) -> NodeId {
        let (dt, sa) = self.ty_of(a);
        let (_, sb) = self.ty_of(b);
        let mut shape = sa[..sa.len() - 1].to_vec();
        shape.push(sb[sb.len() - 1].clone());
        self.add(Op::MatMul, dt, shape, vec![a, b], span)
    }
    fn sum_axes(&mut self, a: NodeId, axes: Vec<usize>, span: Span) -> NodeId {
        if axes.is_empty() {
            return a;
        }
        if let Some(sum) = super::sum_factors::factored_sum(self.g, a, &axes, span) {
            return sum;
        }
        let (dt, s) = self.ty_of(a);
        let shape = s.iter().enumerate().map(|(i, d)| if axes.contains(&i) { Dim::known(1) } else { d.clone() }).collect();
        self.add(Op::Reduce(ReduceOp::Sum, axes), dt, shape, vec![a], span)
    }

    /// relu's mask from relu's output, as PyTorch's `threshold_backward` takes it: for
    /// `y = where(0 < x, x, b)` with `b` zero or `x * k` (k >= 0, leaky relu), `0 < y` is the
    /// same mask as `0 < x` at every element (NaN included: the mask is false and y is 0 or NaN).
    /// Backward then reads `y`, which the next layer's gradient keeps anyway, instead of also
    /// keeping `x` until backward.
    fn mask_from_output(&mut self, id: NodeId, n: &Node) -> Option<NodeId> {
        let g = &*self.g;
        // A constant, through the reshapes and broadcasts that shape it.
        let value = |mut m: NodeId| -> Option<f64> {
            loop {
                let node = g.node(m);
                match node.op {
                    Op::Const(bits) => return Some(f64::from_bits(bits)),
                    Op::Expand | Op::Reshape => m = node.src[0],
                    _ => return None,
                }
            }
        };
        let (c, x, b) = (n.src[0], n.src[1], n.src[2]);
        let cond = g.node(c);
        let zero_below = matches!(cond.op, Op::Binary(BinaryOp::CmpLt)) && cond.src[1] == x && value(cond.src[0]) == Some(0.0);
        let other = g.node(b);
        let zero_or_leak = value(b) == Some(0.0)
            || (matches!(other.op, Op::Binary(BinaryOp::Mul)) && other.src[0] == x && value(other.src[1]).is_some_and(|k| k >= 0.0));
        if !(zero_below && zero_or_leak && n.dtype.is_float()) {
            return None;
        }
        let zero = cond.src[0];
        Some(self.binary(BinaryOp::CmpLt, zero, id, self.g.span(c)))
    }

    /// The contribution of `dy` (the adjoint of `id`) to each source, as (source index, node).
    fn rule(&mut self, id: NodeId, n: &Node, dy: NodeId, span: Span) -> Result<Vec<(usize, NodeId)>, GradError> {
        let s = &n.src;
        Ok(match &n.op {
            Op::Input(_) | Op::Param(_) | Op::Literal(_) | Op::Const(_) | Op::Rand { .. } | Op::Iota | Op::Detach | Op::Recompute => vec![],
            Op::Cast => {
                let (src_dt, _) = self.ty_of(s[0]);
                if !src_dt.is_float() {
                    return Ok(vec![]);
                }
                let (_, shape) = self.ty_of(dy);
                vec![(0, self.add(Op::Cast, src_dt, shape, vec![dy], span))]
            }
            Op::Unary(u) => {
                let x = s[0];
                let d = match u {
                    UnaryOp::Neg => self.neg(dy, span),
                    UnaryOp::Exp => self.mul(dy, id, span),
                    UnaryOp::Log => self.binary(BinaryOp::Div, dy, x, span),
                    UnaryOp::Sqrt => {
                        let half = self.scale(dy, 0.5, span);
                        self.binary(BinaryOp::Div, half, id, span)
                    }
                    UnaryOp::Recip => {
                        let yy = self.mul(id, id, span);
                        let t = self.mul(dy, yy, span);
                        self.neg(t, span)
                    }
                    UnaryOp::Sin => {
                        let c = self.unary(UnaryOp::Cos, x, span);
                        self.mul(dy, c, span)
                    }
                    UnaryOp::Cos => {
                        let si = self.unary(UnaryOp::Sin, x, span);
                        let t = self.mul(dy, si, span);
                        self.neg(t, span)
                    }
                    UnaryOp::Tanh => {
                        let yy = self.mul(id, id, span);
                        let dt = self.ty_of(yy).0;
                        let one = self.constant(1.0, dt, span);
                        let d = self.binary(BinaryOp::Sub, one, yy, span);
                        self.mul(dy, d, span)
                    }
                    UnaryOp::Erf => {
                        // d erf(x) = 2/sqrt(pi) * exp(-x^2)
                        let xx = self.mul(x, x, span);
                        let nxx = self.neg(xx, span);
                        let e = self.unary(UnaryOp::Exp, nxx, span);
                        let t = self.scale(e, std::f64::consts::FRAC_2_SQRT_PI, span);
                        self.mul(dy, t, span)
                    }
                    UnaryOp::Abs => {
                        // sign(x), with sign(0) = 0 as in PyTorch.
                        let dt = self.ty_of(x).0;
                        let zero = self.constant(0.0, dt, span);
                        let neg = self.binary(BinaryOp::CmpLt, x, zero, span);
                        let pos = self.binary(BinaryOp::CmpLt, zero, x, span);
                        let ndy = self.neg(dy, span);
                        let z = self.zeros_like(dy, span);
                        let p = self.where_(pos, dy, z, span);
                        self.where_(neg, ndy, p, span)
                    }
                    UnaryOp::Floor | UnaryOp::Not => return Ok(vec![]),
                };
                vec![(0, d)]
            }
            Op::Binary(op) => {
                let (a, b) = (s[0], s[1]);
                match op {
                    BinaryOp::Add => vec![(0, dy), (1, dy)],
                    BinaryOp::Sub => vec![(0, dy), (1, self.neg(dy, span))],
                    BinaryOp::Mul => vec![(0, self.mul(dy, b, span)), (1, self.mul(dy, a, span))],
                    BinaryOp::Div => {
                        let da = self.binary(BinaryOp::Div, dy, b, span);
                        let q = self.binary(BinaryOp::Div, id, b, span);
                        let t = self.mul(dy, q, span);
                        vec![(0, da), (1, self.neg(t, span))]
                    }
                    BinaryOp::Pow => {
                        // d/da a^b = b a^(b-1); d/db a^b = a^b ln a
                        let dt = self.ty_of(b).0;
                        let one = self.constant(1.0, dt, span);
                        let bm1 = self.binary(BinaryOp::Sub, b, one, span);
                        let p = self.binary(BinaryOp::Pow, a, bm1, span);
                        let t = self.mul(b, p, span);
                        let da = self.mul(dy, t, span);
                        let ln = self.unary(UnaryOp::Log, a, span);
                        let t2 = self.mul(id, ln, span);
                        let db = self.mul(dy, t2, span);
                        vec![(0, da), (1, db)]
                    }
                    BinaryOp::Max | BinaryOp::Min => {
                        // Ties go to the first operand.
                        let a_loses = if *op == BinaryOp::Max {
                            self.binary(BinaryOp::CmpLt, a, b, span)
                        } else {
                            self.binary(BinaryOp::CmpLt, b, a, span)
                        };
                        let z = self.zeros_like(dy, span);
                        vec![(0, self.where_(a_loses, z, dy, span)), (1, self.where_(a_loses, dy, z, span))]
                    }
                    BinaryOp::Mod => {
                        // a - b*floor(a/b): da = dy, db = -dy*floor(a/b)
                        let q = self.binary(BinaryOp::Div, a, b, span);
                        let f = self.unary(UnaryOp::Floor, q, span);
                        let t = self.mul(dy, f, span);
                        vec![(0, dy), (1, self.neg(t, span))]
                    }
                    _ => vec![],
                }
            }
            Op::Where => {
                let z = self.zeros_like(dy, span);
                let c = self.mask_from_output(id, n).unwrap_or(s[0]);
                vec![(1, self.where_(c, dy, z, span)), (2, self.where_(c, z, dy, span))]
            }
            Op::Reduce(ReduceOp::Sum, _) => {
                let (_, shape) = self.ty_of(s[0]);
                vec![(0, self.expand_to(dy, &shape, span))]
            }
            Op::Reduce(ReduceOp::Max | ReduceOp::Min, _) => {
                // Every position equal to the extreme receives the gradient.
                let (_, shape) = self.ty_of(s[0]);
                let y = self.expand_to(id, &shape, span);
                let hit = self.binary(BinaryOp::CmpEq, s[0], y, span);
                let g = self.expand_to(dy, &shape, span);
                let z = self.zeros_like(g, span);
                vec![(0, self.where_(hit, g, z, span))]
            }
            Op::Reduce(ReduceOp::ArgMax, _) => vec![],
            Op::Reshape => {
                let (_, shape) = self.ty_of(s[0]);
                vec![(0, self.reshape(dy, &shape, span))]
            }
            Op::Permute(p) => {
                let mut inv = vec![0; p.len()];
                for (i, &x) in p.iter().enumerate() {
                    inv[x] = i;
                }
                vec![(0, self.permute(dy, &inv, span))]
            }
            Op::Expand => {
                let (_, from) = self.ty_of(s[0]);
                let axes: Vec<usize> =
                    from.iter().zip(&n.shape).enumerate().filter(|(_, (a, b))| a.is_one() && !b.is_one()).map(|(i, _)| i).collect();
                let summed = self.sum_axes(dy, axes, span);
                vec![(0, self.reshape(summed, &from, span))]
            }
            Op::Slice { start, step } => {
                let (dt, from) = self.ty_of(s[0]);
                vec![(0, self.add(Op::Unslice { start: start.clone(), step: step.clone() }, dt, from, vec![dy], span))]
            }
            Op::Concat(axis) => {
                let mut out = vec![];
                let mut offset = 0i64;
                for (i, &x) in s.iter().enumerate() {
                    let (dt, xs) = self.ty_of(x);
                    let r = xs.len();
                    let mut start = vec![0i64; r];
                    start[*axis] = offset;
                    offset += xs[*axis].as_known().unwrap_or(0);
                    out.push((i, self.add(Op::Slice { start, step: vec![1; r] }, dt, xs, vec![dy], span)));
                }
                out
            }
            Op::MatMul => {
                let (a, b) = (s[0], s[1]);
                let bt = self.transpose_last(b, span);
                let at = self.transpose_last(a, span);
                vec![(0, self.matmul(dy, bt, span)), (1, self.matmul(at, dy, span))]
            }
            Op::Conv2d(attrs) => {
                let (dt, xs) = self.ty_of(s[0]);
                let (_, ws) = self.ty_of(s[1]);
                let dx = self.add(Op::Conv2dGradInput(*attrs), dt, xs, vec![dy, s[1]], span);
                let dw = self.add(Op::Conv2dGradWeight(*attrs), dt, ws, vec![s[0], dy], span);
                vec![(0, dx), (1, dw)]
            }
            Op::Pool2d { kind, kernel, stride, padding, channels_last } => {
                let (dt, xs) = self.ty_of(s[0]);
                let op = Op::Pool2dGrad { kind: *kind, kernel: *kernel, stride: *stride, padding: *padding, channels_last: *channels_last };
                vec![(0, self.add(op, dt, xs, vec![s[0], dy], span))]
            }
            Op::Take => {
                let (dt, xs) = self.ty_of(s[0]);
                vec![(0, self.add(Op::TakeGrad, dt, xs, vec![s[1], dy], span))]
            }
            other @ (Op::Unslice { .. } | Op::Conv2dGradInput(_) | Op::Conv2dGradWeight(_) | Op::Pool2dGrad { .. } | Op::TakeGrad) => {
                return Err(GradError::NoRule(other.name()))
            }
        })
    }
}
