//! Library ops that no fused region took, as kernels, so that a device runs them where their
//! operands already are instead of through the host: an elementwise op alone (a comparison, a
//! cast, a broadcast of floats) as a one-op region, a sum over axes of f32 values, a broadcast or
//! permutation of any storage type as a copy, i64 comparisons and arithmetic, and random draws from
//! the CPU's counter-based stream. Each computes what the interpreter computes, bit for bit
//! (sums: in f64, rounded once, as the CPU sums). Everything else stays a library call
//! (products go to the device's gemm).

use super::lower::{concrete, contiguous, expand_strides, lower_region, storage, LowerError};
use super::{
    ArgMax, Buf, Concat, Copy, Elementwise, Index, Inst, IntBinary, Kernel, Param, Pool, Rand, SumAxes, Take, TakeGrad, Ty, Unslice,
};
use dlc_language::ir::{BinaryOp, Graph, NodeId, Op, PoolKind, RandDist, ReduceOp};
use dlc_language::passes::fusion::{is_fusible, Region};
use dlc_language::types::rules::{permuted, TO_NCHW};
use dlc_language::types::DType;

/// A library op as a kernel, and the nodes its input parameters read, in parameter order (its
/// one output is the node itself). `None`: it stays a library call.
pub fn lower_library(g: &Graph, n: NodeId) -> Result<Lowered, LowerError> {
    let node = g.node(n);
    if storage(node.dtype).is_err() || node.src.iter().any(|s| storage(g.node(*s).dtype).is_err()) {
        return Ok(None);
    }
    let param = |s: NodeId| param(g, s);
    if is_fusible(g, n) {
        // Constants are inlined into the body; every other operand is a parameter.
        let mut inputs: Vec<NodeId> = vec![];
        for s in &node.src {
            if !matches!(g.node(*s).op, Op::Const(_)) && !inputs.contains(s) {
                inputs.push(*s);
            }
        }
        let region = Region { nodes: vec![n], inputs: inputs.clone(), outputs: vec![n] };
        return Ok(Some((Kernel::Elementwise(lower_region(g, &region)?), inputs)));
    }
    let shape = concrete(g, n);
    Ok(match &node.op {
        Op::Expand | Op::Permute(_) | Op::Slice { .. } | Op::Unslice { .. } | Op::Concat(_) => movement(g, n)?,
        Op::Binary(op) if node.src.iter().all(|s| concrete(g, *s) == shape && storage(g.node(*s).dtype) == Ok(Ty::I64)) => {
            let out = match op {
                BinaryOp::CmpEq | BinaryOp::CmpNe | BinaryOp::CmpLt | BinaryOp::CmpLe if node.dtype == DType::Bool => Ty::Bool,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Max | BinaryOp::Min
                    if node.dtype == DType::I64 && node.src.iter().all(|s| g.node(*s).dtype == DType::I64) =>
                {
                    Ty::I64
                }
                // Division, modulo and powers can fail (by zero, a negative power): the host's.
                _ => return Ok(None),
            };
            let (a, b) = (node.src[0], node.src[1]);
            let kernel = IntBinary { shape, op: *op, a: param(a)?, b: param(b)?, out };
            Some((Kernel::IntBinary(kernel), vec![a, b]))
        }
        // Integers to f32 (class labels compared as f32, `one_hot`): each read as f32, which
        // is the conversion (round to nearest, as the interpreter's `as f32`).
        Op::Cast if node.dtype == DType::F32 && storage(g.node(node.src[0]).dtype) == Ok(Ty::I64) => {
            let s = node.src[0];
            let body = vec![Inst::Load { from: Buf::Param(0), index: Index::Linear }];
            Some((Kernel::Elementwise(Elementwise { shape, inputs: vec![param(s)?], body, outputs: vec![(0, Ty::F32)] }), vec![s]))
        }
        Op::Reduce(ReduceOp::Sum, axes) if node.dtype == DType::F32 && g.node(node.src[0]).dtype == DType::F32 => {
            let s = node.src[0];
            let prologue = Elementwise {
                shape: concrete(g, s),
                inputs: vec![param(s)?],
                body: vec![Inst::Load { from: Buf::Param(0), index: Index::Linear }],
                outputs: vec![(0, Ty::F32)],
            };
            Some((Kernel::Sum(SumAxes { prologue, summed: 0, axes: axes.clone() }), vec![s]))
        }
        Op::Reduce(ReduceOp::ArgMax, axes)
            if node.dtype == DType::I64
                && matches!(param(node.src[0])?.ty, Ty::F32 | Ty::BF16 | Ty::F16)
                && axes.as_slice() == [shape.len().saturating_sub(1)] =>
        {
            let s = node.src[0];
            let len = *concrete(g, s).last().unwrap_or(&1);
            if len == 0 {
                return Ok(None);
            }
            Some((Kernel::ArgMax(ArgMax { rows: shape.iter().product(), len, input: param(s)? }), vec![s]))
        }
        Op::Pool2d { .. } | Op::Pool2dGrad { .. } => pool(g, n)?,
        // src = [table, indices]; the executor checks the indices beside it (`IndexCheck`).
        Op::Take if g.node(node.src[1]).dtype == DType::I64 && !concrete(g, node.src[0]).is_empty() => {
            let table = concrete(g, node.src[0]);
            let (rows, row) = (table[0], table[1..].iter().product::<usize>());
            let ty = param(node.src[0])?.ty;
            Some((Kernel::Take(Take { rows, row, n: concrete(g, node.src[1]).iter().product(), ty }), node.src.clone()))
        }
        // src = [indices, grad_out]. Out-of-range indices add nothing here; the forward's
        // index check has already stopped the step with the error.
        Op::TakeGrad
            if node.dtype == DType::F32
                && g.node(node.src[0]).dtype == DType::I64
                && g.node(node.src[1]).dtype == DType::F32
                && !shape.is_empty() =>
        {
            let (rows, row) = (shape[0], shape[1..].iter().product::<usize>());
            let n: usize = concrete(g, node.src[0]).iter().product();
            (concrete(g, node.src[1]).iter().product::<usize>() == n * row)
                .then(|| (Kernel::TakeGrad(TakeGrad { rows, row, n }), node.src.clone()))
        }
        Op::Rand { dist, seed } if node.dtype == DType::F32 && node.src.len() <= 1 => {
            let step = node.src.first().map(|s| param(*s)).transpose()?;
            let normal = *dist == RandDist::Normal;
            Some((Kernel::Rand(Rand { len: shape.iter().product(), seed: *seed, step, normal }), node.src.clone()))
        }
        _ => None,
    })
}

/// A library op's result: the kernel and the nodes its input parameters read.
type Lowered = Option<(Kernel, Vec<NodeId>)>;

fn param(g: &Graph, s: NodeId) -> Result<Param, LowerError> {
    Ok(Param { ty: storage(g.node(s).dtype)?, len: concrete(g, s).iter().product() })
}

/// Broadcasts, permutations and slices as copies; the transpose of a slice; concatenations.
fn movement(g: &Graph, n: NodeId) -> Result<Lowered, LowerError> {
    let node = g.node(n);
    let shape = concrete(g, n);
    let param = |s: NodeId| param(g, s);
    Ok(match &node.op {
        Op::Expand | Op::Permute(_) | Op::Slice { .. } => {
            let s = node.src[0];
            let from = concrete(g, s);
            let src_strides: Vec<i64> = contiguous(&from).into_iter().map(|v| v as i64).collect();
            let (offset, strides) = match &node.op {
                Op::Permute(p) => (0, p.iter().map(|a| src_strides[*a]).collect()),
                Op::Slice { start, step } => {
                    if start.len() != from.len() || step.len() != from.len() {
                        return Ok(None);
                    }
                    (
                        start.iter().zip(&src_strides).map(|(a, st)| a * st).sum(),
                        step.iter().zip(&src_strides).map(|(k, st)| k * st).collect(),
                    )
                }
                _ => (0, expand_strides(&from, &shape).into_iter().map(|v| v as i64).collect()),
            };
            Some((Kernel::Copy(Copy { shape, input: param(s)?, offset, strides }), vec![s]))
        }
        Op::Unslice { start, step }
            if matches!(param(node.src[0])?.ty, Ty::F32 | Ty::I64) && step.iter().all(|k| *k > 0) && start.iter().all(|a| *a >= 0) =>
        {
            let s = node.src[0];
            let input_shape = concrete(g, s);
            if start.len() != input_shape.len() || step.len() != input_shape.len() {
                return Ok(None);
            }
            Some((Kernel::Unslice(Unslice { shape, input: param(s)?, input_shape, start: start.clone(), step: step.clone() }), vec![s]))
        }
        Op::Concat(axis) if *axis < shape.len() => {
            let tys: Vec<Ty> = node.src.iter().map(|s| param(*s).map(|p| p.ty)).collect::<Result<_, _>>()?;
            if tys.iter().any(|t| *t != tys[0]) {
                return Ok(None);
            }
            let inputs = node.src.iter().map(|s| Ok((param(*s)?, concrete(g, *s)[*axis]))).collect::<Result<Vec<_>, LowerError>>()?;
            Some((Kernel::Concat(Concat { shape, axis: *axis, inputs }), node.src.clone()))
        }
        _ => None,
    })
}

/// Pooling and its gradient in f32.
fn pool(g: &Graph, n: NodeId) -> Result<Lowered, LowerError> {
    let node = g.node(n);
    let shape = concrete(g, n);
    Ok(match &node.op {
        Op::Pool2d { kind, kernel, stride, padding, channels_last } | Op::Pool2dGrad { kind, kernel, stride, padding, channels_last }
            if node.dtype == DType::F32 && node.src.iter().all(|s| g.node(*s).dtype == DType::F32) =>
        {
            let grad = matches!(node.op, Op::Pool2dGrad { .. });
            // Channels-last arrays as their NCHW forms, the channel count kept.
            let nchw = |s: Vec<usize>| if *channels_last && s.len() == 4 { permuted(&s, &TO_NCHW) } else { s };
            let x = nchw(concrete(g, node.src[0]));
            // The output's plane: the forward's own, the gradient's its second operand's.
            let y = nchw(if grad { concrete(g, node.src[1]) } else { shape.clone() });
            let r = x.len();
            let dims = |v: (i64, i64)| (v.0.max(0) as usize, v.1.max(0) as usize);
            let (k, s, p) = (dims(*kernel), dims(*stride), dims(*padding));
            if r < 2 || y.len() != r || k.0 == 0 || k.1 == 0 || s.0 == 0 || s.1 == 0 {
                return Ok(None);
            }
            let pool = Pool {
                max: *kind == PoolKind::Max,
                grad,
                planes: x[..r - 2].iter().product(),
                channels_last: channels_last.then_some(x[1]),
                h: x[r - 2],
                w: x[r - 1],
                oh: y[r - 2],
                ow: y[r - 1],
                k,
                s,
                p,
            };
            Some((Kernel::Pool(pool), node.src.clone()))
        }
        _ => None,
    })
}
