//! IDX files: a big-endian header (magic `0x0000 <type> <ndims>`, then one u32 per dim) and the
//! values row-major. Only unsigned bytes (type 0x08) occur in MNIST-style data sets.

use super::{err, read_maybe_gz, DataError};
use crate::runtime::tensor::Tensor;
use dlc_language::types::DType;
use std::path::Path;

/// The array of an IDX file as a u8 tensor (gzip or raw).
pub fn read(path: &Path) -> Result<Tensor, DataError> {
    let bytes = read_maybe_gz(path)?;
    if bytes.len() < 4 {
        return Err(err(path, format!("not an IDX file: {} bytes, the header alone needs at least 4", bytes.len())));
    }
    if bytes[0] != 0 || bytes[1] != 0 {
        return Err(err(path, format!("not an IDX file: magic number starts {:02x} {:02x}, expected 00 00", bytes[0], bytes[1])));
    }
    if bytes[2] != 0x08 {
        return Err(err(path, format!("IDX element type 0x{:02x} is not supported (only unsigned bytes, 0x08)", bytes[2])));
    }
    let ndims = bytes[3] as usize;
    let header = 4 + 4 * ndims;
    if ndims == 0 || bytes.len() < header {
        return Err(err(path, format!("truncated IDX header: {ndims} dimensions need {header} bytes, the file has {}", bytes.len())));
    }
    let dims: Vec<usize> =
        (0..ndims).map(|i| u32::from_be_bytes([bytes[4 + 4 * i], bytes[5 + 4 * i], bytes[6 + 4 * i], bytes[7 + 4 * i]]) as usize).collect();
    let n: usize = dims.iter().product();
    let body = &bytes[header..];
    if body.len() != n {
        return Err(err(
            path,
            format!(
                "IDX header says {dims:?} ({n} values) but the file holds {} bytes of data{}",
                body.len(),
                if body.len() < n { ": truncated" } else { "" }
            ),
        ));
    }
    // The values in place: the header is dropped from the front of the one buffer.
    let mut bytes = bytes;
    bytes.drain(..header);
    Ok(Tensor::u8(dims, bytes))
}

/// An images file and its labels file, checked to agree on the count.
pub fn read_pair(images: &Path, labels: &Path) -> Result<(Tensor, Tensor), DataError> {
    let x = read(images)?;
    let y = read(labels)?;
    if y.shape.len() != 1 {
        return Err(err(labels, format!("labels should be one-dimensional, found shape {:?}", y.shape)));
    }
    if x.shape[0] != y.shape[0] {
        return Err(err(labels, format!("{} labels for {} images in {}", y.shape[0], x.shape[0], images.display())));
    }
    Ok((x, y.cast(DType::I64)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::data::test_data;

    #[test]
    fn reads_real_mnist() {
        let (x, y) = read_pair(&test_data("mnist/t10k-images-idx3-ubyte.gz"), &test_data("mnist/t10k-labels-idx1-ubyte.gz")).unwrap();
        assert_eq!(x.shape, vec![10000, 28, 28]);
        // First test labels, as published: 7, 2, 1, 0, 4, 1, 4, 9, 5, 9.
        assert_eq!(y.to_f64()[..10], [7.0, 2.0, 1.0, 0.0, 4.0, 1.0, 4.0, 9.0, 5.0, 9.0]);
        let v = x.to_f64();
        assert!(v.iter().all(|p| (0.0..=255.0).contains(p)));
    }

    #[test]
    fn rejects_corrupt_and_truncated_files() {
        let dir = std::env::temp_dir().join(format!("dlc-idx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad_magic = dir.join("bad.idx");
        std::fs::write(&bad_magic, [1u8, 2, 8, 1, 0, 0, 0, 1, 5]).unwrap();
        assert!(read(&bad_magic).unwrap_err().detail.contains("magic"));
        let truncated = dir.join("short.idx");
        std::fs::write(&truncated, [0u8, 0, 8, 1, 0, 0, 0, 4, 5, 6]).unwrap();
        let e = read(&truncated).unwrap_err();
        assert!(e.detail.contains("truncated"), "{e}");
        let short_header = dir.join("hdr.idx");
        std::fs::write(&short_header, [0u8, 0, 8, 3, 0, 0]).unwrap();
        assert!(read(&short_header).unwrap_err().detail.contains("truncated IDX header"));
        assert!(read(&dir.join("missing.idx")).unwrap_err().detail.contains("cannot read"));
    }
}
