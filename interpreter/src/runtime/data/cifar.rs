//! CIFAR-10's binary version: records of 1 label byte and 3,072 pixel bytes (1,024 red, green and
//! blue values, each plane 32x32 row-major), concatenated with no header.

use super::{err, DataError};
use crate::runtime::tensor::Tensor;
use dlc_language::types::DType;
use std::path::Path;

const RECORD: usize = 1 + 3 * 32 * 32;

/// Images as u8 [N, 3, 32, 32] and labels as i64 [N] from one or more record files.
pub fn read(files: &[&Path]) -> Result<(Tensor, Tensor), DataError> {
    let mut pixels = Vec::new();
    let mut labels = Vec::new();
    for f in files {
        let bytes = std::fs::read(f).map_err(|e| err(f, format!("cannot read: {e}")))?;
        if bytes.is_empty() || bytes.len() % RECORD != 0 {
            return Err(err(f, format!("{} bytes is not a whole number of {RECORD}-byte CIFAR-10 records", bytes.len())));
        }
        for (i, rec) in bytes.chunks(RECORD).enumerate() {
            if rec[0] > 9 {
                return Err(err(f, format!("record {i} has label {}, expected 0..9", rec[0])));
            }
            labels.push(rec[0] as f64);
            pixels.extend_from_slice(&rec[1..]);
        }
    }
    let n = labels.len();
    Ok((Tensor::u8(vec![n, 3, 32, 32], pixels), Tensor::from_f64(DType::I64, vec![n], labels)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::data::test_data;

    #[test]
    fn reads_the_bundled_subset() {
        let f = test_data("cifar-10/test_batch_first800.bin");
        let (x, y) = read(&[f.as_path()]).unwrap();
        assert_eq!(x.shape, vec![800, 3, 32, 32]);
        // First test labels, as published: 3, 8, 8, 0, 6, 6, 1, 6, 3, 1.
        assert_eq!(y.to_f64()[..10], [3.0, 8.0, 8.0, 0.0, 6.0, 6.0, 1.0, 6.0, 3.0, 1.0]);
    }
}
