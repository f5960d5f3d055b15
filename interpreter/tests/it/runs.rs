//! Runs and their files, driven through the binary as a user drives it: one path rule whatever
//! the working directory, a run never clobbers an earlier one (`--overwrite` moves it aside),
//! and `--resume` continues the run that was started (its `--set` overrides recorded in the
//! manifest), saying what changed and when there is nothing left to do.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common;
use common::{dlc_in, text};

/// A fresh folder `tag` with `proj/prog.dl` (its data and checkpoint named relative to `proj/`)
/// and an empty `elsewhere/` to run it from.
fn project(tag: &str, steps: usize) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dlc-runs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("proj/data")).unwrap();
    std::fs::create_dir_all(dir.join("elsewhere")).unwrap();
    let iris = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/data/sklearn/iris.csv");
    std::fs::copy(iris, dir.join("proj/data/iris.csv")).unwrap();
    let src = format!(
        "use std.nn\nuse std.data\nuse std.optim\nmodel M() {{\n  fc = Linear(4, 3)\n  forward(x: f32[B, 4]) = fc(x)\n}}\n\
         data d = csv(\"data/iris.csv\", features: 4, label: 4, header: 1) |> map(r => (r.features / 8.0, r.label)) |> batch(16)\n\
         train {{\n  model = M()\n  data = d\n  loss = cross_entropy(model(x), y)\n  optimizer = sgd(lr: 0.1)\n  steps = {steps}\n  \
         checkpoint \"runs/m\" every 1000 steps\n}}\n\
         evaluate {{ model = M(), data = d, checkpoint = \"runs/m\", metrics = cross_entropy(model(x), y) }}\n"
    );
    std::fs::write(dir.join("proj/prog.dl"), src).unwrap();
    dir
}

/// The lines that name a path the run reads or writes.
fn path_lines(o: &Output) -> Vec<String> {
    text(&o.stderr)
        .lines()
        .filter(|l| ["data: ", "checkpoint: ", "metrics: ", "resume: "].iter().any(|p| l.starts_with(p)))
        .map(String::from)
        .collect()
}

fn manifest(ck: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(ck.join("manifest.json")).expect("a manifest")).expect("JSON")
}

#[test]
fn a_program_reads_and_writes_the_same_files_from_any_working_directory() {
    let dir = project("cwd", 6);
    let ck = dir.join("proj/runs/m");
    let here = dlc_in(&dir.join("proj"), &["run", "prog.dl"]);
    assert!(here.status.success(), "{}", text(&here.stderr));
    let from_elsewhere = dlc_in(&dir.join("elsewhere"), &["run", "../proj/prog.dl", "--overwrite"]);
    assert!(from_elsewhere.status.success(), "{}", text(&from_elsewhere.stderr));
    assert_eq!(path_lines(&here), path_lines(&from_elsewhere), "the same files, named the same way");
    let lines = path_lines(&here);
    let data = dir.join("proj/data/iris.csv");
    for want in
        [format!("data: {}", data.display()), format!("checkpoint: {}", ck.display()), format!("metrics: {}/metrics.jsonl", ck.display())]
    {
        assert!(lines.contains(&want), "`{want}` in {lines:?}");
    }
    assert!(!dir.join("elsewhere/runs").exists(), "nothing is written relative to the working directory");
    // The evaluate block read the checkpoint the train recipe had just written: the same loss.
    for o in [&here, &from_elsewhere] {
        let out = text(&o.stdout);
        assert!(out.contains(&format!("checkpoint: {} (step 6)", ck.display())), "{out}");
        assert!(out.lines().any(|l| l.starts_with("evaluate: cross_entropy")), "{out}");
    }
    let eval = |o: &Output| text(&o.stdout).lines().find(|l| l.starts_with("evaluate:")).map(String::from);
    assert_eq!(eval(&here), eval(&from_elsewhere));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_second_run_refuses_and_overwrite_moves_the_first_aside() {
    let dir = project("clobber", 4);
    let proj = dir.join("proj");
    let ck = proj.join("runs/m");
    let first = dlc_in(&proj, &["run", "prog.dl", "--set", "steps=3"]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let (manifest_before, metrics_before) = (manifest(&ck), std::fs::read(ck.join("metrics.jsonl")).unwrap());
    let second = dlc_in(&proj, &["run", "prog.dl"]);
    assert_eq!(second.status.code(), Some(1));
    let err = text(&second.stderr);
    assert!(err.contains(&format!("error: {} holds an earlier run (a checkpoint at step 3, epoch 0)", ck.display())), "{err}");
    assert!(err.contains(&format!(" run prog.dl --resume {}", ck.display())), "the command that continues it: {err}");
    assert!(err.contains(" run prog.dl --overwrite") && err.contains(&format!("moved to {}.old-1", ck.display())), "{err}");
    assert!(!text(&second.stdout).contains("trained"), "nothing trained");
    // Timing runs never touch a run's files.
    let bench = dlc_in(&proj, &["bench", "prog.dl", "--steps", "2", "--warmup", "1"]);
    assert!(bench.status.success(), "{}", text(&bench.stderr));
    let one = dlc_in(&proj, &["bench", "prog.dl", "--steps", "2", "--warmup", "1", "--one-batch", "--json"]);
    assert!(one.status.success(), "{}", text(&one.stderr));
    let report: serde_json::Value = serde_json::from_str(text(&one.stdout).lines().last().unwrap_or("")).expect("JSON");
    assert_eq!((report["one_batch"].as_bool(), report["steps"].as_u64()), (Some(true), Some(2)), "{report}");
    assert_eq!(manifest(&ck), manifest_before, "the earlier checkpoint is untouched");
    assert_eq!(std::fs::read(ck.join("metrics.jsonl")).unwrap(), metrics_before, "the earlier metrics are untouched");
    // Starting over moves the earlier run aside, whole; the new metrics file holds one run.
    let over = dlc_in(&proj, &["run", "prog.dl", "--overwrite"]);
    assert!(over.status.success(), "{}", text(&over.stderr));
    assert!(text(&over.stderr).contains(&format!("moved to {}.old-1", ck.display())), "{}", text(&over.stderr));
    let aside = proj.join("runs/m.old-1");
    assert_eq!(manifest(&aside), manifest_before);
    assert_eq!(std::fs::read(aside.join("metrics.jsonl")).unwrap(), metrics_before);
    assert!(dlc::train::checkpoint::load(&aside).is_ok(), "the moved checkpoint still loads");
    assert_eq!(manifest(&ck)["step"], 4);
    let metrics = std::fs::read_to_string(ck.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.matches("\"first_step\"").count(), 1, "{metrics}");
    // A metrics file of its own is refused the same way.
    std::fs::write(proj.join("m.jsonl"), "{\"step\": 1}\n").unwrap();
    let o = dlc_in(&proj, &["run", "prog.dl", "--overwrite", "--metrics", "m.jsonl"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(proj.join("m.jsonl.old-1").exists() && proj.join("runs/m.old-2").exists());
    let o = dlc_in(&proj, &["run", "prog.dl", "--resume", "runs/m", "--metrics", "m.jsonl", "--set", "steps=5"]);
    assert!(o.status.success(), "a resumed run appends to its metrics file: {}", text(&o.stderr));
    let o = dlc_in(&proj, &["run", "prog.dl", "--metrics", "m.jsonl", "--overwrite"]);
    assert!(o.status.success());
    std::fs::remove_dir_all(&ck).unwrap();
    let o = dlc_in(&dir.join("elsewhere"), &["run", "../proj/prog.dl", "--metrics", "../proj/m.jsonl", "--set", "steps=1"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains(&format!("error: the metrics file {} holds an earlier run", proj.join("m.jsonl").display())), "{err}");
    assert!(err.contains("--metrics ../proj/m.jsonl --set steps=1 --overwrite"), "the command as given, to start over: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resume_applies_the_recorded_overrides_and_says_what_changed() {
    let dir = project("resume", 20);
    let proj = dir.join("proj");
    let ck = proj.join("runs/m");
    let o = dlc_in(&proj, &["run", "prog.dl", "--set", "steps=7"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let m = manifest(&ck);
    assert_eq!(m["set"], serde_json::json!(["steps=7"]));
    assert_eq!(m["program"], proj.join("prog.dl").display().to_string());
    let sha = dlc::train::manifest::sha256_hex(&std::fs::read(proj.join("prog.dl")).unwrap());
    assert_eq!(m["program_sha256"], sha);
    // Resumed from elsewhere with nothing else said: `steps=7` again, so nothing is left to do
    // (without the record the recipe's `steps = 20` would train 13 more).
    let o = dlc_in(&dir.join("elsewhere"), &["run", "../proj/prog.dl", "--resume", "../proj/runs/m"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(err.contains("note: `--set steps=7`, recorded with the checkpoint, applies again"), "{err}");
    assert!(out.contains("already finished at step 7") && !out.lines().any(|l| l.starts_with("trained")), "{out}");
    assert_eq!(manifest(&ck), m, "a finished run writes nothing");
    // A new value replaces the recorded one, said; the manifest records it for the next resume.
    let o = dlc_in(&proj, &["run", "prog.dl", "--resume", "runs/m", "--set", "steps=9"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("note: `--set steps=9` replaces `steps=7`, recorded with the checkpoint"), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("resumed from") && text(&o.stdout).contains("trained 9 steps"), "{}", text(&o.stdout));
    assert_eq!(manifest(&ck)["set"], serde_json::json!(["steps=9"]));
    let metrics = std::fs::read_to_string(ck.join("metrics.jsonl")).unwrap();
    assert!(metrics.contains("{\"kind\":\"resumed\",\"step\":7}"), "{metrics}");
    // The program changed since: said, with both hashes; the run goes on.
    std::fs::write(proj.join("prog.dl"), std::fs::read_to_string(proj.join("prog.dl")).unwrap() + "# edited\n").unwrap();
    let o = dlc_in(&proj, &["run", "prog.dl", "--resume", "runs/m", "--set", "steps=10"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("warning: `prog.dl` changed since the checkpoint in") && err.contains(&format!("SHA-256 {} then", &sha[..12])),
        "{err}"
    );
    assert!(text(&o.stdout).contains("trained 10 steps"));
    let o = dlc_in(&proj, &["run", "prog.dl", "--resume", "runs/m"]);
    assert!(!text(&o.stderr).contains("changed since"), "the manifest has the new program's hash: {}", text(&o.stderr));
    assert!(text(&o.stdout).contains("already finished at step 10"), "{}", text(&o.stdout));
    // `--overwrite` with `--resume` of the same directory contradicts itself.
    let o = dlc_in(&proj, &["run", "prog.dl", "--resume", "runs/m", "--overwrite"]);
    assert_eq!(o.status.code(), Some(1));
    let o = dlc_in(&proj, &["run", "prog.dl", "--resume", "runs/none"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains(&format!("cannot resume from {}", proj.join("runs/none").display())), "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
