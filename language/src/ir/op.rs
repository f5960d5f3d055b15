//! The primitive ops. Everything else — layers, losses, optimisers — is composed from these in the
//! stdlib, so later passes (autodiff, fusion) need rules for these alone.

use crate::types::rules::Conv2dAttrs;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum UnaryOp {
    Neg,
    Exp,
    Log,
    Sqrt,
    Recip,
    Sin,
    Cos,
    Tanh,
    Erf,
    Abs,
    Floor,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Max,
    Min,
    CmpLt,
    CmpLe,
    CmpEq,
    CmpNe,
    And,
    Or,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
    /// Index of the maximum along a single axis (i64 result).
    ArgMax,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum PoolKind {
    Max,
    Avg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum RandDist {
    /// Uniform on [0, 1).
    Uniform,
    /// Standard normal.
    Normal,
}

/// How a parameter is initialised (bits of f64 so the op stays hashable).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Init {
    Uniform { lo: u64, hi: u64 },
    Normal { mean: u64, std: u64 },
    Constant(u64),
}

impl Init {
    pub fn uniform(lo: f64, hi: f64) -> Init {
        Init::Uniform { lo: lo.to_bits(), hi: hi.to_bits() }
    }
    pub fn normal(mean: f64, std: f64) -> Init {
        Init::Normal { mean: mean.to_bits(), std: std.to_bits() }
    }
    pub fn constant(v: f64) -> Init {
        Init::Constant(v.to_bits())
    }
    pub fn describe(&self) -> String {
        match *self {
            Init::Uniform { lo, hi } => format!("uniform({:.4}, {:.4})", f64::from_bits(lo), f64::from_bits(hi)),
            Init::Normal { mean, std } => format!("normal({}, {})", f64::from_bits(mean), f64::from_bits(std)),
            Init::Constant(v) => format!("constant({})", f64::from_bits(v)),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Op {
    /// A tensor bound from outside the graph (a data element, a value computed earlier).
    Input(u32),
    Param(u32),
    /// A tensor literal; values in `Graph::literals`.
    Literal(u32),
    /// A 0-d constant (f64 bits); broadcast with `Expand`.
    Const(u64),
    Rand {
        dist: RandDist,
        seed: u64,
    },
    /// 0, 1, ..., n-1 along a 1-d i64 tensor.
    Iota,
    Cast,
    Unary(UnaryOp),
    Binary(BinaryOp),
    /// `where(cond, a, b)`.
    Where,
    /// Reduce over axes, keeping them as size 1.
    Reduce(ReduceOp, Vec<usize>),
    /// Movement ops: views in a fusing backend; the eager interpreter copies.
    Reshape,
    Permute(Vec<usize>),
    /// Broadcast size-1 dims to the node's shape (same rank).
    Expand,
    /// Per-axis start and step; the node's shape gives the lengths.
    Slice {
        start: Vec<i64>,
        step: Vec<i64>,
    },
    Concat(usize),
    /// Contractions that call tuned libraries.
    MatMul,
    Conv2d(Conv2dAttrs),
    /// 2-d pooling over the last two dims (`[N, C, H, W]` or `[C, H, W]`), or, channels-last,
    /// over the two before the last (`[N, H, W, C]`: the layout pass's, beside channels-last
    /// convolutions).
    Pool2d {
        kind: PoolKind,
        kernel: (i64, i64),
        stride: (i64, i64),
        padding: (i64, i64),
        channels_last: bool,
    },
    /// Rows of src[0] selected by the i64 indices src[1] (embedding lookup).
    Take,
    /// The value of src[0], through which no gradient flows (`stop_grad`).
    Detach,
    /// The value of src[0] again, once src[1] has been computed: where a `checkpoint` block's
    /// values are recomputed in backward, its inputs are read through this node with the block's
    /// output gradient as src[1], so that the recomputation is scheduled when backward reaches the
    /// block and not while the forward values are still live. A view; src[1] is only an ordering.
    Recompute,
    // Ops that only backward passes build (the transposes of the ops above).
    /// The transpose of `Slice`: src[0] placed at `start + i*step` in a zero tensor of the node's shape.
    Unslice {
        start: Vec<i64>,
        step: Vec<i64>,
    },
    /// d(conv2d)/d(input): src = [grad_out, weight]; the node's shape is the input's.
    Conv2dGradInput(Conv2dAttrs),
    /// d(conv2d)/d(weight): src = [input, grad_out]; the node's shape is the weight's.
    Conv2dGradWeight(Conv2dAttrs),
    /// d(pool)/d(input): src = [input, grad_out].
    Pool2dGrad {
        kind: PoolKind,
        kernel: (i64, i64),
        stride: (i64, i64),
        padding: (i64, i64),
        channels_last: bool,
    },
    /// d(take)/d(table): rows of src[1] (grad_out) added at the indices src[0] into zeros of the node's shape.
    TakeGrad,
}

impl Op {
    pub fn name(&self) -> String {
        match self {
            Op::Input(i) => format!("input#{i}"),
            Op::Param(i) => format!("param#{i}"),
            Op::Literal(i) => format!("literal#{i}"),
            Op::Const(b) => format!("const({})", f64::from_bits(*b)),
            Op::Rand { dist, seed } => format!("rand_{}(seed={seed})", if *dist == RandDist::Normal { "normal" } else { "uniform" }),
            Op::Iota => "iota".into(),
            Op::Cast => "cast".into(),
            Op::Unary(u) => format!("{u:?}").to_lowercase(),
            Op::Binary(b) => format!("{b:?}").to_lowercase(),
            Op::Where => "where".into(),
            Op::Reduce(r, axes) => format!("reduce_{}{:?}", format!("{r:?}").to_lowercase(), axes),
            Op::Reshape => "reshape".into(),
            Op::Permute(p) => format!("permute{p:?}"),
            Op::Expand => "expand".into(),
            Op::Slice { start, step } => format!("slice(start={start:?}, step={step:?})"),
            Op::Concat(a) => format!("concat(axis={a})"),
            Op::MatMul => "matmul".into(),
            Op::Conv2d(a) => {
                let layout = if a.channels_last { ", channels_last" } else { "" };
                format!("conv2d(stride={:?}, padding={:?}, dilation={:?}, groups={}{layout})", a.stride, a.padding, a.dilation, a.groups)
            }
            Op::Pool2d { kind, kernel, stride, padding, channels_last } => {
                let layout = if *channels_last { ", channels_last" } else { "" };
                format!("{}_pool2d(k={kernel:?}, s={stride:?}, p={padding:?}{layout})", if *kind == PoolKind::Max { "max" } else { "avg" })
            }
            Op::Take => "take".into(),
            Op::Detach => "detach".into(),
            Op::Recompute => "recompute".into(),
            Op::Unslice { start, step } => format!("unslice(start={start:?}, step={step:?})"),
            Op::Conv2dGradInput(_) => "conv2d_grad_input".into(),
            Op::Conv2dGradWeight(_) => "conv2d_grad_weight".into(),
            Op::Pool2dGrad { kind, .. } => format!("{}_pool2d_grad", if *kind == PoolKind::Max { "max" } else { "avg" }),
            Op::TakeGrad => "take_grad".into(),
        }
    }
    /// The op's name without its arguments (`permute`, `reduce`, `unary`): a label for reports.
    pub fn kind_name(&self) -> String {
        format!("{self:?}").split(['(', ' ', '{']).next().unwrap_or("op").to_lowercase()
    }
    /// Elementwise ops: the ones a fusion region chains together.
    pub fn is_elementwise(&self) -> bool {
        matches!(self, Op::Cast | Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Const(_))
    }
}
