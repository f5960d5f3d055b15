//! `dlc explain` about GPUs: where every kernel of every example and bench program runs on
//! the (emulated) GPU, and the roofline estimate of `--gpu`, checked against the tuning guide's
//! measurement.

use std::process::Command;

use crate::common;
use common::{dlc, text};

/// No step, evaluation or `infer` block of any example or bench program goes through the host
/// on a GPU: `dlc explain` on the emulated GPU places every kernel on the device (or computes it
/// once and keeps it). A new op without a device kernel fails this, naming the program and op.
#[test]
fn no_example_or_bench_program_goes_through_the_host_on_a_gpu() {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut files: Vec<std::path::PathBuf> = ["examples", "bench"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root.join(d)).expect("a directory").map(|e| e.expect("an entry").path()))
        .filter(|p| p.extension().is_some_and(|e| e == "dl"))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "{files:?}");
    let mut placed = 0;
    let mut arenas = 0;
    for f in &files {
        let o = Command::new(env!("CARGO_BIN_EXE_dlc"))
            .args(["explain", f.to_str().expect("utf-8 path"), "--json"])
            .current_dir(root)
            .env("NO_COLOR", "1")
            .env("DLC_EMULATE_GPU", "1")
            .output()
            .expect("run dlc");
        assert!(o.status.success(), "{}: {}", f.display(), text(&o.stderr));
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
        let items = report["items"].as_array().or(report.as_array()).expect("items").clone();
        for item in items.iter().filter(|i| !i["device_plan"].is_null()) {
            placed += 1;
            assert_eq!(item["device_plan"]["host"], serde_json::json!({}), "{} ({}): {}", f.display(), item["what"], item["device_plan"]);
            // The plan's arena holds its values alive at once, and wastes little beyond that
            // (greedy placement by size; offsets aligned to 256 bytes).
            let (size, live) = (
                item["device_plan"]["arena_bytes"].as_u64().expect("arena"),
                item["device_plan"]["arena_live_peak"].as_u64().expect("peak"),
            );
            assert!(
                size >= live && size as f64 <= live as f64 * 1.25 + 65536.0,
                "{} ({}): arena {size} for {live}",
                f.display(),
                item["what"]
            );
            arenas += (size > 0) as usize;
        }
    }
    assert!(placed >= 30, "only {placed} plans were placed");
    assert!(arenas >= 30, "only {arenas} plans have an arena");
}

/// A large embedding's gradient (50,000 rows, 2,048 indices a step: 10^8 rows x indices, past
/// what a thread an output element could scan) is a device kernel too, not a round trip.
#[test]
fn a_large_embeddings_gradient_runs_on_the_device() {
    let dir = common::scratch("explain-embedding");
    let data = std::path::Path::new(common::ROOT).join("examples/data/tinyshakespeare/input.txt");
    let program = format!(
        "use std.nn\nuse std.data\nuse std.optim\n\
         model E(vocab: int = 50000, dim: int = 16) {{\n  tok = Embedding(vocab, dim)\n  head = Linear(dim, 65)\n  \
         forward(idx: i64[B, T]) -> f32[B, T, 65] = head(tok(idx))\n}}\n\
         data d = text(\"{}\", block: 64, level: \"char\") |> batch(32, drop_last: true)\n\
         train {{\n  model = E()\n  data = d\n  loss = cross_entropy(reshape(model(x), (-1, 65)), flatten(y))\n  \
         optimizer = sgd(lr: 0.1)\n  steps = 1\n}}\n",
        data.display()
    );
    std::fs::write(dir.join("e.dl"), program).expect("written");
    let o = common::command(&dir).args(["explain", "e.dl", "--json"]).env("DLC_EMULATE_GPU", "1").output().expect("run dlc");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let items = report["items"].as_array().or(report.as_array()).expect("items").clone();
    let step = items.iter().find(|i| !i["device_plan"].is_null()).expect("a step placed on the device");
    assert_eq!(step["device_plan"]["host"], serde_json::json!({}), "{}", step["device_plan"]);
    assert_eq!(step["device_plan"]["generated"]["take_grad"], serde_json::json!(1), "{}", step["device_plan"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `dlc explain --gpu` estimates a plan on paper. The model is checked against the tuning
/// guide's measurement on a Quadro RTX 8000: the GELU of about a million values took 65 µs as
/// five eager kernels and 16 µs fused; the estimate for bench/gelu_1m.dl (2^20 values) must be
/// within 20% of each.
#[test]
fn explain_estimates_a_plan_on_a_gpu_on_paper() {
    let o = dlc(&["explain", "bench/gelu_1m.dl", "--gpu", "rtx8000", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let items = report["items"].as_array().or(report.as_array()).expect("items");
    let r = &items.iter().find(|i| i["what"] == "infer").expect("the infer block")["roofline"];
    let (fused, eager) = (r["predicted_ms"].as_f64().expect("fused") * 1e3, r["eager_predicted_ms"].as_f64().expect("eager") * 1e3);
    assert_eq!((r["launches"].as_u64(), r["eager_launches"].as_u64()), (Some(1), Some(5)), "{r}");
    assert!((fused / 16.0 - 1.0).abs() <= 0.2, "fused {fused} µs against the guide's 16: {r}");
    assert!((eager / 65.0 - 1.0).abs() <= 0.2, "eager {eager} µs against the guide's 65: {r}");
    let bad = dlc(&["explain", "bench/gelu_1m.dl", "--gpu", "v100"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("no GPU called `v100` (known: h100"), "{}", text(&bad.stderr));
}
