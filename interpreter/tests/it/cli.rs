//! The `dlc` binary driven as a user drives it: subcommands, exit codes, JSON, and the REPL with
//! piped input.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::common;
use common::{dlc, text};

#[test]
fn version_and_help() {
    let o = dlc(&["--version"]);
    assert!(o.status.success());
    assert!(text(&o.stdout).starts_with("dlc "), "{}", text(&o.stdout));
    let h = dlc(&["--help"]);
    assert!(text(&h.stdout).contains("Examples:"));
}

#[test]
fn check_summarises_models() {
    let o = dlc(&["check", "examples/mnist_mlp.dl"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    // 784*512+512 + 512*512+512 + 512*10+10, as PyTorch counts it.
    assert!(out.contains("model Mlp: 669,706 parameters"), "{out}");
    assert!(out.contains("fc1.weight") && out.contains("f32[512, 784]"), "{out}");
    assert!(out.contains("train: model: Mlp, data: data pipeline of (f32[128, 784], i64[128])"), "{out}");
    assert!(out.contains("loss: f32[]"), "{out}");
}

#[test]
fn check_reports_errors_with_exit_1() {
    let dir = crate::common::scratch("cli");
    let f = dir.join("bad.dl");
    std::fs::write(&f, "use std.nn\nlet layer = Linear(512, 10)\nlet x = randn(f32[8, 784], seed: 0)\nprint(layer(x))\n").unwrap();
    let o = dlc(&["check", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("E0302"), "{err}");
    // At the layer's construction, the line to change, with the call that fits.
    assert!(err.contains("change to `Linear(784, 10)`"), "{err}");
    assert!(err.contains("bad.dl:2:13"), "{err}");
    let j = dlc(&["check", "--json", f.to_str().unwrap()]);
    assert_eq!(j.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).expect("valid JSON");
    assert_eq!(v["diagnostics"][0]["code"], "E0302");
    assert_eq!(v["diagnostics"][0]["labels"][0]["span"]["line"], 2);
    assert_eq!(v["diagnostics"][0]["labels"][0]["span"]["column"], 13);
}

#[test]
fn run_prints_and_runs_a_custom_step() {
    let o = dlc(&["run", "examples/gelu.dl"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("tensor(["));
    // A custom `step` block (the GAN: two models, two optimisers) runs and logs both losses.
    let t = dlc(&["run", "examples/gan.dl", "--set", "steps=3"]);
    assert!(t.status.success(), "{}", text(&t.stderr));
    let out = text(&t.stdout);
    assert!(out.contains("step 3: d_loss ") && out.contains(", g_loss ") && out.contains("trained 3 steps"), "{out}");
}

#[test]
fn seed_changes_parameter_init_reproducibly() {
    let dir = crate::common::scratch("seed");
    let f = dir.join("seed.dl");
    std::fs::write(&f, "use std.nn\nprint(Linear(4, 3).weight)\n").unwrap();
    let f = f.to_str().unwrap();
    let a = text(&dlc(&["run", f]).stdout);
    let b = text(&dlc(&["run", "--seed", "0", f]).stdout);
    let c = text(&dlc(&["run", "--seed", "5", f]).stdout);
    assert_eq!(a, b, "the default seed is 0");
    assert_ne!(a, c, "another seed gives other weights");
    assert!(a.starts_with("tensor([["), "{a}");
}

#[test]
fn missing_file_is_a_clear_error() {
    let o = dlc(&["run", "no/such/file.dl"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("cannot read `no/such/file.dl`"), "{}", text(&o.stderr));
}

#[test]
fn repl_with_piped_input() {
    let hist = std::env::temp_dir().join(format!("dlc-hist-{}", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_dlc"))
        .arg("repl")
        .env("DLC_HISTORY", &hist)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start repl");
    let gelu = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/gelu.dl");
    let input = format!(
        "let x = [1.0, 2.0]\nx * 2\n:type x @ x\nlet y = x +* 1\nfn f(a,\n      b) = a * b\nf(x, 3)\n:type undefined_name\nlet m = [[1, 2],\n [3, 4]]\nsum(m)\n:load {gelu}\n:type guide_gelu(m)\n:reset\n:type x\n:bogus\n:quit\nprint(\"not reached\")\n"
    );
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    let out = text(&o.stdout);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("tensor([2., 4.])"), "{out}");
    assert!(out.contains("f32[]"), "{out}");
    assert!(out.contains("tensor([3., 6.])"), "multi-line fn then call: {out}");
    assert!(out.contains("tensor(10)"), "multi-line literal: {out}");
    assert!(out.contains("f32[2, 2]"), ":load defines guide_gelu: {out}");
    assert_eq!(out.matches("tensor([ 0.6979").count(), 2, ":load runs the file's prints: {out}");
    assert!(err.contains("unknown command `:bogus`"), "{err}");
    assert!(!out.contains("not reached"), ":quit ends the session: {out}");
    assert!(err.contains("E0101"), "syntax error is reported and the session goes on: {err}");
    assert!(err.contains("E0201"), "{err}");
    // After :reset, x is gone.
    assert_eq!(err.matches("cannot find `x`").count(), 1, "{err}");
    assert!(std::fs::read_to_string(&hist).map(|h| h.contains("let x = [1.0, 2.0]")).unwrap_or(false), "history file written");
}

/// Ctrl-C in the middle of training saves a checkpoint and exits 130; `--resume` continues from it.
#[test]
fn ctrl_c_saves_a_checkpoint_that_resumes() {
    let dir = crate::common::scratch("sigint");
    let ck = dir.join("ck");
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/data/sklearn/iris.csv");
    let src = format!(
        "use std.nn\nuse std.data\nuse std.optim\nmodel M() {{\n  fc = Linear(4, 3)\n  forward(x: f32[B, 4]) = fc(x)\n}}\n\
         data d = csv(\"{data}\", features: 4, label: 4, header: 1) |> map(r => (r.features / 8.0, r.label)) |> batch(16)\n\
         train {{\n  model = M()\n  data = d\n  loss = cross_entropy(model(x), y)\n  optimizer = sgd(lr: 0.1)\n  epochs = 1000000\n  checkpoint \"{}\" every 1000000 steps\n}}\n",
        ck.display()
    );
    let f = dir.join("long.dl");
    std::fs::write(&f, src).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dlc"))
        .args(["run", f.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until training is under way (the first epoch's summary), however slow the machine is,
    // so the interrupt lands in training and not before the handler exists.
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while std::io::BufRead::read_line(&mut out, &mut line).unwrap_or(0) > 0 && !line.contains("epoch 1 done") {
        line.clear();
    }
    let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let drain = std::thread::spawn(move || std::io::Read::read_to_end(&mut out, &mut vec![]));
    let o = child.wait_with_output().unwrap();
    let _ = drain.join();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ck.join("manifest.json")).expect("checkpoint saved on Ctrl-C")).unwrap();
    let step = manifest["step"].as_u64().unwrap();
    assert!(step > 0);
    // The message names the exact command that resumes; run as a shell runs it (with a step
    // limit, as the recipe trains for a million epochs), it continues from the checkpoint.
    let err = text(&o.stderr);
    let said = format!("training interrupted at step {step}; the checkpoint in {} continues it:\n  ", ck.display());
    let command = err.split(&said).nth(1).and_then(|rest| rest.lines().next()).unwrap_or_else(|| panic!("`{said}` in {err}"));
    assert_eq!(command, format!("{} run {} --resume {}", env!("CARGO_BIN_EXE_dlc"), f.display(), ck.display()));
    let r = Command::new("sh")
        .arg("-c")
        .arg(format!("{command} --set steps={}", step + 5))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", text(&r.stderr));
    assert!(text(&r.stdout).contains(&format!("resumed from {} at step {step}", ck.display())), "{}", text(&r.stdout));
    assert!(text(&r.stdout).contains(&format!("trained {} steps", step + 5)), "{}", text(&r.stdout));
}

/// A run killed with SIGKILL at arbitrary moments, while it writes a checkpoint every step, always
/// leaves a checkpoint that loads and resumes: files are written aside and renamed.
#[test]
fn sigkill_never_leaves_a_corrupt_checkpoint() {
    let dir = crate::common::scratch("sigkill");
    let ck = dir.join("ck");
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/data/sklearn/iris.csv");
    let src = format!(
        "use std.nn\nuse std.data\nuse std.optim\nmodel M() {{\n  fc1 = Linear(4, 64)\n  fc2 = Linear(64, 3)\n  forward(x: f32[B, 4]) = fc2(relu(fc1(x)))\n}}\n\
         data d = csv(\"{data}\", features: 4, label: 4, header: 1) |> map(r => (r.features / 8.0, r.label)) |> batch(16)\n\
         train {{\n  model = M()\n  data = d\n  loss = cross_entropy(model(x), y)\n  optimizer = adam(lr: 0.01)\n  epochs = 1000000\n  checkpoint \"{}\" every 1 steps\n}}\n",
        ck.display()
    );
    let f = dir.join("kill.dl");
    std::fs::write(&f, src).unwrap();
    // Kill at growing delays until two kills have landed after the first checkpoint existed
    // (however slow the machine), each time checking the checkpoint still loads and resumes.
    let mut landed = 0;
    for delay_ms in [300u64, 450, 620, 810, 1100, 1600, 2400, 3600, 5000] {
        if landed >= 2 {
            break;
        }
        let had_checkpoint = ck.join("manifest.json").exists();
        // A run never clobbers an earlier one: once a checkpoint exists, each run resumes it
        // (before, one killed ahead of its first checkpoint may have left a metrics file).
        let resume: &[&str] = if had_checkpoint { &["--resume", ck.to_str().unwrap()] } else { &["--overwrite"] };
        let mut child = Command::new(env!("CARGO_BIN_EXE_dlc"))
            .args(["run", f.to_str().unwrap()])
            .args(resume)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL: no handler runs
        let _ = child.wait();
        if !ck.join("manifest.json").exists() {
            continue; // killed before the first checkpoint
        }
        if had_checkpoint {
            landed += 1;
        }
        let r = dlc(&["run", f.to_str().unwrap(), "--resume", ck.to_str().unwrap(), "--set", "steps=1"]);
        let out = text(&r.stdout);
        // A checkpoint past step 1 means `steps=1` is already reached: resuming must still load it cleanly.
        assert!(r.status.success(), "checkpoint after SIGKILL at {delay_ms} ms did not load: {}", text(&r.stderr));
        assert!(out.contains("resumed from"), "{out}");
    }
    assert!(landed >= 2, "fewer than two kills landed while checkpoints were being written");
}

/// A data file that cannot be loaded is E0502 at the source expression, naming the file and row;
/// training does not start.
#[test]
fn bad_data_points_at_the_source_and_the_row() {
    let dir = crate::common::scratch("baddata");
    std::fs::write(dir.join("rows.csv"), "a,b,label\n1.0,2.0,0\n3.0,x,1\n").unwrap();
    let f = dir.join("bad.dl");
    std::fs::write(
        &f,
        "use std.nn\nuse std.data\nuse std.optim\nmodel M() {\n  fc = Linear(2, 2)\n  forward(x: f32[B, 2]) = fc(x)\n}\n\
         data d = csv(\"rows.csv\", features: 2, label: 2, header: 1) |> map(r => (r.features, r.label)) |> batch(2)\n\
         train {\n  model = M()\n  data = d\n  loss = cross_entropy(model(x), y)\n  optimizer = sgd()\n  epochs = 1\n  checkpoint \"ck\" every epoch\n}\n",
    )
    .unwrap();
    // Paths in a program are relative to its folder (docs/language.md, "Paths"), whatever the
    // working directory.
    let o =
        Command::new(env!("CARGO_BIN_EXE_dlc")).args(["run", "bad.dl"]).current_dir(&dir).env("NO_COLOR", "1").output().expect("run dlc");
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("E0502") && err.contains("rows.csv, row 3: column 2: `x` is not a number"), "{err}");
    assert!(err.contains("bad.dl:8:10"), "points at the csv(...) source: {err}");
    assert!(!dir.join("ck").exists(), "no checkpoint directory (nor its metrics file) is created");
}

/// `dlc explain --json`: the guide's gelu is one kernel (eager: five ops and three broadcasts),
/// and the AdamW update of every parameter of the MLP is one launch, the step's last.
#[test]
fn explain_reports_fused_kernels() {
    let o = dlc(&["explain", "bench/gelu_1m.dl", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: serde_json::Value = serde_json::from_str(&text(&o.stdout)).expect("JSON");
    let gelu = &r["items"][0];
    assert_eq!(gelu["what"], "infer");
    assert_eq!(gelu["kernels"], 1, "{gelu}");
    assert_eq!(gelu["regions"][0]["ops"], 5, "{gelu}");
    let o = dlc(&["explain", "bench/mlp_step_128.dl", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: serde_json::Value = serde_json::from_str(&text(&o.stdout)).expect("JSON");
    let step = &r["items"][0];
    assert_eq!(step["what"], "train");
    let last = step["sequence"].as_array().and_then(|s| s.last()).and_then(|v| v.as_str()).unwrap_or("");
    let regions: usize = last.trim_start_matches("group(").split(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(last.starts_with("group(") && regions >= 6, "the 6 parameters' updates are one launch: {last}");
    assert!(step["kernels"].as_u64().unwrap_or(999) * 3 < step["eager_kernels"].as_u64().unwrap_or(0), "{step}");
    // The biases' broadcasts are loaded inside each kernel that reads them, never materialised.
    assert!(step["rematerialised"]["broadcasts"].as_u64() >= Some(3), "{}", step["rematerialised"]);
    // softmax (max, subtract, exp, sum, divide) is one row kernel, no reduction left alone.
    let o = dlc(&["explain", "bench/softmax_rows.dl", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: serde_json::Value = serde_json::from_str(&text(&o.stdout)).expect("JSON");
    let softmax = &r["items"][0];
    assert_eq!(softmax["kernels"], 1, "{softmax}");
    assert_eq!(softmax["library_ops"], serde_json::json!([]), "{softmax}");
    assert_eq!(softmax["sequence"], serde_json::json!(["rows(2 regions, 2 reductions)"]), "{softmax}");
    // In the MLP step, log_softmax + nll's forward and backward rows are row kernels too.
    assert!(step["sequence"].as_array().is_some_and(|s| s.iter().any(|k| k.as_str().is_some_and(|k| k.starts_with("rows(")))), "{step}");
}

/// The kernel count for evaluation: conv -> batch norm -> relu is one convolution plus one
/// kernel per batch, batch norm's parameter-only work hoisted out of the batch loop; the memory
/// plan and autocast report are there for the training step.
#[test]
fn explain_reports_eval_specialisation_memory_and_precision() {
    let o = dlc(&["explain", "bench/conv_bn_relu_eval.dl", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: serde_json::Value = serde_json::from_str(&text(&o.stdout)).expect("JSON");
    let items = r["items"].as_array().expect("items");
    let eval = items.iter().find(|i| i["what"] == "evaluate").expect("an evaluate item");
    assert_eq!(eval["kernels"], 2, "{eval}");
    assert_eq!(eval["library_ops"], serde_json::json!(["conv2d"]), "{eval}");
    assert!(eval["hoisted_kernels"].as_u64().unwrap_or(0) >= 1, "{eval}");
    // Batch norm folded into the convolution: the kernel after it adds the shift and applies relu.
    assert_eq!(eval["folded_batch_norms"]["count"], 1, "{eval}");
    assert_eq!(eval["fused_ops"], 3, "shift, compare, select: {eval}");
    let train = items.iter().find(|i| i["what"] == "train").expect("a train item");
    let m = &train["memory"];
    assert!(m["peak_mib"].as_f64().unwrap_or(0.0) > 0.0, "{m}");
    // (This step writes so few values that they may all be live at once: its batch norm's
    // differences are recomputed where they are read, passes::inline_written.)
    assert!(m["intermediates_peak_mib"].as_f64() <= m["intermediates_without_reuse_mib"].as_f64(), "{m}");
    assert_eq!(train["precision"]["precision"], "f32");
    let o = dlc(&["explain", "bench/mlp_step_128_bf16.dl", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: serde_json::Value = serde_json::from_str(&text(&o.stdout)).expect("JSON");
    let m = &r["items"][0]["memory"];
    assert!(m["intermediates_peak_mib"].as_f64() < m["intermediates_without_reuse_mib"].as_f64(), "memory is reused: {m}");
    let p = &r["items"][0]["precision"];
    assert_eq!(p["precision"], "bf16", "{p}");
    assert_eq!(p["lowered"].as_array().map(|l| l.len()), Some(3), "three linear layers: {p}");
}

/// `checkpoint { ... }` in `dlc explain --json`: each block with what backward recomputes, and a
/// step memory plan below the same model's without the hint; `dlc bench --recipe` picks a recipe.
#[test]
fn explain_reports_checkpointed_blocks_and_their_memory() {
    let o = dlc(&["explain", "bench/residual_checkpoint.dl", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: serde_json::Value = serde_json::from_str(&text(&o.stdout)).expect("JSON");
    let train = |name: &str| r["items"].as_array().and_then(|i| i.iter().find(|i| i["name"] == name)).cloned().expect(name);
    let (ck, plain) = (train("checkpointed"), train("plain"));
    let blocks = ck["checkpoints"]["blocks"].as_array().cloned().unwrap_or_default();
    assert_eq!(blocks.len(), 4, "{}", ck["checkpoints"]);
    for b in &blocks {
        assert!(b["at"].as_str().is_some_and(|a| a.starts_with("residual_checkpoint.dl:")), "{b}");
        assert!(b["recomputed_library_ops"].as_u64() >= Some(1), "the block's first product is recomputed: {b}");
    }
    assert_eq!(plain["checkpoints"]["blocks"].as_array().map(|b| b.len()), Some(0));
    // Without the hint the compiler still recomputes gelu's output (automatic rematerialisation).
    assert!(plain["checkpoints"]["automatic_ops"].as_u64() >= Some(4), "{}", plain["checkpoints"]);
    let peak = |item: &serde_json::Value| item["memory"]["intermediates_peak_mib"].as_f64().unwrap_or(0.0);
    assert!(peak(&ck) < 0.7 * peak(&plain), "checkpointed {} MiB, plain {} MiB", peak(&ck), peak(&plain));
    let o = dlc(&["bench", "bench/residual_checkpoint.dl", "--recipe", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("named ones: `checkpointed`, `plain`"), "{}", text(&o.stderr));
}

/// Batch norm in training: its statistics and their gradients are sums over (N, H, W) fused with
/// the elementwise work that computes their input, which is never written; `x ** 2` is a multiply.
#[test]
fn explain_reports_reductions_fused_with_their_prologue() {
    let o = dlc(&["explain", "bench/conv_bn_step.dl", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: serde_json::Value = serde_json::from_str(&text(&o.stdout)).expect("JSON");
    let train = &r["items"][0];
    let reductions = train["prologue_reductions"].as_array().cloned().unwrap_or_default();
    // Per batch norm (two layers): the variance's sum of squares in forward, sum(dy * xhat) in
    // backward (sum(dy), the other, has no prologue; d/ds and d/dmu reuse the two since stop 53:
    // passes::sum_factors).
    assert_eq!(reductions.len(), 4, "{}", train["prologue_reductions"]);
    // (N, H, W): where they are in the step's layout.
    let axes = if r["layout"]["layout"] == "channels-last" { [0, 1, 2] } else { [0, 2, 3] };
    for red in &reductions {
        assert_eq!(red["axes"], serde_json::json!(axes), "{red}");
        assert_eq!(red["input"], "f32[64, 32, 32, 32]", "{red}");
    }
    let sequence: Vec<String> = train["sequence"].as_array().into_iter().flatten().filter_map(|s| s.as_str().map(String::from)).collect();
    assert_eq!(sequence.iter().filter(|s| s.starts_with("sum(prologue")).count(), reductions.len(), "{sequence:?}");
    let regions = train["regions"].as_array().cloned().unwrap_or_default();
    let ops: Vec<String> = regions
        .iter()
        .flat_map(|r| r["op_names"].as_array().cloned().unwrap_or_default())
        .filter_map(|o| o.as_str().map(String::from))
        .collect();
    assert!(!ops.iter().any(|o| o == "pow"), "x ** 2 is computed as x * x: {ops:?}");
}

/// `--device cuda` on a machine this build cannot run a GPU on is an error naming what is
/// missing (no GPU here: the driver library), exit 1, nothing trained; `--device auto` says in
/// one line that it runs on the CPU and trains.
#[test]
fn device_cuda_without_a_usable_gpu_is_a_clear_error_and_auto_falls_back() {
    let o = dlc(&["run", "examples/iris.dl", "--device", "cuda", "--set", "epochs=1"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("error: device = cuda") && (err.contains("libcuda.so.1") || err.contains("cannot run steps on a GPU yet")),
        "{err}"
    );
    assert!(!text(&o.stdout).contains("epoch 1"), "nothing trains");
    let o = dlc(&["run", "examples/iris.dl", "--device", "auto", "--set", "epochs=1"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert_eq!(err.lines().filter(|l| l.starts_with("device: device = auto")).count(), 1, "{err}");
    assert!(err.contains("running on the CPU"), "{err}");
    assert!(text(&o.stdout).contains("epoch 1"));
}

/// `dlc kernels` lists a program's generated kernels and emits them as CUDA C.
#[test]
fn kernels_lists_and_emits_cuda() {
    let o = dlc(&["kernels", "examples/mnist_mlp.dl", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let kinds: Vec<&str> = report["kernels"].as_array().expect("kernels").iter().filter_map(|k| k["kind"].as_str()).collect();
    assert!(kinds.contains(&"elementwise") && kinds.contains(&"rows") && kinds.contains(&"group"), "{kinds:?}");
    let o = dlc(&["kernels", "examples/gelu.dl", "--emit", "cuda"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let cu = text(&o.stdout);
    assert!(cu.contains("extern \"C\" __global__ void __launch_bounds__(256) print1_7_elementwise(") && cu.contains("dlc_erf("), "{cu}");
    let o = dlc(&["kernels", "examples/no_such_file.dl"]);
    assert_eq!(o.status.code(), Some(1));
}

/// `dlc tune` measures autotuning's choices and saves them; the next run takes them from the
/// file instead of measuring; a corrupt file is never used, and the next save replaces it.
#[test]
fn tune_saves_choices_that_later_runs_read_and_survives_a_corrupt_file() {
    let cache = std::env::temp_dir().join(format!("dlc-tune-cli-{}", std::process::id()));
    let tune = || {
        Command::new(env!("CARGO_BIN_EXE_dlc"))
            .args(["tune", "bench/mlp_step_128.dl"])
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .env("DLC_CACHE_DIR", &cache)
            .output()
            .expect("run dlc")
    };
    let o = tune();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let first = text(&o.stdout);
    assert!(first.contains("0 from the tuning file") && !first.contains("(0 measured now"), "{first}");
    let file = cache.join("tune.json");
    let saved: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).expect("saved")).expect("JSON");
    assert!(saved["machines"].as_object().expect("machines").values().all(|m| !m.as_object().expect("entries").is_empty()));
    let o = tune();
    let second = text(&o.stdout);
    assert!(second.contains("(0 measured now") && !second.contains(" 0 from the tuning file"), "{second}");
    std::fs::write(&file, "{\"format\": 1, \"machines\": {").expect("writable");
    let o = tune();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("0 from the tuning file"), "{}", text(&o.stdout));
    assert!(serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&file).expect("saved")).is_ok(), "replaced by a whole file");
    let _ = std::fs::remove_dir_all(&cache);
}

/// `--device cuda` on the emulated GPU (`DLC_EMULATE_GPU=1`): the steps run through the device
/// executor, the run ends with a line on what it launched and what ran on the host, and the
/// epoch's mean loss is the CPU's to the printed digits.
#[test]
fn device_cuda_on_the_emulated_gpu_trains_as_the_cpu_does() {
    let run = |emulate: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_dlc"));
        c.args(["run", "examples/iris.dl", "--device", if emulate { "cuda" } else { "cpu" }, "--set", "epochs=1"])
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .env("NO_COLOR", "1")
            .env("DLC_CACHE_DIR", std::env::temp_dir().join(format!("dlc-cli-tests-{}", std::process::id())));
        if emulate {
            c.env("DLC_EMULATE_GPU", "1");
        }
        c.output().expect("run dlc")
    };
    let (gpu, cpu) = (run(true), run(false));
    assert!(gpu.status.success(), "{}", text(&gpu.stderr));
    let err = text(&gpu.stderr);
    assert!(err.contains("device: device = cuda: emulated GPU"), "{err}");
    assert!(err.contains("kernel launches from") && err.contains("round trips through the host:"), "{err}");
    let epoch_line = |o: &Output| {
        text(&o.stdout).lines().find(|l| l.starts_with("epoch 1 done")).map(|l| l.split(" over ").next().unwrap_or("").to_string())
    };
    assert_eq!(epoch_line(&gpu), epoch_line(&cpu));
    assert!(epoch_line(&gpu).is_some(), "{}", text(&gpu.stdout));
}

/// `dlc explain` on a GPU says where each kernel of the step and the evaluation runs: generated
/// kernels, products on cuBLAS, and what goes through the host.
#[test]
fn explain_shows_the_device_plan_on_a_gpu() {
    let o = Command::new(env!("CARGO_BIN_EXE_dlc"))
        .args(["explain", "examples/mnist_mlp.dl", "--json"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .env("NO_COLOR", "1")
        .env("DLC_EMULATE_GPU", "1")
        .output()
        .expect("run dlc");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let items = report["items"].as_array().or(report.as_array()).expect("items");
    let step = items.iter().find(|i| i["what"] == "train").expect("a train item");
    let plan = &step["device_plan"];
    assert_eq!(step["device"]["device"], "cuda", "{step}");
    for kind in ["elementwise", "rows", "group"] {
        assert!(plan["generated"][kind].as_u64().unwrap_or(0) >= 1, "{plan}");
    }
    // Three linear layers: three products forward, three weight gradients, two input gradients.
    assert_eq!(plan["gemm"], 8, "{plan}");
    let eval = items.iter().find(|i| i["what"] == "evaluate").expect("an evaluate item");
    assert_eq!(eval["device_plan"]["gemm"], 3, "{}", eval["device_plan"]);
    // Nothing of the step goes through the host every run; the class indices' iota once.
    assert_eq!(plan["host"], serde_json::json!({}), "{plan}");
    assert_eq!(plan["once"]["iota"], 1, "{plan}");
    assert!(plan["generated"]["rand"].as_u64().unwrap_or(0) >= 1, "dropout's draws on the device: {plan}");
}

/// A recipe with `parallel = data_parallel(...)` gets its bucket plan from `dlc explain`: the
/// gradients in the order backward writes them, packed up to `bucket_mb`, each with the kernel
/// after which its all-reduce starts.
#[test]
fn explain_shows_the_data_parallel_buckets() {
    let dir = crate::common::scratch("explain-ddp");
    let f = dir.join("ddp.dl");
    std::fs::write(
        &f,
        "use std.nn\nuse std.data\nuse std.optim\n\
         model M() {\n  a = Linear(784, 512)\n  b = Linear(512, 10)\n  forward(x: f32[B, 784]) -> f32[B, 10] = x |> a |> gelu |> b\n}\n\
         let xs = randn(f32[128, 784], seed: 1)\nlet ys = cast(abs(randn(f32[128], seed: 2)) * 3.0, i64)\n\
         data d = tensors(xs, ys) |> batch(64, drop_last: true)\n\
         train {\n  model = M()\n  data = d\n  loss = cross_entropy(model(x), y)\n  optimizer = sgd(lr: 0.1)\n  epochs = 1\n  parallel = data_parallel(bucket_mb: 1.0)\n}\n",
    )
    .expect("program");
    let o = dlc(&["explain", f.to_str().expect("utf-8 path"), "--json"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let step = report["items"].as_array().expect("items").iter().find(|i| i["what"] == "train").expect("train").clone();
    let buckets = step["parallel"]["buckets"].as_array().expect("buckets").clone();
    // b's gradients (20 KB) first, then a.bias, then a.weight (1.6 MB) alone past the 1 MB cap.
    let params: Vec<Vec<String>> = buckets
        .iter()
        .map(|b| b["params"].as_array().expect("params").iter().map(|p| p.as_str().unwrap_or("").to_string()).collect())
        .collect();
    assert_eq!(params.last().expect("a bucket"), &vec!["a.weight".to_string()], "{params:?}");
    assert!(params[0].iter().any(|p| p.starts_with("b.")), "{params:?}");
    let ready: Vec<u64> = buckets.iter().map(|b| b["ready_after"].as_u64().expect("ready_after")).collect();
    assert!(ready.windows(2).all(|w| w[0] <= w[1]), "buckets start in the order backward writes them: {ready:?}");
}

#[test]
fn a_file_that_is_not_dl_gets_a_bounded_report() {
    // A data file passed by mistake: thousands of invalid characters. The first 200 reports are
    // printed, the rest counted; `--json` has them all.
    let dir = crate::common::scratch("notdl");
    let f = dir.join("data.dl");
    std::fs::write(&f, "$?!&`~".repeat(500)).unwrap();
    let o = dlc(&["check", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert_eq!(err.matches("[E0103]").count(), 200, "{}", &err[err.len().saturating_sub(400)..]);
    assert!(err.contains("... and 2800 more (`dlc check --json` lists them all)"), "{}", &err[err.len() - 300..]);
    assert!(err.contains("3000 errors"), "{}", &err[err.len() - 300..]);
    let j = dlc(&["check", "--json", f.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).expect("valid JSON");
    assert_eq!(v["diagnostics"].as_array().map(|a| a.len()), Some(3000));
}

/// An epoch over a data set larger than the memory the run may use: a 128 MiB `.npy` file
/// (32,768 rows of 1,024 f32) read a row at a time as the feed's workers ask for them,
/// shuffled and batched; the whole run's peak resident memory stays below the file's size. Read
/// whole, as before, the file was held twice (its values, then its rows).
#[test]
fn a_data_set_larger_than_the_runs_memory_streams_from_disk() {
    let dir = crate::common::scratch("big-npy");
    let (rows, width) = (32_768usize, 1024usize);
    let x: Vec<u8> = (0..rows * width).flat_map(|i| (((i * 7919) % 1000) as f32 / 1000.0 - 0.5).to_le_bytes()).collect();
    std::fs::write(dir.join("x.npy"), dlc::runtime::data::npy::encode("<f4", &[rows, width], &x)).unwrap();
    drop(x);
    let y: Vec<u8> = (0..rows).flat_map(|i| ((i % 4) as i64).to_le_bytes()).collect();
    std::fs::write(dir.join("y.npy"), dlc::runtime::data::npy::encode("<i8", &[rows], &y)).unwrap();
    let program = dir.join("big.dl");
    std::fs::write(
        &program,
        "use std.nn\nuse std.data\nuse std.optim\n\
         model M() {\n  fc = Linear(1024, 4)\n  forward(x: f32[B, 1024]) -> f32[B, 4] = x |> fc\n}\n\
         data d = npy(\"x.npy\", row: f32[1024], labels: \"y.npy\") |> shuffle(seed: 1) |> batch(256, drop_last: true)\n\
         train {\n  model = M()\n  data = d\n  loss = cross_entropy(model(x), y)\n  optimizer = sgd(lr: 0.01)\n  epochs = 1\n}\n",
    )
    .unwrap();
    let o = dlc(&["run", program.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert!(o.status.success() && out.contains("trained 128 steps"), "{out}{}", text(&o.stderr));
    let peak: f64 = out
        .split("peak memory ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("the run's peak memory: {out}"));
    assert!(peak < 128.0, "the run held {peak} MiB for a 128 MiB data set:\n{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
