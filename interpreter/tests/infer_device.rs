//! `infer` blocks run where the recipe says, through the same compiled plan in `dlc run` and
//! `dlc bench`.

mod common;
use common::text;
use std::path::Path;

/// `dlc bench` on an `infer` block times exactly what `dlc run` executes: on the emulated GPU
/// (`DLC_EMULATE_GPU=1 --device cuda`) both go through the device executor, and the kernels
/// `run` launches for the block are the ones each of `bench`'s runs launches (the same plan,
/// compiled by one function), with the input computed once before either.
#[test]
fn bench_and_run_of_an_infer_block_execute_the_same_plan_on_the_emulated_gpu() {
    // Small: the emulated GPU runs each block's threads for real.
    let dir = std::env::temp_dir().join(format!("dlc-infer-device-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
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
