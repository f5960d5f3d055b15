//! Pooling of channels-last arrays (`[N, H, W, C]`) as stored: images in parallel, each window
//! pixel read as a row of C channels and combined with a row of C results, so the loops run over
//! channels (vectors) and every channel's output meets its window in the order, and with the
//! comparisons and additions, of the NCHW loops (`forward_plane`, `backward_plane`): the values
//! are the NCHW ones, element for element. (Beside channels-last convolutions this saves the two
//! transposes an NCHW pooling needs: 1.0 ms of the conv-BN step on the Zen 5, stop 48.)

use super::super::elem::Elem;
use super::{pick, Window};
use crate::exec::elementwise::as_uninit;
use dlc_language::ir::PoolKind;
use rayon::prelude::*;
use std::mem::MaybeUninit;

impl Window {
    pub(super) fn forward_cl<T: Elem>(&self, x: &[T], c: usize) -> Vec<T> {
        let (image, out_image) = (self.h * self.w * c, self.oh * self.ow * c);
        let mut out = vec![T::ZERO; x.len() / image.max(1) * out_image];
        let area: T = self.area();
        let inside = self.inside();
        out.par_chunks_mut(out_image.max(1)).zip(x.par_chunks(image.max(1))).for_each(|(o, xi)| {
            for oy in 0..self.oh {
                for ox in 0..self.ow {
                    let acc = &mut o[(oy * self.ow + ox) * c..][..c];
                    acc.fill(if self.kind == PoolKind::Max { T::NEG_INFINITY } else { T::ZERO });
                    let mut visit = |i: usize| {
                        let px = &xi[i * c..][..c];
                        match self.kind {
                            PoolKind::Max => acc.iter_mut().zip(px).for_each(|(a, v)| *a = pick(*a, *v)),
                            PoolKind::Avg => acc.iter_mut().zip(px).for_each(|(a, v)| *a += *v),
                        }
                    };
                    if inside {
                        // The same pixels in the same order as `each`, without its bounds tests.
                        let (kh, kw) = (self.k.0 as usize, self.k.1 as usize);
                        let (y0, x0) = (oy * self.s.0 as usize, ox * self.s.1 as usize);
                        (0..kh * kw).for_each(|k| visit((y0 + k / kw) * self.w + x0 + k % kw));
                    } else {
                        self.each(oy, ox, visit);
                    }
                    if self.kind == PoolKind::Avg {
                        acc.iter_mut().for_each(|a| *a = *a / area);
                    }
                }
            }
        });
        out
    }

    /// Max pooling sends each output's gradient to the first maximum of its window (a channel at
    /// a time, as `backward_plane`); average pooling spreads it over the window.
    pub(super) fn backward_cl<T: Elem>(&self, x: &[T], dy: &[T], c: usize) -> Vec<T> {
        let (image, out_image) = (self.h * self.w * c, self.oh * self.ow * c);
        let mut dx = vec![T::ZERO; x.len()];
        let area: T = self.area();
        let images = dx.par_chunks_mut(image.max(1)).zip(x.par_chunks(image.max(1))).zip(dy.par_chunks(out_image.max(1)));
        images.for_each(|((d, xi), gi)| {
            let (mut best_v, mut best_i) = (vec![T::ZERO; c], vec![0usize; c]);
            for oy in 0..self.oh {
                for ox in 0..self.ow {
                    let g = &gi[(oy * self.ow + ox) * c..][..c];
                    if self.kind == PoolKind::Avg {
                        self.each(oy, ox, |i| d[i * c..][..c].iter_mut().zip(g).for_each(|(dd, gg)| *dd += *gg / area));
                        continue;
                    }
                    let mut first = true;
                    self.each(oy, ox, |i| {
                        let px = &xi[i * c..][..c];
                        for ((bv, bi), v) in best_v.iter_mut().zip(best_i.iter_mut()).zip(px) {
                            if first || *v > *bv {
                                *bv = *v;
                                *bi = i;
                            }
                        }
                        first = false;
                    });
                    if !first {
                        for (ch, (bi, gg)) in best_i.iter().zip(g).enumerate() {
                            d[bi * c + ch] += *gg;
                        }
                    }
                }
            }
        });
        dx
    }
}

/// The geometry of a max pooling whose windows tile an image: channels, kernel rows and columns,
/// the image's width, the output's height and width.
#[derive(Clone, Copy)]
struct Tiling {
    c: usize,
    kh: usize,
    kw: usize,
    w: usize,
    oh: usize,
    ow: usize,
}

impl Tiling {
    /// Where pixel `k` (row-major in the window) of output (oy, ox)'s window starts.
    fn at(&self, oy: usize, ox: usize, k: usize) -> usize {
        ((oy * self.kh + k / self.kw) * self.w + ox * self.kw + k % self.kw) * self.c
    }
}

impl Window {
    /// The tiling, when this is max pooling whose windows tile the image (inside it, stride =
    /// kernel: the usual `MaxPool2d(k)`).
    fn tiling(&self, c: usize) -> Option<Tiling> {
        (self.kind == PoolKind::Max && self.inside() && self.k == self.s).then_some(Tiling {
            c,
            kh: self.k.0 as usize,
            kw: self.k.1 as usize,
            w: self.w,
            oh: self.oh,
            ow: self.ow,
        })
    }

    /// `forward_cl` in f32, on the widest vectors where the windows tile the image (the generic
    /// loop, its channels' running maxima in a slice it first fills with -inf, ran at 25 GB/s: 0.4
    /// ms of the conv-BN step on the Zen 5).
    pub(super) fn forward_cl_f32(&self, x: &[f32], c: usize) -> Vec<f32> {
        let Some(t) = self.tiling(c) else { return self.forward_cl(x, c) };
        let (image, out_image) = (self.h * self.w * c, self.oh * self.ow * c);
        let len = x.len() / image.max(1) * out_image;
        let mut out: Vec<f32> = Vec::with_capacity(len);
        let images = out.spare_capacity_mut()[..len].par_chunks_mut(out_image.max(1)).zip(x.par_chunks(image.max(1)));
        images.for_each(|(o, xi)| max_tiling(xi, o, t));
        // SAFETY: every output of every image written above.
        unsafe { out.set_len(len) };
        out
    }

    /// `backward_cl` in f32, on the widest vectors where the windows tile the image.
    pub(super) fn backward_cl_f32(&self, x: &[f32], dy: &[f32], c: usize) -> Vec<f32> {
        let Some(t) = self.tiling(c) else { return self.backward_cl(x, dy, c) };
        let (image, out_image) = (self.h * self.w * c, self.oh * self.ow * c);
        // Windows that cover the whole image write every pixel: the buffer needs no zeros first
        // (a pass over it, 8 MiB in the conv-BN step); a ragged edge's pixels stay zero.
        let covered = t.oh * t.kh == self.h && t.ow * t.kw == self.w;
        let mut dx: Vec<f32> = Vec::with_capacity(x.len());
        if !covered {
            dx.resize(x.len(), 0.0);
        }
        let out: &mut [MaybeUninit<f32>] = if covered { &mut dx.spare_capacity_mut()[..x.len()] } else { as_uninit(&mut dx) };
        let images = out.par_chunks_mut(image.max(1)).zip(x.par_chunks(image.max(1))).zip(dy.par_chunks(out_image.max(1)));
        images.for_each(|((d, xi), gi)| max_grad_tiling(xi, gi, d, t));
        // SAFETY: zeroed, or covered: every pixel of every image written above.
        unsafe { dx.set_len(x.len()) };
        dx
    }
}

/// Channels a window's loops take at a time: a group's running maxima (and the gradient's
/// positions of them) stay in registers. (As slices of the row's length the forward's loops were
/// vectorised by 64 channels, and C = 32 ran in the scalar remainder: 80 cycles a window.)
/// Channels past the last full group are taken one at a time.
const LANES: usize = 16;

/// The `N` values from `at` of `xs` (a pixel's channels), as an array.
#[inline(always)]
fn pixel<const N: usize, T>(xs: &[T], at: usize) -> &[T; N] {
    xs[at..at + N].try_into().expect("N values")
}

/// The `N` values from `at` of `d` (a pixel's channels of a result), as an array to write.
#[inline(always)]
fn pixel_mut<const N: usize>(d: &mut [MaybeUninit<f32>], at: usize) -> &mut [MaybeUninit<f32>; N] {
    (&mut d[at..at + N]).try_into().expect("N values")
}

/// The maxima of `N` channels over a window's `taps` pixels (pixel k's at `at(k)` of `xi`), in
/// `forward_cl`'s order with its `pick`: from the first pixel's value (its -inf start gives that
/// value: -inf stays -inf, a NaN is picked), written to `out`.
#[inline(always)]
fn window_max<const N: usize>(xi: &[f32], taps: usize, at: impl Fn(usize) -> usize, out: &mut [MaybeUninit<f32>]) {
    let mut best = *pixel::<N, f32>(xi, at(0));
    for k in 1..taps {
        best.iter_mut().zip(pixel::<N, f32>(xi, at(k))).for_each(|(b, v)| *b = pick(*b, *v));
    }
    pixel_mut::<N>(out, 0).iter_mut().zip(best).for_each(|(o, b)| _ = o.write(b));
}

crate::runtime::cpu::widest! {
    /// One image's max pooling where the windows tile it, each output written once, by groups
    /// of `LANES` channels (`window_max`).
    fn max_tiling(xi: &[f32], o: &mut [MaybeUninit<f32>], t: Tiling) {
        let (c, taps, full) = (t.c, t.kh * t.kw, t.c / LANES * LANES);
        for oy in 0..t.oh {
            for ox in 0..t.ow {
                let out = &mut o[(oy * t.ow + ox) * c..][..c];
                for c0 in (0..full).step_by(LANES) {
                    window_max::<LANES>(xi, taps, |k| t.at(oy, ox, k) + c0, &mut out[c0..]);
                }
                for c0 in full..c {
                    window_max::<1>(xi, taps, |k| t.at(oy, ox, k) + c0, &mut out[c0..]);
                }
            }
        }
    }
}

/// A window's gradient (see `max_grad_tiling`) for `N` channels whose gradients are `g`: each
/// channel's first maximum (the comparisons of `backward_plane`, in its order) gets its
/// gradient, every other pixel of the window 0.
#[inline(always)]
fn window_grad<const N: usize>(xi: &[f32], g: &[f32; N], taps: usize, at: impl Fn(usize) -> usize, d: &mut [MaybeUninit<f32>]) {
    let mut best_v = *pixel::<N, f32>(xi, at(0));
    let mut best_k = [0u32; N];
    for k in 1..taps {
        let px = pixel::<N, f32>(xi, at(k));
        let more: [bool; N] = std::array::from_fn(|i| px[i] > best_v[i]);
        best_v = std::array::from_fn(|i| if more[i] { px[i] } else { best_v[i] });
        best_k = std::array::from_fn(|i| if more[i] { k as u32 } else { best_k[i] });
    }
    for k in 0..taps {
        let row = pixel_mut::<N>(d, at(k));
        for i in 0..N {
            // `0 + g` where the maximum is, else +0 (all bits clear): as a mask of bits, the
            // loop is compiled to vectors (as a select, to one compare and `vmovd` a value).
            let keep = 0u32.wrapping_sub((best_k[i] == k as u32) as u32);
            row[i].write(f32::from_bits((0.0 + g[i]).to_bits() & keep));
        }
    }
}

crate::runtime::cpu::widest! {
    /// One image's max-pooling gradient where the windows tile it: no two windows share a pixel,
    /// so each window's pixels are written once, the gradient at each channel's first maximum and
    /// zero elsewhere, with no scatter: the window position of each channel's maximum is kept (an
    /// integer a lane, found with the same comparisons in the same order as `backward_plane`) and
    /// every pixel of the window written, by groups of `LANES` channels (`window_grad`). (`0 + g`,
    /// as the general loop adds into zeros: a -0 gradient becomes +0 there too.)
    fn max_grad_tiling(xi: &[f32], gi: &[f32], d: &mut [MaybeUninit<f32>], t: Tiling) {
        let (c, taps, full) = (t.c, t.kh * t.kw, t.c / LANES * LANES);
        for oy in 0..t.oh {
            for ox in 0..t.ow {
                let g = &gi[(oy * t.ow + ox) * c..][..c];
                for c0 in (0..full).step_by(LANES) {
                    window_grad::<LANES>(xi, pixel(g, c0), taps, |k| t.at(oy, ox, k) + c0, d);
                }
                for c0 in full..c {
                    window_grad::<1>(xi, pixel(g, c0), taps, |k| t.at(oy, ox, k) + c0, d);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NHWC pooling, forward and gradient, against the NCHW loops on the same values permuted,
    /// bit for bit: ties, NaN and infinities, padding, overlapping and gapped windows, both kinds.
    #[test]
    fn channels_last_pooling_equals_nchw_element_for_element() {
        // (The first two tile their images: the f32 loops; the last, with a ragged edge, too.
        // 21 channels: a vector group of the f32 forward and five channels after it.)
        let n = 3;
        let shapes = [
            (8, 8, (2, 2), (2, 2), (0, 0)),
            (9, 12, (3, 2), (3, 2), (0, 0)),
            (7, 9, (3, 2), (2, 3), (1, 1)),
            (5, 5, (3, 3), (1, 1), (1, 0)),
            (6, 11, (1, 4), (1, 2), (0, 2)),
            (7, 9, (2, 2), (2, 2), (0, 0)),
        ];
        for ((h, w, k, s, p), c) in shapes.into_iter().flat_map(|shape| [(shape, 5), (shape, 21)]) {
            for kind in [PoolKind::Max, PoolKind::Avg] {
                let oh = ((h + 2 * p.0) as i64 - k.0) as usize / s.0 as usize + 1;
                let ow = ((w + 2 * p.1) as i64 - k.1) as usize / s.1 as usize + 1;
                let win = Window { kind, k, s, p: (p.0 as i64, p.1 as i64), h, w, oh, ow };
                let nchw: Vec<f32> = (0..n * c * h * w)
                    .map(|i| match (i * 7919) % 23 {
                        0 => f32::NAN,
                        1 => f32::NEG_INFINITY,
                        2 => f32::INFINITY,
                        r => (r % 5) as f32 - 2.0,
                    })
                    .collect();
                let dy_nchw: Vec<f32> = (0..n * c * oh * ow).map(|i| i as f32 * 0.25 + 0.5).collect();
                let to_cl = |v: &[f32], hh: usize, ww: usize| -> Vec<f32> {
                    let mut out = vec![0f32; v.len()];
                    for (i, x) in v.iter().enumerate() {
                        let (img, ch, px) = (i / (c * hh * ww), i / (hh * ww) % c, i % (hh * ww));
                        out[(img * hh * ww + px) * c + ch] = *x;
                    }
                    out
                };
                let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
                let want = to_cl(&win.forward(&nchw), oh, ow);
                assert_eq!(
                    bits(win.forward_cl(&to_cl(&nchw, h, w), c)),
                    bits(want.clone()),
                    "forward {kind:?} {h}x{w} k {k:?} s {s:?} p {p:?}"
                );
                assert_eq!(
                    bits(win.forward_cl_f32(&to_cl(&nchw, h, w), c)),
                    bits(want),
                    "f32 forward {kind:?} {h}x{w} k {k:?} s {s:?} p {p:?}"
                );
                let want = to_cl(&win.backward(&nchw, &dy_nchw), h, w);
                let (x_cl, dy_cl) = (to_cl(&nchw, h, w), to_cl(&dy_nchw, oh, ow));
                assert_eq!(
                    bits(win.backward_cl(&x_cl, &dy_cl, c)),
                    bits(want.clone()),
                    "gradient {kind:?} {h}x{w} k {k:?} s {s:?} p {p:?}"
                );
                assert_eq!(
                    bits(win.backward_cl_f32(&x_cl, &dy_cl, c)),
                    bits(want),
                    "f32 gradient {kind:?} {h}x{w} k {k:?} s {s:?} p {p:?}"
                );
            }
        }
    }
}
