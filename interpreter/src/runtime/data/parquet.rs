//! Apache Parquet files: each declared field read from the top-level column of its name (a
//! number column for a 0-d type, a LIST column of numbers, nested as the shape is or flat, for a
//! shaped one; fields.rs says how a value becomes a tensor), through the parquet crate's row API
//! with only those columns projected.
//!
//! Opening reads the footer (a corrupt or missing one stops there, naming the file) and checks
//! the columns against the declared types. Rows are read by row group, the unit Parquet
//! compresses: row `i` is in the group its metadata's row counts place it in, and asking for it
//! decodes that whole group, which is then kept (row_groups.rs: up to `CACHE_BYTES` of decoded
//! groups, shared by the feed's workers). So an epoch read in order decodes each group once, and
//! a shuffled epoch does too while the decoded file fits the cache; a larger file read in a
//! shuffled order decodes a group for most rows it reads, which is slow: give such a data set
//! smaller row groups, or read it in order.

use super::contained::contained;
use super::fields::{bytes, to_tensor, AsCell, Cell};
use super::row_groups::RowGroups;
use super::{err, DataError};
use crate::runtime::tensor::Tensor;
use ::parquet::basic::{LogicalType, Repetition, Type as Physical};
use ::parquet::file::reader::{ChunkReader, FileReader, Length, SerializedFileReader};
use ::parquet::record::{Field, Row};
use ::parquet::schema::types::{Type, TypePtr};
use dlc_language::types::TensorTy;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The decoded row groups kept at most, in bytes of tensor values (and a little for each
/// tensor's header).
pub const CACHE_BYTES: usize = 256 << 20;

/// A row group's rows, each its tensors or what was wrong with it.
type Group = Vec<Result<Vec<Tensor>, String>>;

pub struct ParquetRows {
    path: PathBuf,
    reader: SerializedFileReader<PosFile>,
    /// The first row of each row group, and the row count at the end.
    starts: Vec<usize>,
    /// The file's schema with only the declared fields' columns.
    projection: Type,
    fields: Vec<(String, TensorTy)>,
    groups: RowGroups<Group>,
}

/// The file, read with positional reads: the feed's workers share it without sharing a file
/// offset (the crate's own `File` reader seeks a shared one).
struct PosFile {
    file: Arc<File>,
    len: u64,
}

/// A reader of a `PosFile` from an offset on.
struct PosRead {
    file: Arc<File>,
    at: u64,
}

impl std::io::Read for PosRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

impl Length for PosFile {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for PosFile {
    type T = std::io::BufReader<PosRead>;

    fn get_read(&self, start: u64) -> ::parquet::errors::Result<Self::T> {
        Ok(std::io::BufReader::new(PosRead { file: Arc::clone(&self.file), at: start }))
    }

    fn get_bytes(&self, start: u64, length: usize) -> ::parquet::errors::Result<::bytes::Bytes> {
        let mut buf = vec![0; length];
        self.file.read_exact_at(&mut buf, start).map_err(|e| {
            ::parquet::errors::ParquetError::EOF(format!("cannot read {length} bytes at offset {start} of a {}-byte file: {e}", self.len))
        })?;
        Ok(buf.into())
    }
}

impl AsCell for Field {
    fn cell(&self) -> Cell<'_, Self> {
        let int = |v: f64| Cell::Num { value: v, integral: true };
        let float = |v: f64| Cell::Num { value: v, integral: false };
        match self {
            Field::Null => Cell::Null,
            Field::Bool(b) => Cell::Bool(*b),
            Field::Byte(x) => int(*x as f64),
            Field::Short(x) => int(*x as f64),
            Field::Int(x) => int(*x as f64),
            Field::Long(x) => int(*x as f64),
            Field::UByte(x) => int(*x as f64),
            Field::UShort(x) => int(*x as f64),
            Field::UInt(x) => int(*x as f64),
            Field::ULong(x) => int(*x as f64),
            Field::Float16(x) => float(x.to_f64()),
            Field::Float(x) => float(*x as f64),
            Field::Double(x) => float(*x),
            Field::ListInternal(list) => Cell::List(list.elements()),
            Field::Str(_) => Cell::Other("a string"),
            Field::Bytes(_) => Cell::Other("bytes"),
            Field::Decimal(_) => Cell::Other("a decimal"),
            Field::Group(_) => Cell::Other("a group of columns (a struct)"),
            Field::MapInternal(_) => Cell::Other("a map"),
            _ => Cell::Other("a date or a time"),
        }
    }
}

/// A panic's message (the crate's readers panic on some malformed input).
/// Whether column `col` can hold `ty`: numbers at its leaves, and nested (a list) exactly when
/// `ty` has dimensions; otherwise what is wrong.
fn check_column(col: &Type, name: &str, ty: &TensorTy) -> Result<(), String> {
    fn leaves<'a>(t: &'a Type, out: &mut Vec<&'a Type>) {
        match t.is_primitive() {
            true => out.push(t),
            false => t.get_fields().iter().for_each(|f| leaves(f, out)),
        }
    }
    let mut found = vec![];
    leaves(col, &mut found);
    for leaf in found {
        let float16 = matches!(leaf.get_basic_info().logical_type_ref(), Some(LogicalType::Float16));
        let physical = leaf.get_physical_type();
        if !matches!(physical, Physical::BOOLEAN | Physical::INT32 | Physical::INT64 | Physical::FLOAT | Physical::DOUBLE) && !float16 {
            return Err(format!("column `{name}` holds {physical} values, not numbers"));
        }
    }
    let nested = !col.is_primitive() || col.get_basic_info().repetition() == Repetition::REPEATED;
    match (nested, ty.rank()) {
        (true, 0) => Err(format!("column `{name}` is a list, but the source declares `{name}: {ty}` (one number a row)")),
        (false, r) if r > 0 => Err(format!("column `{name}` holds one number a row, but the source declares `{name}: {ty}`")),
        _ => Ok(()),
    }
}

impl ParquetRows {
    /// Open `path` and check its columns against `fields`.
    pub fn open(path: &Path, fields: &[(String, TensorTy)]) -> Result<ParquetRows, DataError> {
        let file = File::open(path).map_err(|e| err(path, format!("cannot read: {e}")))?;
        let len = file.metadata().map_err(|e| err(path, format!("cannot read: {e}")))?.len();
        let pos = PosFile { file: Arc::new(file), len };
        let reader = match contained(|| SerializedFileReader::new(pos)) {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(err(path, format!("not a readable Parquet file (its footer): {e}"))),
            Err(p) => return Err(err(path, format!("not a readable Parquet file (its footer): {p}"))),
        };
        let meta = reader.metadata();
        let schema = meta.file_metadata().schema();
        let columns: Vec<&TypePtr> = schema.get_fields().iter().collect();
        let mut selected = vec![];
        for (name, ty) in fields {
            let Some(col) = columns.iter().find(|c| c.name() == name) else {
                let names: Vec<&str> = columns.iter().map(|c| c.name()).collect();
                return Err(err(path, format!("has no column `{name}` (its columns: {})", names.join(", "))));
            };
            check_column(col, name, ty).map_err(|e| err(path, e))?;
            selected.push(Arc::clone(col));
        }
        // The file's column order: a projection is a part of the schema as it is.
        selected.sort_by_key(|c| columns.iter().position(|x| Arc::ptr_eq(x, c)));
        let projection = Type::group_type_builder(schema.name())
            .with_fields(selected)
            .build()
            .map_err(|e| err(path, format!("cannot select the columns: {e}")))?;
        let mut starts = vec![0usize];
        for (g, rg) in meta.row_groups().iter().enumerate() {
            let n = usize::try_from(rg.num_rows()).map_err(|_| err(path, format!("row group {g} has {} rows", rg.num_rows())))?;
            starts.push(starts[g] + n);
        }
        if starts.last() == Some(&0) {
            return Err(err(path, "holds no rows"));
        }
        let groups = RowGroups::new(starts.len() - 1, CACHE_BYTES);
        Ok(ParquetRows { path: path.to_path_buf(), reader, starts, projection, fields: fields.to_vec(), groups })
    }

    pub fn len(&self) -> usize {
        *self.starts.last().expect("one entry at least")
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many row groups the file has.
    pub fn row_groups(&self) -> usize {
        self.starts.len() - 1
    }

    /// Row `i` (counted from 0 over the whole file): its fields' tensors, in the declared order.
    pub fn read(&self, i: usize) -> Result<Vec<Tensor>, DataError> {
        let g = self.starts.partition_point(|s| *s <= i) - 1;
        let group = self.groups.get(g, || self.decode(g), |rows| rows.iter().flatten().flatten().map(|t| bytes(t) + 64).sum());
        let r = i - self.starts[g];
        group[r].clone().map_err(|detail| err(&self.path, format!("row {i} (row group {g}, row {r} of it): {detail}")))
    }

    /// Every row of group `g`, or what was wrong with each: a row the reader could not give (a
    /// corrupt page, a group shorter than its metadata says) gets the reader's error, and so do
    /// the rows after it.
    fn decode(&self, g: usize) -> Group {
        let n = self.starts[g + 1] - self.starts[g];
        let mut rows: Group = Vec::with_capacity(n);
        let run = contained(|| -> Result<(), String> {
            let group = self.reader.get_row_group(g).map_err(|e| e.to_string())?;
            let iter = group.get_row_iter(Some(self.projection.clone())).map_err(|e| e.to_string())?;
            for row in iter.take(n) {
                rows.push(self.element(&row.map_err(|e| e.to_string())?));
            }
            Ok(())
        });
        let failed = match run {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(p) => Some(format!("the Parquet reader failed: {p}")),
        };
        let got = rows.len();
        let short = "it holds fewer rows than its metadata says (cut short?)";
        let why = match failed {
            Some(e) if e.contains("end of column data") => format!("the row group cannot be read from its row {got} on: {e}: {short}"),
            Some(e) => format!("the row group cannot be read from its row {got} on: {e}"),
            None => format!("the row group ends after {got} of its {n} rows: {short}"),
        };
        rows.resize(n, Err(why));
        rows
    }

    /// A decoded row's declared fields as tensors.
    fn element(&self, row: &Row) -> Result<Vec<Tensor>, String> {
        self.fields
            .iter()
            .map(|(name, ty)| match row.get_column_iter().find(|(n, _)| *n == name) {
                Some((_, v)) => to_tensor(name, ty, v),
                None => Err(format!("no column `{name}`")),
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "parquet_tests.rs"]
mod tests;
