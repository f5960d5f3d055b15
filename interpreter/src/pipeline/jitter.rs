//! `color_jitter`: torchvision's `ColorJitter` on a u8 image `[C, H, W]`, with the formulas of
//! its tensor functions (`adjust_brightness`, `adjust_contrast`, `adjust_saturation`,
//! `adjust_hue`): a blend computed in f32, clamped to [0, 255] and truncated to a byte as
//! `.to(torch.uint8)` truncates; gray as `rgb_to_grayscale` (0.2989 R + 0.587 G + 0.114 B,
//! truncated); hue through HSV in f32 and back to bytes as `convert_image_dtype` does
//! (x 255.999). The four run in a random order, as `ColorJitter` draws a permutation per image.
//! Saturation and hue leave a one-channel image as it is, as torchvision does.

use crate::runtime::data::resize::to_byte;
use crate::runtime::tensor::{Data, Tensor};

/// The image jittered by `[brightness, contrast, saturation, hue]` (0 leaves that one out),
/// with the random numbers from `draw`.
pub fn jitter(img: &Tensor, amounts: [f64; 4], draw: &mut impl FnMut() -> f64) -> Tensor {
    let Data::U8(v) = &img.data else { return img.clone() };
    let r = img.shape.len();
    let plane = img.shape[r - 2] * img.shape[r - 1];
    let channels = img.numel() / plane.max(1);
    // The order: a permutation of the four drawn by Fisher-Yates.
    let mut order = [0usize, 1, 2, 3];
    for i in (1..4).rev() {
        let j = ((draw() * (i + 1) as f64) as usize).min(i);
        order.swap(i, j);
    }
    let factors: Vec<f32> = amounts
        .iter()
        .enumerate()
        .map(|(k, a)| {
            let u = draw();
            if k == 3 {
                (-a + 2.0 * a * u) as f32
            } else {
                let lo = (1.0 - a).max(0.0);
                (lo + (1.0 + a - lo) * u) as f32
            }
        })
        .collect();
    let mut px: Vec<u8> = v.to_vec();
    for k in order {
        if amounts[k] == 0.0 {
            continue;
        }
        let f = factors[k];
        match k {
            0 => blend(&mut px, Other::Constant(0.0), f, plane),
            1 => {
                let gray = gray(&px, channels, plane);
                // The gray plane's mean from its exact sum (torch.mean sums pairwise in f32:
                // the two differ at most in the mean's last bit).
                let mean = gray.iter().map(|g| *g as u64).sum::<u64>() as f32 / plane.max(1) as f32;
                blend(&mut px, Other::Constant(mean), f, plane)
            }
            2 if channels == 3 => {
                let gray = gray(&px, channels, plane);
                blend(&mut px, Other::Plane(&gray), f, plane)
            }
            3 if channels == 3 => shift_hue(&mut px, f, plane),
            _ => {}
        }
    }
    Tensor::u8(img.shape.clone(), px)
}

/// What an image is blended with: a value (black, the gray mean) or a gray plane.
enum Other<'a> {
    Constant(f32),
    Plane(&'a [u8]),
}

/// `f * x + (1 - f) * other`, clamped to [0, 255], truncated; plane by plane, built for AVX2
/// where the CPU has it (the same roundings: no fused multiply-adds). The loops are written so
/// that they vectorise: no index arithmetic, and the truncation by `to_byte` (the value is
/// clamped already, so it is the same as `as u8`, whose saturation does not vectorise).
fn blend(px: &mut [u8], other: Other, f: f32, plane: usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2(px: &mut [u8], other: Other, f: f32, plane: usize) {
            blend_planes(px, other, f, plane)
        }
        // SAFETY: the CPU has AVX2.
        return unsafe { avx2(px, other, f, plane) };
    }
    blend_planes(px, other, f, plane)
}

#[inline(always)]
fn blend_planes(px: &mut [u8], other: Other, f: f32, plane: usize) {
    for channel in px.chunks_exact_mut(plane.max(1)) {
        match other {
            Other::Constant(k) => {
                let c = (1.0 - f) * k;
                for p in channel.iter_mut() {
                    *p = to_byte((f * *p as f32 + c).clamp(0.0, 255.0));
                }
            }
            Other::Plane(g) => {
                for (p, g) in channel.iter_mut().zip(g) {
                    *p = to_byte((f * *p as f32 + (1.0 - f) * *g as f32).clamp(0.0, 255.0));
                }
            }
        }
    }
}

/// `rgb_to_grayscale` of a u8 image: one plane (the image itself when it has one channel);
/// built for AVX2 where the CPU has it.
fn gray(px: &[u8], channels: usize, plane: usize) -> Vec<u8> {
    if channels != 3 {
        return px[..plane].to_vec();
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2(px: &[u8], plane: usize) -> Vec<u8> {
            weighted(px, plane)
        }
        // SAFETY: the CPU has AVX2.
        return unsafe { avx2(px, plane) };
    }
    weighted(px, plane)
}

#[inline(always)]
fn weighted(px: &[u8], plane: usize) -> Vec<u8> {
    let (r, rest) = px.split_at(plane);
    let (g, b) = rest.split_at(plane);
    // The weights sum to 0.9999: the value stays in [0, 255).
    r.iter().zip(g).zip(&b[..plane]).map(|((r, g), b)| to_byte(0.2989 * *r as f32 + 0.587 * *g as f32 + 0.114 * *b as f32)).collect()
}

/// `adjust_hue`: to f32 in [0, 1], to HSV, the hue moved by `shift` (mod 1), back to RGB and
/// to bytes.
fn shift_hue(px: &mut [u8], shift: f32, plane: usize) {
    for i in 0..plane {
        let [r, g, b] = [px[i], px[plane + i], px[2 * plane + i]].map(|c| c as f32 / 255.0);
        let (h, s, v) = rgb_to_hsv(r, g, b);
        let h = (h + shift).rem_euclid(1.0);
        let rgb = hsv_to_rgb(h, s, v);
        for (c, x) in rgb.iter().enumerate() {
            px[c * plane + i] = (x * (255.0 + 1.0 - 1e-3)) as u8;
        }
    }
}

/// torchvision's `_rgb2hsv`, one pixel.
fn rgb_to_hsv(r: f32, g: f32, b: f32) -> (f32, f32, f32) {
    let (max, min) = (r.max(g).max(b), r.min(g).min(b));
    let eq = max == min;
    let cr = max - min;
    let s = cr / if eq { 1.0 } else { max };
    let d = if eq { 1.0 } else { cr };
    let (rc, gc, bc) = ((max - r) / d, (max - g) / d, (max - b) / d);
    let h = if max == r {
        bc - gc
    } else if max == g {
        2.0 + rc - bc
    } else {
        4.0 + gc - rc
    };
    ((h / 6.0 + 1.0) % 1.0, s, max)
}

/// torchvision's `_hsv2rgb`, one pixel.
fn hsv_to_rgb(h: f32, s: f32, v: f32) -> [f32; 3] {
    let i = (h * 6.0).floor();
    let f = h * 6.0 - i;
    let p = (v * (1.0 - s)).clamp(0.0, 1.0);
    let q = (v * (1.0 - s * f)).clamp(0.0, 1.0);
    let t = (v * (1.0 - s * (1.0 - f))).clamp(0.0, 1.0);
    match (i as i32).rem_euclid(6) {
        0 => [v, t, p],
        1 => [q, v, p],
        2 => [p, v, t],
        3 => [p, q, v],
        4 => [t, p, v],
        _ => [v, p, q],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pixel of each colour in a 3 x 1 x 4 image.
    fn image() -> Tensor {
        Tensor::u8(vec![3, 1, 4], vec![200, 10, 0, 255, 100, 10, 0, 255, 50, 240, 0, 255])
    }

    #[test]
    fn brightness_contrast_and_saturation_blend_as_torchvision() {
        let img = image();
        let mut half = || 0.5;
        // Brightness 0.5 drawn at the middle of [0.5, 1.5]: factor 1, the image unchanged.
        assert_eq!(jitter(&img, [0.5, 0.0, 0.0, 0.0], &mut half).to_f64(), img.to_f64());
        // A factor of 0 (brightness 1, draw 0): black.
        let mut zero = || 0.0;
        assert!(jitter(&img, [1.0, 0.0, 0.0, 0.0], &mut zero).to_f64().iter().all(|v| *v == 0.0));
        // Contrast 0: every pixel the mean of the gray image. Gray: 0.2989 R + 0.587 G + 0.114 B
        // truncated: (59.78 + 58.7 + 5.7) = 124, (2.989 + 5.87 + 27.36) = 36, 0, and white 254
        // (the weights sum to 0.9999, as torchvision's do): mean 103.5.
        let flat = jitter(&img, [0.0, 1.0, 0.0, 0.0], &mut zero).to_f64();
        assert!(flat.iter().all(|v| *v == 103.0), "{flat:?}");
        // Saturation 0: each pixel its gray value in every channel.
        let g = jitter(&img, [0.0, 0.0, 1.0, 0.0], &mut zero).to_f64();
        assert_eq!(g[..4], [124.0, 36.0, 0.0, 254.0]);
        assert_eq!(g[..4], g[4..8]);
    }

    #[test]
    fn hue_goes_round_the_colour_wheel_and_back() {
        // Through HSV and back without a shift is the image (gray pixels included).
        let img = image();
        let mut px: Vec<u8> = img.to_f64().iter().map(|v| *v as u8).collect();
        shift_hue(&mut px, 0.0, 4);
        assert_eq!(px.iter().map(|v| *v as f64).collect::<Vec<_>>(), img.to_f64());
        // Red shifted by a third of the wheel is green.
        let mut red = vec![255, 0, 0];
        shift_hue(&mut red, 1.0 / 3.0, 1);
        assert_eq!(red, vec![0, 255, 0]);
    }
}
