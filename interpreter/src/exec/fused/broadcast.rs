//! Broadcast loads: a chunk of an input read with strides over the output's dims.

use crate::exec::elementwise::{fill, write_all};
use std::mem::MaybeUninit;

/// out[t] = src[offset(start + t)], with the offset of an output index given by `strides`.
pub(super) fn broadcast_load(src: &[f32], shape: &[usize], strides: &[usize], start: usize, out: &mut [MaybeUninit<f32>]) {
    if shape.is_empty() || strides.iter().all(|s| *s == 0) {
        fill(out, src[0]);
        return;
    }
    // General case: dims merged where they are one run of memory (or both broadcast), then an
    // odometer that moves a whole innermost run at a time (a fill when it is broadcast).
    let mut dims: Vec<(usize, usize)> = vec![];
    for (&n, &st) in shape.iter().zip(strides) {
        if n == 1 {
            continue;
        }
        match dims.last_mut() {
            Some((pn, ps)) if *ps == st * n => {
                *pn *= n;
                *ps = st;
            }
            _ => dims.push((n, st)),
        }
    }
    if dims.is_empty() {
        fill(out, src[0]);
        return;
    }
    let rank = dims.len();
    let mut idx = vec![0usize; rank];
    let mut rem = start;
    for d in (0..rank).rev() {
        idx[d] = rem % dims[d].0;
        rem /= dims[d].0;
    }
    let (n_in, s_in) = dims[rank - 1];
    let mut outer: usize = (0..rank - 1).map(|d| idx[d] * dims[d].1).sum();
    let mut t = 0;
    let mut first = idx[rank - 1];
    while t < out.len() {
        let run = (n_in - first).min(out.len() - t);
        let dst = &mut out[t..t + run];
        if s_in == 0 {
            fill(dst, src[outer]);
        } else if s_in == 1 {
            write_all(dst, &src[outer + first..outer + first + run]);
        } else {
            for (j, o) in dst.iter_mut().enumerate() {
                o.write(src[outer + (first + j) * s_in]);
            }
        }
        t += run;
        first = 0;
        // Carry into the outer dims.
        let mut d = rank - 1;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            outer += dims[d].1;
            if idx[d] < dims[d].0 {
                break;
            }
            outer -= dims[d].1 * dims[d].0;
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::broadcast_load;

    /// The run-at-a-time broadcast against the definition, on the shapes a bias, a statistic and
    /// odd mixtures give, from every start.
    #[test]
    fn broadcast_load_matches_the_definition() {
        let cases: Vec<(Vec<usize>, Vec<bool>)> = vec![
            (vec![4, 3, 5, 6], vec![true, false, true, true]),
            (vec![4, 3, 5, 6], vec![false, true, false, false]),
            (vec![7, 5], vec![true, false]),
            (vec![7, 5], vec![false, true]),
            (vec![2, 1, 3, 1, 4], vec![false, true, true, true, false]),
            (vec![3, 4, 5], vec![true, false, true]),
            (vec![6], vec![false]),
        ];
        for (shape, bcast) in cases {
            // The input's shape: 1 where broadcast; its contiguous strides over the output's dims.
            let from: Vec<usize> = shape.iter().zip(&bcast).map(|(n, b)| if *b { 1 } else { *n }).collect();
            let mut contiguous = vec![1usize; from.len()];
            for d in (0..from.len().saturating_sub(1)).rev() {
                contiguous[d] = contiguous[d + 1] * from[d + 1];
            }
            let strides: Vec<usize> = (0..shape.len()).map(|d| if from[d] == 1 && shape[d] != 1 { 0 } else { contiguous[d] }).collect();
            let src: Vec<f32> = (0..from.iter().product::<usize>()).map(|i| i as f32 + 0.5).collect();
            let n: usize = shape.iter().product();
            let want: Vec<f32> = (0..n)
                .map(|mut i| {
                    let mut off = 0;
                    for d in (0..shape.len()).rev() {
                        off += (i % shape[d]) * strides[d];
                        i /= shape[d];
                    }
                    src[off]
                })
                .collect();
            for start in 0..n {
                for len in [1, 2, 7, n - start] {
                    let len = len.min(n - start);
                    let mut out = vec![f32::NAN; len];
                    broadcast_load(&src, &shape, &strides, start, crate::exec::elementwise::as_uninit(&mut out));
                    assert_eq!(out, want[start..start + len], "shape {shape:?} strides {strides:?} start {start} len {len}");
                }
            }
        }
    }
}
