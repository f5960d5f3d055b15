//! Variable-length sequences (the checker's side is `eval/data_sequences.rs`). `pad_batch` pads
//! (or truncates) each element's variable-length tensors to a fixed length and appends the mask
//! (1 for a real position, 0 for padding, Hugging Face's `attention_mask`) before stacking;
//! `bucket` groups the elements by the smallest boundary that holds them, batches within a
//! bucket and pads each batch to its bucket's boundary, the batches' order shuffled from
//! (seed, epoch); `pack` concatenates token sequences into rows of a fixed length with each
//! token's document index in its row. The same functions serve the whole epoch (`apply`) and
//! the streamed one (stream.rs), so the two agree bit for bit.

use super::stages::shuffle_order;
use super::{int_arg, leaves, stack, Element};
use crate::runtime::tensor::{Data, Tensor};
use crate::runtime::RuntimeError;
use dlc_language::eval::data_sequences::boundaries;
use dlc_language::eval::value::Stage;
use dlc_language::eval::Value;
use dlc_language::ir::Graph;
use dlc_language::types::{DType, Dim};
use std::sync::{Arc, Mutex};

/// Which leaves of an element are variable-length (first dimension `_`), and the pad value.
#[derive(Clone, Debug)]
pub struct Padding {
    variable: Vec<bool>,
    /// The leaf whose length makes the mask: the first variable one.
    first: usize,
    pad: f64,
}

impl Padding {
    /// A `pad_batch` or `bucket` stage's padding, from the types of its input's leaves.
    pub fn of(stage: &Stage, graph: &Graph) -> Padding {
        let mut ins = vec![];
        leaves(&stage.input, &mut ins);
        let variable: Vec<bool> = ins.iter().map(|n| graph.ty(*n).shape.first() == Some(&Dim::Any)).collect();
        let first = variable.iter().position(|v| *v).unwrap_or(0);
        Padding { variable, first, pad: stage.arg("pad").and_then(|v| v.as_float()).unwrap_or(0.0) }
    }

    /// The length of an element's sequence: its first variable leaf's first dimension.
    pub fn length(&self, e: &Element) -> usize {
        e.get(self.first).and_then(|t| t.shape.first().copied()).unwrap_or(0)
    }

    /// `e` with its variable-length leaves padded or truncated to `length`, and the mask of its
    /// sequence (`f32[length]`) appended.
    pub fn pad(&self, e: Element, length: usize) -> Element {
        let real = self.length(&e).min(length);
        let mut out: Element =
            e.into_iter().zip(&self.variable).map(|(t, v)| if *v { pad_leaf(&t, length, self.pad) } else { t }).collect();
        out.push(Tensor::f32(vec![length], (0..length).map(|i| if i < real { 1.0 } else { 0.0 }).collect()));
        out
    }
}

/// `t` (`[len, ...]`) cut or padded with `pad` along its first axis to `[length, ...]`.
fn pad_leaf(t: &Tensor, length: usize, pad: f64) -> Tensor {
    fn fit<T: Copy>(v: &[T], row: usize, length: usize, pad: T) -> Arc<Vec<T>> {
        let keep = v.len().min(length * row);
        let mut out = Vec::with_capacity(length * row);
        out.extend_from_slice(&v[..keep]);
        out.resize(length * row, pad);
        Arc::new(out)
    }
    let row: usize = t.shape[1..].iter().product();
    let data = match &t.data {
        Data::F32(v) => Data::F32(fit(v, row, length, pad as f32)),
        Data::F64(v) => Data::F64(fit(v, row, length, pad)),
        Data::I64(v) => Data::I64(fit(v, row, length, pad as i64)),
        Data::U8(v) => Data::U8(fit(v, row, length, pad as u8)),
    };
    let mut shape = t.shape.clone();
    shape[0] = length;
    Tensor { dtype: t.dtype, shape, data }
}

/// Each prepared element's sequence length where it reaches a streamed `bucket` stage, measured
/// the first time an epoch needs it and kept for the next epochs: the stages before `bucket`
/// move elements and keep their lengths, so a length is its element's wherever it stands.
#[derive(Clone, Default)]
pub struct Lengths(Arc<Mutex<Vec<u32>>>);

impl Lengths {
    /// The lengths of the elements at these prepared indices, measuring (on all cores) those
    /// not measured yet by `measure(k)`, `k` the place in `source`.
    pub fn of(&self, source: &[u32], measure: impl Fn(usize) -> Result<usize, RuntimeError> + Sync) -> Result<Vec<usize>, RuntimeError> {
        use rayon::prelude::*;
        const UNKNOWN: u32 = u32::MAX;
        let known = self.0.lock().expect("no panic holds the lock").clone();
        let at = |i: u32| known.get(i as usize).copied().unwrap_or(UNKNOWN);
        let lengths = (0..source.len())
            .into_par_iter()
            .map(|k| match at(source[k]) {
                UNKNOWN => measure(k),
                n => Ok(n as usize),
            })
            .collect::<Result<Vec<usize>, RuntimeError>>()?;
        let mut all = self.0.lock().expect("no panic holds the lock");
        for (k, &i) in source.iter().enumerate() {
            if all.len() <= i as usize {
                all.resize(i as usize + 1, UNKNOWN);
            }
            all[i as usize] = lengths[k].min(UNKNOWN as usize - 1) as u32;
        }
        Ok(lengths)
    }
}

/// One batch of a `bucket` stage: the positions of its elements in the stream, in order, and
/// the length they are padded to.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub positions: Vec<u32>,
    pub length: usize,
}

/// A `bucket` stage's batches for elements of these lengths (in stream order): each element in
/// the first bucket whose boundary holds it (longer than the last: the last, truncated), each
/// bucket cut into batches of `size` in stream order (an incomplete one dropped with
/// `drop_last`), the batches ordered by their first element, then shuffled from (seed, epoch)
/// when the stage has a seed. A pure function of its arguments, so a resumed epoch and every
/// worker see the same batches.
pub fn bucket_groups(stage: &Stage, lengths: &[usize], epoch: u64) -> Vec<Group> {
    let bounds = boundaries(stage.arg("boundaries")).unwrap_or_else(|_| vec![usize::MAX]);
    let size = int_arg(stage, "size", 1).max(1) as usize;
    let drop_last = matches!(stage.arg("drop_last"), Some(Value::Bool(true)));
    let mut buckets: Vec<Vec<u32>> = vec![vec![]; bounds.len()];
    for (p, &len) in lengths.iter().enumerate() {
        let k = bounds.iter().position(|&b| len <= b).unwrap_or(bounds.len() - 1);
        buckets[k].push(p as u32);
    }
    let mut groups: Vec<Group> = vec![];
    for (k, members) in buckets.iter().enumerate() {
        for chunk in members.chunks(size) {
            if !drop_last || chunk.len() == size {
                groups.push(Group { positions: chunk.to_vec(), length: bounds[k] });
            }
        }
    }
    groups.sort_by_key(|g| g.positions[0]);
    if stage.arg("seed").is_some() {
        let order = shuffle_order(stage, epoch, groups.len());
        let mut slots: Vec<Option<Group>> = groups.into_iter().map(Some).collect();
        groups = order.into_iter().map(|i| slots[i].take().expect("a permutation")).collect();
    }
    groups
}

/// Apply `pad_batch`, `bucket` or `pack` to a whole epoch's elements.
pub fn apply(stage: &Stage, elems: Vec<Element>, graph: &Graph, epoch: u64) -> Result<Vec<Element>, RuntimeError> {
    if stage.kind == "pack" {
        return Ok(pack(stage, &elems, graph));
    }
    let padding = Padding::of(stage, graph);
    if stage.kind == "pad_batch" {
        let size = int_arg(stage, "size", 1).max(1) as usize;
        let length = int_arg(stage, "length", 1).max(1) as usize;
        let drop_last = matches!(stage.arg("drop_last"), Some(Value::Bool(true)));
        let batches = elems.chunks(size).filter(|c| !drop_last || c.len() == size);
        return Ok(batches.map(|c| stack(&c.iter().map(|e| padding.pad(e.clone(), length)).collect::<Vec<_>>())).collect());
    }
    let lengths: Vec<usize> = elems.iter().map(|e| padding.length(e)).collect();
    let groups = bucket_groups(stage, &lengths, epoch);
    Ok(groups
        .iter()
        .map(|g| stack(&g.positions.iter().map(|&p| padding.pad(elems[p as usize].clone(), g.length)).collect::<Vec<_>>()))
        .collect())
}

/// `pack(length: n)`: the first variable-length leaf (1-d tokens) of every element, in order,
/// concatenated and cut into rows of `n` (the last, shorter row dropped), each row with
/// `segments`: the index within the row of the document each token came from (0 for the
/// first, which may have begun in the row before). A document longer than a row spans rows.
pub fn pack(stage: &Stage, elems: &[Element], graph: &Graph) -> Vec<Element> {
    let n = int_arg(stage, "length", 1).max(1) as usize;
    let first = Padding::of(stage, graph).first;
    let dtype = elems.first().map(|e| e[first].dtype).unwrap_or(DType::I64);
    pack_rows(elems.iter().map(|e| e[first].to_f64()), n)
        .into_iter()
        .map(|(tokens, segments)| vec![Tensor::from_f64(dtype, vec![n], tokens), Tensor::from_f64(DType::I64, vec![n], segments)])
        .collect()
}

/// The rows of `n` tokens `pack` cuts the documents into, with their document indices.
fn pack_rows(docs: impl Iterator<Item = Vec<f64>>, n: usize) -> Vec<(Vec<f64>, Vec<f64>)> {
    let (mut rows, mut tokens, mut segments) = (vec![], vec![], vec![]);
    let mut current = 0.0;
    for doc in docs {
        for (k, x) in doc.into_iter().enumerate() {
            // Each row numbers its documents from 0 (a document carried over from the row
            // before included); a document's first token starts the next number.
            if tokens.is_empty() {
                current = 0.0;
            } else if k == 0 {
                current += 1.0;
            }
            tokens.push(x);
            segments.push(current);
            if tokens.len() == n {
                rows.push((std::mem::take(&mut tokens), std::mem::take(&mut segments)));
            }
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlc_language::Span;

    fn stage(kind: &'static str, args: Vec<(&str, Value)>) -> Stage {
        let args = args.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        Stage { kind, args, input: Value::unit(), output: Value::unit(), span: Span::default() }
    }

    fn ints(xs: &[i64]) -> Value {
        Value::Tuple(std::rc::Rc::new(xs.iter().map(|x| Value::Int(*x)).collect()))
    }

    fn tokens(xs: &[i64]) -> Tensor {
        Tensor::from_f64(DType::I64, vec![xs.len()], xs.iter().map(|x| *x as f64))
    }

    #[test]
    fn padding_pads_truncates_and_masks_the_variable_leaves_only() {
        let p = Padding { variable: vec![true, false], first: 0, pad: -1.0 };
        let label = Tensor::from_f64(DType::I64, vec![], [7.0]);
        let e = p.pad(vec![tokens(&[4, 5]), label.clone()], 4);
        assert_eq!(e[0].shape, vec![4]);
        assert_eq!(e[0].to_f64(), vec![4.0, 5.0, -1.0, -1.0]);
        assert_eq!(e[1].to_f64(), vec![7.0]);
        assert_eq!((e[2].dtype, e[2].to_f64()), (DType::F32, vec![1.0, 1.0, 0.0, 0.0]));
        let e = p.pad(vec![tokens(&[1, 2, 3, 4, 5]), label], 3);
        assert_eq!(e[0].to_f64(), vec![1.0, 2.0, 3.0]);
        assert_eq!(e[2].to_f64(), vec![1.0, 1.0, 1.0]);
        // A sequence of vectors pads whole rows.
        let t = Tensor::f32(vec![1, 2], vec![0.5, 0.25]);
        assert_eq!(pad_leaf(&t, 2, 0.0).to_f64(), vec![0.5, 0.25, 0.0, 0.0]);
    }

    #[test]
    fn buckets_batch_within_a_bucket_and_shuffle_by_seed_and_epoch() {
        let lengths = [3, 9, 4, 2, 20, 8, 1, 5];
        let st = stage("bucket", vec![("size", Value::Int(2)), ("boundaries", ints(&[4, 8]))]);
        let groups = bucket_groups(&st, &lengths, 0);
        let got: Vec<(Vec<u32>, usize)> = groups.iter().map(|g| (g.positions.clone(), g.length)).collect();
        // Bucket 4: 0, 2, 3, 6; bucket 8: 1 (9 > 8: truncated into the last), 4, 5, 7.
        assert_eq!(got, vec![(vec![0, 2], 4), (vec![1, 4], 8), (vec![3, 6], 4), (vec![5, 7], 8)]);
        let st = stage("bucket", vec![("size", Value::Int(3)), ("boundaries", ints(&[4, 8])), ("drop_last", Value::Bool(true))]);
        let got: Vec<Vec<u32>> = bucket_groups(&st, &lengths, 0).into_iter().map(|g| g.positions).collect();
        assert_eq!(got, vec![vec![0, 2, 3], vec![1, 4, 5]]);
        let seeded = |seed, epoch| {
            let st = stage("bucket", vec![("size", Value::Int(1)), ("boundaries", ints(&[4, 8])), ("seed", Value::Int(seed))]);
            bucket_groups(&st, &lengths, epoch).into_iter().map(|g| g.positions[0]).collect::<Vec<_>>()
        };
        assert_eq!(seeded(1, 0), seeded(1, 0));
        assert_ne!(seeded(1, 0), seeded(1, 1));
        assert_ne!(seeded(1, 0), (0..8).collect::<Vec<u32>>());
        let mut all = seeded(2, 3);
        all.sort();
        assert_eq!(all, (0..8).collect::<Vec<u32>>());
    }

    #[test]
    fn packing_cuts_rows_and_numbers_documents_within_a_row() {
        let docs: Vec<Vec<f64>> =
            [&[1.0, 2.0][..], &[3.0, 4.0, 5.0], &[6.0], &[7.0, 8.0, 9.0, 10.0, 11.0]].iter().map(|d| d.to_vec()).collect();
        let rows = pack_rows(docs.into_iter(), 4);
        assert_eq!(
            rows,
            vec![(vec![1.0, 2.0, 3.0, 4.0], vec![0.0, 0.0, 1.0, 1.0]), (vec![5.0, 6.0, 7.0, 8.0], vec![0.0, 1.0, 2.0, 2.0]),],
            "the last 3 tokens (no full row) are dropped"
        );
    }
}
