//! Layout: convolutions channels-last where the device's kernels want it, and the values around
//! them kept channels-last so that the layout costs a transpose at the edges of a convolutional
//! region, not two around every convolution (the guide's `memory_format=torch.channels_last`,
//! chosen by the compiler).
//!
//! cuDNN's tensor-core convolutions in bf16 and f16 are NHWC kernels: given NCHW operands it
//! transposes them itself, every call. So on a GPU each bf16/f16 `conv2d` becomes a channels-last
//! one (x and y `[N, H, W, C]`, w `[O, kH, kW, I]`), and the choice spreads forward through what
//! does not care where the channels are: elementwise ops, casts, broadcasts, reductions (their
//! axes renumbered) and pooling (over the dims before the channels), which is batch norm, the
//! bias add, the activation and the pooling between two convolutions. What does care (reshapes,
//! products, anything else) reads its operand transposed back. Transposes of arrays whose other
//! axes have size 1 (a bias `[1, C, 1, 1]`) are reshapes, and a transpose back of a transpose is
//! its source.
//!
//! The pass runs on the forward graph after autocast and before autodiff, so backward
//! differentiates what forward computes: the gradients of channels-last values are channels-last,
//! and the convolutions' gradients are channels-last convolutions too.

use super::rewrite::{rebuild, Memo};
use crate::ir::{Graph, Node, NodeId, Op};
use crate::span::Span;
use crate::types::rules::{permuted, Conv2dAttrs, TO_CHANNELS_LAST, TO_NCHW};
use crate::types::DType;
use std::collections::{HashMap, HashSet};

/// Which convolutions run channels-last.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConvLayout {
    /// None: the CPU's choice without oneDNN (its im2col gained less from NHWC than the
    /// transposes cost), and what `infer` blocks and evaluations compiled before their runner
    /// is known use.
    #[default]
    Nchw,
    /// Those in bf16 or f16: a GPU's choice (cuDNN's tensor-core kernels are NHWC).
    ChannelsLastLowPrecision,
    /// All: the CPU's choice with oneDNN, whose NHWC kernels run them as stored, where NCHW
    /// costs a reorder in and out of its blocked layout each call (the conv-BN step 16.1-19.1
    /// ms against 18.5-19.4 NCHW on the Zen 5, once per-channel values were read from tiles,
    /// channels-last sums ran a block of rows a call and pooling ran NHWC: stop 48).
    ChannelsLast,
}

impl ConvLayout {
    fn takes(self, dtype: DType) -> bool {
        match self {
            ConvLayout::Nchw => false,
            ConvLayout::ChannelsLastLowPrecision => matches!(dtype, DType::BF16 | DType::F16),
            ConvLayout::ChannelsLast => dtype.is_float(),
        }
    }
}

/// The rewrite, shared by every root of a step so that common subgraphs are rewritten once.
pub struct Layout {
    policy: ConvLayout,
    memo: Memo,
    state: State,
    /// Where each convolution made channels-last is written.
    pub converted: Vec<Span>,
}

#[derive(Default)]
struct State {
    /// The old nodes whose replacements hold their values channels-last.
    channels_last: HashSet<NodeId>,
    /// A new node moved to the other layout (`true`: to channels-last), made once.
    moved: HashMap<(NodeId, bool), NodeId>,
}

impl Layout {
    pub fn new(policy: ConvLayout) -> Layout {
        Layout { policy, memo: Memo::new(), state: State::default(), converted: vec![] }
    }

    /// The node that replaces `root`: the same value (in its layout as written), computed with
    /// the convolutions the policy takes channels-last.
    pub fn map(&mut self, g: &mut Graph, root: NodeId) -> NodeId {
        if self.policy == ConvLayout::Nchw {
            return root;
        }
        let (policy, state, converted) = (self.policy, &mut self.state, &mut self.converted);
        rebuild(g, root, &mut self.memo, |g, old, node, span, memo| {
            let rewritten = rule(g, policy, state, node, span, memo)?;
            if rewritten.1 {
                state.channels_last.insert(old);
                if matches!(node.op, Op::Conv2d(_)) {
                    converted.push(span);
                }
            }
            Some(rewritten.0)
        });
        self.nchw(g, root)
    }

    /// `old`'s replacement in the layout `old` was written in.
    fn nchw(&mut self, g: &mut Graph, old: NodeId) -> NodeId {
        let new = self.memo[&old];
        if self.state.channels_last.contains(&old) {
            move_to(g, &mut self.state, new, false)
        } else {
            new
        }
    }
}

/// Every root under `policy`, rewritten once (an evaluation's or an `infer` block's forward).
pub fn lower_all(g: &mut Graph, roots: &[NodeId], policy: ConvLayout) -> Vec<NodeId> {
    let mut l = Layout::new(policy);
    roots.iter().map(|r| l.map(g, *r)).collect()
}

/// The replacement of `node` and whether it is channels-last; `None` keeps it as it is (on its
/// rewritten sources, all in their written layout).
fn rule(g: &mut Graph, policy: ConvLayout, state: &mut State, node: &Node, span: Span, memo: &Memo) -> Option<(NodeId, bool)> {
    let is_cl = |s: &NodeId| state.channels_last.contains(s);
    let four = node.shape.len() == 4;
    if let Op::Conv2d(a) = &node.op {
        if four && !a.channels_last && policy.takes(node.dtype) {
            let src = node.src.iter().map(|s| in_layout(g, state, memo, *s, true)).collect();
            let op = Op::Conv2d(Conv2dAttrs { channels_last: true, ..*a });
            let shape = permuted(&node.shape, &TO_CHANNELS_LAST);
            return Some((g.add(Node { op, dtype: node.dtype, shape, src }, span), true));
        }
    }
    if !node.src.iter().any(is_cl) {
        return None;
    }
    // Pooling windows the two dims before the channels just as well (`[N, H, W, C]`): a pool of
    // a channels-last value pools it as stored, and its gradient is channels-last too.
    if let Op::Pool2d { kind, kernel, stride, padding, channels_last: false } = &node.op {
        if four && is_cl(&node.src[0]) {
            let src = vec![in_layout(g, state, memo, node.src[0], true)];
            let op = Op::Pool2d { kind: *kind, kernel: *kernel, stride: *stride, padding: *padding, channels_last: true };
            let shape = permuted(&node.shape, &TO_CHANNELS_LAST);
            return Some((g.add(Node { op, dtype: node.dtype, shape, src }, span), true));
        }
    }
    // What does not care where the channels are follows its channels-last operands.
    let follows = match &node.op {
        Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast | Op::Detach | Op::Expand => four,
        Op::Reduce(..) => four && node.src.len() == 1,
        _ => false,
    };
    if follows {
        let src = node.src.iter().map(|s| in_layout(g, state, memo, *s, true)).collect();
        let op = match &node.op {
            // Reductions keep their axes: each renumbered to where it is channels-last.
            Op::Reduce(r, axes) => Op::Reduce(*r, axes.iter().map(|a| position(*a)).collect()),
            op => op.clone(),
        };
        let shape = permuted(&node.shape, &TO_CHANNELS_LAST);
        return Some((g.add(Node { op, dtype: node.dtype, shape, src }, span), true));
    }
    let src = node.src.iter().map(|s| in_layout(g, state, memo, *s, false)).collect();
    Some((g.add(Node { src, ..node.clone() }, span), false))
}

/// Where logical axis `a` of an NCHW array is in its channels-last form.
fn position(a: usize) -> usize {
    TO_CHANNELS_LAST.iter().position(|p| *p == a).expect("an axis of a 4-d array")
}

/// Old node `s`'s replacement, channels-last (`cl`) or as written.
fn in_layout(g: &mut Graph, state: &mut State, memo: &Memo, s: NodeId, cl: bool) -> NodeId {
    let new = memo[&s];
    if g.node(new).shape.len() != 4 || state.channels_last.contains(&s) == cl {
        return new;
    }
    move_to(g, state, new, cl)
}

/// New node `n` moved to channels-last (`cl`) or back: a transpose back of a transpose is its
/// source, a broadcast moves its operand, and an array with one axis over 1 among the moved ones
/// is reshaped, not transposed (its elements stay in order).
fn move_to(g: &mut Graph, state: &mut State, n: NodeId, cl: bool) -> NodeId {
    if let Some(m) = state.moved.get(&(n, cl)) {
        return *m;
    }
    let perm = if cl { TO_CHANNELS_LAST } else { TO_NCHW };
    let node = g.node(n).clone();
    let span = g.span(n);
    let shape = permuted(&node.shape, &perm);
    let moved = match &node.op {
        Op::Permute(p) if p.len() == 4 && perm.iter().enumerate().all(|(i, q)| p[*q] == i) => node.src[0],
        Op::Expand => {
            let src = move_to(g, state, node.src[0], cl);
            g.add(Node { op: Op::Expand, dtype: node.dtype, shape, src: vec![src] }, span)
        }
        _ => {
            let big: Vec<usize> = (0..4).filter(|i| !node.shape[*i].is_one()).collect();
            let big_after: Vec<usize> = perm.iter().copied().filter(|i| !node.shape[*i].is_one()).collect();
            let op = if big == big_after { Op::Reshape } else { Op::Permute(perm.to_vec()) };
            g.add(Node { op, dtype: node.dtype, shape, src: vec![n] }, span)
        }
    };
    state.moved.insert((n, cl), moved);
    moved
}

#[cfg(test)]
mod tests;
