//! Arrays of a safetensors file as the rows of a data source: `safetensors(path, tensor: "x",
//! row: f32[784], labels: "y")`. Safetensors is the format dlc writes checkpoints in and Hugging
//! Face ships data and weights in: an 8-byte little-endian header length, a JSON header naming
//! each tensor's dtype, shape and byte range, then the bytes. The rows are read with positional
//! reads as an `npy` file's are (npy.rs), so a file larger than memory streams through the page
//! cache and the process holds only the rows in use.

use super::npy::{Header, Rows};
use super::{err, DataError};
use dlc_language::types::TensorTy;
use safetensors::tensor::{Dtype, Metadata};
use std::io::Read;
use std::path::Path;

/// Larger headers than this are not read (the format's own reference implementation refuses
/// headers over 100 MB): a length this large means the file is not safetensors.
const MOST_HEADER: u64 = 100 << 20;

/// The rows of tensor `name` in the file at `path`, as the declared `row` type.
pub fn rows(path: &Path, name: &str, row: &TensorTy) -> Result<Rows, DataError> {
    let mut file = std::fs::File::open(path).map_err(|e| err(path, format!("cannot read: {e}")))?;
    let mut n = [0u8; 8];
    file.read_exact(&mut n).map_err(|_| err(path, "not a safetensors file (shorter than its 8-byte header length)"))?;
    let n = u64::from_le_bytes(n);
    if n > MOST_HEADER {
        return Err(err(path, format!("not a safetensors file (its first 8 bytes give a header of {n} bytes)")));
    }
    let mut head = vec![0u8; n as usize];
    file.read_exact(&mut head).map_err(|_| err(path, format!("truncated: the header of {n} bytes is cut off")))?;
    // The safetensors crate's own header type (its checks of names, dtypes and offsets); its
    // `read_metadata` wants the whole file in memory, which a data set larger than it is not.
    let header: Metadata = serde_json::from_slice(&head).map_err(|e| err(path, format!("not a safetensors header: {e}")))?;
    let Some(info) = header.info(name) else {
        let mut names: Vec<String> = header.tensors().into_keys().collect();
        names.sort_unstable();
        return Err(err(path, format!("has no tensor `{name}` (it has {})", names.join(", "))));
    };
    let bad = |what: &str| err(path, format!("tensor `{name}`: {what}"));
    let (kind, size) = match info.dtype {
        Dtype::BOOL => ('b', 1),
        Dtype::U8 => ('u', 1),
        Dtype::I8 => ('i', 1),
        Dtype::U16 => ('u', 2),
        Dtype::I16 => ('i', 2),
        Dtype::U32 => ('u', 4),
        Dtype::I32 => ('i', 4),
        Dtype::U64 => ('u', 8),
        Dtype::I64 => ('i', 8),
        Dtype::F16 => ('f', 2),
        Dtype::BF16 => ('B', 2),
        Dtype::F32 => ('f', 4),
        Dtype::F64 => ('f', 8),
        other => return Err(bad(&format!("unsupported dtype {other:?} (bool, integers, f16, bf16, f32 and f64 are)"))),
    };
    let (shape, (begin, end)) = (info.shape.clone(), info.data_offsets);
    let needs = shape.iter().product::<usize>() * size;
    if end < begin || end - begin != needs {
        let dtype = info.dtype;
        return Err(bad(&format!("its byte range {begin}..{end} does not hold {dtype:?}{shape:?} ({needs} bytes)")));
    }
    let data_start = 8 + n as usize + begin;
    let len = file.metadata().map_err(|e| err(path, format!("cannot read: {e}")))?.len() as usize;
    let have = len.saturating_sub(data_start).min(end - begin);
    Rows::of(file, path, Header { kind, size, shape, data_start }, row, have)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlc_language::types::{DType, Dim};

    /// A safetensors file of `tensors` (name, dtype, shape, bytes), written by the crate.
    fn write(name: &str, tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> std::path::PathBuf {
        let views = tensors
            .iter()
            .map(|(n, dtype, shape, bytes)| (*n, safetensors::tensor::TensorView::new(*dtype, shape.clone(), bytes).unwrap()));
        let dir = std::env::temp_dir().join(format!("dlc-safetensors-rows-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, safetensors::serialize(views, None).unwrap()).unwrap();
        p
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn rows_of_named_tensors_read_on_demand() {
        let x: Vec<f32> = (0..12).map(|v| v as f32 * 0.5).collect();
        let y: Vec<u8> = [3i64, 1, 4].iter().flat_map(|v| v.to_le_bytes()).collect();
        let bf: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|v| half::bf16::from_f32(*v).to_le_bytes()).collect();
        let p = write(
            "d.safetensors",
            &[("y", Dtype::I64, vec![3], y), ("x", Dtype::F32, vec![3, 4], f32s(&x)), ("h", Dtype::BF16, vec![2], bf)],
        );
        let rows = super::rows(&p, "x", &TensorTy::new(DType::F32, vec![Dim::known(4)])).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows.row(2).unwrap().to_f64(), [4.0, 4.5, 5.0, 5.5]);
        let labels = super::rows(&p, "y", &TensorTy::new(DType::I64, vec![])).unwrap();
        assert_eq!((labels.row(0).unwrap().to_f64(), labels.row(2).unwrap().shape.len()), (vec![3.0], 0));
        let h = super::rows(&p, "h", &TensorTy::new(DType::F32, vec![])).unwrap();
        assert_eq!(h.row(1).unwrap().to_f64(), [-2.0]);
    }

    #[test]
    fn a_wrong_name_row_or_file_is_an_error_naming_what_is_there() {
        let p = write("e.safetensors", &[("x", Dtype::F32, vec![2, 3], f32s(&[0.0; 6]))]);
        let e = super::rows(&p, "images", &TensorTy::new(DType::F32, vec![Dim::known(3)])).err().unwrap();
        assert!(e.detail.contains("no tensor `images`") && e.detail.contains("it has x"), "{e}");
        let e = super::rows(&p, "x", &TensorTy::new(DType::F32, vec![Dim::known(4)])).err().unwrap();
        assert!(e.detail.contains("rows are [3]"), "{e}");
        let e = super::rows(&p, "x", &TensorTy::new(DType::I64, vec![Dim::known(3)])).err().unwrap();
        assert!(e.detail.contains("holds floats"), "{e}");
        // Cut off inside the data.
        let bytes = std::fs::read(&p).unwrap();
        let cut = p.with_file_name("cut.safetensors");
        std::fs::write(&cut, &bytes[..bytes.len() - 5]).unwrap();
        let e = super::rows(&cut, "x", &TensorTy::new(DType::F32, vec![Dim::known(3)])).err().unwrap();
        assert!(e.detail.contains("truncated"), "{e}");
        let not = p.with_file_name("not.safetensors");
        std::fs::write(&not, b"\xff\xff\xff\xff\xff\xff\xff\x7fhello").unwrap();
        assert!(super::rows(&not, "x", &TensorTy::new(DType::F32, vec![])).err().unwrap().detail.contains("not a safetensors file"));
    }
}
