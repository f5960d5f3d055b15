//! The random augmentations of an image (the element's first tensor), torchvision's names and
//! semantics: `random_crop` (RandomCrop with zero padding), `random_flip`
//! (RandomHorizontalFlip), `random_resized_crop` (RandomResizedCrop) and `color_jitter`
//! (ColorJitter). Each element's draws depend on (seed, epoch, position) only, so an epoch is the
//! same on any number of worker threads and after a resume, and differs from the next epoch.
//! The draws are dlc's own counter-based stream, not torch's generator: the same distributions,
//! not the same numbers.

use super::{int_arg, Element};
use crate::runtime::data::resize::{resize_window, Window};
use crate::runtime::rng;
use crate::runtime::tensor::{Data, Tensor};
use dlc_language::eval::value::Stage;
use dlc_language::eval::Value;

/// Draws an element may take: each element's counters are `position * DRAWS + k`.
const DRAWS: u64 = 32;

/// One augmentation stage of one epoch, in plain values (worker threads run it).
#[derive(Clone, Copy, Debug)]
pub struct Augment {
    stream: u64,
    kind: Kind,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Shifted by up to `pad` pixels each way, zeros shifted in.
    Crop { pad: usize },
    /// Mirrored left-right with probability `p`.
    Flip { p: f64 },
    /// A crop of random area (a fraction in `scale` of the image's) and aspect ratio (in
    /// `ratio`, drawn log-uniformly), resized to `size`.
    ResizedCrop { size: (usize, usize), scale: (f64, f64), ratio: (f64, f64) },
    /// Brightness, contrast and saturation factors drawn from `[max(0, 1 - x), 1 + x]`, a hue
    /// shift from `[-hue, hue]`, applied in a random order.
    Jitter { brightness: f64, contrast: f64, saturation: f64, hue: f64 },
}

fn float(stage: &Stage, name: &str, default: f64) -> f64 {
    stage.arg(name).and_then(|v| v.as_float()).unwrap_or(default)
}

fn pair(stage: &Stage, name: &str, default: (f64, f64)) -> (f64, f64) {
    match stage.arg(name) {
        Some(Value::Tuple(v)) if v.len() == 2 => (v[0].as_float().unwrap_or(default.0), v[1].as_float().unwrap_or(default.1)),
        _ => default,
    }
}

impl Augment {
    pub fn of(stage: &Stage, epoch: u64) -> Augment {
        let seed = int_arg(stage, "seed", 0) as u64;
        let stream = seed.wrapping_mul(0xA24B_AED4_963E_E407) ^ epoch.wrapping_mul(0x9FB2_1C65_1E98_DF25) ^ (stage.kind.len() as u64);
        let kind = match stage.kind {
            "random_crop" => Kind::Crop { pad: int_arg(stage, "padding", 0).max(0) as usize },
            "random_flip" => Kind::Flip { p: float(stage, "p", 0.5) },
            "random_resized_crop" => Kind::ResizedCrop {
                size: super::geometry::size_arg(stage),
                scale: pair(stage, "scale", (0.08, 1.0)),
                ratio: pair(stage, "ratio", (3.0 / 4.0, 4.0 / 3.0)),
            },
            _ => Kind::Jitter {
                brightness: float(stage, "brightness", 0.0),
                contrast: float(stage, "contrast", 0.0),
                saturation: float(stage, "saturation", 0.0),
                hue: float(stage, "hue", 0.0),
            },
        };
        Augment { stream, kind }
    }

    /// The element at position `i` of the stage's input, augmented.
    pub fn apply(&self, i: usize, mut e: Element) -> Element {
        let mut k = 0;
        let mut draw = || {
            k += 1;
            rng::uniform(self.stream, i as u64 * DRAWS + k - 1)
        };
        if let Some(img) = e.first_mut() {
            *img = match self.kind {
                Kind::Crop { pad } => {
                    let (a, b) = (draw(), draw());
                    let span = 2 * pad + 1;
                    let pad = pad as isize;
                    shifted(img, (a * span as f64) as isize - pad, (b * span as f64) as isize - pad, false)
                }
                Kind::Flip { p } => shifted(img, 0, 0, draw() < p),
                Kind::ResizedCrop { size, scale, ratio } => resized_crop(img, size, scale, ratio, &mut draw),
                Kind::Jitter { brightness, contrast, saturation, hue } => {
                    super::jitter::jitter(img, [brightness, contrast, saturation, hue], &mut draw)
                }
            };
        }
        e
    }
}

/// torchvision's `RandomResizedCrop.get_params`: up to ten tries at a crop of random area and
/// aspect ratio that fits, then the central crop of the ratio's nearest bound. Returns
/// (top, left, height, width).
fn crop_box(h: usize, w: usize, scale: (f64, f64), ratio: (f64, f64), draw: &mut impl FnMut() -> f64) -> (usize, usize, usize, usize) {
    let area = (h * w) as f64;
    let (lo, hi) = (ratio.0.ln(), ratio.1.ln());
    for _ in 0..10 {
        let target = area * (scale.0 + (scale.1 - scale.0) * draw());
        let aspect = (lo + (hi - lo) * draw()).exp();
        let cw = (target * aspect).sqrt().round_ties_even() as usize;
        let ch = (target / aspect).sqrt().round_ties_even() as usize;
        if cw > 0 && cw <= w && ch > 0 && ch <= h {
            let top = ((draw() * (h - ch + 1) as f64) as usize).min(h - ch);
            let left = ((draw() * (w - cw + 1) as f64) as usize).min(w - cw);
            return (top, left, ch, cw);
        }
    }
    let in_ratio = w as f64 / h as f64;
    let (ch, cw) = if in_ratio < ratio.0.min(ratio.1) {
        ((w as f64 / ratio.0.min(ratio.1)).round_ties_even() as usize, w)
    } else if in_ratio > ratio.0.max(ratio.1) {
        (h, (h as f64 * ratio.0.max(ratio.1)).round_ties_even() as usize)
    } else {
        (h, w)
    };
    ((h - ch) / 2, (w - cw) / 2, ch, cw)
}

/// A random crop of `img` resized to `size` (bilinear, half-pixel centres, no antialiasing,
/// as `resize`); images other than u8 are returned as they are (the checker allows u8 only).
fn resized_crop(img: &Tensor, size: (usize, usize), scale: (f64, f64), ratio: (f64, f64), draw: &mut impl FnMut() -> f64) -> Tensor {
    let Data::U8(v) = &img.data else { return img.clone() };
    let r = img.shape.len();
    let (h, w) = (img.shape[r - 2], img.shape[r - 1]);
    let planes = img.numel() / (h * w).max(1);
    let (top, left, ch, cw) = crop_box(h, w, scale, ratio, draw);
    let win = Window { channels: planes, plane: h * w, width: w, top, left, h: ch, w: cw };
    let mut shape = img.shape.clone();
    (shape[r - 2], shape[r - 1]) = size;
    Tensor::u8(shape, resize_window(v, win, size))
}

/// An image ([.., H, W]) moved by (dy, dx) with zeros shifted in (a random crop of the
/// zero-padded image), and mirrored left-right when `flip`; in its own element type (bytes stay
/// bytes: an augmented CIFAR image is 3 KB, not 24 KB), and not copied when nothing moves.
fn shifted(t: &Tensor, dy: isize, dx: isize, flip: bool) -> Tensor {
    if dy == 0 && dx == 0 && !flip {
        return t.clone();
    }
    let r = t.shape.len();
    let (h, w) = (t.shape[r - 2], t.shape[r - 1]);
    match &t.data {
        Data::U8(v) => Tensor::u8(t.shape.clone(), shift_planes(v, h, w, dy, dx, flip)),
        Data::F32(v) => Tensor::f32(t.shape.clone(), shift_planes(v, h, w, dy, dx, flip)),
        _ => Tensor::from_f64(t.dtype, t.shape.clone(), shift_planes(&t.to_f64(), h, w, dy, dx, flip)),
    }
}

/// `shifted` on the planes `v` (each `h` x `w`), row by row.
fn shift_planes<T: Copy + Default>(v: &[T], h: usize, w: usize, dy: isize, dx: isize, flip: bool) -> Vec<T> {
    let mut out = vec![T::default(); v.len()];
    for (src, dst) in v.chunks_exact((h * w).max(1)).zip(out.chunks_exact_mut((h * w).max(1))) {
        for y in 0..h {
            let sy = y as isize + dy;
            if sy < 0 || sy >= h as isize {
                continue;
            }
            let (row, out_row) = (&src[sy as usize * w..(sy as usize + 1) * w], &mut dst[y * w..(y + 1) * w]);
            // Output column x reads xx = x + dx, or w - 1 - x + dx flipped: the columns whose
            // xx is inside the row, copied as a run (reversed when flipped).
            let wi = w as isize;
            if flip {
                let (lo, hi) = (dx.max(0), (wi + dx).min(wi));
                if lo < hi {
                    let src_run = &row[(wi - hi + dx) as usize..(wi - lo + dx) as usize];
                    for (o, v) in out_row[lo as usize..hi as usize].iter_mut().zip(src_run.iter().rev()) {
                        *o = *v;
                    }
                }
            } else {
                let (lo, hi) = ((-dx).max(0), (wi - dx).min(wi));
                if lo < hi {
                    out_row[lo as usize..hi as usize].copy_from_slice(&row[(lo + dx) as usize..(hi + dx) as usize]);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifted_and_flipped_planes_take_each_pixel_from_its_source() {
        let (h, w) = (5, 7);
        let v: Vec<u8> = (1..=2 * h * w).map(|i| i as u8).collect();
        for flip in [false, true] {
            for dy in -6..=6isize {
                for dx in -8..=8isize {
                    let got = shift_planes(&v, h, w, dy, dx, flip);
                    for c in 0..2 {
                        for y in 0..h {
                            for x in 0..w {
                                let (sy, sx) = (y as isize + dy, if flip { (w - 1 - x) as isize } else { x as isize } + dx);
                                let inside = (0..h as isize).contains(&sy) && (0..w as isize).contains(&sx);
                                let want = if inside { v[c * h * w + sy as usize * w + sx as usize] } else { 0 };
                                assert_eq!(got[c * h * w + y * w + x], want, "flip {flip} dy {dy} dx {dx} at {c},{y},{x}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_crop_box_fits_the_image_and_covers_the_asked_area() {
        let mut n = 0u64;
        let mut draw = || {
            n += 1;
            rng::uniform(7, n)
        };
        for _ in 0..200 {
            let (top, left, ch, cw) = crop_box(32, 48, (0.08, 1.0), (0.75, 4.0 / 3.0), &mut draw);
            assert!(top + ch <= 32 && left + cw <= 48 && ch > 0 && cw > 0);
            let frac = (ch * cw) as f64 / (32.0 * 48.0);
            assert!((0.06..=1.0).contains(&frac), "{frac}");
        }
        // Nothing fits (a scale above the whole image): the central crop at the ratio's bound.
        assert_eq!(crop_box(10, 40, (2.0, 3.0), (0.75, 4.0 / 3.0), &mut draw), (0, 13, 10, 13));
        assert_eq!(crop_box(20, 20, (2.0, 3.0), (0.75, 4.0 / 3.0), &mut draw), (0, 0, 20, 20));
    }

    #[test]
    fn a_resized_crop_has_the_asked_size_and_takes_its_pixels_from_the_image() {
        let img = Tensor::u8(vec![3, 16, 16], (0..768).map(|i| (i % 251) as u8).collect());
        let mut n = 0u64;
        let mut draw = || {
            n += 1;
            rng::uniform(3, n)
        };
        let out = resized_crop(&img, (8, 8), (0.08, 1.0), (0.75, 4.0 / 3.0), &mut draw);
        assert_eq!(out.shape, vec![3, 8, 8]);
        // The whole image at its own size is the image.
        let same = resized_crop(&img, (16, 16), (1.0, 1.0), (1.0, 1.0), &mut draw);
        assert_eq!(same.to_f64(), img.to_f64());
    }
}
