//! Reductions over a set of axes (kept as size 1): the reduced axes are moved innermost, then each
//! contiguous run is folded. Sums accumulate in f64 for accuracy.

use super::movement;
use crate::runtime::tensor::Tensor;
use dlc_language::ir::ReduceOp;
use dlc_language::types::DType;

pub fn reduce(op: ReduceOp, x: &Tensor, axes: &[usize], shape: Vec<usize>) -> Tensor {
    let keep: Vec<usize> = (0..x.shape.len()).filter(|a| !axes.contains(a)).collect();
    let perm: Vec<usize> = keep.iter().chain(axes.iter()).copied().collect();
    let moved = movement::permute(x, &perm);
    let run: usize = axes.iter().map(|a| x.shape[*a]).product();
    let vals = moved.to_f64();
    let groups = if run == 0 { shape.iter().product() } else { vals.len() / run };
    let mut out = Vec::with_capacity(groups);
    for g in 0..groups {
        let chunk = if run == 0 { &[][..] } else { &vals[g * run..(g + 1) * run] };
        out.push(match op {
            ReduceOp::Sum => chunk.iter().sum(),
            ReduceOp::Max => {
                chunk.iter().copied().fold(f64::NEG_INFINITY, |a, b| if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) })
            }
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
