//! NumPy `.npy` files (format versions 1, 2 and 3): little-endian bool, u8, i8..i64, u16..u64,
//! f16, f32 and f64 arrays in C order. The first dimension is the row count; the rest must match
//! the row type the program declares (`npy(path, row: f32[28, 28])`).

use super::{err, read_maybe_gz, DataError};
use crate::runtime::tensor::Tensor;
use dlc_language::types::{DType, TensorTy};
use std::path::Path;

/// The array's element kind (NumPy's `b`, `u`, `i`, `f`, and `B` for bf16, which safetensors
/// files hold), size in bytes, and shape, from the header; and where its data start.
pub(super) struct Header {
    pub kind: char,
    pub size: usize,
    pub shape: Vec<usize>,
    pub data_start: usize,
}

fn header(path: &Path, bytes: &[u8]) -> Result<Header, DataError> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(err(path, "not a .npy file (the magic bytes \\x93NUMPY are missing)"));
    }
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        v => return Err(err(path, format!("unsupported .npy format version {v}"))),
    };
    let text = bytes.get(start..start + len).ok_or_else(|| err(path, "the header is truncated"))?;
    let text = std::str::from_utf8(text).map_err(|_| err(path, "the header is not text"))?;
    let field = |key: &str| -> Option<&str> {
        let at = text.find(&format!("'{key}'"))? + key.len() + 2;
        Some(text[at..].trim_start().trim_start_matches(':').trim_start())
    };
    let descr = field("descr").and_then(|s| s.strip_prefix('\'')).and_then(|s| s.split('\'').next());
    let descr = descr.ok_or_else(|| err(path, "the header has no 'descr'"))?;
    if field("fortran_order").is_some_and(|s| s.starts_with("True")) {
        return Err(err(path, "Fortran-order arrays are not supported: save with np.ascontiguousarray"));
    }
    let shape_text = field("shape").and_then(|s| s.strip_prefix('(')).and_then(|s| s.split(')').next());
    let shape_text = shape_text.ok_or_else(|| err(path, "the header has no 'shape'"))?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| err(path, format!("bad shape entry `{s}` in the header"))))
        .collect::<Result<Vec<_>, _>>()?;
    let mut chars = descr.chars();
    let order = chars.next().unwrap_or('?');
    let kind = chars.next().unwrap_or('?');
    let size: usize = chars.as_str().parse().unwrap_or(0);
    let known = matches!((kind, size), ('b', 1) | ('u', 1 | 2 | 4 | 8) | ('i', 1 | 2 | 4 | 8) | ('f', 2 | 4 | 8));
    if order == '>' || !known {
        return Err(err(path, format!("unsupported dtype '{descr}' (little-endian bool, integers and floats are)")));
    }
    Ok(Header { kind, size, shape, data_start: start + len })
}

fn decode(kind: char, size: usize, b: &[u8]) -> f64 {
    let mut a = [0u8; 8];
    a[..size].copy_from_slice(b);
    match (kind, size) {
        ('b', _) | ('u', 1) => b[0] as f64,
        ('u', 2) => u16::from_le_bytes([a[0], a[1]]) as f64,
        ('u', 4) => u32::from_le_bytes([a[0], a[1], a[2], a[3]]) as f64,
        ('u', _) => u64::from_le_bytes(a) as f64,
        ('i', 1) => b[0] as i8 as f64,
        ('i', 2) => i16::from_le_bytes([a[0], a[1]]) as f64,
        ('i', 4) => i32::from_le_bytes([a[0], a[1], a[2], a[3]]) as f64,
        ('i', _) => i64::from_le_bytes(a) as f64,
        ('f', 2) => half::f16::from_le_bytes([a[0], a[1]]).to_f64(),
        ('B', _) => half::bf16::from_le_bytes([a[0], a[1]]).to_f64(),
        ('f', 4) => f32::from_le_bytes([a[0], a[1], a[2], a[3]]) as f64,
        _ => f64::from_le_bytes(a),
    }
}

/// A `.npy` file's bytes, format 1.0: the magic, the header (`descr` such as `<f4`, C order,
/// `shape`) padded to a multiple of 64 bytes, then `data`, little-endian.
pub fn encode(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let shape = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        dims => format!("({})", dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    header.push_str(&" ".repeat((64 - (10 + header.len() + 1) % 64) % 64));
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(data);
    out
}

/// Check the header against the declared row type: the file's dimensions after the first must
/// match `row`'s known dimensions, floats are not read into integer rows, and the data (`have`
/// bytes after the header) must be all there.
pub(super) fn check(path: &Path, h: &Header, row: &TensorTy, have: usize) -> Result<(), DataError> {
    if h.shape.is_empty() {
        return Err(err(path, "a 0-d array has no rows"));
    }
    let file_row = &h.shape[1..];
    let fits = file_row.len() == row.shape.len()
        && file_row.iter().zip(&row.shape).all(|(f, d)| d.as_known().map(|k| k as usize == *f).unwrap_or(true));
    if !fits {
        return Err(err(path, format!("rows are {:?} ({} rows), but the source declares `row: {row}`", file_row, h.shape[0])));
    }
    if matches!(h.kind, 'f' | 'B') && !matches!(row.dtype, DType::F16 | DType::BF16 | DType::F32 | DType::F64) {
        return Err(err(path, format!("holds floats (f{}), but the source declares {} rows", h.size * 8, row.dtype)));
    }
    let n: usize = h.shape.iter().product();
    if have < n * h.size {
        return Err(err(path, format!("truncated: the header promises {} bytes of data, the file has {have}", n * h.size)));
    }
    Ok(())
}

/// `bytes` of `h`'s element kind as a tensor of `dtype` and `shape` (f32 data into f32 rows
/// without going through f64).
fn values(h: &Header, dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Tensor {
    if (h.kind, h.size, dtype) == ('f', 4, DType::F32) {
        let v: Vec<f32> = bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        return Tensor { dtype, shape, data: crate::runtime::tensor::Data::F32(std::sync::Arc::new(v)) };
    }
    Tensor::from_f64(dtype, shape, bytes.chunks_exact(h.size).map(|c| decode(h.kind, h.size, c)))
}

/// Read the file as rows of `row` (the declared element type), all of it at once.
pub fn read(path: &Path, row: &TensorTy) -> Result<Tensor, DataError> {
    let bytes = read_maybe_gz(path)?;
    let h = header(path, &bytes)?;
    let data = &bytes[h.data_start.min(bytes.len())..];
    check(path, &h, row, data.len())?;
    let n: usize = h.shape.iter().product();
    Ok(values(&h, row.dtype, h.shape.clone(), &data[..n * h.size]))
}

/// An uncompressed `.npy` file read a row at a time with positional reads, on any thread: a
/// data set larger than memory streams through the page cache, and the process holds only the
/// rows it is using.
pub struct Rows {
    file: std::fs::File,
    path: std::path::PathBuf,
    h: Header,
    dtype: DType,
    row_bytes: usize,
}

impl Rows {
    /// The file's rows of the declared type; `None` for a gzip file (it must be read whole).
    pub fn open(path: &Path, row: &TensorTy) -> Result<Option<Rows>, DataError> {
        use std::io::Read;
        let mut file = std::fs::File::open(path).map_err(|e| err(path, format!("cannot read: {e}")))?;
        let mut head = vec![0u8; 4096];
        let got = file.read(&mut head).map_err(|e| err(path, format!("cannot read: {e}")))?;
        if head[..got].starts_with(&[0x1f, 0x8b]) {
            return Ok(None);
        }
        let mut h = header(path, &head[..got])?;
        if h.data_start > got {
            // A header longer than the first read: read it whole.
            let bytes = std::fs::read(path).map_err(|e| err(path, format!("cannot read: {e}")))?;
            h = header(path, &bytes)?;
        }
        let len = file.metadata().map_err(|e| err(path, format!("cannot read: {e}")))?.len() as usize;
        let have = len.saturating_sub(h.data_start);
        Rows::of(file, path, h, row, have).map(Some)
    }

    /// The rows of `h`'s array in `file` (`have` bytes of data from `h.data_start`), checked
    /// against the declared `row` type.
    pub(super) fn of(file: std::fs::File, path: &Path, h: Header, row: &TensorTy, have: usize) -> Result<Rows, DataError> {
        check(path, &h, row, have)?;
        let row_bytes = h.shape[1..].iter().product::<usize>() * h.size;
        Ok(Rows { file, path: path.to_path_buf(), dtype: row.dtype, row_bytes, h })
    }

    pub fn len(&self) -> usize {
        self.h.shape[0]
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i`, read from the file now.
    pub fn row(&self, i: usize) -> Result<Tensor, DataError> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; self.row_bytes];
        let at = (self.h.data_start + i * self.row_bytes) as u64;
        self.file.read_exact_at(&mut buf, at).map_err(|e| err(&self.path, format!("cannot read row {i}: {e}")))?;
        Ok(values(&self.h, self.dtype, self.h.shape[1..].to_vec(), &buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlc_language::types::Dim;

    fn write(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("dlc-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn reads_f32_rows_and_int_labels() {
        let data: Vec<u8> = [1.5f32, -2.0, 3.0, 4.25].iter().flat_map(|v| v.to_le_bytes()).collect();
        let p = write("x.npy", &encode("<f4", &[2, 2], &data));
        let t = read(&p, &TensorTy::new(DType::F32, vec![Dim::known(2)])).unwrap();
        assert_eq!(t.shape, vec![2, 2]);
        assert_eq!(t.to_f64(), vec![1.5, -2.0, 3.0, 4.25]);
        let labels: Vec<u8> = [7i64, 1].iter().flat_map(|v| v.to_le_bytes()).collect();
        let p = write("y.npy", &encode("<i8", &[2], &labels));
        let y = read(&p, &TensorTy::new(DType::I64, vec![])).unwrap();
        assert_eq!(y.to_f64(), vec![7.0, 1.0]);
    }

    #[test]
    fn rejects_mismatched_rows_truncation_and_float_into_int() {
        let data: Vec<u8> = [0f32; 6].iter().flat_map(|v| v.to_le_bytes()).collect();
        let p = write("m.npy", &encode("<f4", &[2, 3], &data));
        let e = read(&p, &TensorTy::new(DType::F32, vec![Dim::known(4)])).unwrap_err();
        assert!(e.detail.contains("rows are [3]") && e.detail.contains("f32[4]"), "{e}");
        let e = read(&p, &TensorTy::new(DType::I64, vec![Dim::known(3)])).unwrap_err();
        assert!(e.detail.contains("holds floats"), "{e}");
        let p = write("t.npy", &encode("<f4", &[2, 3], &data[..10]));
        let e = read(&p, &TensorTy::new(DType::F32, vec![Dim::known(3)])).unwrap_err();
        assert!(e.detail.contains("truncated"), "{e}");
        let p = write("bad.npy", b"hello world");
        assert!(read(&p, &TensorTy::new(DType::F32, vec![])).unwrap_err().detail.contains("magic"));
        let p = write("t2.npy", &encode("<f4", &[2, 3], &data[..10]));
        let e = Rows::open(&p, &TensorTy::new(DType::F32, vec![Dim::known(3)])).err().expect("truncated");
        assert!(e.detail.contains("truncated"), "{e}");
    }

    #[test]
    fn rows_read_on_demand_equal_the_whole_read() {
        let data: Vec<u8> = (0..12).flat_map(|v| (v as f32 * 0.5).to_le_bytes()).collect();
        let p = write("r.npy", &encode("<f4", &[4, 3], &data));
        let ty = TensorTy::new(DType::F32, vec![Dim::known(3)]);
        let whole = read(&p, &ty).unwrap().to_f64();
        let rows = Rows::open(&p, &ty).unwrap().expect("not gzip");
        assert_eq!(rows.len(), 4);
        for i in [3, 0, 2, 1] {
            assert_eq!(rows.row(i).unwrap().to_f64(), whole[i * 3..i * 3 + 3], "row {i}");
        }
        let labels: Vec<u8> = [7i16, -1, 3, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
        let p = write("l.npy", &encode("<i2", &[4], &labels));
        let y = Rows::open(&p, &TensorTy::new(DType::I64, vec![])).unwrap().expect("not gzip");
        assert_eq!(y.row(1).unwrap().to_f64(), vec![-1.0]);
        assert_eq!(y.row(1).unwrap().shape, Vec::<usize>::new());
    }
}
