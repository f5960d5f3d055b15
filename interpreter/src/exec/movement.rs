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
        // Innermost dimension in a tight loop: a value repeated (an expand's broadcast) or a run
        // of values (stride 1) in one call each, which the compiler vectorises (pushed one by
        // one, expanding the one-hot's `[1024, 1]` labels to `[1024, 10]` took 9 µs).
        let (s, n) = (st[last], shape[last]);
        match s {
            0 => out.extend(std::iter::repeat_n(src[pos as usize], n)),
            1 => out.extend_from_slice(&src[pos as usize..pos as usize + n]),
            _ => out.extend((0..n).map(|i| src[(pos + i as isize * s) as usize])),
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
    let shape: Vec<usize> = perm.iter().map(|p| x.shape[*p]).collect();
    if let (Data::F32(v), Some((b, m, n))) = (&x.data, batched_transpose(&x.shape, perm)) {
        return Tensor { dtype: x.dtype, shape, data: Data::F32(Arc::new(transpose(v, b, m, n))) };
    }
    let s = strides(&x.shape);
    let st: Vec<isize> = perm.iter().map(|p| s[*p]).collect();
    apply(x, &shape, &st, 0)
}

/// A permutation that is a batch of matrix transposes: the leading `k` axes kept, then two
/// blocks of axes swapped (NCHW to NHWC is `[N, C, H*W]` to `[N, H*W, C]`). Gives the batch, and
/// the rows and columns of each matrix as stored.
fn batched_transpose(shape: &[usize], perm: &[usize]) -> Option<(usize, usize, usize)> {
    let r = perm.len();
    let k = perm.iter().enumerate().take_while(|(i, p)| *i == **p).count();
    if k + 1 >= r {
        return None;
    }
    // The output's axes after the kept ones: j..r, then k..j.
    let j = perm[k];
    let swapped = (k..r).all(|i| perm[i] == if i < k + (r - j) { j + (i - k) } else { k + (i - k - (r - j)) });
    (j > k && swapped).then(|| (shape[..k].iter().product(), shape[k..j].iter().product(), shape[j..].iter().product()))
}

/// `b` matrices of `m` × `n` values, each transposed (to `n` × `m`), by their bits in blocks
/// through vector registers on all threads (exec/transpose.rs).
fn transpose(src: &[f32], b: usize, m: usize, n: usize) -> Vec<f32> {
    let len = b * m * n;
    let mut out: Vec<f32> = Vec::with_capacity(len);
    // SAFETY: f32 and u32 have one size and alignment, so the values are read as words and the
    // output's spare capacity (`len` values) written as words; every one is written.
    unsafe {
        let words = std::slice::from_raw_parts(src.as_ptr() as *const u32, src.len());
        let dst = std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut std::mem::MaybeUninit<u32>, len);
        super::transpose::transpose_batched(words, dst, b, m, n);
        out.set_len(len);
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every permutation of ranks 1-4 (the batched transposes among them by tiles), odd sizes
    /// and sizes past a tile included, equals the strided gather.
    #[test]
    fn permutes_equal_the_gather() {
        fn perms(r: usize) -> Vec<Vec<usize>> {
            if r == 0 {
                return vec![vec![]];
            }
            let mut out = vec![];
            for p in perms(r - 1) {
                for at in 0..=p.len() {
                    let mut q = p.clone();
                    q.insert(at, r - 1);
                    out.push(q);
                }
            }
            out
        }
        let mut tiled = 0;
        for shape in [vec![5], vec![33, 70], vec![3, 40, 9], vec![2, 5, 35, 3], vec![1, 64, 1, 33]] {
            let n: usize = shape.iter().product();
            let x = Tensor {
                dtype: dlc_language::types::DType::F32,
                shape: shape.clone(),
                data: Data::F32(Arc::new((0..n).map(|i| i as f32).collect())),
            };
            for p in perms(shape.len()) {
                let s = strides(&shape);
                let want = apply(&x, &p.iter().map(|a| shape[*a]).collect::<Vec<_>>(), &p.iter().map(|a| s[*a]).collect::<Vec<_>>(), 0);
                tiled += batched_transpose(&shape, &p).is_some() as usize;
                let got = permute(&x, &p);
                assert_eq!((got.shape.clone(), got.to_f64()), (want.shape.clone(), want.to_f64()), "{shape:?} by {p:?}");
            }
        }
        assert!(tiled >= 10, "the tiled path was taken {tiled} times");
    }
}
