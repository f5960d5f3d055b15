//! Where an epoch's elements come from: prepared in memory (the source decoded and the stages
//! before the first epoch-dependent one applied, once a run), or read from the files as the
//! feed's workers ask for them (an uncompressed `npy` source, an `images` folder, `shards`
//! tar files, or `jsonl` and `parquet` records (records.rs), whose whole pipeline streams), so
//! that a data set larger than memory trains with the memory of the batches in flight, and
//! images are decoded on the workers.

use super::{data_err, npy_types, str_arg, Element};
use crate::runtime::data::images::ImageFolder;
use crate::runtime::data::shards::ShardSet;
use crate::runtime::data::{npy, safetensors_rows};
use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use dlc_language::eval::value::Stage;
use dlc_language::eval::Value;
use dlc_language::types::DType;
use dlc_language::Span;
use std::path::Path;
use std::sync::Arc;

#[derive(Clone)]
pub enum Elements {
    Memory(Arc<Vec<Element>>),
    /// An `npy` source's rows, and its labels' rows, read when asked for.
    Rows {
        x: Arc<npy::Rows>,
        y: Option<Arc<npy::Rows>>,
        span: Span,
    },
    /// An `images` folder's files, decoded when asked for.
    Images {
        folder: Arc<ImageFolder>,
        span: Span,
    },
    /// A `jsonl` or `parquet` source's records, read when asked for.
    Records {
        records: Arc<super::records::Records>,
        span: Span,
    },
    /// A `shards` source's samples (WebDataset tar files), read and decoded when asked for.
    Shards {
        set: Arc<ShardSet>,
        span: Span,
    },
    /// A `shards` source read whole (its pipeline does not stream), with the shard each element
    /// came from and how many shards there are (`grouped.rs`).
    Sharded {
        elems: Arc<Vec<Element>>,
        shards: Arc<Vec<u32>>,
        count: usize,
    },
}

impl Elements {
    pub fn len(&self) -> usize {
        match self {
            Elements::Memory(v) => v.len(),
            Elements::Rows { x, .. } => x.len(),
            Elements::Images { folder, .. } => folder.len(),
            Elements::Records { records, .. } => records.len(),
            Elements::Shards { set, .. } => set.len(),
            Elements::Sharded { elems, .. } => elems.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i`, or `None` when it could not be read and the source skips such elements
    /// (`on_error: "skip"`; counted, see `skipped`).
    pub fn get_or_skip(&self, i: usize) -> Result<Option<Element>, RuntimeError> {
        let (read, skip, skipped, span) = match self {
            Elements::Images { folder, span } => (folder.get(i).map(labelled), folder.skip, &folder.skipped, span),
            Elements::Shards { set, span } => (set.get(i).map(labelled), set.skips(), &set.skipped, span),
            Elements::Records { records, span } => (records.read(i), records.skip, &records.skipped, span),
            _ => return self.get(i).map(Some),
        };
        match read {
            Ok(e) => Ok(Some(e)),
            Err(e) if skip => {
                skipped.note(&e);
                Ok(None)
            }
            Err(e) => Err(data_err(e, *span)),
        }
    }

    /// Elements left out so far because they could not be read, and the first one's error.
    pub fn skipped(&self) -> (usize, Option<String>) {
        match self {
            Elements::Images { folder, .. } => folder.skipped.so_far(),
            Elements::Records { records, .. } => records.skipped.so_far(),
            Elements::Shards { set, .. } => set.skipped.so_far(),
            _ => (0, None),
        }
    }

    /// Element `i` where the source holds it in memory (read, not copied).
    pub fn held(&self, i: usize) -> Option<&Element> {
        match self {
            Elements::Memory(v) | Elements::Sharded { elems: v, .. } => v.get(i),
            _ => None,
        }
    }

    /// Element `i`.
    pub fn get(&self, i: usize) -> Result<Element, RuntimeError> {
        match self {
            Elements::Memory(v) => Ok(v[i].clone()),
            Elements::Rows { x, y, span } => {
                let mut e = vec![x.row(i).map_err(|e| data_err(e, *span))?];
                if let Some(y) = y {
                    e.push(y.row(i).map_err(|e| data_err(e, *span))?);
                }
                Ok(e)
            }
            Elements::Images { folder, span } => folder.get(i).map(labelled).map_err(|e| data_err(e, *span)),
            Elements::Records { records, span } => records.read(i).map_err(|e| data_err(e, *span)),
            Elements::Shards { set, span } => set.get(i).map(labelled).map_err(|e| data_err(e, *span)),
            Elements::Sharded { elems, .. } => Ok(elems[i].clone()),
        }
    }

    /// How many shards the source has (a `shards` source; 0 for any other).
    pub fn shard_count(&self) -> usize {
        match self {
            Elements::Shards { set, .. } => set.files.len(),
            Elements::Sharded { count, .. } => *count,
            _ => 0,
        }
    }

    /// The shard element `i` came from (a `shards` source).
    pub fn shard_of(&self, i: usize) -> Option<u32> {
        match self {
            Elements::Shards { set, .. } => Some(set.shard_of(i)),
            Elements::Sharded { shards, .. } => Some(shards[i]),
            _ => None,
        }
    }

    /// Every element, in order, but those skipped (a pipeline that does not stream applies its
    /// stages to all).
    pub fn all(&self) -> Result<Vec<Element>, RuntimeError> {
        match self {
            Elements::Memory(v) | Elements::Sharded { elems: v, .. } => Ok((**v).clone()),
            other => Ok((0..other.len()).map(|i| other.get_or_skip(i)).collect::<Result<Vec<_>, _>>()?.into_iter().flatten().collect()),
        }
    }
}

/// An image source's element, `(image, label)`, from a decoded image and its class index.
fn labelled((image, label): (Tensor, i64)) -> Element {
    vec![image, Tensor::from_f64(DType::I64, vec![], [label as f64])]
}

/// An image source's `size: (h, w)`, `channels` (3 unless given) and whether it skips what it
/// cannot read (`on_error: "skip"`): `images` and `shards` read their images alike.
pub(super) fn image_args(src: &Stage) -> (Option<(usize, usize)>, usize, bool) {
    let size = match src.arg("size") {
        Some(Value::Tuple(hw)) if hw.len() == 2 => hw[0].as_int().zip(hw[1].as_int()).map(|(h, w)| (h as usize, w as usize)),
        Some(v) => v.as_int().map(|s| (s as usize, s as usize)),
        None => None,
    };
    let channels = src.arg("channels").and_then(|v| v.as_int()).unwrap_or(3) as usize;
    (size, channels, str_arg(src, "on_error").as_deref() == Some("skip"))
}

/// An `images` source's folder, listed (its images are decoded when read).
pub fn image_folder(root: &Path, src: &Stage) -> Result<Elements, RuntimeError> {
    let dir = crate::paths::in_program(root, &str_arg(src, "dir").unwrap_or_default());
    let (size, channels, skip) = image_args(src);
    let folder = ImageFolder::open(&dir, size, channels, skip).map_err(|e| data_err(e, src.span))?;
    Ok(Elements::Images { folder: Arc::new(folder), span: src.span })
}

/// A source whose elements are read one at a time by index, whether the pipeline streams or the
/// elements are prepared whole: an `images` folder, `jsonl` and `parquet` records, `shards`
/// samples, a `safetensors` file's rows; `None` for every other source.
pub fn opened(root: &Path, src: &Stage) -> Result<Option<Elements>, RuntimeError> {
    match src.kind {
        "images" => image_folder(root, src).map(Some),
        "jsonl" | "parquet" => super::records::open(root, src).map(Some),
        "shards" => super::shard_source::open(root, src).map(Some),
        "safetensors" => rows(root, src),
        _ => Ok(None),
    }
}

/// A source read on demand when the whole pipeline streams: those `opened`, and an `npy`
/// source's rows when its files are not gzip; `None` otherwise (the source is read whole).
pub fn on_demand(root: &Path, src: &Stage) -> Result<Option<Elements>, RuntimeError> {
    match src.kind {
        "npy" => rows(root, src),
        _ => opened(root, src),
    }
}

/// The rows of an `npy` source (its file, and with `labels` its labels' file; `None` when one is
/// gzip, which is read whole) or of a `safetensors` source (two tensors of one file).
fn rows(root: &Path, src: &Stage) -> Result<Option<Elements>, RuntimeError> {
    let path = |name: &str| crate::paths::in_program(root, &str_arg(src, name).unwrap_or_default());
    let (row, label_row) = npy_types(src);
    let labels = str_arg(src, "labels");
    // The rows, their labels' rows, and how a mismatch names each.
    let (x, y, names) = if src.kind == "safetensors" {
        let file = path("path");
        let tensor = str_arg(src, "tensor").unwrap_or_default();
        let rows = |name: &str, ty| safetensors_rows::rows(&file, name, ty).map_err(|e| data_err(e, src.span));
        let x = rows(&tensor, &row)?;
        let y = labels.as_deref().map(|name| rows(name, &label_row)).transpose()?;
        (x, y, (format!("{}: tensor `{tensor}`", file.display()), format!("`{}`", labels.unwrap_or_default())))
    } else {
        let open = |name: &str, ty| npy::Rows::open(&path(name), ty).map_err(|e| data_err(e, src.span));
        let Some(x) = open("path", &row)? else { return Ok(None) };
        let y = match labels {
            None => None,
            Some(_) => match open("labels", &label_row)? {
                None => return Ok(None),
                Some(y) => Some(y),
            },
        };
        (x, y, (path("path").display().to_string(), path("labels").display().to_string()))
    };
    if let Some(y) = y.as_ref().filter(|y| y.len() != x.len()) {
        let message = format!("{} has {} rows but {} has {}", names.0, x.len(), names.1, y.len());
        return Err(RuntimeError::Data { message, span: src.span });
    }
    Ok(Some(Elements::Rows { x: Arc::new(x), y: y.map(Arc::new), span: src.span }))
}
