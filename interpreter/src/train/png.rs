//! A PNG grid of images, for `infer` blocks whose `output` names a `.png` file (a VAE's or a
//! GAN's samples). Like torchvision's `save_image`: values are clamped to [0, 1], images are laid
//! out in rows of up to 8 with a 2-pixel border. 8-bit grayscale for 1 channel, RGB for 3.

use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use std::io::Write;
use std::path::Path;

fn err(msg: impl Into<String>) -> RuntimeError {
    RuntimeError::Unsupported(msg.into())
}

/// (count, channels, height, width) of a batch of images: [N, H, W], [N, C, H, W], or [N, D]
/// with D a perfect square (a flattened MNIST digit).
fn layout(shape: &[usize]) -> Result<(usize, usize, usize, usize), RuntimeError> {
    match *shape {
        [n, c, h, w] if c == 1 || c == 3 => Ok((n, c, h, w)),
        [n, h, w] => Ok((n, 1, h, w)),
        [n, d] => {
            let side = (d as f64).sqrt().round() as usize;
            if side * side == d {
                Ok((n, 1, side, side))
            } else {
                Err(err(format!("a PNG grid needs images: [N, D] with D a square, [N, H, W] or [N, C, H, W]; found {shape:?}")))
            }
        }
        _ => Err(err(format!("a PNG grid needs images: [N, D] with D a square, [N, H, W] or [N, C, H, W] with C 1 or 3; found {shape:?}"))),
    }
}

/// Write the batch as one PNG image.
pub fn write_grid(path: &Path, t: &Tensor) -> Result<(), RuntimeError> {
    let (n, c, h, w) = layout(&t.shape)?;
    let v = t.to_f64();
    let pad = 2;
    let cols = n.clamp(1, 8);
    let rows = n.div_ceil(cols).max(1);
    let (gw, gh) = (cols * (w + pad) + pad, rows * (h + pad) + pad);
    let mut pixels = vec![0u8; gw * gh * c];
    for i in 0..n {
        let (oy, ox) = (pad + (i / cols) * (h + pad), pad + (i % cols) * (w + pad));
        for ch in 0..c {
            for y in 0..h {
                for x in 0..w {
                    let val = v[((i * c + ch) * h + y) * w + x];
                    let byte = (val.clamp(0.0, 1.0) * 255.0 + 0.5) as u8;
                    pixels[((oy + y) * gw + ox + x) * c + ch] = byte;
                }
            }
        }
    }
    std::fs::write(path, encode(gw, gh, c, &pixels)).map_err(|e| RuntimeError::Io(format!("cannot write {}: {e}", path.display())))
}

/// Write 8-bit RGB pixels (row-major, 3 bytes each) as a PNG file (`dlc plot`'s charts).
pub fn write_rgb(path: &Path, w: usize, h: usize, pixels: &[u8]) -> Result<(), RuntimeError> {
    std::fs::write(path, encode(w, h, 3, pixels)).map_err(|e| RuntimeError::Io(format!("cannot write {}: {e}", path.display())))
}

/// PNG bytes: signature, IHDR, one zlib IDAT of filter-0 scanlines, IEND.
fn encode(w: usize, h: usize, channels: usize, pixels: &[u8]) -> Vec<u8> {
    let mut raw = Vec::with_capacity(h * (w * channels + 1));
    for row in pixels.chunks(w * channels) {
        raw.push(0);
        raw.extend_from_slice(row);
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&raw).expect("writing to memory");
    let idat = z.finish().expect("writing to memory");
    let mut ihdr = Vec::new();
    ihdr.extend((w as u32).to_be_bytes());
    ihdr.extend((h as u32).to_be_bytes());
    ihdr.extend([8, if channels == 3 { 2 } else { 0 }, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    for (kind, data) in [(b"IHDR", &ihdr), (b"IDAT", &idat), (b"IEND", &Vec::new())] {
        out.extend((data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend(kind);
        out.extend(data.iter());
        let crc = crc32(&out[start..]);
        out.extend(crc.to_be_bytes());
    }
    out
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlc_language::types::DType;

    #[test]
    fn crc_matches_the_png_specification_example() {
        // The CRC of "IEND" with no data, as in every PNG file.
        assert_eq!(crc32(b"IEND"), 0xae42_6082);
    }

    #[test]
    fn grid_has_the_right_size_and_valid_structure() {
        let t = Tensor::from_f64(DType::F32, vec![3, 16], (0..48).map(|i| i as f64 / 47.0));
        let dir = std::env::temp_dir().join(format!("dlc-png-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("g.png");
        write_grid(&p, &t).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // 3 images of 4x4 in one row with 2-pixel borders: 3*6+2 = 20 wide, 4+4 = 8 high.
        assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 20);
        assert_eq!(u32::from_be_bytes(bytes[20..24].try_into().unwrap()), 8);
        assert!(layout(&[2, 15]).is_err());
        std::fs::remove_dir_all(dir).ok();
    }
}
