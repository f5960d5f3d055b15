//! Data pipelines executed on the bundled data: sources, `map` through the traced lambda,
//! `shuffle` (seeded, reshuffled per epoch), `batch` (drop_last), take/skip/split.

use dlc::api::RuntimeHost;
use dlc::pipeline;
use dlc::runtime::data::idx;
use dlc_language::eval::{Mode, Session, Value};
use std::path::{Path, PathBuf};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Check a program in `examples/` and return its session (pipelines are module items).
fn load(src: &str) -> Session {
    let mut s = Session::new(Mode::Check);
    let mut host = RuntimeHost::new(Some(examples()), false);
    assert!(s.run_source("pipeline_test.dl", src, &mut host), "{:?}", s.diagnostics());
    s
}

fn epoch(s: &Session, name: &str, e: u64) -> Vec<pipeline::Element> {
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get(name).cloned() else { panic!("no pipeline {name}") };
    pipeline::run(&p, &examples(), &s.t.graph, e).expect("pipeline runs")
}

#[test]
fn mnist_test_split_normalised_and_batched() {
    let s = load(
        "use std.data\ndata test_set = mnist(\"data/mnist\", split: \"test\") |> map(r => (flatten(to_unit(r.image)), r.label)) |> batch(1000)\n",
    );
    let batches = epoch(&s, "test_set", 0);
    assert_eq!(batches.len(), 10);
    assert_eq!(batches[0][0].shape, vec![1000, 784]);
    assert_eq!(batches[0][1].shape, vec![1000]);
    assert_eq!(batches[0][1].to_f64()[..4], [7.0, 2.0, 1.0, 0.0]);
    // The same pixels, read directly, divided by 255.
    let raw = idx::read(&examples().join("data/mnist/t10k-images-idx3-ubyte.gz")).unwrap().to_f64();
    let got = batches[3][0].to_f64();
    for i in (0..784 * 1000).step_by(997) {
        assert!((got[i] - raw[3 * 784 * 1000 + i] / 255.0).abs() < 1e-6);
    }
}

#[test]
fn shuffle_is_seeded_and_reshuffles_each_epoch() {
    let s = load(
        "use std.data\ndata d = csv(\"data/sklearn/iris.csv\", features: 4, label: 4, header: 1) |> shuffle(seed: 5) |> batch(32, drop_last: true)\n",
    );
    let a = epoch(&s, "d", 0);
    let b = epoch(&s, "d", 0);
    let c = epoch(&s, "d", 1);
    assert_eq!(a.len(), 4, "150 rows in batches of 32, the last 22 dropped");
    let labels = |e: &Vec<pipeline::Element>| e.iter().flat_map(|b| b[1].to_f64()).collect::<Vec<_>>();
    assert_eq!(labels(&a), labels(&b), "same seed, same epoch: same order");
    assert_ne!(labels(&a), labels(&c), "a new epoch reshuffles");
    let unshuffled = load("use std.data\ndata d = csv(\"data/sklearn/iris.csv\", features: 4, label: 4, header: 1)\n");
    let all = epoch(&unshuffled, "d", 0);
    assert_eq!(all.len(), 150);
    assert_eq!(all[0][0].to_f64(), vec![5.1f32 as f64, 3.5f32 as f64, 1.4f32 as f64, 0.2f32 as f64]);
}

#[test]
fn text_windows_take_skip_split() {
    let s = load(
        "use std.data\ndata t = text(\"data/tinyshakespeare/input.txt\", block: 8) |> skip(1) |> take(100) |> split(0.9)\ndata v = text(\"data/tinyshakespeare/input.txt\", block: 8) |> take(100) |> split(0.9, part: \"rest\")\n",
    );
    let t = epoch(&s, "t", 0);
    let v = epoch(&s, "v", 0);
    assert_eq!((t.len(), v.len()), (90, 10));
    // Targets are the inputs shifted by one character.
    let (x, y) = (t[0][0].to_f64(), t[0][1].to_f64());
    assert_eq!(x[1..], y[..7]);
}

#[test]
fn a_missing_data_file_is_a_clear_error() {
    let s = load("use std.data\ndata d = mnist(\"data/nowhere\")\n");
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get("d").cloned() else { panic!() };
    let e = pipeline::run(&p, &examples(), &s.t.graph, 0).unwrap_err().to_string();
    assert!(e.contains("data/nowhere/train-images-idx3-ubyte") && e.contains("cannot read"), "{e}");
}

/// Every element of `batches` as bits, batch by batch (f32 values as f32 bits, the rest as f64).
fn bits(batches: impl IntoIterator<Item = pipeline::Element>) -> Vec<Vec<Vec<u64>>> {
    batches.into_iter().map(|b| b.iter().map(|t| t.to_f64().into_iter().map(f64::to_bits).collect()).collect()).collect()
}

/// A streaming epoch (each batch made on demand from the prepared elements, as the feed's
/// workers make them) equals the whole-epoch application of the stages, bit for bit: the
/// shuffle's order, each augmentation's draws by position, `map`s after them, take/skip, the
/// final batch without `drop_last`; for two epochs, from a middle batch on (a resumed run), with
/// the feed's worker threads, and dealt to two ranks.
#[test]
fn a_streamed_epoch_equals_the_whole_epoch_applied() {
    let s = load(
        "use std.data\nfn prepare(r) = (normalize(to_unit(r.image), mean: 0.5, std: 0.25), r.label)\n\
         data d = cifar(\"data/cifar-10/test_batch_first800.bin\") |> take(300) |> random_crop(padding: 4, seed: 3) \
         |> shuffle(seed: 9) |> random_flip(seed: 4) |> map(prepare) |> skip(7) |> batch(50) |> prefetch(3)\n",
    );
    let Some(Value::Pipeline(p)) = s.t.modules[s.main].items.get("d").cloned() else { panic!("no pipeline d") };
    for e in 0..2 {
        let whole = bits(pipeline::run(&p, &examples(), &s.t.graph, e).expect("pipeline runs"));
        assert_eq!(whole.len(), 6, "293 elements in batches of 50, the last one short");
        let mut cache = None;
        let streamed = pipeline::run_cached(&p, &examples(), &s.t.graph, e, &mut cache).expect("streams");
        assert!(matches!(streamed, pipeline::Batches::Stream(_)), "the epoch streams");
        assert_eq!(bits(streamed.into_iter().map(|b| b.expect("batch"))), whole, "epoch {e}");
        for workers in [1, 3] {
            let again = pipeline::run_cached(&p, &examples(), &s.t.graph, e, &mut cache).expect("streams");
            let fed = pipeline::Feed::start(again, 2, workers, 3, Default::default());
            assert_eq!(bits(fed.map(|b| b.expect("batch"))), whole[2..], "epoch {e}, {workers} workers, from batch 2");
        }
    }
    assert_ne!(
        bits(pipeline::run(&p, &examples(), &s.t.graph, 0).unwrap()),
        bits(pipeline::run(&p, &examples(), &s.t.graph, 1).unwrap()),
        "each epoch draws anew"
    );
}
