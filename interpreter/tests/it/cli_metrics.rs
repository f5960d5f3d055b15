//! What a user reads off the command line and a run: `--help`, `--version`, `--set`'s fields,
//! the device line, `check --json`'s shapes, and the metrics a run leaves: JSON lines, the
//! TensorBoard event file beside them (read back by a reader of the format written here, and by
//! TensorBoard's own when bench/.venv has it) and `dlc plot`'s PNG.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;
use common::{dlc, text, ROOT};

fn temp(name: &str) -> PathBuf {
    common::scratch(&format!("cli-metrics-{name}"))
}

/// Every `DLC_*` variable the binary's code reads (`var("DLC_...")`, `var_os("DLC_...")`).
fn env_vars_read(dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).expect("source dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            env_vars_read(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let src = std::fs::read_to_string(&p).expect("source");
            for pat in ["var(\"DLC_", "var_os(\"DLC_"] {
                for (i, _) in src.match_indices(pat) {
                    let name: String = src[i + pat.len() - 4..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    if !out.contains(&name) {
                        out.push(name);
                    }
                }
            }
        }
    }
}

#[test]
fn help_describes_commands_files_settable_fields_and_every_environment_variable() {
    let h = text(&dlc(&["--help"]).stdout);
    assert!(h.contains("plot") && h.contains("Environment:"), "{h}");
    let mut vars = vec![];
    for d in ["interpreter/src", "jit/src", "language/src"] {
        env_vars_read(&Path::new(ROOT).join(d), &mut vars);
    }
    assert!(vars.contains(&"DLC_EMULATE_GPU".to_string()) && vars.contains(&"DLC_AUTOTUNE".to_string()), "{vars:?}");
    for v in &vars {
        assert!(h.contains(v.as_str()), "`dlc --help` does not document {v}:\n{h}");
    }
    let run = text(&dlc(&["run", "--help"]).stdout);
    assert!(run.contains("train") && run.contains("The `.dl` program to run"), "{run}");
    for (field, _) in dlc::train::SETTABLE {
        assert!(run.contains(field), "`dlc run --help` does not list `{field}`:\n{run}");
    }
}

#[test]
fn version_names_the_commit() {
    let v = text(&dlc(&["--version"]).stdout);
    let commit = v.split("(commit ").nth(1).and_then(|c| c.split([' ', ')']).next()).unwrap_or_else(|| panic!("{v}"));
    let head = Command::new("git").args(["-C", ROOT, "rev-parse", "--short=9", "HEAD"]).output().ok().filter(|o| o.status.success());
    match head {
        // Built from this checkout: its HEAD (build.rs reruns when HEAD moves).
        Some(o) => assert_eq!(commit, text(&o.stdout).trim(), "{v}"),
        None => assert_eq!(commit, "unknown", "{v}"),
    }
}

#[test]
fn a_misspelt_set_field_gets_did_you_mean_and_exit_1() {
    let o = dlc(&["run", "examples/iris.dl", "--set", "epoch=1"]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("did you mean `--set epochs=1`?") && err.contains("settable: epochs, steps"), "{err}");
    assert!(!text(&o.stdout).contains("epoch 1"), "nothing trains");
    let o = dlc(&["run", "examples/iris.dl", "--set", "optimizer.lrr=0.1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("did you mean `optimizer.lr`?"), "{}", text(&o.stderr));
}

#[test]
fn check_json_writes_shapes_as_the_messages_do() {
    let o = dlc(&["check", "--json", "examples/mnist_mlp.dl"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(!out.contains("Mono") && !out.contains("coef"), "internal shape encodings: {out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let fc1 = &v["models"][0]["params"][0];
    assert_eq!(fc1["name"], "fc1.weight");
    assert_eq!(fc1["type"], "f32[512, 784]");
    assert_eq!(fc1["shape"], serde_json::json!([512, 784]));
}

#[test]
fn explain_has_the_convolution_layout_note_only_with_convolutions() {
    let mlp = text(&dlc(&["explain", "examples/iris.dl"]).stdout);
    assert!(mlp.contains("threads:") && !mlp.contains("layout:"), "{mlp}");
    // On the CPU: channels-last where oneDNN runs the convolutions, NCHW on im2col.
    let cnn = dlc(&["explain", "--json", "bench/conv_bn_step.dl"]);
    let v: serde_json::Value = serde_json::from_slice(&cnn.stdout).unwrap_or_else(|_| panic!("{}", text(&cnn.stderr)));
    assert_eq!(v["layout"]["layout"], if dlc::exec::onednn_convolutions() { "channels-last" } else { "NCHW" }, "{}", v["layout"]);
    let im2col = common::command(Path::new(ROOT))
        .args(["explain", "--json", "bench/conv_bn_step.dl"])
        .env("DLC_CONV", "im2col")
        .output()
        .expect("run dlc");
    let v: serde_json::Value = serde_json::from_slice(&im2col.stdout).unwrap_or_else(|_| panic!("{}", text(&im2col.stderr)));
    assert_eq!(v["layout"]["layout"], "NCHW", "{}", v["layout"]);
}

// ---- reading TensorBoard's event files, independently of the writer ----------------------------

/// CRC-32C bit by bit (the writer uses a table).
fn crc32c(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for b in data {
        c ^= *b as u32;
        for _ in 0..8 {
            c = (c >> 1) ^ (0x82F6_3B78 & (c & 1).wrapping_neg());
        }
    }
    !c
}

fn masked(data: &[u8]) -> u32 {
    let c = crc32c(data);
    c.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// A protobuf message's fields: (number, varint or fixed bits, bytes of a length-delimited one).
fn fields(mut b: &[u8]) -> Vec<(u64, u64, Vec<u8>)> {
    fn varint(b: &mut &[u8]) -> u64 {
        let mut v = 0;
        for shift in (0..64).step_by(7) {
            let byte = b[0];
            *b = &b[1..];
            v |= ((byte & 0x7f) as u64) << shift;
            if byte < 0x80 {
                break;
            }
        }
        v
    }
    let mut out = vec![];
    while !b.is_empty() {
        let key = varint(&mut b);
        let (field, wire) = (key >> 3, key & 7);
        match wire {
            0 => out.push((field, varint(&mut b), vec![])),
            1 => {
                out.push((field, u64::from_le_bytes(b[..8].try_into().unwrap()), vec![]));
                b = &b[8..];
            }
            2 => {
                let n = varint(&mut b) as usize;
                out.push((field, 0, b[..n].to_vec()));
                b = &b[n..];
            }
            5 => {
                out.push((field, u32::from_le_bytes(b[..4].try_into().unwrap()) as u64, vec![]));
                b = &b[4..];
            }
            w => panic!("wire type {w}"),
        }
    }
    out
}

/// (step, tag, value) of every scalar; asserts the framing's CRCs and the version record.
fn read_events(path: &Path) -> Vec<(i64, String, f32)> {
    let bytes = std::fs::read(path).expect("event file");
    let (mut at, mut records) = (0, vec![]);
    while at < bytes.len() {
        let len_bytes = &bytes[at..at + 8];
        let len = u64::from_le_bytes(len_bytes.try_into().unwrap()) as usize;
        assert_eq!(u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()), masked(len_bytes), "length CRC at {at}");
        let data = &bytes[at + 12..at + 12 + len];
        assert_eq!(u32::from_le_bytes(bytes[at + 12 + len..at + 16 + len].try_into().unwrap()), masked(data), "data CRC at {at}");
        records.push(data.to_vec());
        at += 16 + len;
    }
    let first = fields(&records[0]);
    assert!(first.iter().any(|(f, _, b)| *f == 3 && b == b"brain.Event:2"), "the first record holds the file version");
    let mut out = vec![];
    for r in &records[1..] {
        let ev = fields(r);
        let step = ev.iter().find(|f| f.0 == 2).map(|f| f.1 as i64).unwrap_or(0);
        assert!(ev.iter().any(|f| f.0 == 1 && f64::from_bits(f.1) > 1.6e9), "wall time in seconds since 1970");
        for (_, _, summary) in ev.iter().filter(|f| f.0 == 5) {
            for (_, _, value) in fields(summary) {
                let v = fields(&value);
                let tag = v.iter().find(|f| f.0 == 1).map(|f| String::from_utf8(f.2.clone()).unwrap()).expect("tag");
                let x = v.iter().find(|f| f.0 == 2).map(|f| f32::from_bits(f.1 as u32)).expect("simple_value");
                out.push((step, tag, x));
            }
        }
    }
    out
}

/// A real run's metrics: JSON lines with one vocabulary, the TensorBoard events beside them with
/// the same values, and `dlc plot` drawing them.
#[test]
fn a_run_writes_metrics_tensorboard_events_and_plots() {
    let dir = temp("run");
    let metrics = dir.join("metrics.jsonl");
    // iris.dl, logging every 4 steps (10 steps an epoch), reading its data where it is.
    let data = Path::new(ROOT).join("examples/data/sklearn/iris.csv");
    let src = std::fs::read_to_string(Path::new(ROOT).join("examples/iris.dl"))
        .unwrap()
        .replace("log every 100 steps", "log every 4 steps")
        .replace("\"data/sklearn/iris.csv\"", &format!("{:?}", data.to_str().unwrap()));
    let program = dir.join("iris.dl");
    std::fs::write(&program, src).unwrap();
    let o = dlc(&["run", program.to_str().unwrap(), "--set", "epochs=3", "--metrics", metrics.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // The device line, on the CPU too.
    assert!(text(&o.stderr).lines().any(|l| l.starts_with("device: ")), "{}", text(&o.stderr));
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&metrics).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let epochs: Vec<_> = lines.iter().filter(|l| l["kind"] == "epoch").collect();
    assert_eq!(epochs.len(), 3);
    // Each epoch's time blocked on the data feed, within the epoch's time; and the console's
    // percentage of it.
    for e in &epochs {
        let (wait, secs) = (e["data_wait_s"].as_f64().expect("data_wait_s"), e["epoch_s"].as_f64().unwrap());
        assert!((0.0..=secs).contains(&wait), "{e}");
    }
    assert!(text(&o.stdout).lines().any(|l| l.starts_with("epoch 3 done:") && l.contains("; data wait ")), "{}", text(&o.stdout));
    let events = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("tfevents"))
        .expect("an event file beside the metrics");
    let scalars = read_events(&events);
    for e in &epochs {
        let step = e["step"].as_i64().unwrap();
        let loss = e["loss"].as_f64().unwrap() as f32;
        assert!(scalars.contains(&(step, "epoch/loss".into(), loss)), "epoch/loss at {step} = {loss}: {scalars:?}");
    }
    let last_eval = lines.iter().rev().find(|l| l["kind"] == "eval").expect("evaluations");
    let acc =
        (last_eval["step"].as_i64().unwrap(), "eval/all_flowers/accuracy".to_string(), last_eval["accuracy"].as_f64().unwrap() as f32);
    assert!(scalars.contains(&acc), "{acc:?} in {scalars:?}");
    let train: Vec<_> = lines.iter().filter(|l| l["kind"] == "train").collect();
    assert_eq!(train.iter().map(|l| l["step"].as_i64().unwrap()).collect::<Vec<_>>(), [4, 8, 12, 16, 20, 24, 28]);
    for l in &train {
        let step = l["step"].as_i64().unwrap();
        assert!(scalars.contains(&(step, "train/loss".into(), l["loss"].as_f64().unwrap() as f32)), "train/loss at {step}");
        assert!(scalars.contains(&(step, "train/lr".into(), l["lr"].as_f64().unwrap() as f32)), "train/lr at {step}");
    }
    tensorboard_reads(&dir, scalars.len());

    let o = dlc(&["plot", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("(1280x720): training (logged steps; epoch means); learning rate; evaluation: accuracy"), "{out}");
    check_png(&dir.join("plot.png"), 3);
    let _ = std::fs::remove_dir_all(&dir);
}

/// TensorBoard's own reader, where bench/.venv has it (bench/setup.sh installs it).
fn tensorboard_reads(dir: &Path, scalars: usize) {
    let python = Path::new(ROOT).join("bench/.venv/bin/python");
    let script = "import sys\nfrom tensorboard.backend.event_processing.event_accumulator import EventAccumulator\n\
        a = EventAccumulator(sys.argv[1]); a.Reload()\nprint(sum(len(a.Scalars(t)) for t in a.Tags()['scalars']))\n\
        print(' '.join(sorted(a.Tags()['scalars'])))";
    let Ok(o) = Command::new(&python).args(["-c", script, dir.to_str().unwrap()]).output() else {
        eprintln!("skipped TensorBoard's reader: no bench/.venv");
        return;
    };
    if text(&o.stderr).contains("No module named 'tensorboard'") {
        eprintln!("skipped TensorBoard's reader: bench/.venv has no tensorboard");
        return;
    }
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert_eq!(out.lines().next(), Some(scalars.to_string().as_str()), "{out}");
    assert!(out.contains("epoch/loss") && out.contains("eval/all_flowers/accuracy"), "{out}");
}

/// The PNG decodes (an independent decoder), has the size of `panels` charts and is drawn on:
/// the first series' colour in lines, dark text in the first chart's title row.
fn check_png(path: &Path, panels: usize) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).expect("plot.png")));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("decodes");
    assert_eq!((info.width, info.height), dlc::plot::size(panels));
    assert_eq!(info.color_type, png::ColorType::Rgb);
    let px = |x: u32, y: u32| {
        let i = ((y * info.width + x) * 3) as usize;
        (buf[i], buf[i + 1], buf[i + 2])
    };
    let all = (0..info.height).flat_map(|y| (0..info.width).map(move |x| (x, y)));
    let blue = all.clone().filter(|&(x, y)| px(x, y) == (31, 119, 180)).count();
    assert!(blue > 300, "the first series' line: {blue} pixels");
    let title_dark = (0..30).flat_map(|y| (0..dlc::plot::PANEL.0).map(move |x| (x, y))).filter(|&(x, y)| px(x, y).0 < 100).count();
    assert!(title_dark > 100, "the title's text: {title_dark} dark pixels");
    let white = all.filter(|&(x, y)| px(x, y) == (255, 255, 255)).count() as f64 / (info.width * info.height) as f64;
    assert!((0.5..0.99).contains(&white), "mostly background, not blank: {white}");
}

/// The progress events count the optimiser steps the run takes (what the bar and the ETA are
/// drawn over): under `steps`, `epochs` and `accumulate` the total is the last step, not the
/// epoch's batches.
#[test]
fn progress_counts_the_steps_the_run_takes() {
    use dlc::train::{Event, Observer, TrainOptions, Trainer};
    use std::sync::{Arc, Mutex};
    struct Seen(Arc<Mutex<Vec<(usize, usize)>>>);
    impl Observer for Seen {
        fn event(&mut self, e: &Event) {
            if let Event::Step { step, total, .. } = *e {
                self.0.lock().unwrap().push((step, total));
            }
        }
    }
    let examples = Path::new(ROOT).join("examples");
    let src = std::fs::read_to_string(examples.join("iris.dl")).unwrap();
    // 150 rows in batches of 16: 10 batches an epoch.
    for (set, total) in [(vec![("steps", "25")], 25), (vec![("epochs", "3")], 30), (vec![("epochs", "2"), ("accumulate", "3")], 6)] {
        let mut p = dlc::Program::run("iris.dl", &src, Some(&examples), false);
        let mut info = p.session.t.recipes[0].clone();
        let set: Vec<(String, String)> = set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        dlc::train::apply_overrides(&mut info, &set).expect("overrides apply");
        let seen = Arc::new(Mutex::new(vec![]));
        let mut opts = TrainOptions::new(examples.clone(), 0);
        opts.observer = Some(Box::new(Seen(seen.clone())));
        let r = Trainer::new(&mut p.session, info, opts).and_then(|mut t| t.run()).expect("trains");
        let seen = seen.lock().unwrap();
        assert_eq!(r.steps, total, "{set:?}");
        assert!(seen.iter().all(|&(_, t)| t == total), "{set:?}: {seen:?}");
        assert_eq!(seen.last(), Some(&(total, total)), "{set:?}");
    }
}
