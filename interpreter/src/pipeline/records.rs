//! The elements of a record source, `jsonl(path, fields: ...)` or `parquet(path, fields: ...)`:
//! read by index from the file when the feed's workers ask for them (runtime/data/jsonl.rs,
//! parquet.rs), each declared field a tensor in the declared order. With `on_error: "skip"` a
//! record that cannot be read is left out of its batch and counted, and each epoch's end warns
//! how many and names the first, as an `images` folder's unreadable files are.

use super::{data_err, str_arg, Elements};
use crate::runtime::data::jsonl::JsonLines;
use crate::runtime::data::parquet::ParquetRows;
use crate::runtime::data::{DataError, Skipped};
use crate::runtime::RuntimeError;
use dlc_language::eval::data_fields::{record_fields, skips};
use dlc_language::eval::value::Stage;
use std::path::Path;
use std::sync::Arc;

enum Reader {
    Jsonl(JsonLines),
    Parquet(ParquetRows),
}

pub struct Records {
    reader: Reader,
    /// `on_error: "skip"`.
    pub skip: bool,
    /// Records left out so far, and the first one's error.
    pub skipped: Skipped,
}

/// A `jsonl` or `parquet` source, opened (a JSON Lines file indexed, a Parquet file's footer read
/// and its columns checked).
pub fn open(root: &Path, src: &Stage) -> Result<Elements, RuntimeError> {
    let path = crate::paths::in_program(root, &str_arg(src, "path").unwrap_or_default());
    let fields = src.arg("fields").ok_or_else(|| "`fields` is missing".to_string()).and_then(record_fields);
    let fields = fields.map_err(|message| RuntimeError::Data { message, span: src.span })?;
    let reader = match src.kind {
        "jsonl" => JsonLines::open(&path, &fields).map(Reader::Jsonl),
        _ => ParquetRows::open(&path, &fields).map(Reader::Parquet),
    };
    let reader = reader.map_err(|e| data_err(e, src.span))?;
    let skip = skips(src.arg("on_error")).unwrap_or(false);
    let records = Records { reader, skip, skipped: Skipped::default() };
    Ok(Elements::Records { records: Arc::new(records), span: src.span })
}

impl Records {
    pub fn len(&self) -> usize {
        match &self.reader {
            Reader::Jsonl(r) => r.len(),
            Reader::Parquet(r) => r.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Record `i`.
    pub fn read(&self, i: usize) -> Result<super::Element, DataError> {
        match &self.reader {
            Reader::Jsonl(r) => r.read(i),
            Reader::Parquet(r) => r.read(i),
        }
    }
}
