//! Movement ops. In the eager interpreter each one copies into a new contiguous tensor through
//! one strided-gather routine.

use crate::runtime::tensor::{strides, Data, Tensor};
use std::sync::Arc;

/// out[idx] = src[offset + sum(idx[k] * strides[k])] over the output shape.
fn gather<T: Copy>(src: &[T], shape: &[usize], st: &[isize], offset: isize) -> Vec<T> {
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let rank = shape.len();
    if rank == 0 {
        out.push(src[offset as usize]);
        return out;
    }
    let mut idx = vec![0usize; rank];
    let mut pos = offset;
    let last = rank - 1;
    loop {
        // Innermost dimension in a tight loop.
        let s = st[last];
        for i in 0..shape[last] {
            out.push(src[(pos + i as isize * s) as usize]);
        }
        // Carry into outer dimensions.
        let mut k = last;
        loop {
            if k == 0 {
                return out;
            }
            k -= 1;
            idx[k] += 1;
            pos += st[k];
            if idx[k] < shape[k] {
                break;
            }
            pos -= st[k] * shape[k] as isize;
            idx[k] = 0;
        }
    }
}

fn apply(x: &Tensor, shape: &[usize], st: &[isize], offset: isize) -> Tensor {
    let data = match &x.data {
        Data::F32(v) => Data::F32(Arc::new(gather(v, shape, st, offset))),
        Data::F64(v) => Data::F64(Arc::new(gather(v, shape, st, offset))),
        Data::I64(v) => Data::I64(Arc::new(gather(v, shape, st, offset))),
        Data::U8(v) => Data::U8(Arc::new(gather(v, shape, st, offset))),
    };
    Tensor { dtype: x.dtype, shape: shape.to_vec(), data }
}

pub fn permute(x: &Tensor, perm: &[usize]) -> Tensor {
    let s = strides(&x.shape);
    let shape: Vec<usize> = perm.iter().map(|p| x.shape[*p]).collect();
    let st: Vec<isize> = perm.iter().map(|p| s[*p]).collect();
    apply(x, &shape, &st, 0)
}

/// Broadcast size-1 dims (same rank) with stride 0.
pub fn expand(x: &Tensor, shape: &[usize]) -> Tensor {
    let s = strides(&x.shape);
    let st: Vec<isize> = x.shape.iter().zip(&s).map(|(d, s)| if *d == 1 { 0 } else { *s }).collect();
    apply(x, shape, &st, 0)
}

pub fn slice(x: &Tensor, start: &[i64], step: &[i64], shape: &[usize]) -> Tensor {
    let s = strides(&x.shape);
    let offset: isize = start.iter().zip(&s).map(|(a, s)| *a as isize * s).sum();
    let st: Vec<isize> = step.iter().zip(&s).map(|(k, s)| *k as isize * s).collect();
    apply(x, shape, &st, offset)
}

pub fn concat(xs: &[Tensor], axis: usize, shape: Vec<usize>) -> Tensor {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let mut vals: Vec<f64> = Vec::with_capacity(shape.iter().product());
    let parts: Vec<Vec<f64>> = xs.iter().map(|x| x.to_f64()).collect();
    for o in 0..outer {
        for (x, p) in xs.iter().zip(&parts) {
            let chunk = x.shape[axis] * inner;
            vals.extend_from_slice(&p[o * chunk..(o + 1) * chunk]);
        }
    }
    Tensor::from_f64(xs[0].dtype, shape, vals)
}
