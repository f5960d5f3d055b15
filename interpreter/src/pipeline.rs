//! Executing a typed data pipeline: read the source, then apply each stage to the stream of
//! elements. An element is the list of tensor leaves of the stage's element value (tuples and
//! records flattened in order); `map` evaluates the graph the checker traced for its lambda.

use crate::exec::Executor;
use crate::runtime::data::{cifar, csv, idx, npy, text, DataError};
use crate::runtime::tensor::{Data, Tensor};
use crate::runtime::RuntimeError;
use dlc_language::eval::value::{Pipeline, Stage};
use dlc_language::eval::Value;
use dlc_language::ir::{Graph, NodeId};
use dlc_language::types::{DType, Dim, TensorTy};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod augment;
mod deal;
mod feed;
mod geometry;
mod grouped;
mod jitter;
mod records;
mod sequences;
mod shard_source;
mod shuffle_buffer;
mod source;
mod stages;
mod stream;

pub use augment::Augment;
pub use feed::{default_workers, next_workers, Feed, DEFAULT_AHEAD};
pub use source::Elements;
pub use stream::EpochPlan;

/// One element of the stream: its tensor leaves.
pub type Element = Vec<Tensor>;

/// The tensor leaves of a value, in order.
pub fn leaves(v: &Value, out: &mut Vec<NodeId>) {
    match v {
        Value::Tensor(n) => out.push(*n),
        Value::Tuple(items) => items.iter().for_each(|x| leaves(x, out)),
        Value::Record(items) => items.iter().for_each(|(_, x)| leaves(x, out)),
        _ => {}
    }
}

fn data_err(e: DataError, span: dlc_language::Span) -> RuntimeError {
    RuntimeError::Data { message: e.to_string(), span }
}

fn str_arg(st: &Stage, name: &str) -> Option<String> {
    match st.arg(name) {
        Some(Value::Str(s)) => Some(s.to_string()),
        _ => None,
    }
}

fn int_arg(st: &Stage, name: &str, default: i64) -> i64 {
    st.arg(name).and_then(|v| v.as_int()).unwrap_or(default)
}

/// Split tensors along their first dimension into per-element tensors, copying each row in the
/// tensor's own storage (a whole data set through f64 would double its memory for nothing:
/// MNIST's images are 376 MB as i64 storage, and the process's peak went to 1.2 GB).
fn rows(t: &Tensor) -> Vec<Tensor> {
    fn split<T: Copy>(v: &[T], n: usize, row: usize, wrap: impl Fn(Arc<Vec<T>>) -> Data) -> Vec<Data> {
        (0..n).map(|i| wrap(Arc::new(v[i * row..(i + 1) * row].to_vec()))).collect()
    }
    let n = t.shape[0];
    let row: usize = t.shape[1..].iter().product();
    let parts = match &t.data {
        Data::F32(v) => split(v, n, row, Data::F32),
        Data::F64(v) => split(v, n, row, Data::F64),
        Data::I64(v) => split(v, n, row, Data::I64),
        Data::U8(v) => split(v, n, row, Data::U8),
    };
    parts.into_iter().map(|data| Tensor { dtype: t.dtype, shape: t.shape[1..].to_vec(), data }).collect()
}

fn zip_rows(columns: &[Tensor]) -> Vec<Element> {
    let split: Vec<Vec<Tensor>> = columns.iter().map(rows).collect();
    let n = split.first().map(|c| c.len()).unwrap_or(0);
    (0..n).map(|i| split.iter().map(|c| c[i].clone()).collect()).collect()
}

/// An `npy` source's declared row and label row types (`f32[_]` and `i64[]` when not given).
fn npy_types(src: &Stage) -> (TensorTy, TensorTy) {
    let ty = |k: &str, d: TensorTy| match src.arg(k) {
        Some(Value::Type(t)) => t.clone(),
        _ => d,
    };
    (ty("row", TensorTy::new(DType::F32, vec![Dim::Any])), ty("label_row", TensorTy::new(DType::I64, vec![])))
}

/// Read a source's elements. `root` is the directory of the program (paths are relative to it);
/// `exec` evaluates in-memory tensors given to `tensors(...)`.
pub fn read_source(root: &Path, src: &Stage, graph: &Graph, exec: &mut Executor) -> Result<Vec<Element>, RuntimeError> {
    // The sources read by index are read through that, every element but those skipped.
    if let Some(elems) = source::opened(root, src)? {
        return elems.all();
    }
    let path = |name: &str| -> PathBuf { crate::paths::in_program(root, &str_arg(src, name).unwrap_or_default()) };
    match src.kind {
        "mnist" | "fashion_mnist" => {
            let dir = path("dir");
            let prefix = if str_arg(src, "split").as_deref() == Some("test") { "t10k" } else { "train" };
            let find = |stem: &str| -> PathBuf {
                let gz = dir.join(format!("{prefix}-{stem}-ubyte.gz"));
                if gz.exists() {
                    gz
                } else {
                    dir.join(format!("{prefix}-{stem}-ubyte"))
                }
            };
            let (x, y) = idx::read_pair(&find("images-idx3"), &find("labels-idx1")).map_err(|e| data_err(e, src.span))?;
            Ok(zip_rows(&[x, y]))
        }
        "idx" => {
            let (x, y) = idx::read_pair(&path("images"), &path("labels")).map_err(|e| data_err(e, src.span))?;
            Ok(zip_rows(&[x, y]))
        }
        "cifar" => {
            let files: Vec<PathBuf> = match src.arg("files") {
                Some(Value::Str(s)) => vec![crate::paths::in_program(root, s)],
                Some(Value::Tuple(items)) => items
                    .iter()
                    .filter_map(|v| if let Value::Str(s) = v { Some(crate::paths::in_program(root, s)) } else { None })
                    .collect(),
                _ => vec![],
            };
            let refs: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
            let (x, y) = cifar::read(&refs).map_err(|e| data_err(e, src.span))?;
            Ok(zip_rows(&[x, y]))
        }
        "csv" => {
            let (label, target) = dlc_language::eval::data::csv_target(src.arg("label"), src.arg("label_row"))
                .map_err(|message| RuntimeError::Data { message, span: src.span })?;
            let spec = csv::CsvSpec { skip: int_arg(src, "header", 0) as usize, label, label_dtype: target.dtype };
            let (x, y) = csv::read(&path("path"), &spec).map_err(|e| data_err(e, src.span))?;
            let mut cols = vec![x];
            cols.extend(y);
            Ok(zip_rows(&cols))
        }
        "text" => {
            let byte_level = str_arg(src, "level").as_deref() == Some("byte");
            let corpus = match str_arg(src, "tokenizer") {
                Some(tok) => text::read_tokenized(&path("path"), &crate::paths::in_program(root, &tok)),
                None => text::read(&path("path"), byte_level),
            }
            .map_err(|e| data_err(e, src.span))?;
            let block = int_arg(src, "block", 128) as usize;
            let ids = corpus.ids.to_f64();
            // Non-overlapping windows; targets are the inputs shifted by one.
            let n = (ids.len().saturating_sub(1)) / block;
            let dt = corpus.ids.dtype;
            Ok((0..n)
                .map(|i| {
                    let s = i * block;
                    vec![
                        Tensor::from_f64(dt, vec![block], ids[s..s + block].iter().copied()),
                        Tensor::from_f64(dt, vec![block], ids[s + 1..s + block + 1].iter().copied()),
                    ]
                })
                .collect())
        }
        "npy" => {
            let (row, label_row) = npy_types(src);
            let x = npy::read(&path("path"), &row).map_err(|e| data_err(e, src.span))?;
            let mut cols = vec![x];
            if str_arg(src, "labels").is_some() {
                let y = npy::read(&path("labels"), &label_row).map_err(|e| data_err(e, src.span))?;
                if y.shape[0] != cols[0].shape[0] {
                    return Err(RuntimeError::Data {
                        message: format!(
                            "{} has {} rows but {} has {}",
                            path("path").display(),
                            cols[0].shape[0],
                            path("labels").display(),
                            y.shape[0]
                        ),
                        span: src.span,
                    });
                }
                cols.push(y);
            }
            Ok(zip_rows(&cols))
        }
        "tensors" => {
            let mut cols = vec![];
            for key in ["x", "y"] {
                if let Some(Value::Tensor(n)) = src.arg(key) {
                    cols.push(exec.eval(graph, *n)?);
                }
            }
            Ok(zip_rows(&cols))
        }
        other => Err(RuntimeError::Unsupported(format!("the `{other}` source is checked but cannot be read yet"))),
    }
}

/// Stack elements into one batched element (a new leading dimension per leaf).
fn stack<E: std::borrow::Borrow<Element>>(elems: &[E]) -> Element {
    let leaves = elems[0].borrow().len();
    (0..leaves)
        .map(|l| {
            let first = &elems[0].borrow()[l];
            let mut shape = vec![elems.len()];
            shape.extend(first.shape.iter().copied());
            // Elements of one leaf share a dtype, hence a storage: concatenate the values as
            // they are (no round trip through f64).
            let n = elems.len() * first.numel();
            let data = match &first.data {
                Data::F32(_) => Data::F32(concat(elems, l, n, |d| if let Data::F32(v) = d { Some(v) } else { None }, |x| x as f32)),
                Data::I64(_) => Data::I64(concat(elems, l, n, |d| if let Data::I64(v) = d { Some(v) } else { None }, |x| x as i64)),
                Data::U8(_) => Data::U8(concat(elems, l, n, |d| if let Data::U8(v) = d { Some(v) } else { None }, |x| x as u8)),
                Data::F64(_) => Data::F64(Arc::new(elems.iter().flat_map(|e| e.borrow()[l].to_f64()).collect())),
            };
            Tensor { dtype: first.dtype, shape, data }
        })
        .collect()
}

/// Leaf `l` of every element, `n` values in all, concatenated in the storage `same` picks out
/// (an element stored otherwise goes through f64 and `from_f64`).
fn concat<T: Copy, E: std::borrow::Borrow<Element>>(
    elems: &[E],
    l: usize,
    n: usize,
    same: impl Fn(&Data) -> Option<&Arc<Vec<T>>>,
    from_f64: impl Fn(f64) -> T,
) -> Arc<Vec<T>> {
    let mut out = Vec::with_capacity(n);
    for e in elems {
        let leaf = &e.borrow()[l];
        match same(&leaf.data) {
            Some(v) => out.extend_from_slice(v),
            None => out.extend(leaf.to_f64().into_iter().map(&from_f64)),
        }
    }
    Arc::new(out)
}

/// Apply one stage to the stream. `epoch` reseeds `shuffle`, so each epoch has its own order.
pub fn apply(stage: &Stage, elems: Vec<Element>, graph: &Graph, epoch: u64) -> Result<Vec<Element>, RuntimeError> {
    match stage.kind {
        "map" => {
            let f = stages::MapStage::new(stage, graph)?;
            // Elements are independent: map them on all cores (rayon keeps the order, so the
            // result does not depend on the number of threads).
            use rayon::prelude::*;
            elems.into_par_iter().map(|e| f.run(graph, e)).collect()
        }
        "shuffle" => {
            let order = shuffle_buffer::order(stage, epoch, elems.len(), None).order;
            Ok(grouped::permute(elems, &order))
        }
        "batch" => {
            let size = int_arg(stage, "size", 1).max(1) as usize;
            let drop_last = matches!(stage.arg("drop_last"), Some(Value::Bool(true)));
            Ok(elems.chunks(size).filter(|c| !drop_last || c.len() == size).map(stack).collect())
        }
        "pad_batch" | "bucket" | "pack" => sequences::apply(stage, elems, graph, epoch),
        "take" | "skip" | "split" => {
            let mut elems = elems;
            Ok(elems.drain(stages::kept(stage, elems.len())).collect())
        }
        // Worker threads and the bounded queue come with the trainer; the values are the same.
        "prefetch" => Ok(elems),
        "resize" | "center_crop" => {
            let g = geometry::Geometry::of(stage);
            use rayon::prelude::*;
            elems.into_par_iter().map(|e| g.apply(e)).collect()
        }
        "random_crop" | "random_flip" | "random_resized_crop" | "color_jitter" => {
            let aug = Augment::of(stage, epoch);
            Ok(elems.into_iter().enumerate().map(|(i, e)| aug.apply(i, e)).collect())
        }
        other => Err(RuntimeError::Unsupported(format!("the `{other}` stage cannot run yet"))),
    }
}

/// The `size` of the pipeline's last batching stage (`batch`, `pad_batch`, `bucket`), if any.
pub fn batch_size(p: &Pipeline) -> Option<i64> {
    let last = p.stages.iter().rev().find(|s| matches!(s.kind, "batch" | "pad_batch" | "bucket"))?;
    last.arg("size").and_then(|v| v.as_int())
}

/// How many batches ahead the pipeline's `prefetch(n)` asks for, if it has one.
pub fn prefetch_depth(p: &Pipeline) -> Option<usize> {
    p.stages.iter().rev().find(|st| st.kind == "prefetch").map(|st| int_arg(st, "n", DEFAULT_AHEAD as i64).max(1) as usize)
}

/// Whether a stage's output depends on the epoch (a new order, new random crops; `bucket`'s
/// batches in a seeded order).
fn varies_by_epoch(kind: &str) -> bool {
    matches!(kind, "shuffle" | "bucket" | "random_crop" | "random_flip" | "random_resized_crop" | "color_jitter")
}

/// What a pipeline yields before its first epoch-dependent stage: the same every epoch, so it is
/// read and mapped once per run (the source decoded, `map` applied) and only the rest (shuffle,
/// augmentation, batching) is redone each epoch.
pub struct Prepared {
    /// How many stages the elements have been through.
    stages: usize,
    elems: Elements,
    /// The graph as the run started, shared with the workers that run `map` stages.
    graph: Arc<Graph>,
    /// The elements' lengths at a streamed `bucket` stage, measured once.
    lengths: sequences::Lengths,
    /// What the source left out when it was read whole to prepare the elements.
    read_skipped: grouped::Skips,
}

impl Prepared {
    /// Elements the source left out so far because they could not be read (`on_error:
    /// "skip"`): when the elements were prepared, and since, read on demand; and the first
    /// one's error.
    pub fn skipped(&self) -> (usize, Option<String>) {
        let (n, first) = self.elems.skipped();
        (n + self.read_skipped.0, self.read_skipped.1.clone().or(first))
    }
}

/// One epoch's batches. When the pipeline ends in `batch` (then only `prefetch`), each batch is
/// stacked from the epoch's elements as the trainer asks for it, so an epoch holds the data set
/// once (the prepared elements, shared with the cache) and one batch, not a second, stacked
/// copy of the whole epoch (188 MB for MNIST as f32).
pub enum Batches {
    /// Batches made already (by the pipeline's stages, or a Rust data source).
    Ready(Vec<Element>),
    /// The epoch's elements in order, stacked `size` at a time on demand.
    Lazy { elems: Vec<Element>, size: usize, count: usize },
    /// Each batch made on demand from the prepared elements, on any thread (stream.rs).
    Stream(Arc<EpochPlan>),
}

impl Batches {
    pub fn len(&self) -> usize {
        match self {
            Batches::Ready(b) => b.len(),
            Batches::Lazy { count, .. } => *count,
            Batches::Stream(plan) => plan.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl IntoIterator for Batches {
    type Item = Result<Element, RuntimeError>;
    type IntoIter = BatchIter;
    fn into_iter(self) -> BatchIter {
        BatchIter { batches: self, next: 0 }
    }
}

/// The batches of an epoch in order; `nth` (and so `skip`, on resume) stacks nothing it skips.
pub struct BatchIter {
    batches: Batches,
    next: usize,
}

impl Iterator for BatchIter {
    type Item = Result<Element, RuntimeError>;
    fn next(&mut self) -> Option<Self::Item> {
        let i = self.next;
        if i >= self.batches.len() {
            return None;
        }
        self.next += 1;
        Some(match &mut self.batches {
            Batches::Ready(b) => Ok(std::mem::take(&mut b[i])),
            Batches::Lazy { elems, size, .. } => Ok(stack(&elems[i * *size..((i + 1) * *size).min(elems.len())])),
            Batches::Stream(plan) => plan.batch(i),
        })
    }

    fn nth(&mut self, n: usize) -> Option<Self::Item> {
        self.next = self.next.saturating_add(n);
        self.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.batches.len().saturating_sub(self.next);
        (left, Some(left))
    }
}

/// `run`, keeping the epoch-independent prefix in `cache` for the next epochs. The elements'
/// data are shared, not copied, between epochs, and a final `batch` stage is left to the
/// consumer (`Batches::Lazy`).
pub fn run_cached(p: &Pipeline, root: &Path, graph: &Graph, epoch: u64, cache: &mut Option<Prepared>) -> Result<Batches, RuntimeError> {
    if cache.is_none() && stream::streams(&p.stages) {
        // A source read on demand streams all its stages, each epoch: nothing is held whole.
        if let Some(elems) = source::on_demand(root, &p.source)? {
            *cache =
                Some(Prepared { stages: 0, elems, graph: Arc::new(graph.clone()), lengths: Default::default(), read_skipped: (0, None) });
        }
    }
    if cache.is_none() {
        let mut exec = Executor::new(0);
        // (A `shards` source's elements keep their shards, for a buffered shuffle: grouped.rs.)
        let (mut elems, read_skipped) = grouped::read(root, &p.source, graph, &mut exec)?;
        let stages = stream::prefix_len(&p.stages);
        for st in &p.stages[..stages] {
            elems = elems.apply(st, graph, epoch)?;
        }
        let graph = Arc::new(graph.clone());
        *cache = Some(Prepared { stages, elems: elems.into_elements(), graph, lengths: Default::default(), read_skipped });
    }
    let prepared = cache.as_ref().expect("just filled");
    let mut rest = &p.stages[prepared.stages..];
    if stream::streams(rest) {
        let plan = EpochPlan::new(rest, prepared.elems.clone(), prepared.graph.clone(), epoch, &prepared.lengths)?;
        return Ok(Batches::Stream(Arc::new(plan)));
    }
    let mut elems = grouped::of(&prepared.elems)?;
    // `prefetch` changes no values (the trainer's queue does its work).
    while let [before @ .., last] = rest {
        if last.kind != "prefetch" {
            break;
        }
        rest = before;
    }
    let lazy = match rest {
        [before @ .., last] if last.kind == "batch" => {
            rest = before;
            Some(last)
        }
        _ => None,
    };
    for st in rest {
        elems = elems.apply(st, graph, epoch)?;
    }
    let elems = elems.elems;
    Ok(match lazy {
        Some(batch) => {
            let size = int_arg(batch, "size", 1).max(1) as usize;
            let drop_last = matches!(batch.arg("drop_last"), Some(Value::Bool(true)));
            let count = if drop_last { elems.len() / size } else { elems.len().div_ceil(size) };
            Batches::Lazy { elems, size, count }
        }
        None => Batches::Ready(elems),
    })
}

/// Every element of one epoch of the pipeline.
pub fn run(p: &Pipeline, root: &Path, graph: &Graph, epoch: u64) -> Result<Vec<Element>, RuntimeError> {
    run_counting(p, root, graph, epoch).map(|(elems, _)| elems)
}

/// `run`, and the elements its source left out because they could not be read.
pub fn run_counting(p: &Pipeline, root: &Path, graph: &Graph, epoch: u64) -> Result<(Vec<Element>, grouped::Skips), RuntimeError> {
    let mut exec = Executor::new(0);
    let (mut elems, skipped) = grouped::read(root, &p.source, graph, &mut exec)?;
    for st in &p.stages {
        elems = elems.apply(st, graph, epoch)?;
    }
    Ok((elems.elems, skipped))
}
