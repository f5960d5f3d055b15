//! `infer` blocks run where the recipe says, through the same compiled plan in `dlc run` and
//! `dlc bench`.

use crate::common;
use common::text;
use std::path::Path;

/// `dlc bench` on an `infer` block times exactly what `dlc run` executes: on the emulated GPU
/// (`DLC_EMULATE_GPU=1 --device cuda`) both go through the device executor, and the kernels
/// `run` launches for the block are the ones each of `bench`'s runs launches (the same plan,
/// compiled by one function), with the input computed once before either.
#[test]
fn bench_and_run_of_an_infer_block_execute_the_same_plan_on_the_emulated_gpu() {
    // Small: the emulated GPU runs each block's threads for real.
    let dir = crate::common::scratch("infer-device");
    let path = dir.join("softmax.dl");
    std::fs::write(&path, "infer rows {\n  model = softmax\n  input = randn(f32[8, 100], seed: 0)\n}\n").expect("written");
    let file = path.to_str().expect("a UTF-8 path");
    let emulated =
        |args: &[&str]| common::command(Path::new(common::ROOT)).args(args).env("DLC_EMULATE_GPU", "1").output().expect("run dlc");
    let run = emulated(&["run", file, "--device", "cuda"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let err = text(&run.stderr);
    let line = err.lines().find(|l| l.contains("kernel launches from")).unwrap_or_else(|| panic!("a device line:\n{err}"));
    let launches = |l: &str| l.split_whitespace().nth(1).and_then(|n| n.parse::<u64>().ok()).expect("a count");
    // The block's own launches: the input's plan (run once, as in bench) and the model's.
    let run_launches = launches(line);
    let bench = |steps: &str| {
        let o = emulated(&["bench", file, "--device", "cuda", "--json", "--steps", steps, "--warmup", "0"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
        assert_eq!((&report["what"], &report["device"]), (&serde_json::json!("infer"), &serde_json::json!("cuda")), "{report}");
        report["device_report"]["launches"].as_u64().expect("launches")
    };
    // One timed run: the input once and the model once, as `run` does.
    let one = bench("1");
    assert_eq!(one, run_launches, "bench's run launches what run's does\n{err}");
    // Three: the model's launches twice more, and there are some.
    let three = bench("3");
    assert!(three > one && (three - one) % 2 == 0, "{one} then {three}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A small causal transformer (std.nn's TransformerBlock) and a model whose every position sees
/// the window's mean, each with a `generate` block over a 28-character vocabulary.
fn sampling_programs(dir: &Path) {
    std::fs::write(dir.join("vocab.txt"), "the quick brown fox jumps over the lazy dog\n").expect("written");
    let block = |model: &str, context: usize, seed: u64| {
        format!(
            "infer sample {{\n  model = {model}\n  input = \"the \"\n  vocab = \"vocab.txt\"\n  context = {context}\n  generate = 24\n  temperature = 0.8\n  seed = {seed}\n}}\n"
        )
    };
    let causal = "use std.nn\n\nmodel Tiny(vocab: int = 28, dim: int = 16, heads: int = 2, block: int = 12) {\n  tok = Embedding(vocab, dim)\n  pos = Embedding(block, dim)\n  b1 = TransformerBlock(dim, heads, block)\n  ln = LayerNorm(dim)\n  head = Linear(dim, vocab)\n  forward(idx: i64[B, T]) -> f32[B, T, vocab] {\n    let x = tok(idx) + pos(arange(T))\n    head(ln(b1(x)))\n  }\n}\n\n";
    let lookahead = "use std.nn\n\nmodel Mix(vocab: int = 28, dim: int = 16) {\n  tok = Embedding(vocab, dim)\n  head = Linear(dim, vocab)\n  forward(idx: i64[B, T]) -> f32[B, T, vocab] {\n    let x = tok(idx)\n    head(x + mean(x, axis: 1, keepdim: true))\n  }\n}\n\n";
    std::fs::write(dir.join("causal.dl"), format!("{causal}{}", block("Tiny()", 12, 0))).expect("written");
    std::fs::write(dir.join("causal_seed1.dl"), format!("{causal}{}", block("Tiny()", 12, 1))).expect("written");
    std::fs::write(dir.join("lookahead.dl"), format!("{lookahead}{}", block("Mix()", 8, 0))).expect("written");
}

/// The sample a `generate` run printed, and its summary line.
fn sampled(out: &std::process::Output) -> (String, String) {
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let sample = stdout.split_once("infer: sample\n").map(|(_, s)| s.trim_end_matches('\n').to_string()).expect("a sample");
    let err = text(&out.stderr);
    let summary = err.lines().find(|l| l.starts_with("infer: sampled")).unwrap_or_else(|| panic!("a summary:\n{err}")).to_string();
    (sample, summary)
}

/// `generate` compiles one plan for every window length of a causal model (padded on the right,
/// checked once against the unpadded window's own plan) and falls back to one plan per length
/// for a model that looks ahead; the sample is reproducible from its seed and another seed
/// samples otherwise.
#[test]
fn generate_pads_short_windows_of_a_causal_model_and_not_of_one_that_looks_ahead() {
    let dir = common::scratch("generate-cpu");
    sampling_programs(&dir);
    let (sample, summary) = sampled(&common::dlc_in(&dir, &["run", "causal.dl"]));
    assert!(sample.starts_with("the ") && sample.chars().count() == 4 + 24, "{sample:?}");
    // The context plan and the first short window's own (the check): not one per length (8).
    assert!(summary.contains("with 2 compiled plans: short windows padded"), "{summary}");
    assert_eq!(sampled(&common::dlc_in(&dir, &["run", "causal.dl"])).0, sample, "the same seed samples the same text");
    assert_ne!(sampled(&common::dlc_in(&dir, &["run", "causal_seed1.dl"])).0, sample, "another seed samples otherwise");
    let (sample, summary) = sampled(&common::dlc_in(&dir, &["run", "lookahead.dl"]));
    assert_eq!(sample.chars().count(), 4 + 24, "{sample:?}");
    // Windows of 4, 5, 6 and 7 characters each have their plan, and the context's (8) its own.
    assert!(summary.contains("with 5 compiled plans, one per window length"), "{summary}");
    // `dlc bench` times the full window's sampler a token at a time.
    let o = common::dlc_in(&dir, &["bench", "causal.dl", "--json", "--steps", "5", "--warmup", "1"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!((&report["what"], &report["steps"]), (&serde_json::json!("generate"), &serde_json::json!(5)), "{report}");
    assert!(report["median_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// On the emulated GPU the sampler runs in the plan: the same sample as the CPU's, character for
/// character, nothing through the host, and the steady-state runs replayed as graphs.
#[test]
fn generate_on_the_emulated_gpu_samples_what_the_cpu_samples_without_round_trips() {
    let dir = common::scratch("generate-gpu");
    sampling_programs(&dir);
    let (cpu, _) = sampled(&common::dlc_in(&dir, &["run", "causal.dl"]));
    let out = common::command(&dir).args(["run", "causal.dl", "--device", "cuda"]).env("DLC_EMULATE_GPU", "1").output().expect("run dlc");
    let (gpu, summary) = sampled(&out);
    assert_eq!(gpu, cpu, "{summary}");
    let err = text(&out.stderr);
    let device = err.lines().find(|l| l.contains("kernel launches from")).unwrap_or_else(|| panic!("a device line:\n{err}"));
    assert!(device.contains("from 2 compiled plans") && device.contains("round trips through the host: nothing"), "{device}");
    let replayed =
        device.split("; ").find_map(|p| p.strip_suffix(" graphs")).and_then(|p| p.split_whitespace().next()?.parse::<u32>().ok());
    assert!(replayed.is_some_and(|r| r >= 20), "most of 24 tokens replayed: {device}");
    let _ = std::fs::remove_dir_all(&dir);
}
