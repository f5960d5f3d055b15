//! Bilinear resizing of u8 image planes as PyTorch's `F.interpolate(mode="bilinear",
//! align_corners=False)` without antialiasing computes it: each output pixel blends its two
//! source rows' horizontal blends, in f32, rounded to the nearest byte.
//!
//! Separable, so each source row's horizontal blend is computed once however many output rows
//! read it (an upscaled 224x224 crop reads each about twice), and the vertical blend is a loop
//! over contiguous rows that vectorises. The arithmetic is the per-pixel formula's, term for
//! term: `top = r0[x0] (1 - wx) + r0[x1] wx`, the same for `bottom`, then
//! `top (1 - wy) + bottom wy`, so the bytes are those of blending each pixel on its own (a test
//! checks it against that formula). Built for AVX2 where the CPU has it (no fused multiply-adds:
//! the same roundings as the plain build).

/// A window of `channels` planes: `(top, left, h, w)` inside planes of `width` columns and
/// `plane` values each (the whole image: `(0, 0, h, w)`, `width = w`, `plane = h * w`).
#[derive(Clone, Copy)]
pub(crate) struct Window {
    pub channels: usize,
    pub plane: usize,
    pub width: usize,
    pub top: usize,
    pub left: usize,
    pub h: usize,
    pub w: usize,
}

impl Window {
    /// The whole of `channels` planes of `(h, w)`.
    pub fn whole(channels: usize, (h, w): (usize, usize)) -> Window {
        Window { channels, plane: h * w, width: w, top: 0, left: 0, h, w }
    }
}

/// Bilinear resize of `channels` planes from `(h, w)` to `(oh, ow)`.
pub(crate) fn resize(planes: &[u8], channels: usize, (h, w): (usize, usize), size: (usize, usize)) -> Vec<u8> {
    resize_window(planes, Window::whole(channels, (h, w)), size)
}

/// Bilinear resize of a window of `src`'s planes to `(oh, ow)`: `channels` planes out.
pub(crate) fn resize_window(src: &[u8], win: Window, size: (usize, usize)) -> Vec<u8> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2(src: &[u8], win: Window, size: (usize, usize)) -> Vec<u8> {
            separable(src, win, size)
        }
        // SAFETY: the CPU has AVX2.
        return unsafe { avx2(src, win, size) };
    }
    separable(src, win, size)
}

#[inline(always)]
fn separable(src: &[u8], win: Window, (oh, ow): (usize, usize)) -> Vec<u8> {
    let xs: Vec<(usize, usize, f32)> = (0..ow).map(|x| source_index(x, win.w, ow)).collect();
    let ys: Vec<(usize, usize, f32)> = (0..oh).map(|y| source_index(y, win.h, oh)).collect();
    // Which source rows any output row reads, and where each one's horizontal blend is kept.
    let mut slot = vec![usize::MAX; win.h];
    let mut used = 0;
    for &(y0, y1, _) in &ys {
        for y in [y0, y1] {
            if slot[y] == usize::MAX {
                slot[y] = used;
                used += 1;
            }
        }
    }
    let mut rows = vec![0f32; used * ow];
    let mut out = vec![0u8; win.channels * oh * ow];
    for c in 0..win.channels {
        let plane = &src[c * win.plane..(c + 1) * win.plane];
        for (y, s) in slot.iter().enumerate() {
            if *s == usize::MAX {
                continue;
            }
            let at = (win.top + y) * win.width + win.left;
            let r = &plane[at..at + win.w];
            for (o, &(x0, x1, wx)) in rows[s * ow..(s + 1) * ow].iter_mut().zip(&xs) {
                *o = r[x0] as f32 * (1.0 - wx) + r[x1] as f32 * wx;
            }
        }
        for (orow, &(y0, y1, wy)) in out[c * oh * ow..(c + 1) * oh * ow].chunks_exact_mut(ow.max(1)).zip(&ys) {
            let top = &rows[slot[y0] * ow..(slot[y0] + 1) * ow];
            let bottom = &rows[slot[y1] * ow..(slot[y1] + 1) * ow];
            for ((o, t), b) in orow.iter_mut().zip(top).zip(bottom) {
                // Round half away from zero as `f32::round` does, for the values here (never
                // negative) as a truncation: `round` is a library call on baseline x86-64.
                *o = to_byte((t * (1.0 - wy) + b * wy).clamp(0.0, 255.0) + 0.5);
            }
        }
    }
    out
}

/// `v as u8` for a value already in [0, 256), truncated: one vector conversion where `as u8`
/// (and `as i32`) check every lane for NaN and saturate it one at a time.
#[inline(always)]
pub(crate) fn to_byte(v: f32) -> u8 {
    debug_assert!((0.0..256.0).contains(&v), "{v}");
    // SAFETY: in [0, 256), so finite and within i32.
    unsafe { v.to_int_unchecked::<i32>() as u8 }
}

/// Where output index `o` samples the input along an axis of `n_in` (half-pixel centres, as
/// PyTorch's `align_corners=False`, negative sources clamped to 0): the two neighbours and the
/// second's weight.
fn source_index(o: usize, n_in: usize, n_out: usize) -> (usize, usize, f32) {
    let s = ((o as f32 + 0.5) * (n_in as f32 / n_out as f32) - 0.5).max(0.0);
    let i0 = (s.floor() as usize).min(n_in - 1);
    let i1 = (i0 + 1).min(n_in - 1);
    (i0, i1, s - i0 as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-pixel formula, each output pixel on its own.
    fn each_pixel(planes: &[u8], channels: usize, (h, w): (usize, usize), (oh, ow): (usize, usize)) -> Vec<u8> {
        let mut out = vec![];
        for c in 0..channels {
            let plane = &planes[c * h * w..(c + 1) * h * w];
            for y in 0..oh {
                let (y0, y1, wy) = source_index(y, h, oh);
                for x in 0..ow {
                    let (x0, x1, wx) = source_index(x, w, ow);
                    let top = plane[y0 * w + x0] as f32 * (1.0 - wx) + plane[y0 * w + x1] as f32 * wx;
                    let bottom = plane[y1 * w + x0] as f32 * (1.0 - wx) + plane[y1 * w + x1] as f32 * wx;
                    out.push(((top * (1.0 - wy) + bottom * wy).clamp(0.0, 255.0) + 0.5) as i32 as u8);
                }
            }
        }
        out
    }

    #[test]
    fn a_constant_image_stays_constant_and_a_ramp_is_sampled_at_half_pixel_centres() {
        let flat = vec![77u8; 3 * 6 * 4];
        assert!(resize(&flat, 3, (6, 4), (3, 5)).iter().all(|v| *v == 77));
        // 0, 100 along x, halved: each output pixel sits between the two inputs.
        assert_eq!(resize(&[0u8, 100, 0, 100], 1, (2, 2), (1, 1)), vec![50]);
        // Doubled: the edges clamp, the middle interpolates at 1/4 and 3/4.
        assert_eq!(resize(&[0u8, 100], 1, (1, 2), (1, 4)), vec![0, 25, 75, 100]);
    }

    #[test]
    fn the_separable_resize_gives_each_pixels_own_blend_up_and_down() {
        let (h, w) = (37, 29);
        let img: Vec<u8> = (0..3 * h * w).map(|i| ((i * 7919 + i / 13) % 256) as u8).collect();
        for size in [(224, 224), (16, 40), (37, 29), (5, 3), (80, 17)] {
            assert_eq!(resize(&img, 3, (h, w), size), each_pixel(&img, 3, (h, w), size), "{size:?}");
        }
    }

    #[test]
    fn a_window_resizes_as_its_copy_would() {
        let (h, w) = (20, 30);
        let img: Vec<u8> = (0..3 * h * w).map(|i| (i * 31 % 251) as u8).collect();
        let (top, left, ch, cw) = (3, 7, 11, 17);
        let mut crop = vec![];
        for c in 0..3 {
            for y in top..top + ch {
                crop.extend_from_slice(&img[c * h * w + y * w + left..c * h * w + y * w + left + cw]);
            }
        }
        let win = Window { channels: 3, plane: h * w, width: w, top, left, h: ch, w: cw };
        assert_eq!(resize_window(&img, win, (24, 24)), resize(&crop, 3, (ch, cw), (24, 24)));
    }
}
