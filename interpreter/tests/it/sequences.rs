//! Variable-length sequences from a `jsonl` file of token lists: `pad_batch` (padded and
//! truncated to a length, with the mask), `bucket` (each batch padded to its length bucket, in a
//! seeded order) and `pack` (rows of tokens with document indices); streamed on the feed's
//! workers as the whole epoch applied; a tiny sequence classifier trains on `pad_batch` bit for
//! bit as on the same data padded by hand, and on `bucket` with a step compiled per length.

use crate::common::scratch;
use dlc::api::RuntimeHost;
use dlc::pipeline;
use dlc::train::{TrainOptions, Trainer};
use dlc::Program;
use dlc_language::eval::{Mode, Session, Value};
use dlc_language::types::DType;
use std::path::Path;

/// Twelve documents of 1 to 11 tokens (ids 1..19, 0 is padding) and a label each.
fn docs() -> Vec<(Vec<i64>, i64)> {
    (0..12).map(|i: i64| ((0..(i * 7 % 11 + 1)).map(|k| (i * 5 + k * 3) % 19 + 1).collect(), i % 2)).collect()
}

fn write_docs(dir: &Path) {
    let text: String = docs()
        .iter()
        .map(|(t, y)| format!("{{\"tokens\": [{}], \"label\": {y}}}\n", t.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")))
        .collect();
    std::fs::write(dir.join("docs.jsonl"), text).unwrap();
}

const SOURCE: &str = "jsonl(\"docs.jsonl\", fields: (tokens: i64[_], label: i64[]))";

fn pipeline_of(dir: &Path, src: &str) -> (Session, std::rc::Rc<dlc_language::eval::value::Pipeline>) {
    let mut s = Session::new(Mode::Check);
    let mut host = RuntimeHost::new(Some(dir.to_path_buf()), false);
    assert!(s.run_source("sequences_test.dl", src, &mut host), "{:?}", s.diagnostics());
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get("d").cloned() else { panic!("no pipeline d") };
    (s, p)
}

fn bits(batches: impl IntoIterator<Item = pipeline::Element>) -> Vec<Vec<Vec<u64>>> {
    batches.into_iter().map(|b| b.iter().map(|t| t.to_f64().iter().map(|x| x.to_bits()).collect()).collect()).collect()
}

/// The whole epoch `e` of `d`, checked equal, bit for bit, to the streamed epoch (made on the
/// feed's workers, whole and from batch 1 on, as a resumed run starts).
fn whole_equals_streamed(dir: &Path, src: &str, e: u64) -> Vec<pipeline::Element> {
    let (s, p) = pipeline_of(dir, src);
    let whole = pipeline::run(&p, dir, &s.t.graph, e).unwrap();
    let mut cache = None;
    let streamed = pipeline::run_cached(&p, dir, &s.t.graph, e, &mut cache).unwrap();
    assert!(matches!(streamed, pipeline::Batches::Stream(_)), "the epoch streams");
    assert_eq!(bits(streamed.into_iter().map(|b| b.unwrap())), bits(whole.clone()), "streamed against whole, epoch {e}");
    for workers in [1, 3] {
        let again = pipeline::run_cached(&p, dir, &s.t.graph, e, &mut cache).unwrap();
        let fed = pipeline::Feed::start(again, 1, workers, 2, Default::default(), None);
        assert_eq!(bits(fed.map(|b| b.unwrap())), bits(whole[1..].to_vec()), "{workers} workers from batch 1, epoch {e}");
    }
    whole
}

/// The tokens of a padded batch's rows, each cut at its mask, and the masks' lengths.
fn rows(b: &pipeline::Element) -> Vec<Vec<i64>> {
    let (n, l) = (b[0].shape[0], b[0].shape[1]);
    let (t, m) = (b[0].to_f64(), b[2].to_f64());
    (0..n)
        .map(|r| {
            let real = m[r * l..(r + 1) * l].iter().take_while(|x| **x == 1.0).count();
            assert!(m[r * l + real..(r + 1) * l].iter().all(|x| *x == 0.0), "the mask is ones then zeros");
            assert!(t[r * l + real..(r + 1) * l].iter().all(|x| *x == 0.0), "padding is the pad value");
            t[r * l..r * l + real].iter().map(|x| *x as i64).collect()
        })
        .collect()
}

#[test]
fn pad_batch_pads_truncates_and_masks_streamed_as_whole() {
    let dir = scratch("sequences-pad");
    write_docs(&dir);
    let src = format!("use std.data\ndata d = {SOURCE} |> shuffle(seed: 2) |> pad_batch(5, length: 8)\n");
    let whole = whole_equals_streamed(&dir, &src, 0);
    assert_eq!(whole.len(), 3, "12 documents in batches of 5, the last short");
    assert_eq!((whole[0][0].shape.clone(), whole[0][1].shape.clone(), whole[0][2].shape.clone()), (vec![5, 8], vec![5], vec![5, 8]));
    assert_eq!(whole[2][0].shape, vec![2, 8]);
    let mut got: Vec<(Vec<i64>, i64)> =
        whole.iter().flat_map(|b| rows(b).into_iter().zip(b[1].to_f64().into_iter().map(|y| y as i64))).collect();
    got.sort();
    let mut want: Vec<(Vec<i64>, i64)> = docs().into_iter().map(|(t, y)| (t[..t.len().min(8)].to_vec(), y)).collect();
    want.sort();
    assert_eq!(got, want, "every document once, cut to 8 tokens");
    whole_equals_streamed(&dir, &src, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bucket_pads_each_batch_to_its_bucket_in_a_seeded_order() {
    let dir = scratch("sequences-bucket");
    write_docs(&dir);
    let src = format!("use std.data\ndata d = {SOURCE} |> bucket(2, boundaries: (4, 8), pad: 0, seed: 7)\n");
    let order = |e| {
        let whole = whole_equals_streamed(&dir, &src, e);
        let mut lengths = vec![];
        let mut all = vec![];
        for b in &whole {
            let l = b[0].shape[1];
            assert!(l == 4 || l == 8, "a bucket's length: {l}");
            assert_eq!(b[2].shape, b[0].shape);
            for r in rows(b) {
                assert!(r.len() <= l && (l == 4 || r.len() > 4), "{r:?} in the bucket of {l}");
                all.push(r);
            }
            lengths.push(l);
        }
        all.sort();
        let mut want: Vec<Vec<i64>> = docs().into_iter().map(|(t, _)| t[..t.len().min(8)].to_vec()).collect();
        want.sort();
        assert_eq!(all, want, "every document once, the longest cut to the last boundary");
        (lengths, bits(whole))
    };
    let (lengths, first) = order(0);
    assert!(lengths.contains(&4) && lengths.contains(&8), "{lengths:?}");
    assert_ne!(order(1).1, first, "a new epoch, a new order of the batches");
    assert_eq!(order(0).1, first, "the order is a function of (seed, epoch)");
    // One run's epochs share the lengths measured: a shuffle and a `take` before the bucket
    // bring other elements to other places each epoch, and every epoch is still the whole one's.
    let src2 = format!("use std.data\ndata d = {SOURCE} |> shuffle(seed: 3) |> take(9) |> bucket(2, boundaries: (4, 8), seed: 7)\n");
    let (s2, p2) = pipeline_of(&dir, &src2);
    let mut cache = None;
    for e in [0, 1, 2, 1] {
        let whole = bits(pipeline::run(&p2, &dir, &s2.t.graph, e).unwrap());
        let streamed = pipeline::run_cached(&p2, &dir, &s2.t.graph, e, &mut cache).unwrap();
        assert_eq!(bits(streamed.into_iter().map(|b| b.unwrap())), whole, "epoch {e} with the lengths kept");
    }
    // Under data parallelism whole batches are dealt: batch i to rank i mod 2, the odd one out
    // (seven batches) dropped so that both ranks take as many steps.
    let (s, p) = pipeline_of(&dir, &src);
    let mut cache = None;
    let dealt: Vec<Vec<Vec<Vec<u64>>>> = (0..2)
        .map(|rank| match pipeline::run_cached(&p, &dir, &s.t.graph, 0, &mut cache).unwrap() {
            pipeline::Batches::Stream(plan) => {
                let plan = std::sync::Arc::new(std::sync::Arc::unwrap_or_clone(plan).shard(rank, 2));
                bits(pipeline::Batches::Stream(plan).into_iter().map(|b| b.unwrap()))
            }
            _ => panic!("the epoch streams"),
        })
        .collect();
    assert_eq!(first.len(), 7);
    assert_eq!(dealt[0], [first[0].clone(), first[2].clone(), first[4].clone()]);
    assert_eq!(dealt[1], [first[1].clone(), first[3].clone(), first[5].clone()]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pack_cuts_rows_with_document_indices() {
    let dir = scratch("sequences-pack");
    write_docs(&dir);
    let src = format!("use std.data\ndata d = {SOURCE} |> pack(length: 6) |> batch(4)\n");
    let (s, p) = pipeline_of(&dir, &src);
    let whole = pipeline::run(&p, &dir, &s.t.graph, 0).unwrap();
    let tokens: Vec<i64> = docs().into_iter().flat_map(|(t, _)| t).collect();
    let got: Vec<i64> = whole.iter().flat_map(|b| b[0].to_f64()).map(|x| x as i64).collect();
    assert_eq!(got, tokens[..tokens.len() / 6 * 6], "the documents' tokens in order, the last short row dropped");
    assert_eq!(whole[0][1].shape, vec![4, 6]);
    // The first document has 1 token, the second 8: row 0 is [d0, d1 x5], row 1 [d1 x3, d2 ...].
    assert_eq!(whole[0][1].to_f64()[..12], [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sequence classifier: embedding, the mean over the real tokens, a linear layer.
const PROGRAM: &str = r#"
use std.nn
use std.data
use std.optim
fn pool(h, m) = sum(h * unsqueeze(m, 2), axis: 1) / sum(unsqueeze(m, 2), axis: 1)
model Seq() {
  emb = Embedding(20, 8)
  fc = Linear(8, 2)
  forward(tokens, mask) = fc(pool(emb(tokens), mask))
}
DATA
train {
  model = Seq()
  data = d
  loss = LOSS
  optimizer = sgd(lr: 0.5)
  epochs = 3
  seed = 4
  log every 1 steps
}
"#;

/// Every logged loss of the program with its data and loss, as bits (each step's, then each
/// epoch's mean), and whether the trainer compiled a step for each of `shapes`.
fn losses(dir: &Path, data: &str, loss: &str, shapes: &[Vec<(DType, Vec<usize>)>]) -> (Vec<(usize, u64)>, Vec<bool>) {
    let src = PROGRAM.replace("DATA", data).replace("LOSS", loss);
    let mut p = Program::run("seq.dl", &src, Some(dir), false);
    assert!(p.ok, "{:?}", p.diagnostics());
    let info = p.session.t.recipes[0].clone();
    let mut t = Trainer::new(&mut p.session, info, TrainOptions::new(dir.to_path_buf(), 0)).expect("trainer");
    let r = t.run().expect("training runs");
    let compiled = shapes.iter().map(|s| t.step_passes(s).is_some()).collect();
    (r.losses.iter().map(|(s, l)| (*s, l.to_bits())).collect(), compiled)
}

#[test]
fn a_sequence_model_trains_on_pad_batch_as_on_hand_padded_tensors_and_on_buckets() {
    let dir = scratch("sequences-train");
    write_docs(&dir);
    let padded: Vec<String> = docs()
        .iter()
        .map(|(t, _)| format!("[{}]", (0..8).map(|k| t.get(k).copied().unwrap_or(0).to_string()).collect::<Vec<_>>().join(", ")))
        .collect();
    let labels: Vec<String> = docs().iter().map(|(_, y)| y.to_string()).collect();
    let hand =
        format!("let toks = [{}]\nlet labels = [{}]\ndata d = tensors(toks, labels) |> batch(4)", padded.join(", "), labels.join(", "));
    let (want, _) = losses(&dir, &hand, "cross_entropy(model(x, cast(x > 0, f32)), y)", &[]);
    assert_eq!(want.len(), 3 * (3 + 1), "three batches of four and the epoch's mean, three epochs");
    let (got, _) = losses(&dir, &format!("data d = {SOURCE} |> pad_batch(4, length: 8)"), "cross_entropy(model(tokens, mask), label)", &[]);
    assert_eq!(got, want, "pad_batch against the same data padded by hand");
    // Bucket 4 holds 5 documents (batches of 2, 2, 1), bucket 8 the other 7 (2, 2, 2, 1).
    let shape = |b: usize, l: usize| vec![(DType::I64, vec![b, l]), (DType::I64, vec![b]), (DType::F32, vec![b, l])];
    let shapes = [shape(2, 4), shape(1, 4), shape(2, 8), shape(1, 8), shape(2, 6)];
    let (bucketed, compiled) = losses(
        &dir,
        &format!("data d = {SOURCE} |> bucket(2, boundaries: (4, 8), seed: 1)"),
        "cross_entropy(model(tokens, mask), label)",
        &shapes,
    );
    assert_eq!(bucketed.len(), 3 * (7 + 1), "seven batches and the epoch's mean, three epochs");
    assert!(bucketed.iter().all(|(_, l)| f64::from_bits(*l).is_finite()));
    assert_eq!(compiled, [true, true, true, true, false], "a step per batch shape, and no other");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The element's types: the mask is a record's field `mask`, a tuple's last item, and beside a
/// single tensor as `(x: ..., mask: ...)`; `bucket`'s length is the symbolic `L`.
#[test]
fn the_checker_types_the_padded_element_and_its_mask() {
    let dir = scratch("sequences-types");
    let types = |stages: &str| {
        let (s, p) = pipeline_of(&dir, &format!("use std.data\ndata d = {SOURCE} {stages}\n"));
        let show = |v: &Value| match v {
            Value::Tensor(n) => s.t.ty(*n).to_string(),
            other => other.kind().to_string(),
        };
        match &p.elem {
            Value::Record(items) => items.iter().map(|(k, v)| format!("{k}: {}", show(v))).collect::<Vec<_>>().join(", "),
            Value::Tuple(items) => items.iter().map(show).collect::<Vec<_>>().join(", "),
            other => show(other),
        }
    };
    assert_eq!(types("|> pad_batch(4, length: 8)"), "tokens: i64[B, 8], label: i64[B], mask: f32[B, 8]");
    assert_eq!(types("|> map(r => (r.tokens, r.label)) |> pad_batch(4, length: 8, drop_last: true)"), "i64[4, 8], i64[4], f32[4, 8]");
    assert_eq!(types("|> map(r => r.tokens) |> pad_batch(4, length: 8)"), "x: i64[B, 8], mask: f32[B, 8]");
    assert_eq!(types("|> bucket(4, boundaries: (8, 16))"), "tokens: i64[B, L], label: i64[B], mask: f32[B, L]");
    assert_eq!(types("|> pack(length: 16) |> batch(2)"), "tokens: i64[B, 16], segments: i64[B, 16]");
    let _ = std::fs::remove_dir_all(&dir);
}
