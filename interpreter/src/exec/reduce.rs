//! Reductions over a set of axes (kept as size 1). Sums accumulate in f64 for accuracy; a sum of
//! an f32 tensor reads it once, in place, run by run. Other reductions move the reduced axes
//! innermost, then fold each contiguous run.

use super::elem::Elem;
use super::movement;
use super::sum_axes::{sum_axes, sum_run, Values};
use crate::runtime::tensor::{Data, Tensor};
use dlc_language::ir::ReduceOp;
use dlc_language::types::DType;

pub fn reduce(op: ReduceOp, x: &Tensor, axes: &[usize], shape: Vec<usize>) -> Tensor {
    if let (ReduceOp::Sum, Data::F32(v)) = (op, &x.data) {
        return Tensor::from_f64(x.dtype, shape, sum_axes(&Values::Tensor(v), &x.shape, axes));
    }
    let keep: Vec<usize> = (0..x.shape.len()).filter(|a| !axes.contains(a)).collect();
    let perm: Vec<usize> = keep.iter().chain(axes.iter()).copied().collect();
    let moved = movement::permute(x, &perm);
    let run: usize = axes.iter().map(|a| x.shape[*a]).product();
    let vals = moved.to_f64();
    let groups = vals.len().checked_div(run).unwrap_or_else(|| shape.iter().product());
    let mut out = Vec::with_capacity(groups);
    for g in 0..groups {
        let chunk = if run == 0 { &[][..] } else { &vals[g * run..(g + 1) * run] };
        out.push(match op {
            ReduceOp::Sum => chunk.iter().sum(),
            ReduceOp::Max => max_run(chunk).unwrap_or(f64::NAN),
            ReduceOp::Min => chunk.iter().copied().fold(f64::INFINITY, |a, b| if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) }),
            // First index of the maximum, as torch.argmax.
            ReduceOp::ArgMax => {
                let mut best = 0;
                for (i, v) in chunk.iter().enumerate() {
                    if *v > chunk[best] || (v.is_nan() && !chunk[best].is_nan()) {
                        best = i;
                    }
                }
                best as f64
            }
        });
    }
    let dtype = if op == ReduceOp::ArgMax { DType::I64 } else { x.dtype };
    Tensor::from_f64(dtype, shape, out)
}

/// The maximum of a run, None if any is NaN (torch.max gives NaN then), -inf of an empty run:
/// eight running maxima (element i to lane i % 8, a larger value replacing the lane's), then
/// combined in a fixed order, so the loop vectorises and the result (even which zero of a tie of
/// +0 and -0) depends on the run alone. The same in f32 as in f64: comparisons are exact.
fn max_run<T: Elem>(run: &[T]) -> Option<T> {
    let mut lanes = [T::NEG_INFINITY; 8];
    let mut nan = false;
    let mut blocks = run.chunks_exact(8);
    for b in &mut blocks {
        for (l, v) in lanes.iter_mut().zip(b) {
            nan |= v.is_nan();
            *l = if *v > *l { *v } else { *l };
        }
    }
    for (l, v) in lanes.iter_mut().zip(blocks.remainder()) {
        nan |= v.is_nan();
        *l = if *v > *l { *v } else { *l };
    }
    (!nan).then(|| lanes.iter().fold(T::NEG_INFINITY, |a, b| if *b > a { *b } else { a }))
}

/// One row's sum over the last axis, exactly as `reduce` computes it for an f32 tensor (the
/// fused row kernels' reduction, exec/rows.rs).
pub(super) fn row_sum(row: &[f32]) -> f32 {
    (0.0 + sum_run(row)) as f32
}

/// One row's maximum over the last axis, exactly as `reduce` computes it.
pub(super) fn row_max(row: &[f32]) -> f32 {
    max_run(row).unwrap_or(f32::NAN)
}
