//! Readers of the data formats DL sources name: IDX (MNIST, Fashion-MNIST; gzip or raw), the
//! CIFAR-10 binary records, CSV, NumPy .npy, plain text, WebDataset tar shards, JSON Lines and Parquet
//! (`fields.rs` their records' fields as the declared tensors). Each validates what it reads and fails with the
//! file and, for CSV, the row and column.

pub mod cifar;
pub mod contained;
pub mod csv;
pub mod fields;
pub mod glob;
pub mod idx;
pub mod images;
pub mod jsonl;
pub mod npy;
pub mod parquet;
pub mod resize;
pub mod row_groups;
pub mod safetensors_rows;
pub mod shards;
pub mod text;

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{}: {detail}", path.display(), row.map(|r| format!(", row {r}")).unwrap_or_default())]
pub struct DataError {
    pub path: PathBuf,
    /// 1-based row of a text format, when the problem is in one row.
    pub row: Option<usize>,
    pub detail: String,
}

/// What a source left out under `on_error: "skip"`: how many elements so far, and the first
/// one's error (said at each epoch's end). Shared by the feed's workers.
#[derive(Debug, Default)]
pub struct Skipped {
    count: std::sync::atomic::AtomicUsize,
    first: std::sync::Mutex<Option<String>>,
}

impl Skipped {
    /// Count one element left out because of `e`.
    pub fn note(&self, e: &DataError) {
        self.count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.first.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(|| e.to_string());
    }

    /// How many were left out so far, and the first one's error.
    pub fn so_far(&self) -> (usize, Option<String>) {
        let first = self.first.lock().unwrap_or_else(|p| p.into_inner()).clone();
        (self.count.load(std::sync::atomic::Ordering::Relaxed), first)
    }
}

pub(crate) fn err(path: &Path, detail: impl Into<String>) -> DataError {
    DataError { path: path.to_path_buf(), row: None, detail: detail.into() }
}

/// The whole file, gunzipped when it is gzip (by magic bytes, not by name).
pub(crate) fn read_maybe_gz(path: &Path) -> Result<Vec<u8>, DataError> {
    let raw = std::fs::read(path).map_err(|e| err(path, format!("cannot read: {e}")))?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..]).read_to_end(&mut out).map_err(|e| err(path, format!("corrupt gzip data: {e}")))?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// The repository's examples/data, for tests.
#[cfg(test)]
pub(crate) fn test_data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/data").join(rel)
}
