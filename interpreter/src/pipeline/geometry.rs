//! `resize` and `center_crop`: torchvision's `Resize((h, w))` and `CenterCrop((h, w))` of the
//! element's first tensor, a u8 image `[C, H, W]` or `[H, W]`, the same for every element and
//! epoch. Resizing is bilinear with half-pixel centres and no antialiasing (as `images` resizes);
//! the crop's offset rounds half to even as torchvision's `round`, and an image smaller than the
//! crop is padded with zeros first, as torchvision pads it.

use super::{int_arg, Element};
use crate::runtime::data::resize;
use crate::runtime::tensor::{Data, Tensor};
use crate::runtime::RuntimeError;
use dlc_language::eval::value::Stage;
use dlc_language::eval::Value;

/// A `resize` or `center_crop` stage, in plain values (worker threads run it).
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    crop: bool,
    size: (usize, usize),
}

/// `round((a - b) / 2)` as Python rounds: half to even.
fn half_offset(d: usize) -> usize {
    let q = d / 2;
    if d % 2 == 1 && q % 2 == 1 {
        q + 1
    } else {
        q
    }
}

/// A stage's `size: (h, w)` or `size: s` (the checker has made sure they are positive).
pub(super) fn size_arg(stage: &Stage) -> (usize, usize) {
    match stage.arg("size") {
        Some(Value::Tuple(hw)) if hw.len() == 2 => (hw[0].as_int().unwrap_or(1) as usize, hw[1].as_int().unwrap_or(1) as usize),
        _ => {
            let s = int_arg(stage, "size", 1).max(1) as usize;
            (s, s)
        }
    }
}

impl Geometry {
    pub fn of(stage: &Stage) -> Geometry {
        Geometry { crop: stage.kind == "center_crop", size: size_arg(stage) }
    }

    /// The element with its first tensor resized or cropped.
    pub fn apply(&self, mut e: Element) -> Result<Element, RuntimeError> {
        if let Some(img) = e.first_mut() {
            *img = self.image(img)?;
        }
        Ok(e)
    }

    fn image(&self, t: &Tensor) -> Result<Tensor, RuntimeError> {
        let Data::U8(v) = &t.data else {
            return Err(RuntimeError::Unsupported(format!("`{}` works on u8 images", if self.crop { "center_crop" } else { "resize" })));
        };
        let r = t.shape.len();
        let (h, w) = (t.shape[r - 2], t.shape[r - 1]);
        let planes = t.numel() / (h * w).max(1);
        let (oh, ow) = self.size;
        let mut shape = t.shape.clone();
        (shape[r - 2], shape[r - 1]) = (oh, ow);
        let out = if !self.crop {
            resize::resize(v, planes, (h, w), (oh, ow))
        } else {
            // Padded to at least the crop (zeros, the extra split as torchvision splits it),
            // then cropped at the centre.
            let (ph, pw) = (h.max(oh), w.max(ow));
            let (top_pad, left_pad) = ((ph - h) / 2, (pw - w) / 2);
            let (top, left) = (half_offset(ph - oh), half_offset(pw - ow));
            let mut out = vec![0u8; planes * oh * ow];
            for c in 0..planes {
                for y in 0..oh {
                    let Some(sy) = (y + top).checked_sub(top_pad).filter(|sy| *sy < h) else { continue };
                    for x in 0..ow {
                        if let Some(sx) = (x + left).checked_sub(left_pad).filter(|sx| *sx < w) {
                            out[(c * oh + y) * ow + x] = v[(c * h + sy) * w + sx];
                        }
                    }
                }
            }
            out
        };
        Ok(Tensor::u8(shape, out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crop_offset_rounds_half_to_even_and_small_images_are_padded() {
        // Python: round(0.5) = 0, round(1.5) = 2, round(2.5) = 2.
        assert_eq!([1, 2, 3, 5, 7].map(half_offset), [0, 1, 2, 2, 4]);
        let img = Tensor::u8(vec![1, 3, 4], (1..=12).collect());
        let crop = Geometry { crop: true, size: (2, 2) };
        // Rows offset round(0.5) = 0, columns offset 1.
        assert_eq!(crop.image(&img).unwrap().to_f64(), vec![2.0, 3.0, 6.0, 7.0]);
        let pad = Geometry { crop: true, size: (5, 4) };
        let padded = pad.image(&img).unwrap().to_f64();
        assert_eq!(padded[..4], [0.0; 4], "one row of zeros above");
        assert_eq!(padded[4..8], [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(padded[16..], [0.0; 4], "and one below");
    }
}
