//! Data parallelism over MPI (`mpirun -n 2 dlc run ...`) against one process, on MNIST: the
//! real launcher, the real library, the real data. Two ranks of batch 64 take, step by step,
//! the same 128 examples one process of batch 128 takes (each epoch's order dealt to the ranks),
//! so with gradients averaged the runs agree up to the order of floating-point sums: the
//! averaged gradient is (sum of 64 + sum of 64) / 2 / 64 on two ranks against a sum of 128 / 128
//! in one process.
//!
//! mpirun must be there (`scripts/setup.sh` installs Open MPI); without it these tests say
//! SKIPPED, and fail instead when `DLC_REQUIRE_MPI=1` (CI).

use crate::common;
use common::text;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn mpirun() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join("mpirun")).find(|m| m.is_file()));
    if found.is_none() {
        assert!(std::env::var("DLC_REQUIRE_MPI").as_deref() != Ok("1"), "DLC_REQUIRE_MPI=1 but mpirun is not on the PATH");
        eprintln!("SKIPPED: mpirun is not installed (bash scripts/setup.sh installs Open MPI)");
    }
    found
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The test's MLP on MNIST (no dropout: each rank would draw its own masks).
fn program(dir: &Path, batch: usize, steps: usize, accumulate: usize, optimizer: &str) -> PathBuf {
    let data = repo().join("examples/data/mnist");
    let src = format!(
        "use std.nn\nuse std.data\nuse std.optim\n\
         model Mlp(hidden: int = 256) {{\n  fc1 = Linear(784, hidden)\n  fc2 = Linear(hidden, 10)\n  \
         forward(x: f32[B, 784]) -> f32[B, 10] = x |> fc1 |> gelu |> fc2\n}}\n\
         fn prepare(r) = (flatten(normalize(to_unit(r.image), mean: 0.1307, std: 0.3081)), r.label)\n\
         data train_set = mnist(\"{data}\", split: \"train\") |> map(prepare) |> shuffle(seed: 1) |> batch({batch}, drop_last: true)\n\
         data test_set = mnist(\"{data}\", split: \"test\") |> map(prepare) |> batch(1000)\n\
         train {{\n  model = Mlp()\n  data = train_set\n  loss = cross_entropy(model(x), y)\n  optimizer = {optimizer}\n  \
         steps = {steps}\n  accumulate = {accumulate}\n  log every 1 steps\n  \
         evaluate test_set every {steps} steps {{ accuracy(model(x), y) }}\n  checkpoint \"{ck}\" every {steps} steps\n}}\n",
        data = data.display(),
        ck = dir.join("ck").display(),
    );
    let f = dir.join("ddp.dl");
    std::fs::create_dir_all(dir).expect("temp dir");
    std::fs::write(&f, src).expect("program");
    f
}

/// `dlc run FILE ARGS` as `ranks` MPI ranks (or one plain process).
fn job(ranks: usize, file: &Path, args: &[&str]) -> Output {
    let dlc = env!("CARGO_BIN_EXE_dlc");
    let mut c = if ranks == 1 {
        Command::new(dlc)
    } else {
        let mut c = Command::new("mpirun");
        c.args(["--allow-run-as-root", "--oversubscribe", "-n", &ranks.to_string(), dlc]);
        c
    };
    c.arg("run").arg(file).args(args).env("NO_COLOR", "1").env("DLC_CACHE_DIR", std::env::temp_dir().join("dlc-parallel-tests"));
    c.output().expect("run the job")
}

/// (step, loss) from a metrics file.
fn losses(metrics: &Path) -> Vec<(u64, f64)> {
    std::fs::read_to_string(metrics)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "train")
        .filter_map(|v| Some((v["step"].as_u64()?, v["loss"].as_f64()?)))
        .collect()
}

fn params(ck: &Path) -> Vec<(String, Vec<f64>)> {
    let ck = dlc::train::checkpoint::load(ck).expect("a checkpoint");
    let mut p: Vec<(String, Vec<f64>)> = ck.params.into_iter().map(|(n, t)| (n, t.to_f64())).collect();
    p.sort_by(|a, b| a.0.cmp(&b.0));
    p
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.abs().max(b.abs()).max(1e-3)
}

struct Run {
    out: Output,
    losses: Vec<(u64, f64)>,
    params: Vec<(String, Vec<f64>)>,
}

fn train(tag: &str, ranks: usize, batch: usize, steps: usize, accumulate: usize, optimizer: &str) -> Run {
    let dir = std::env::temp_dir().join(format!("dlc-ddp-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let f = program(&dir, batch, steps, accumulate, optimizer);
    let metrics = dir.join("metrics.jsonl");
    let out = job(ranks, &f, &["--metrics", metrics.to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "{tag}: {}\n{}", text(&out.stdout), text(&out.stderr));
    let run = Run { losses: losses(&metrics), params: params(&dir.join("ck")), out };
    let _ = std::fs::remove_dir_all(&dir);
    run
}

fn assert_same_run(a: &Run, b: &Run, tol: f64) {
    assert_eq!(a.losses.len(), b.losses.len(), "logged steps");
    let worst_loss = a.losses.iter().zip(&b.losses).map(|(x, y)| rel(x.1, y.1)).fold(0.0, f64::max);
    assert!(worst_loss <= tol, "losses differ by {worst_loss:e}");
    let mut worst = 0f64;
    for ((n, x), (_, y)) in a.params.iter().zip(&b.params) {
        let scale = x.iter().fold(0f64, |m, v| m.max(v.abs()));
        let d = x.iter().zip(y).map(|(p, q)| (p - q).abs()).fold(0.0, f64::max) / scale;
        assert!(d <= tol, "`{n}` differs by {d:e} (relative to its largest value)");
        worst = worst.max(d);
    }
    eprintln!("worst loss difference {worst_loss:e}, worst parameter difference {worst:e}");
}

fn line(out: &Output, starts: &str) -> Option<String> {
    text(&out.stdout).lines().find(|l| l.contains(starts)).map(|l| l.to_string())
}

const SGD: &str = "sgd(lr: 0.05, momentum: 0.9)";

/// Two ranks of batch 64 against one process of batch 128 over 50 steps of SGD with momentum:
/// the same losses and parameters within 1e-5, and the same test accuracy; only rank 0 prints.
#[test]
fn two_ranks_train_as_one_process_with_twice_the_batch() {
    if mpirun().is_none() {
        return;
    }
    let one = train("one", 1, 128, 50, 1, SGD);
    let two = train("two", 2, 64, 50, 1, SGD);
    assert_same_run(&one, &two, 1e-5);
    let eval = |r: &Run| line(&r.out, "evaluate test_set").map(|l| l.split(": ").nth(1).unwrap_or("").to_string());
    assert!(eval(&one).is_some(), "{}", text(&one.out.stdout));
    assert_eq!(eval(&one), eval(&two), "the accuracy over every rank's share is the one process's");
    let printed = text(&two.out.stdout);
    assert_eq!(printed.matches("trained 50 steps").count(), 1, "rank 0 alone prints: {printed}");
    assert!(printed.contains("on 2 ranks"), "{printed}");
    let err = text(&two.out.stderr);
    assert!(err.contains("parallel: 50 gradient all-reduces"), "one all-reduce per step (one bucket): {err}");
}

/// The same on the emulated GPU (`DLC_EMULATE_GPU=1`, `device = cuda`): each rank's device
/// executor runs the step's backward half, packs each bucket's gradients into a buffer of the
/// device as soon as the kernel writing its last one has run and starts its all-reduce there
/// (NCCL on real GPUs; the emulated driver all-reduces its memory over MPI, and fails any call
/// that touches a bucket before the all-reduce is waited for), and the update reads the averages
/// where they are. Two ranks of batch 64 against one process of batch 128, 20 steps of a smaller
/// MLP (the emulation is slow); and against the same two ranks averaging through the host
/// (`DLC_DEVICE_COLLECTIVES=0`), bit for bit.
#[test]
fn two_ranks_on_the_emulated_gpu_train_as_one_process_with_twice_the_batch() {
    if mpirun().is_none() {
        return;
    }
    let on_gpu = |tag: &str, ranks: usize, batch: usize, collectives: &str| {
        let dir = std::env::temp_dir().join(format!("dlc-ddp-gpu-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let f = program(&dir, batch, 20, 1, SGD);
        let src = std::fs::read_to_string(&f).expect("program");
        let src =
            src.replace("hidden: int = 256", "hidden: int = 64").replace("  log every 1 steps\n", "  log every 1 steps\n  device = cuda\n");
        assert!(src.contains("device = cuda") && src.contains("= 64"), "the program changed: update the test");
        std::fs::write(&f, src).expect("program");
        let metrics = dir.join("metrics.jsonl");
        let dlc = env!("CARGO_BIN_EXE_dlc");
        let mut c = Command::new(if ranks == 1 { dlc } else { "mpirun" });
        if ranks > 1 {
            c.args(["--allow-run-as-root", "--oversubscribe", "-n", &ranks.to_string(), dlc]);
        }
        let out = c
            .arg("run")
            .arg(&f)
            .args(["--metrics", metrics.to_str().expect("utf-8 path")])
            .env("NO_COLOR", "1")
            .env("DLC_EMULATE_GPU", "1")
            .env("DLC_DEVICE_COLLECTIVES", collectives)
            .env("DLC_CACHE_DIR", std::env::temp_dir().join("dlc-parallel-tests"))
            .output()
            .expect("run the job");
        assert!(out.status.success(), "{tag}: {}\n{}", text(&out.stdout), text(&out.stderr));
        let run = Run { losses: losses(&metrics), params: params(&dir.join("ck")), out };
        let _ = std::fs::remove_dir_all(&dir);
        run
    };
    let one = on_gpu("one", 1, 128, "1");
    let two = on_gpu("two", 2, 64, "1");
    assert_eq!(one.losses.len(), 20, "{}", text(&one.out.stderr));
    assert_same_run(&one, &two, 1e-5);
    let err = text(&two.out.stderr);
    assert!(err.contains("parallel: 20 gradient all-reduces"), "{err}");
    assert!(err.contains("; 20 gradient buckets all-reduced on the device"), "{err}");
    let through_host = on_gpu("host", 2, 64, "0");
    assert!(!text(&through_host.out.stderr).contains("all-reduced on the device"), "{}", text(&through_host.out.stderr));
    assert_eq!(two.params, through_host.params, "the device's averages are the host's");
    assert_eq!(two.losses, through_host.losses);
    assert_eq!(
        err.matches("round trips through the host: nothing").count(),
        1,
        "rank 0 reports its device once, with no round trip: {err}"
    );
}

/// With `accumulate = 2`, two ranks of batch 32 are one process of batch 128, and the gradients
/// cross the ranks once per optimiser step, not once per micro-batch.
#[test]
fn accumulation_reduces_once_per_optimiser_step() {
    if mpirun().is_none() {
        return;
    }
    let one = train("acc-one", 1, 128, 20, 1, SGD);
    let two = train("acc-two", 2, 32, 20, 2, SGD);
    assert_same_run(&one, &two, 1e-5);
    let err = text(&two.out.stderr);
    assert!(err.contains("parallel: 20 gradient all-reduces"), "{err}");
}

/// Under AdamW the same comparison holds within 1e-4: Adam divides each gradient by the root of
/// its running square, so an element whose gradient is at the level of rounding differences
/// (the two runs add the batch's contributions in another order) moves by up to a learning
/// rate either way; 50 steps give about 1.2e-5 of the largest weight.
#[test]
fn two_ranks_follow_one_process_under_adamw() {
    if mpirun().is_none() {
        return;
    }
    let one = train("adam-one", 1, 128, 50, 1, "adamw(lr: 1e-3)");
    let two = train("adam-two", 2, 64, 50, 1, "adamw(lr: 1e-3)");
    assert_same_run(&one, &two, 1e-4);
}

/// A checkpoint written by two ranks resumes in one process (and one process's in two ranks):
/// the run goes on to what one process alone reaches.
#[test]
fn a_checkpoint_resumes_under_another_rank_count() {
    if mpirun().is_none() {
        return;
    }
    let straight = train("straight", 1, 128, 40, 1, SGD);
    for (first, then, tag) in [(2usize, 1usize, "2to1"), (1, 2, "1to2")] {
        let dir = std::env::temp_dir().join(format!("dlc-ddp-resume-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let batch = |ranks: usize| 128 / ranks;
        let f = program(&dir, batch(first), 20, 1, SGD);
        let out = job(first, &f, &[]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let f = program(&dir, batch(then), 40, 1, SGD);
        let ck = dir.join("ck");
        let out = job(then, &f, &["--resume", ck.to_str().expect("utf-8 path")]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains("resumed from"), "{}", text(&out.stdout));
        let resumed = Run { params: params(&ck), losses: vec![], out };
        let _ = std::fs::remove_dir_all(&dir);
        let strip = |r: &Run| Run { params: r.params.clone(), losses: vec![], out: r.out.clone() };
        assert_same_run(&strip(&straight), &resumed, 1e-5);
    }
}

/// A rank killed in the middle of an epoch ends the job: mpirun exits non-zero within 30 s and
/// says which rank died; the checkpoint written before stays readable.
#[test]
fn a_killed_rank_ends_the_job_naming_it() {
    if mpirun().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("dlc-ddp-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let f = program(&dir, 64, 100_000, 1, SGD).to_path_buf();
    let src = std::fs::read_to_string(&f).expect("program").replace("every 100000 steps\n}", "every 20 steps\n}");
    std::fs::write(&f, src).expect("program");
    let mut child = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-n", "2", env!("CARGO_BIN_EXE_dlc"), "run"])
        .arg(&f)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mpirun");
    // Wait for the first checkpoint, then kill rank 1 (the second dlc process mpirun started).
    let ck = dir.join("ck");
    let started = std::time::Instant::now();
    while dlc::train::checkpoint::load(&ck).is_err() {
        assert!(started.elapsed().as_secs() < 120, "no checkpoint after 120 s");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let pids = Command::new("pgrep").args(["-P", &child.id().to_string(), "dlc"]).output().expect("pgrep");
    let mut ranks: Vec<u32> = text(&pids.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect();
    ranks.sort();
    assert_eq!(ranks.len(), 2, "two ranks running: {ranks:?}");
    let victim = ranks[1];
    let killed_at = std::time::Instant::now();
    Command::new("kill").args(["-9", &victim.to_string()]).status().expect("kill");
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(killed_at.elapsed().as_secs() < 30, "the job still runs 30 s after a rank was killed");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let out = child.wait_with_output().expect("output");
    let err = text(&out.stderr) + &text(&out.stdout);
    assert!(!status.success(), "the job must fail");
    assert!(err.contains("rank 1") || err.contains(&format!("PID {victim}")), "the message names the rank: {err}");
    assert!(dlc::train::checkpoint::load(&ck).is_ok(), "the checkpoint written before stays readable");
    let _ = std::fs::remove_dir_all(&dir);
}

/// With `data_parallel(bucket_mb: 0.5)` the MLP's gradients go in several buckets, each
/// all-reduced as soon as backward has written it (the first layer's weight, 0.8 MB, alone; the
/// rest together): as many all-reduces a step as buckets, and the same run as one process.
#[test]
fn small_buckets_reduce_separately_and_train_the_same() {
    if mpirun().is_none() {
        return;
    }
    let one = train("buckets-one", 1, 128, 20, 1, SGD);
    let dir = std::env::temp_dir().join(format!("dlc-ddp-buckets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let f = program(&dir, 64, 20, 1, SGD);
    let src = std::fs::read_to_string(&f)
        .expect("program")
        .replace("  log every 1 steps\n", "  log every 1 steps\n  parallel = data_parallel(ranks: 2, bucket_mb: 0.5)\n");
    std::fs::write(&f, src).expect("program");
    let metrics = dir.join("metrics.jsonl");
    let out = job(2, &f, &["--metrics", metrics.to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let two = Run { losses: losses(&metrics), params: params(&dir.join("ck")), out };
    let _ = std::fs::remove_dir_all(&dir);
    assert_same_run(&one, &two, 1e-5);
    let err = text(&two.out.stderr);
    assert!(err.contains("parallel: 40 gradient all-reduces"), "two buckets a step: {err}");
    // `ranks: 2` (here from `--set parallel.ranks=2` on a recipe without `parallel`) refuses
    // one process.
    let dir = std::env::temp_dir().join(format!("dlc-ddp-ranks-{}", std::process::id()));
    let f = program(&dir, 64, 20, 1, SGD);
    let out = job(1, &f, &["--set", "parallel.ranks=2"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("mpirun -n 2"), "{}", text(&out.stderr));
}

/// A rank that fails (here rank 1's data file is missing: `mpirun` runs two programs as one
/// job) ends the whole job with a message naming it, instead of leaving rank 0 waiting.
#[test]
fn a_failing_rank_ends_the_job_naming_it() {
    if mpirun().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("dlc-ddp-fail-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let good = program(&dir, 64, 200, 1, SGD);
    let bad = dir.join("bad.dl");
    let src = std::fs::read_to_string(&good).expect("program");
    std::fs::write(&bad, src.replace("data/mnist\", split: \"train\"", "data/no-such-dir\", split: \"train\"")).expect("program");
    let dlc = env!("CARGO_BIN_EXE_dlc");
    let started = std::time::Instant::now();
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-n", "1", dlc, "run"])
        .arg(&good)
        .args([":", "-n", "1", dlc, "run"])
        .arg(&bad)
        .env("NO_COLOR", "1")
        .output()
        .expect("mpirun");
    let _ = std::fs::remove_dir_all(&dir);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(started.elapsed().as_secs() < 60, "the job ended after {:?}", started.elapsed());
    assert!(err.contains("rank 1 of 2 failed"), "{err}");
    assert!(err.contains("no-such-dir"), "the rank's own error is shown: {err}");
}
