//! 2-d max and average pooling and their gradients, in the tensor's own precision, planes in
//! parallel (each plane's result depends on that plane alone, so on no thread count). Channels-
//! last arrays (`[N, H, W, C]`) are pooled as stored, images in parallel, each window's pixels
//! read as rows of C channels: every channel meets its window in the same order with the same
//! comparisons and additions as its NCHW plane does, so the two layouts give the same values.

mod channels_last;

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

    /// No padding and every window inside the plane (the usual `MaxPool2d(k)`): the loops can
    /// index rows directly, without the per-element bounds tests of `each`.
    fn inside(&self) -> bool {
        self.p == (0, 0)
            && self.oh > 0
            && self.ow > 0
            && (self.oh as i64 - 1) * self.s.0 + self.k.0 <= self.h as i64
            && (self.ow as i64 - 1) * self.s.1 + self.k.1 <= self.w as i64
    }

    fn area<T: Elem>(&self) -> T {
        T::from_usize((self.k.0 * self.k.1) as usize)
    }

    fn forward<T: Elem>(&self, x: &[T]) -> Vec<T> {
        let (plane, out_plane) = (self.h * self.w, self.oh * self.ow);
        let mut out = vec![T::ZERO; x.len() / plane.max(1) * out_plane];
        let fast = self.kind == PoolKind::Max && self.inside();
        out.par_chunks_mut(out_plane.max(1)).zip(x.par_chunks(plane.max(1))).for_each(|(o, xp)| {
            if fast {
                self.max_plane_inside(xp, o)
            } else {
                self.forward_plane(xp, o)
            }
        });
        out
    }

    fn forward_plane<T: Elem>(&self, xp: &[T], o: &mut [T]) {
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
    }

    /// `forward_plane` for max pooling with every window `inside`: each output meets its window
    /// in the same order (ky, then kx) with the same comparison, but a whole output row is
    /// updated per window position, so the loop carries no dependence from one output to the
    /// next and compiles to selects rather than unpredictable branches.
    fn max_plane_inside<T: Elem>(&self, xp: &[T], o: &mut [T]) {
        let (kh, kw) = (self.k.0 as usize, self.k.1 as usize);
        let (sy, sx) = (self.s.0 as usize, self.s.1 as usize);
        for oy in 0..self.oh {
            let acc = &mut o[oy * self.ow..][..self.ow];
            acc.fill(T::NEG_INFINITY);
            for ky in 0..kh {
                let row = &xp[(oy * sy + ky) * self.w..][..self.w];
                if kw == 2 && sx == 2 {
                    // `MaxPool2d(2)`: each output's pair of inputs side by side, in the same
                    // order as below (kx = 0, then 1), as whole pairs the loop can vectorise.
                    for (a, pair) in acc.iter_mut().zip(row.chunks_exact(2)) {
                        *a = pick(pick(*a, pair[0]), pair[1]);
                    }
                    continue;
                }
                for kx in 0..kw {
                    for (ox, a) in acc.iter_mut().enumerate() {
                        *a = pick(*a, row[ox * sx + kx]);
                    }
                }
            }
        }
    }

    /// Max pooling sends each output's gradient to the first maximum of its window; average
    /// pooling spreads it over the window (padding included in the count, as the forward divides).
    fn backward<T: Elem>(&self, x: &[T], dy: &[T]) -> Vec<T> {
        let (plane, out_plane) = (self.h * self.w, self.oh * self.ow);
        let mut dx = vec![T::ZERO; x.len()];
        let fast = self.kind == PoolKind::Max && self.inside();
        dx.par_chunks_mut(plane.max(1)).zip(x.par_chunks(plane.max(1))).zip(dy.par_chunks(out_plane.max(1))).for_each(|((d, xp), gp)| {
            if fast {
                self.max_grad_plane_inside(xp, gp, d)
            } else {
                self.backward_plane(xp, gp, d)
            }
        });
        dx
    }

    fn backward_plane<T: Elem>(&self, xp: &[T], gp: &[T], d: &mut [T]) {
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
    }

    /// `backward_plane` for max pooling with every window `inside`: the first maximum of each
    /// window found with the same comparisons in the same order, a whole output row at a time.
    fn max_grad_plane_inside<T: Elem>(&self, xp: &[T], gp: &[T], d: &mut [T]) {
        let (kh, kw) = (self.k.0 as usize, self.k.1 as usize);
        let (sy, sx) = (self.s.0 as usize, self.s.1 as usize);
        let mut best_v = vec![T::ZERO; self.ow];
        let mut best_i = vec![0usize; self.ow];
        for oy in 0..self.oh {
            for ky in 0..kh {
                let start = (oy * sy + ky) * self.w;
                let row = &xp[start..][..self.w];
                if kw == 2 && sx == 2 {
                    // `MaxPool2d(2)`: each output's pair side by side, kx = 0 then 1, as below.
                    let slots = best_v.iter_mut().zip(best_i.iter_mut());
                    for (ox, ((bv, bi), pair)) in slots.zip(row.chunks_exact(2)).enumerate() {
                        let first = ky == 0 || pair[0] > *bv;
                        let (v0, i0) = if first { (pair[0], start + 2 * ox) } else { (*bv, *bi) };
                        let second = pair[1] > v0;
                        (*bv, *bi) = if second { (pair[1], start + 2 * ox + 1) } else { (v0, i0) };
                    }
                    continue;
                }
                for kx in 0..kw {
                    for (ox, (bv, bi)) in best_v.iter_mut().zip(best_i.iter_mut()).enumerate() {
                        let at = ox * sx + kx;
                        let v = row[at];
                        // The window's first element starts the search.
                        if (ky == 0 && kx == 0) || v > *bv {
                            *bv = v;
                            *bi = start + at;
                        }
                    }
                }
            }
            for (bi, g) in best_i.iter().zip(&gp[oy * self.ow..][..self.ow]) {
                d[*bi] += *g;
            }
        }
    }
}

/// Max pooling's running maximum `a` after value `v`: the first maximum wins; a NaN propagates.
fn pick<T: Elem>(a: T, v: T) -> T {
    if v.is_nan() || v > a {
        v
    } else {
        a
    }
}

/// Kernel, stride and padding.
type Geometry = ((i64, i64), (i64, i64), (i64, i64));

/// The window over `x` giving `out`, and the channel count when they are channels-last.
fn window(x: &[usize], out: &[usize], kind: PoolKind, (k, s, p): Geometry, channels_last: bool) -> (Window, Option<usize>) {
    let r = x.len();
    if channels_last {
        return (Window { kind, k, s, p, h: x[1], w: x[2], oh: out[1], ow: out[2] }, Some(x[3]));
    }
    (Window { kind, k, s, p, h: x[r - 2], w: x[r - 1], oh: out[r - 2], ow: out[r - 1] }, None)
}

pub fn pool2d(x: &Tensor, kind: PoolKind, geometry: Geometry, channels_last: bool, shape: Vec<usize>) -> Tensor {
    let (win, channels) = window(&x.shape, &shape, kind, geometry, channels_last);
    // (The second operand is unused: pooling reads one tensor.)
    match channels {
        Some(c) => dispatch(x.dtype, x, x, shape, |a, _| win.forward_cl_f32(a, c), |a, _| win.forward_cl(a, c)),
        None => dispatch(x.dtype, x, x, shape, |a, _| win.forward(a), |a, _| win.forward(a)),
    }
}

pub fn pool2d_grad(x: &Tensor, dy: &Tensor, kind: PoolKind, geometry: Geometry, channels_last: bool) -> Tensor {
    let (win, channels) = window(&x.shape, &dy.shape, kind, geometry, channels_last);
    let shape = x.shape.clone();
    match channels {
        Some(c) => dispatch(dy.dtype, x, dy, shape, |a, b| win.backward_cl_f32(a, b, c), |a, b| win.backward_cl(a, b, c)),
        None => dispatch(dy.dtype, x, dy, shape, |a, b| win.backward(a, b), |a, b| win.backward(a, b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The row-slice max pooling against the general loops, forward and gradient, on planes with
    /// ties, NaN and infinities, for several windows and strides (overlapping, gapped, ragged).
    #[test]
    fn inside_windows_match_the_general_loops() {
        for (h, w, k, s) in [
            (24, 24, (2, 2), (2, 2)),
            (7, 9, (2, 2), (2, 2)),
            (5, 8, (3, 2), (1, 2)),
            (7, 9, (3, 2), (2, 3)),
            (5, 5, (3, 3), (1, 1)),
            (6, 11, (1, 4), (1, 2)),
            (4, 4, (4, 4), (4, 4)),
        ] {
            let oh = (h - k.0 as usize) / s.0 as usize + 1;
            let ow = (w - k.1 as usize) / s.1 as usize + 1;
            let win = Window { kind: PoolKind::Max, k, s, p: (0, 0), h, w, oh, ow };
            assert!(win.inside());
            let xp: Vec<f32> = (0..h * w)
                .map(|i| match (i * 7919) % 23 {
                    0 => f32::NAN,
                    1 => f32::NEG_INFINITY,
                    2 => f32::INFINITY,
                    r => (r % 5) as f32 - 2.0, // many ties
                })
                .collect();
            let gp: Vec<f32> = (0..oh * ow).map(|i| i as f32 + 0.5).collect();
            let (mut fast, mut general) = (vec![0f32; oh * ow], vec![0f32; oh * ow]);
            win.max_plane_inside(&xp, &mut fast);
            win.forward_plane(&xp, &mut general);
            assert_eq!(fast.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), general.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
            let (mut fast, mut general) = (vec![0f32; h * w], vec![0f32; h * w]);
            win.max_grad_plane_inside(&xp, &gp, &mut fast);
            win.backward_plane(&xp, &gp, &mut general);
            assert_eq!(fast, general, "{h}x{w} k {k:?} s {s:?}");
        }
    }
}
