//! What a user reads and what the runtime acts on at the edges of a run: evaluation lines and
//! metrics files name their metrics, `evaluate` and `infer` act on `precision` (or say they do
//! not), `dlc bench` times an `infer` block as `infer` runs it, and the time to the first step
//! is recorded.

use std::path::Path;

use crate::common;
use common::{dlc_in, scratch, text};

fn iris_csv() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/data/sklearn/iris.csv").to_string()
}

/// The iris classifier with an evaluation clause `metrics`.
fn iris_program(metrics: &str) -> String {
    format!(
        "use std.nn\nuse std.data\nuse std.optim\n\
         model C() {{\n  fc = Linear(4, 3)\n  forward(x: f32[B, 4]) -> f32[B, 3] = fc(x)\n}}\n\
         data flowers = csv(\"{csv}\", features: 4, label: 4, header: 1) |> map(r => (r.features / 8.0, r.label)) |> batch(50)\n\
         train {{\n  model = C()\n  data = flowers\n  loss = cross_entropy(model(x), y)\n  optimizer = adam(lr: 0.01)\n  epochs = 2\n\
           evaluate flowers every epoch {{ {metrics} }}\n}}\n",
        csv = iris_csv()
    )
}

fn metrics_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn evaluation_lines_and_metrics_files_name_each_metric() {
    let dir = scratch("metric-names");
    for (metrics, names) in [
        ("accuracy(model(x), y)", vec!["accuracy"]),
        ("(acc: accuracy(model(x), y), loss: cross_entropy(model(x), y))", vec!["acc", "loss"]),
        ("(accuracy(model(x), y), cross_entropy(model(x), y))", vec!["accuracy", "cross_entropy"]),
    ] {
        std::fs::write(dir.join("iris.dl"), iris_program(metrics)).unwrap();
        let _ = std::fs::remove_file(dir.join("m.jsonl"));
        let o = dlc_in(&dir, &["run", "iris.dl", "--metrics", "m.jsonl"]);
        let out = text(&o.stdout);
        assert!(o.status.success(), "{out}{}", text(&o.stderr));
        let line = out.lines().find(|l| l.starts_with("epoch 2 evaluate")).unwrap_or_else(|| panic!("an evaluation line: {out}"));
        assert!(line.starts_with("epoch 2 evaluate flowers: "), "{line}");
        for n in &names {
            assert!(line.contains(&format!("{n} 0.")) || line.contains(&format!("{n} 1.")), "`{n}` named: {line}");
        }
        let evals: Vec<serde_json::Value> = metrics_lines(&dir.join("m.jsonl")).into_iter().filter(|l| l["kind"] == "eval").collect();
        assert_eq!(evals.len(), 2, "one evaluation line an epoch");
        for e in &evals {
            assert_eq!(e["data"], "flowers");
            assert_eq!(e["examples"], 150);
            for n in &names {
                assert!(e[*n].as_f64().is_some_and(|v| v.is_finite()), "`{n}` in {e}");
            }
        }
    }
}

#[test]
fn the_first_step_is_timed_from_process_start() {
    let dir = scratch("first-step");
    std::fs::write(dir.join("iris.dl"), iris_program("accuracy(model(x), y)")).unwrap();
    let o = dlc_in(&dir, &["run", "iris.dl", "--set", "steps=1", "--metrics", "m.jsonl"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let lines = metrics_lines(&dir.join("m.jsonl"));
    let first = lines.iter().find(|l| l["kind"] == "first_step").expect("a first_step line");
    let (since, data) = (first["since_start_s"].as_f64().unwrap(), first["data_s"].as_f64().unwrap());
    assert!(since >= data && data >= 0.0 && since < 60.0, "{first}");
}

/// An `infer` block with a model of two linear layers and batch norm between them, its
/// precision given by `precision`.
fn infer_program(precision: &str) -> String {
    format!(
        "use std.nn\n\
         model M() {{\n  a = Linear(64, 64)\n  bn = BatchNorm1d(64)\n  b = Linear(64, 8)\n  forward(x: f32[B, 64]) -> f32[B, 8] = x |> a |> bn |> relu |> b\n}}\n\
         infer {{\n  model = M()\n  input = randn(f32[32, 64], seed: 3)\n  output = \"y.npy\"\n{precision}}}\n"
    )
}

/// The float32 values of a .npy file dlc wrote.
fn read_npy_f32(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap();
    let header = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    bytes[10 + header..].chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[test]
fn infer_computes_in_its_precision_and_says_what_it_ignores() {
    let dir = scratch("infer-precision");
    let run = |precision: &str| -> (Vec<f32>, String) {
        std::fs::write(dir.join("p.dl"), infer_program(precision)).unwrap();
        let o = dlc_in(&dir, &["run", "p.dl"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        (read_npy_f32(&dir.join("y.npy")), text(&o.stderr))
    };
    let (f32_out, f32_err) = run("");
    let (bf16_out, bf16_err) = run("  precision = bf16\n");
    let (tf32_out, tf32_err) = run("  precision = tf32\n");
    assert!(!f32_err.contains("warning") && !bf16_err.contains("warning"), "{f32_err}{bf16_err}");
    assert!(tf32_err.contains("does not act on `precision`"), "tf32 is said to be ignored: {tf32_err}");
    assert_eq!(tf32_out, f32_out, "tf32 computes as f32 on the CPU");
    // bf16 products (8-bit mantissas, f32 accumulation): close to f32, and not equal to it.
    assert_eq!(bf16_out.len(), f32_out.len());
    assert_ne!(bf16_out, f32_out, "precision = bf16 changes the products");
    let scale = f32_out.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (b, f) in bf16_out.iter().zip(&f32_out) {
        assert!((b - f).abs() <= 0.05 * scale, "{b} against {f} (scale {scale})");
    }
}

#[test]
fn evaluate_blocks_compute_in_their_precision() {
    let dir = scratch("evaluate-precision");
    let program = |precision: &str| {
        format!(
            "use std.nn\nuse std.data\n\
             model C() {{\n  fc = Linear(4, 3)\n  forward(x: f32[B, 4]) -> f32[B, 3] = fc(x)\n}}\n\
             data flowers = csv(\"{csv}\", features: 4, label: 4, header: 1) |> map(r => (r.features / 8.0, r.label)) |> batch(50)\n\
             evaluate {{\n  model = C()\n  data = flowers\n  metrics = (loss: cross_entropy(model(x), y))\n{precision}}}\n",
            csv = iris_csv()
        )
    };
    let loss = |precision: &str| -> f64 {
        std::fs::write(dir.join("e.dl"), program(precision)).unwrap();
        let o = dlc_in(&dir, &["run", "e.dl"]);
        let out = text(&o.stdout);
        assert!(o.status.success(), "{out}{}", text(&o.stderr));
        assert!(out.lines().any(|l| l.starts_with("evaluate: loss ")), "the metric is named: {out}");
        // The printed value has four decimals; the library gives all of it.
        let mut p = dlc::Program::run("e.dl", &program(precision), Some(&dir), false);
        assert!(p.ok, "{:?}", p.diagnostics());
        let info = p.session.t.recipes[0].clone();
        let mut t = dlc::train::Trainer::new(&mut p.session, info, dlc::train::TrainOptions::new(dir.clone(), 0)).expect("evaluation");
        t.evaluate_recipe().expect("evaluate")[0]
    };
    let (f32_loss, bf16_loss) = (loss(""), loss("  precision = bf16\n"));
    assert_ne!(f32_loss, bf16_loss, "bf16 products give another loss");
    assert!((f32_loss - bf16_loss).abs() < 0.02 * f32_loss, "{f32_loss} against {bf16_loss}");
}

#[test]
fn bench_times_an_infer_block_with_batch_norm_folded_as_infer_runs_it() {
    let dir = scratch("bench-infer");
    std::fs::write(dir.join("p.dl"), infer_program("")).unwrap();
    let folds = |args: &[&str]| -> u64 {
        let o = dlc_in(&dir, &[&["bench", "p.dl", "--json", "--steps", "2"], args].concat());
        assert!(o.status.success(), "{}", text(&o.stderr));
        let out = text(&o.stdout);
        let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
        v["folded_batch_norms"].as_u64().unwrap()
    };
    // As `infer` computes it (and `dlc explain` reports it); `--no-fuse` times the model as written.
    assert_eq!(folds(&[]), 1, "the batch norm is folded into the first linear layer");
    assert_eq!(folds(&["--no-fuse"]), 0);
}
