//! 2-d convolution and its two gradients as im2col + gemm, in the tensor's own precision: f32
//! (also for bf16/f16, stored as f32, whose results are then rounded) and f64.
//!
//! Images run in parallel, each image's products on one core; the weight gradient sums the
//! per-image parts in image order. Every result is therefore the same whatever the thread
//! count (the project's determinism rule).

use super::elem::Elem;
use super::gemm_select::GemmSelect;
use super::onednn_conv::{Dir, Shape as OneDnnShape};
use crate::runtime::tensor::{round_slice, Data, Tensor};
use dlc_language::types::rules::Conv2dAttrs;
use rayon::prelude::*;
use std::sync::Arc;

/// One product on one core (images already run in parallel), on the kernel chosen for its
/// shape on this machine.
#[allow(clippy::too_many_arguments)]
fn gemm1<T: Elem>(sel: &GemmSelect, m: usize, n: usize, k: usize, lhs: &[T], lhs_t: bool, rhs: &[T], rhs_t: bool, dst: &mut [T]) {
    super::contract::gemm(sel, m, n, k, lhs, lhs_t, rhs, rhs_t, dst, gemm_common::Parallelism::None)
}

/// Input [N, C, H, W], weight [O, C/g, kh, kw], output [N, O, oh, ow].
#[derive(Clone, Copy)]
struct Geom {
    c: usize,
    h: usize,
    w: usize,
    o: usize,
    cg: usize,
    kh: usize,
    kw: usize,
    oh: usize,
    ow: usize,
    g: usize,
    stride: (usize, usize),
    pad: (isize, isize),
    dil: (usize, usize),
}

impl Geom {
    fn new(x: &[usize], w: &[usize], out: &[usize], a: &Conv2dAttrs) -> Geom {
        Geom {
            c: x[1],
            h: x[2],
            w: x[3],
            o: w[0],
            cg: w[1],
            kh: w[2],
            kw: w[3],
            oh: out[2],
            ow: out[3],
            g: a.groups as usize,
            stride: (a.stride.0 as usize, a.stride.1 as usize),
            pad: (a.padding.0 as isize, a.padding.1 as isize),
            dil: (a.dilation.0 as usize, a.dilation.1 as usize),
        }
    }
    /// Rows of a group's unfolded input: (channel, ky, kx).
    fn k(&self) -> usize {
        self.cg * self.kh * self.kw
    }
    fn cols(&self) -> usize {
        self.oh * self.ow
    }
    fn og(&self) -> usize {
        self.o / self.g
    }
    fn image(&self) -> usize {
        self.c * self.h * self.w
    }

    /// Unfold one group of one image (`x` is the image) into col[k, cols].
    fn im2col<T: Elem>(&self, x: &[T], gi: usize, col: &mut [T]) {
        let cols = self.cols();
        for ci in 0..self.cg {
            let plane = &x[(gi * self.cg + ci) * self.h * self.w..][..self.h * self.w];
            for ky in 0..self.kh {
                for kx in 0..self.kw {
                    let row = &mut col[((ci * self.kh + ky) * self.kw + kx) * cols..][..cols];
                    for oy in 0..self.oh {
                        let iy = (oy * self.stride.0 + ky * self.dil.0) as isize - self.pad.0;
                        let out = &mut row[oy * self.ow..][..self.ow];
                        if iy < 0 || iy as usize >= self.h {
                            out.fill(T::ZERO);
                            continue;
                        }
                        let src = &plane[iy as usize * self.w..][..self.w];
                        let (lo, hi, off) = self.valid_ox(kx);
                        out[..lo].fill(T::ZERO);
                        out[hi..].fill(T::ZERO);
                        let first = (lo * self.stride.1) as isize + off;
                        if lo == hi {
                            continue;
                        }
                        if self.stride.1 == 1 {
                            out[lo..hi].copy_from_slice(&src[first as usize..first as usize + (hi - lo)]);
                        } else {
                            for (o, v) in out[lo..hi].iter_mut().zip(src[first as usize..].iter().step_by(self.stride.1)) {
                                *o = *v;
                            }
                        }
                    }
                }
            }
        }
    }

    /// The outputs `lo..hi` of a row whose input column `ox * stride + off` (off = kx * dil -
    /// pad) falls inside the image; the rest read padding.
    fn valid_ox(&self, kx: usize) -> (usize, usize, isize) {
        let off = (kx * self.dil.1) as isize - self.pad.1;
        let s = self.stride.1 as isize;
        // Smallest ox with ox * s + off >= 0, and one past the largest with ox * s + off < w.
        let lo = if off >= 0 { 0 } else { ((-off + s - 1) / s) as usize };
        let last = self.w as isize - 1 - off;
        let hi = if last < 0 { 0 } else { (last / s + 1) as usize };
        let hi = hi.min(self.ow);
        (lo.min(hi), hi, off)
    }

    /// The transpose of `im2col`: add col[k, cols] back into one group of one image (`dx`).
    fn col2im<T: Elem>(&self, col: &[T], gi: usize, dx: &mut [T]) {
        let cols = self.cols();
        for ci in 0..self.cg {
            let plane = &mut dx[(gi * self.cg + ci) * self.h * self.w..][..self.h * self.w];
            for ky in 0..self.kh {
                for kx in 0..self.kw {
                    let row = &col[((ci * self.kh + ky) * self.kw + kx) * cols..][..cols];
                    for oy in 0..self.oh {
                        let iy = (oy * self.stride.0 + ky * self.dil.0) as isize - self.pad.0;
                        if iy < 0 || iy as usize >= self.h {
                            continue;
                        }
                        let dst = &mut plane[iy as usize * self.w..][..self.w];
                        let (lo, hi, off) = self.valid_ox(kx);
                        if lo == hi {
                            continue;
                        }
                        let first = ((lo * self.stride.1) as isize + off) as usize;
                        let src = &row[oy * self.ow..][lo..hi];
                        if self.stride.1 == 1 {
                            for (d, v) in dst[first..first + (hi - lo)].iter_mut().zip(src) {
                                *d += *v;
                            }
                        } else {
                            for (d, v) in dst[first..].iter_mut().step_by(self.stride.1).zip(src) {
                                *d += *v;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// y[b] = W · im2col(x[b]) per group. The output is written once, by the products (not zeroed
/// first: 19 MB for the MNIST CNN's second convolution at batch 128).
fn forward<T: Elem>(sel: &GemmSelect, geo: Geom, x: &[T], w: &[T], nb: usize) -> Vec<T> {
    let (k, cols, og) = (geo.k(), geo.cols(), geo.og());
    let total = nb * geo.o * cols;
    let mut out: Vec<T> = Vec::with_capacity(total);
    if total == 0 {
        return out;
    }
    // One column buffer per rayon job, not per image: im2col overwrites all of it.
    out.spare_capacity_mut()[..total].par_chunks_mut(geo.o * cols).enumerate().for_each_init(
        || vec![T::ZERO; k * cols],
        |col, (b, y)| {
            let img = &x[b * geo.image()..][..geo.image()];
            for gi in 0..geo.g {
                geo.im2col(img, gi, col);
                let dst = &mut y[gi * og * cols..][..og * cols];
                sel.gemm(og, cols, k, &w[gi * og * k..][..og * k], false, col, false, dst, gemm_common::Parallelism::None);
            }
        },
    );
    // SAFETY: the groups' products wrote every row of every image.
    unsafe { out.set_len(total) };
    out
}

/// dx[b] = col2im(Wᵀ · dy[b]) per group.
fn grad_input<T: Elem>(sel: &GemmSelect, geo: Geom, dy: &[T], w: &[T], nb: usize) -> Vec<T> {
    let (k, cols, og) = (geo.k(), geo.cols(), geo.og());
    let mut dx = vec![T::ZERO; nb * geo.image()];
    if dx.is_empty() {
        return dx;
    }
    // One buffer per rayon job: the product overwrites all of it.
    dx.par_chunks_mut(geo.image()).enumerate().for_each_init(
        || vec![T::ZERO; k * cols],
        |dcol, (b, dxb)| {
            for gi in 0..geo.g {
                let g = &dy[(b * geo.o + gi * og) * cols..][..og * cols];
                // Wᵀ of the group ([k, og]) read through strides from the row-major [og, k] block.
                gemm1(sel, k, cols, og, &w[gi * og * k..][..og * k], true, g, false, dcol);
                geo.col2im(dcol, gi, dxb);
            }
        },
    );
    dx
}

/// dW = Σ_b dy[b] · im2col(x[b])ᵀ per group, the images' parts summed in image order.
///
/// Both factors hold the summed axis (the output positions) innermost. The gemm crate computes
/// a row-major product as its transpose, im2col(x)·dyᵀ, whose left factor it then packed one
/// element at a time (a generic gather: 22% of the conv-BN step); with the columns transposed
/// first, in tiles ([cols, k], rows contiguous), it packs nothing it cannot copy by vectors.
fn grad_weight<T: Elem>(sel: &GemmSelect, geo: Geom, x: &[T], dy: &[T], nb: usize) -> Vec<T> {
    let (k, cols, og) = (geo.k(), geo.cols(), geo.og());
    let parts: Vec<Vec<T>> = (0..nb)
        .into_par_iter()
        .map_init(
            || (vec![T::ZERO; k * cols], vec![T::ZERO; k * cols]),
            |(col, col_t), b| {
                let mut part = vec![T::ZERO; geo.o * k];
                let img = &x[b * geo.image()..][..geo.image()];
                for gi in 0..geo.g {
                    geo.im2col(img, gi, col);
                    transpose(col, k, cols, col_t);
                    let g = &dy[(b * geo.o + gi * og) * cols..][..og * cols];
                    gemm1(sel, og, k, cols, g, false, col_t, false, &mut part[gi * og * k..][..og * k]);
                }
                part
            },
        )
        .collect();
    let mut dw = vec![T::ZERO; geo.o * k];
    for p in parts {
        for (d, v) in dw.iter_mut().zip(p) {
            *d += v;
        }
    }
    dw
}

/// `out` (cols × rows) = the transpose of `a` (rows × cols), in 16 × 16 tiles so that both sides
/// are read and written a cache line at a time.
fn transpose<T: Elem>(a: &[T], rows: usize, cols: usize, out: &mut [T]) {
    const TILE: usize = 16;
    assert!(a.len() >= rows * cols && out.len() >= rows * cols);
    for r0 in (0..rows).step_by(TILE) {
        for c0 in (0..cols).step_by(TILE) {
            for r in r0..(r0 + TILE).min(rows) {
                for c in c0..(c0 + TILE).min(cols) {
                    // SAFETY: r < rows and c < cols, so both indices are below rows * cols,
                    // which both slices hold (asserted above). Unchecked: the bounds checks were
                    // most of this loop's time (5% of the conv-BN step).
                    unsafe { *out.get_unchecked_mut(c * rows + r) = *a.get_unchecked(r * cols + c) };
                }
            }
        }
    }
}

/// Run `f32_kernel` on f32-stored tensors (rounding to bf16/f16 after) and `f64_kernel` on the
/// rest (as f64).
pub(super) fn dispatch(
    dtype: dlc_language::types::DType,
    a: &Tensor,
    b: &Tensor,
    shape: Vec<usize>,
    f32_kernel: impl Fn(&[f32], &[f32]) -> Vec<f32>,
    f64_kernel: impl Fn(&[f64], &[f64]) -> Vec<f64>,
) -> Tensor {
    match (&a.data, &b.data) {
        (Data::F32(p), Data::F32(q)) => {
            let mut out = f32_kernel(p, q);
            round_slice(dtype, &mut out);
            Tensor { dtype, shape, data: Data::F32(Arc::new(out)) }
        }
        _ => Tensor::from_f64(dtype, shape, f64_kernel(&a.to_f64(), &b.to_f64())),
    }
}

/// The convolution on oneDNN's primitives (onednn_conv.rs) when that is the kernel chosen for
/// its shape on this machine: f32-stored operands (bf16/f16 rounded after, as on im2col), one
/// group. The choice between im2col + products and oneDNN is measured on the first call of a
/// shape, as a product's kernel is (gemm_select.rs), and saved with it; `DLC_CONV=im2col|onednn`
/// forces one. `None`: im2col computes it.
#[allow(clippy::too_many_arguments)]
fn on_onednn(
    sel: &GemmSelect,
    dir: Dir,
    geo: Geom,
    nb: usize,
    a: &Tensor,
    b: &Tensor,
    shape: &[usize],
    im2col: impl Fn(&[f32], &[f32]) -> Vec<f32>,
) -> Option<Tensor> {
    let (Data::F32(p), Data::F32(q)) = (&a.data, &b.data) else { return None };
    let forced = std::env::var("DLC_CONV").ok();
    if geo.g != 1 || forced.as_deref() == Some("im2col") || !super::onednn_api::available() {
        return None;
    }
    let s = on_onednn_shape(geo, nb, false)?;
    let out_len: usize = shape.iter().product();
    let run = |ins: [&Arc<Vec<f32>>; 2]| sel.convs.run(dir, &s, ins, out_len);
    let macs = nb * geo.o * geo.oh * geo.ow * geo.k();
    let use_onednn = match forced.as_deref() {
        Some("onednn") => true,
        _ if macs < super::gemm_select::MEASURE_MIN => false,
        _ => {
            let key = format!(
                "conv:{dir:?}:{:?}:{:?}:{:?}:s{:?}:d{:?}:p{:?}{:?}:p{}",
                s.x,
                s.w,
                s.y,
                s.stride,
                s.dil,
                s.pad_l,
                s.pad_r,
                rayon::current_num_threads()
            );
            let mut time = |c: usize| {
                let started = std::time::Instant::now();
                let done = if c == 0 { Some(im2col(p, q)) } else { run([p, q]) };
                done.map(|_| started.elapsed().as_nanos() as u64).unwrap_or(u64::MAX)
            };
            sel.choose(key, &["im2col", "onednn"], &mut time) == 1
        }
    };
    let mut out = if use_onednn { run([p, q])? } else { return None };
    round_slice(a.dtype, &mut out);
    Some(Tensor { dtype: a.dtype, shape: shape.to_vec(), data: Data::F32(Arc::new(out)) })
}

/// A convolution's shape as oneDNN takes it; `None` for one it does not (empty, or an input
/// whose last rows the strides skip: negative right padding).
fn on_onednn_shape(geo: Geom, nb: usize, channels_last: bool) -> Option<OneDnnShape> {
    if geo.oh == 0 || geo.ow == 0 || nb == 0 || geo.c == 0 || geo.o == 0 {
        return None;
    }
    let i = |v: usize| v as i64;
    let pad_r = |o: usize, k: usize, s: usize, d: usize, n: usize, p: isize| i((o - 1) * s + (k - 1) * d + 1) - i(n) - p as i64;
    let s = OneDnnShape {
        x: [i(nb), i(geo.c), i(geo.h), i(geo.w)],
        w: [i(geo.o), i(geo.cg), i(geo.kh), i(geo.kw)],
        y: [i(nb), i(geo.o), i(geo.oh), i(geo.ow)],
        stride: [i(geo.stride.0), i(geo.stride.1)],
        dil: [i(geo.dil.0) - 1, i(geo.dil.1) - 1],
        pad_l: [geo.pad.0 as i64, geo.pad.1 as i64],
        pad_r: [
            pad_r(geo.oh, geo.kh, geo.stride.0, geo.dil.0, geo.h, geo.pad.0),
            pad_r(geo.ow, geo.kw, geo.stride.1, geo.dil.1, geo.w, geo.pad.1),
        ],
        channels_last,
    };
    s.pad_r.iter().all(|p| *p >= 0).then_some(s)
}

/// Whether convolutions can run on oneDNN here (installed, and not `DLC_CONV=im2col`): where they
/// can, the CPU's training steps run them channels-last (`DeviceKind::conv_layout`).
pub fn onednn_convolutions() -> bool {
    std::env::var("DLC_CONV").ok().as_deref() != Some("im2col") && super::onednn_api::available()
}

/// A channels-last convolution (x, y `[N, H, W, C]`, w `[O, kH, kW, I]`; the layout pass chooses
/// them) on oneDNN's NHWC kernels, read and written as stored; `p`, `q` are the direction's
/// operands as `Convs::run` takes them. `None` where oneDNN cannot (not installed, groups, a
/// shape it refuses, `DLC_CONV=im2col`): the caller goes through NCHW.
fn channels_last_on_onednn(sel: &GemmSelect, dir: Dir, a: &Conv2dAttrs, p: &Tensor, q: &Tensor, shape: &[usize]) -> Option<Tensor> {
    use dlc_language::types::rules::{permuted, TO_NCHW};
    let (Data::F32(pv), Data::F32(qv)) = (&p.data, &q.data) else { return None };
    if !onednn_convolutions() {
        return None;
    }
    let nchw = |s: &[usize]| permuted(s, &TO_NCHW);
    let (x, w, y) = match dir {
        Dir::Forward => (nchw(&p.shape), nchw(&q.shape), nchw(shape)),
        Dir::Data => (nchw(shape), nchw(&q.shape), nchw(&p.shape)),
        Dir::Weights => (nchw(&p.shape), nchw(shape), nchw(&q.shape)),
    };
    let geo = Geom::new(&x, &w, &y, &Conv2dAttrs { channels_last: false, ..*a });
    if geo.g != 1 {
        return None;
    }
    let s = on_onednn_shape(geo, x[0], true)?;
    let mut out = sel.convs.run(dir, &s, [pv, qv], shape.iter().product())?;
    round_slice(p.dtype, &mut out);
    Some(Tensor { dtype: p.dtype, shape: shape.to_vec(), data: Data::F32(Arc::new(out)) })
}

/// A channels-last convolution run as NCHW: each operand and the output's shape permuted to
/// NCHW, the result back (where oneDNN cannot run it as stored).
fn through_nchw(
    a: &Conv2dAttrs,
    p: &Tensor,
    q: &Tensor,
    shape: &[usize],
    conv: impl Fn(&Tensor, &Tensor, &Conv2dAttrs, Vec<usize>) -> Tensor,
) -> Tensor {
    use dlc_language::types::rules::{permuted, TO_CHANNELS_LAST, TO_NCHW};
    let nchw = Conv2dAttrs { channels_last: false, ..*a };
    let y = conv(&super::movement::permute(p, &TO_NCHW), &super::movement::permute(q, &TO_NCHW), &nchw, permuted(shape, &TO_NCHW));
    super::movement::permute(&y, &TO_CHANNELS_LAST)
}

/// conv2d: x NCHW, w OIHW (channels-last when `a` says so).
pub fn conv2d(sel: &GemmSelect, x: &Tensor, w: &Tensor, a: &Conv2dAttrs, shape: Vec<usize>) -> Tensor {
    if a.channels_last {
        return channels_last_on_onednn(sel, Dir::Forward, a, x, w, &shape)
            .unwrap_or_else(|| through_nchw(a, x, w, &shape, |p, q, a, s| conv2d(sel, p, q, a, s)));
    }
    let geo = Geom::new(&x.shape, &w.shape, &shape, a);
    let nb = x.shape[0];
    if let Some(t) = on_onednn(sel, Dir::Forward, geo, nb, x, w, &shape, |p, q| forward(sel, geo, p, q, nb)) {
        return t;
    }
    dispatch(x.dtype, x, w, shape, |p, q| forward(sel, geo, p, q, nb), |p, q| forward(sel, geo, p, q, nb))
}

/// The gradient of conv2d for its input (of shape `shape`).
pub fn conv2d_grad_input(sel: &GemmSelect, dy: &Tensor, w: &Tensor, a: &Conv2dAttrs, shape: Vec<usize>) -> Tensor {
    if a.channels_last {
        return channels_last_on_onednn(sel, Dir::Data, a, dy, w, &shape)
            .unwrap_or_else(|| through_nchw(a, dy, w, &shape, |p, q, a, s| conv2d_grad_input(sel, p, q, a, s)));
    }
    let geo = Geom::new(&shape, &w.shape, &dy.shape, a);
    let nb = shape[0];
    if let Some(t) = on_onednn(sel, Dir::Data, geo, nb, dy, w, &shape, |p, q| grad_input(sel, geo, p, q, nb)) {
        return t;
    }
    dispatch(dy.dtype, dy, w, shape, |p, q| grad_input(sel, geo, p, q, nb), |p, q| grad_input(sel, geo, p, q, nb))
}

/// The gradient of conv2d for its weight (of shape `shape`).
pub fn conv2d_grad_weight(sel: &GemmSelect, x: &Tensor, dy: &Tensor, a: &Conv2dAttrs, shape: Vec<usize>) -> Tensor {
    if a.channels_last {
        return channels_last_on_onednn(sel, Dir::Weights, a, x, dy, &shape)
            .unwrap_or_else(|| through_nchw(a, x, dy, &shape, |p, q, a, s| conv2d_grad_weight(sel, p, q, a, s)));
    }
    let geo = Geom::new(&x.shape, &shape, &dy.shape, a);
    let nb = x.shape[0];
    if let Some(t) = on_onednn(sel, Dir::Weights, geo, nb, x, dy, &shape, |p, q| grad_weight(sel, geo, p, q, nb)) {
        return t;
    }
    dispatch(dy.dtype, x, dy, shape, |p, q| grad_weight(sel, geo, p, q, nb), |p, q| grad_weight(sel, geo, p, q, nb))
}

#[cfg(test)]
mod tests {
    use super::Geom;
    use std::sync::Arc;

    /// im2col and col2im (rows copied or added a valid range at a time) against the definition,
    /// element by element, with padding wider than the kernel, strides and dilations.
    #[test]
    fn im2col_and_col2im_match_the_definition() {
        for (h, w, kh, kw, stride, pad, dil) in [
            (5usize, 7usize, 3usize, 3usize, (1usize, 1usize), (1isize, 1isize), (1usize, 1usize)),
            (6, 6, 3, 2, (2, 3), (0, 2), (1, 1)),
            (9, 8, 2, 3, (1, 2), (3, 4), (2, 2)),
            (4, 4, 1, 1, (1, 1), (0, 0), (1, 1)),
            (3, 10, 3, 5, (2, 1), (2, 5), (1, 3)),
        ] {
            let span = |n: usize, k: usize, s: usize, p: isize, d: usize| {
                ((n as isize + 2 * p - (d * (k - 1)) as isize - 1) / s as isize + 1) as usize
            };
            let (oh, ow) = (span(h, kh, stride.0, pad.0, dil.0), span(w, kw, stride.1, pad.1, dil.1));
            let geo = Geom { c: 2, h, w, o: 1, cg: 2, kh, kw, oh, ow, g: 1, stride, pad, dil };
            let x: Vec<f32> = (0..2 * h * w).map(|i| i as f32 + 1.0).collect();
            let cols = oh * ow;
            let mut col = vec![f32::NAN; 2 * kh * kw * cols];
            geo.im2col(&x, 0, &mut col);
            let mut dx = vec![0f32; 2 * h * w];
            geo.col2im(&col, 0, &mut dx);
            let mut want_dx = vec![0f32; 2 * h * w];
            for ci in 0..2 {
                for ky in 0..kh {
                    for kx in 0..kw {
                        for oy in 0..oh {
                            for ox in 0..ow {
                                let iy = (oy * stride.0 + ky * dil.0) as isize - pad.0;
                                let ix = (ox * stride.1 + kx * dil.1) as isize - pad.1;
                                let inside = iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < w;
                                let at = (ci * h + iy.max(0) as usize) * w + ix.max(0) as usize;
                                let want = if inside { x[at] } else { 0.0 };
                                let got = col[((ci * kh + ky) * kw + kx) * cols + oy * ow + ox];
                                assert_eq!(got, want, "{h}x{w} k {kh}x{kw} s {stride:?} p {pad:?} d {dil:?}");
                                if inside {
                                    want_dx[at] += want;
                                }
                            }
                        }
                    }
                }
            }
            assert_eq!(dx, want_dx, "col2im {h}x{w} k {kh}x{kw} s {stride:?} p {pad:?} d {dil:?}");
        }
    }

    /// The weight gradient (through the transposed output gradient) against its definition,
    /// with groups, strides, padding and output channels that are not a multiple of any tile.
    #[test]
    fn grad_weight_matches_the_definition() {
        let (nb, c, h, w, o, g, kh, kw) = (3usize, 4usize, 9usize, 7usize, 6usize, 2usize, 3usize, 2usize);
        let (stride, pad, dil) = ((2usize, 1usize), (1isize, 0isize), (1usize, 1usize));
        let oh = (h as isize + 2 * pad.0 - kh as isize) as usize / stride.0 + 1;
        let ow = (w as isize + 2 * pad.1 - kw as isize) as usize / stride.1 + 1;
        let (cg, og) = (c / g, o / g);
        let geo = Geom { c, h, w, o, cg, kh, kw, oh, ow, g, stride, pad, dil };
        let x: Vec<f32> = (0..nb * c * h * w).map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.125).collect();
        let dy: Vec<f32> = (0..nb * o * oh * ow).map(|i| ((i * 53 % 29) as f32 - 14.0) * 0.0625).collect();
        let got = super::grad_weight(&super::GemmSelect::default(), geo, &x, &dy, nb);
        for oc in 0..o {
            let gi = oc / og;
            for ci in 0..cg {
                for ky in 0..kh {
                    for kx in 0..kw {
                        let mut want = 0f64;
                        for b in 0..nb {
                            for oy in 0..oh {
                                for ox in 0..ow {
                                    let iy = (oy * stride.0 + ky) as isize - pad.0;
                                    let ix = (ox * stride.1 + kx) as isize - pad.1;
                                    if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < w {
                                        let xv = x[((b * c + gi * cg + ci) * h + iy as usize) * w + ix as usize];
                                        want += (xv * dy[((b * o + oc) * oh + oy) * ow + ox]) as f64;
                                    }
                                }
                            }
                        }
                        let at = ((oc * cg + ci) * kh + ky) * kw + kx;
                        assert!(
                            (got[at] as f64 - want).abs() <= 1e-4 * (1.0 + want.abs()),
                            "dW[{oc},{ci},{ky},{kx}] {} against {want}",
                            got[at]
                        );
                    }
                }
            }
        }
    }

    /// oneDNN's three convolutions (where the library is installed) against im2col, on
    /// strides, padding, dilation and a batch that does not split evenly over the threads.
    #[test]
    fn onednn_convolutions_agree_with_im2col() {
        use super::{on_onednn_shape, Dir, GemmSelect};
        if !crate::exec::onednn_api::available() {
            eprintln!("oneDNN 2.x is not installed: nothing to compare");
            return;
        }
        let sel = GemmSelect::default();
        for (nb, c, h, w, o, kh, kw, stride, pad, dil) in [
            (3usize, 4usize, 9usize, 7usize, 6usize, 3usize, 2usize, (2usize, 1usize), (1isize, 0isize), (1usize, 1usize)),
            (5, 3, 11, 11, 8, 3, 3, (1, 1), (2, 2), (2, 2)),
        ] {
            let oh = (h as isize + 2 * pad.0 - (dil.0 * (kh - 1) + 1) as isize) as usize / stride.0 + 1;
            let ow = (w as isize + 2 * pad.1 - (dil.1 * (kw - 1) + 1) as isize) as usize / stride.1 + 1;
            let geo = Geom { c, h, w, o, cg: c, kh, kw, oh, ow, g: 1, stride, pad, dil };
            let s = on_onednn_shape(geo, nb, false).expect("a shape oneDNN takes");
            let x: Arc<Vec<f32>> = Arc::new((0..nb * c * h * w).map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.125).collect());
            let wt: Arc<Vec<f32>> = Arc::new((0..o * c * kh * kw).map(|i| ((i * 17 % 13) as f32 - 6.0) * 0.25).collect());
            let dy: Arc<Vec<f32>> = Arc::new((0..nb * o * oh * ow).map(|i| ((i * 53 % 29) as f32 - 14.0) * 0.0625).collect());
            let close = |got: &[f32], want: &[f32], what: &str| {
                assert_eq!(got.len(), want.len(), "{what}");
                for (g, w) in got.iter().zip(want) {
                    assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "{what}: {g} against {w}");
                }
            };
            // (Each call's layout copies and scratchpads come from pools of NaN-filled buffers.)
            crate::exec::onednn_api::poison_pools();
            let y = sel.convs.run(Dir::Forward, &s, [&x, &wt], nb * o * oh * ow).expect("forward");
            close(&y, &super::forward(&sel, geo, &x, &wt, nb), "forward");
            crate::exec::onednn_api::poison_pools();
            let dx = sel.convs.run(Dir::Data, &s, [&dy, &wt], x.len()).expect("data gradient");
            close(&dx, &super::grad_input(&sel, geo, &dy, &wt, nb), "data gradient");
            crate::exec::onednn_api::poison_pools();
            let dw = sel.convs.run(Dir::Weights, &s, [&x, &dy], wt.len()).expect("weight gradient");
            close(&dw, &super::grad_weight(&sel, geo, &x, &dy, nb), "weight gradient");
        }
    }
}
