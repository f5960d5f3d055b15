//! Kernels of the ops only backward passes build: the transposes of slice and take (those of
//! conv2d and pooling are in conv.rs and pool.rs).

use crate::runtime::tensor::{strides, Data, Tensor};
use crate::runtime::RuntimeError;

/// Zeros of `shape` with `src` placed at `start + i*step` along each axis.
pub fn unslice(src: &Tensor, start: &[i64], step: &[i64], shape: Vec<usize>) -> Tensor {
    let out_st = strides(&shape);
    let n: usize = shape.iter().product();
    let mut out = vec![0f64; n];
    let vals = src.to_f64();
    let rank = src.shape.len();
    let mut idx = vec![0usize; rank];
    for v in vals {
        let off: isize = (0..rank).map(|k| (start[k] as isize + idx[k] as isize * step[k] as isize) * out_st[k]).sum();
        out[off as usize] += v;
        for k in (0..rank).rev() {
            idx[k] += 1;
            if idx[k] < src.shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Tensor::from_f64(src.dtype, shape, out)
}

/// Rows of `dy` added into zeros at the rows `idx` names (embedding backward).
pub fn take_grad(idx: &Tensor, dy: &Tensor, shape: Vec<usize>) -> Result<Tensor, RuntimeError> {
    let rows = shape[0];
    let row: usize = shape[1..].iter().product();
    let Data::I64(ids) = &idx.data else {
        return Err(RuntimeError::Unsupported("take_grad needs integer indices".into()));
    };
    let gv = dy.to_f64();
    let mut out = vec![0f64; rows * row];
    for (j, &i) in ids.iter().enumerate() {
        let i = if i < 0 { i + rows as i64 } else { i } as usize;
        if i >= rows {
            return Err(RuntimeError::Unsupported(format!("index {i} is out of range for {rows} rows")));
        }
        for c in 0..row {
            out[i * row + c] += gv[j * row + c];
        }
    }
    Ok(Tensor::from_f64(dy.dtype, shape, out))
}
