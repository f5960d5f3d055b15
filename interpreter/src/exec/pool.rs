//! 2-d max and average pooling and their gradients, in the tensor's own precision, planes in
//! parallel (each plane's result depends on that plane alone, so on no thread count).

use super::conv::dispatch;
use super::elem::Elem;
use crate::runtime::tensor::Tensor;
use dlc_language::ir::PoolKind;
use rayon::prelude::*;

#[derive(Clone, Copy)]
struct Window {
    kind: PoolKind,
    k: (i64, i64),
    s: (i64, i64),
    p: (i64, i64),
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
}

impl Window {
    /// The in-bounds input offsets (within the plane) of output (oy, ox), row by row.
    fn each(&self, oy: usize, ox: usize, mut f: impl FnMut(usize)) {
        for ky in 0..self.k.0 {
            let iy = oy as i64 * self.s.0 + ky - self.p.0;
            if iy < 0 || iy as usize >= self.h {
                continue; // padding: -inf for max, 0 for avg (count_include_pad)
            }
            for kx in 0..self.k.1 {
                let ix = ox as i64 * self.s.1 + kx - self.p.1;
                if ix >= 0 && (ix as usize) < self.w {
                    f(iy as usize * self.w + ix as usize);
                }
            }
        }
    }

    fn area<T: Elem>(&self) -> T {
        T::from_usize((self.k.0 * self.k.1) as usize)
    }

    fn forward<T: Elem>(&self, x: &[T]) -> Vec<T> {
        let (plane, out_plane) = (self.h * self.w, self.oh * self.ow);
        let mut out = vec![T::ZERO; x.len() / plane.max(1) * out_plane];
        out.par_chunks_mut(out_plane.max(1)).zip(x.par_chunks(plane.max(1))).for_each(|(o, xp)| {
            for oy in 0..self.oh {
                for ox in 0..self.ow {
                    let mut acc = if self.kind == PoolKind::Max { T::NEG_INFINITY } else { T::ZERO };
                    self.each(oy, ox, |i| {
                        let v = xp[i];
                        acc = match self.kind {
                            // The first maximum wins; a NaN propagates.
                            PoolKind::Max if v.is_nan() || v > acc => v,
                            PoolKind::Max => acc,
                            PoolKind::Avg => acc + v,
                        };
                    });
                    o[oy * self.ow + ox] = if self.kind == PoolKind::Avg { acc / self.area() } else { acc };
                }
            }
        });
        out
    }

    /// Max pooling sends each output's gradient to the first maximum of its window; average
    /// pooling spreads it over the window (padding included in the count, as the forward divides).
    fn backward<T: Elem>(&self, x: &[T], dy: &[T]) -> Vec<T> {
        let (plane, out_plane) = (self.h * self.w, self.oh * self.ow);
        let mut dx = vec![T::ZERO; x.len()];
        dx.par_chunks_mut(plane.max(1)).zip(x.par_chunks(plane.max(1))).zip(dy.par_chunks(out_plane.max(1))).for_each(|((d, xp), gp)| {
            for oy in 0..self.oh {
                for ox in 0..self.ow {
                    let g = gp[oy * self.ow + ox];
                    match self.kind {
                        PoolKind::Avg => self.each(oy, ox, |i| d[i] += g / self.area()),
                        PoolKind::Max => {
                            let mut best: Option<usize> = None;
                            self.each(oy, ox, |i| {
                                if best.is_none_or(|b| xp[i] > xp[b]) {
                                    best = Some(i);
                                }
                            });
                            if let Some(b) = best {
                                d[b] += g;
                            }
                        }
                    }
                }
            }
        });
        dx
    }
}

fn window(x: &[usize], out: &[usize], kind: PoolKind, k: (i64, i64), s: (i64, i64), p: (i64, i64)) -> Window {
    let r = x.len();
    Window { kind, k, s, p, h: x[r - 2], w: x[r - 1], oh: out[r - 2], ow: out[r - 1] }
}

pub fn pool2d(x: &Tensor, kind: PoolKind, k: (i64, i64), s: (i64, i64), p: (i64, i64), shape: Vec<usize>) -> Tensor {
    let win = window(&x.shape, &shape, kind, k, s, p);
    // (The second operand is unused: pooling reads one tensor.)
    dispatch(x.dtype, x, x, shape, |a, _| win.forward(a), |a, _| win.forward(a))
}

pub fn pool2d_grad(x: &Tensor, dy: &Tensor, kind: PoolKind, k: (i64, i64), s: (i64, i64), p: (i64, i64)) -> Tensor {
    let win = window(&x.shape, &dy.shape, kind, k, s, p);
    let shape = x.shape.clone();
    dispatch(dy.dtype, x, dy, shape, |a, b| win.backward(a, b), |a, b| win.backward(a, b))
}
