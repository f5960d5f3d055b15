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
