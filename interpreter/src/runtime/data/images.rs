//! A folder of class folders of JPEG and PNG files, as torchvision's `ImageFolder` reads one:
//! the classes are the sub-folders in sorted name order (label 0 the first), each class's files
//! in sorted path order, files of other kinds ignored. Listing is done once; each image is
//! decoded when it is asked for (on the data feed's workers): JPEG by `zune-jpeg`, PNG by `png`.
//! Images become `u8[C, H, W]`: RGB (an alpha channel dropped, gray replicated) or gray
//! (`channels: 1`, RGB weighted 299/587/114 as PIL's `convert("L")`), resized when the source
//! says `size: (h, w)` (bilinear with half-pixel centres and no antialiasing, as
//! `F.interpolate(mode="bilinear", align_corners=False)`, rounded to the nearest byte).

use super::resize::resize;
use super::{err, DataError};
use crate::runtime::tensor::Tensor;
use std::path::{Path, PathBuf};

pub struct ImageFolder {
    /// Every image file with its class index, in reading order.
    pub files: Vec<(PathBuf, i64)>,
    pub classes: Vec<String>,
    size: Option<(usize, usize)>,
    channels: usize,
    /// `on_error: "skip"`: an image that cannot be read or decoded is left out of its batch
    /// and counted, instead of stopping the run.
    pub skip: bool,
    /// Images left out so far, and the first one's error.
    pub skipped: super::Skipped,
}

fn is_image(p: &Path) -> bool {
    p.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "jpg" | "jpeg" | "png"))
}

/// The entries of `dir`, sorted by name.
fn sorted(dir: &Path) -> Result<Vec<PathBuf>, DataError> {
    let entries = std::fs::read_dir(dir).map_err(|e| err(dir, format!("cannot list: {e}")))?;
    let mut out = entries.map(|e| e.map(|e| e.path())).collect::<Result<Vec<_>, _>>().map_err(|e| err(dir, format!("cannot list: {e}")))?;
    out.sort();
    Ok(out)
}

/// Every image under `dir` (at any depth), in sorted path order.
fn images_under(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), DataError> {
    for p in sorted(dir)? {
        if p.is_dir() {
            images_under(&p, out)?;
        } else if is_image(&p) {
            out.push(p);
        }
    }
    Ok(())
}

impl ImageFolder {
    /// List `dir`'s classes and images.
    pub fn open(dir: &Path, size: Option<(usize, usize)>, channels: usize, skip: bool) -> Result<ImageFolder, DataError> {
        let mut classes = vec![];
        let mut files = vec![];
        for class in sorted(dir)?.into_iter().filter(|p| p.is_dir()) {
            let label = classes.len() as i64;
            let before = files.len();
            let mut found = vec![];
            images_under(&class, &mut found)?;
            files.extend(found.into_iter().map(|f| (f, label)));
            if files.len() > before {
                classes.push(class.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
            }
        }
        if files.is_empty() {
            return Err(err(dir, "holds no class folder with JPEG or PNG files (`images` reads DIR/CLASS/IMAGE.jpg)"));
        }
        Ok(ImageFolder { files, classes, size, channels, skip, skipped: Default::default() })
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Image `i` as `u8[C, H, W]`, and its label.
    pub fn get(&self, i: usize) -> Result<(Tensor, i64), DataError> {
        let (path, label) = &self.files[i];
        let bytes = std::fs::read(path).map_err(|e| err(path, format!("cannot read: {e}")))?;
        Ok((image_tensor(path, &bytes, self.size, self.channels)?, *label))
    }
}

/// A JPEG or PNG file's bytes as `u8[channels, h, w]`: decoded, made RGB or gray, resized to
/// `size` when it differs (`path` is what an error names). A `shards` source's members are
/// decoded with it too.
pub(crate) fn image_tensor(path: &Path, bytes: &[u8], size: Option<(usize, usize)>, channels: usize) -> Result<Tensor, DataError> {
    let (w, h, pixels) = decode(path, bytes)?;
    let planes = to_planes(&pixels, w * h, channels);
    let (planes, h, w) = match size {
        Some((oh, ow)) if (oh, ow) != (h, w) => (resize(&planes, channels, (h, w), (oh, ow)), oh, ow),
        _ => (planes, h, w),
    };
    Ok(Tensor::u8(vec![channels, h, w], planes))
}

/// An RGB image (`w`, `h`, interleaved RGB bytes); JPEG or PNG by its first bytes. A decoder
/// that panics on a malformed file is caught and reported as that file's error.
fn decode(path: &Path, bytes: &[u8]) -> Result<(usize, usize, Vec<u8>), DataError> {
    let decoded = super::contained::contained(|| {
        if bytes.starts_with(b"\x89PNG") {
            png_rgb(bytes)
        } else if bytes.starts_with(&[0xFF, 0xD8]) {
            jpeg_rgb(bytes)
        } else {
            Err("neither a JPEG nor a PNG file (by its first bytes)".to_string())
        }
    });
    match decoded {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(err(path, format!("cannot decode the image: {e}"))),
        Err(_) => Err(err(path, "cannot decode the image: the decoder failed on it (a corrupt or truncated file)")),
    }
}

fn jpeg_rgb(bytes: &[u8]) -> Result<(usize, usize, Vec<u8>), String> {
    use zune_jpeg::zune_core::colorspace::ColorSpace;
    use zune_jpeg::zune_core::options::DecoderOptions;
    let options = DecoderOptions::default().jpeg_set_out_colorspace(ColorSpace::RGB);
    let mut d = zune_jpeg::JpegDecoder::new_with_options(bytes, options);
    let pixels = d.decode().map_err(|e| format!("{e:?}"))?;
    let (w, h) = d.dimensions().ok_or("no image size in the file")?;
    if pixels.len() != w * h * 3 {
        return Err(format!("{} bytes decoded for a {w}x{h} RGB image", pixels.len()));
    }
    Ok((w, h, pixels))
}

fn png_rgb(bytes: &[u8]) -> Result<(usize, usize, Vec<u8>), String> {
    let mut d = png::Decoder::new(std::io::Cursor::new(bytes));
    // Palettes and low bit depths expanded to bytes, 16 bits cut to 8.
    d.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = d.read_info().map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; reader.output_buffer_size().ok_or("an image too large to decode")?];
    let info = reader.next_frame(&mut buf).map_err(|e| e.to_string())?;
    let (w, h) = (info.width as usize, info.height as usize);
    let px = &buf[..info.buffer_size()];
    let rgb: Vec<u8> = match info.color_type {
        png::ColorType::Rgb => px.to_vec(),
        png::ColorType::Rgba => px.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect(),
        png::ColorType::Grayscale => px.iter().flat_map(|g| [*g, *g, *g]).collect(),
        png::ColorType::GrayscaleAlpha => px.chunks_exact(2).flat_map(|p| [p[0], p[0], p[0]]).collect(),
        png::ColorType::Indexed => return Err("an indexed image left unexpanded".into()),
    };
    Ok((w, h, rgb))
}

/// Interleaved RGB to `channels` planes (CHW): RGB as is, or gray as PIL's `convert("L")`.
fn to_planes(rgb: &[u8], n: usize, channels: usize) -> Vec<u8> {
    if channels == 1 {
        return rgb.chunks_exact(3).map(|p| ((p[0] as u32 * 299 + p[1] as u32 * 587 + p[2] as u32 * 114 + 500) / 1000) as u8).collect();
    }
    let mut out = vec![0u8; 3 * n];
    let (r, rest) = out.split_at_mut(n);
    let (g, b) = rest.split_at_mut(n);
    for (((p, r), g), b) in rgb.chunks_exact(3).zip(r).zip(g).zip(b) {
        (*r, *g, *b) = (p[0], p[1], p[2]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gray_is_weighted_as_pil_converts_it() {
        assert_eq!(to_planes(&[255, 0, 0, 0, 255, 0, 0, 0, 255], 3, 1), vec![76, 150, 29]);
        assert_eq!(to_planes(&[1, 2, 3, 4, 5, 6], 2, 3), vec![1, 4, 2, 5, 3, 6]);
    }
}
