//! A plan's intermediate values in one arena on the device (runner/device_executor/arena.rs),
//! and steady-state steps replayed as graphs (device_executor/graphs.rs): on the emulated GPU,
//! twelve training steps of a conv -> batch norm -> MLP net write their convolutions', products'
//! and generated kernels' outputs at planned offsets of one allocation, most steps are replayed
//! from a recorded graph, and the run ends with the same checkpoint, bit for bit, as the same
//! steps with every output allocated on its own and every call issued one by one
//! (`DLC_ARENA=0 DLC_CUDA_GRAPHS=0 DLC_UPLOAD_AHEAD=0`), each batch uploaded when its step
//! starts instead of on the copy stream during the step before. Two values sharing bytes while
//! both alive, or a graph replayed on other buffers than the step's, would change it; a batch read
//! before its copy's event stops the run (`runner/emulated.rs`), and so would a convolution
//! workspace placed over a live value.

use crate::common;
use common::{command, scratch, text, ROOT};

const NET: &str = r#"use std.nn
use std.data
use std.optim

model Net() {
  c = Conv2d(1, 4, 3, padding: 1, bias: false)
  n = BatchNorm2d(4)
  fc1 = Linear(4 * 8 * 8, 32)
  fc2 = Linear(32, 10)
  forward(x: f32[B, 64]) -> f32[B, 10] =
    reshape(x, (-1, 1, 8, 8)) |> c |> n |> relu |> flatten(start: 1) |> fc1 |> gelu |> fc2
}

fn prepare(r) = (r.features / 16.0, r.label)

data train_set = csv("DIGITS", features: 64, label: 64)
  |> map(prepare) |> shuffle(seed: 1) |> batch(64, drop_last: true)

train {
  model     = Net()
  data      = train_set
  loss      = cross_entropy(model(x), y)
  optimizer = adamw(lr: 0.01)
  steps     = 12
  checkpoint "run" every 12 steps
}
"#;

/// Train NET on the emulated GPU with the arena, graphs and uploads ahead all on or all off;
/// the checkpoint's two files and what the run printed.
fn train(on: bool) -> (Vec<u8>, Vec<u8>, String) {
    let dir = scratch(if on { "arena-on" } else { "arena-off" });
    let digits = std::path::Path::new(ROOT).join("examples/data/sklearn/digits.csv.gz");
    std::fs::write(dir.join("net.dl"), NET.replace("DIGITS", digits.to_str().expect("utf-8 path"))).expect("write net.dl");
    let mut run = command(&dir);
    run.args(["run", "net.dl", "--device", "cuda"]).env("DLC_EMULATE_GPU", "1");
    for feature in ["DLC_ARENA", "DLC_CUDA_GRAPHS", "DLC_UPLOAD_AHEAD"] {
        run.env(feature, if on { "1" } else { "0" });
    }
    let o = run.output().expect("run dlc");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let step = dir.join("run/step-00000012");
    let read = |f: &str| std::fs::read(step.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    (read("model.safetensors"), read("optimizer.safetensors"), text(&o.stdout) + &text(&o.stderr))
}

/// The number before `what` in `printed` (the run's summary line, or one line of it).
fn number_before<T: std::str::FromStr>(printed: &str, what: &str) -> T {
    printed
        .split(what)
        .next()
        .and_then(|s| s.trim_end().rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `{what}` in the run's summary: {printed}"))
}

#[test]
fn steps_in_an_arena_and_replayed_as_graphs_train_as_steps_issued_one_call_at_a_time() {
    let (model, optimizer, printed) = train(true);
    let (model_off, optimizer_off, printed_off) = train(false);
    assert!(model == model_off, "the parameters differ with the arena");
    assert!(optimizer == optimizer_off, "the optimiser's state differs with the arena");
    // The convolutions' workspace is in the arena too, after the values, from the second run
    // on (the emulated driver fills it with NaN before and after each convolution, so placed
    // over a live value it changes the checkpoint: with it at offset 0 the parameters differed).
    assert!(printed.contains("and 0.06 MiB of convolution workspace"), "{printed}");
    // Every step's intermediates went into the arena; only results were allocated. The first
    // run issues its calls; the next two are recorded and, repeating the runs two before
    // them from then on, captured as two graphs that the other runs replay.
    let placed = number_before::<usize>(&printed, "outputs placed");
    assert!(placed >= 12 * 40, "{placed} outputs placed in 12 steps: {printed}");
    let replayed = number_before::<usize>(&printed, "runs replayed as");
    assert!(replayed >= 8, "{replayed} of 12 steps replayed: {printed}");
    assert!(!printed_off.contains("replayed"), "{printed_off}");
    // Each step's batch (x and y) after the first went up on the copy stream while the step
    // before ran; the emulated driver fails any call that reads it before its copy's event.
    let ahead = number_before::<usize>(&printed, "batches uploaded ahead");
    assert!(ahead >= 2 * 11, "{ahead} batches uploaded ahead: {printed}");
    assert!(!printed_off.contains("uploaded ahead"), "{printed_off}");
    assert!(!printed_off.contains("plan arenas"), "{printed_off}");
    // A steady step (the 9 after the first 3) copies its batch up (x f32[64, 64] and y i64[64])
    // and its three scalars (the step and draw counts, the learning rate), and is one graph
    // launch with nothing issued beside it.
    let steady = printed.lines().find(|l| l.starts_with("device: a steady step (9 after")).unwrap_or_else(|| panic!("{printed}"));
    let figure = |what: &str| number_before::<f64>(steady, what);
    assert_eq!(figure(" B and "), (64 * 64 * 4 + 64 * 8) as f64, "{steady}");
    assert!(figure(" B up") - figure(" B and ") <= 12.0, "{steady}");
    assert_eq!((figure(" graph launches"), figure(" calls issued")), (1.0, 0.0), "{steady}");
    let steady_off = printed_off.lines().find(|l| l.starts_with("device: a steady step")).unwrap_or_else(|| panic!("{printed_off}"));
    assert!(steady_off.contains("0.00 graph launches"), "{steady_off}");
}

/// `dlc bench` on the emulated GPU reports a timed step's traffic: the batch and the step's
/// scalars up, the loss (read every timed step) down, one graph launch.
#[test]
fn bench_reports_what_a_timed_step_copies_and_launches_on_the_emulated_gpu() {
    let dir = scratch("arena-bench");
    let digits = std::path::Path::new(ROOT).join("examples/data/sklearn/digits.csv.gz");
    std::fs::write(dir.join("net.dl"), NET.replace("DIGITS", digits.to_str().expect("utf-8 path"))).expect("write net.dl");
    let o = command(&dir)
        .args(["bench", "net.dl", "--device", "cuda", "--json", "--steps", "4", "--warmup", "3"])
        .env("DLC_EMULATE_GPU", "1")
        .output()
        .expect("run dlc");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let d = &report["device_per_step"];
    assert_eq!(report["batch_bytes"], serde_json::json!(64 * 64 * 4 + 64 * 8), "{report}");
    let up = d["bytes_up"].as_f64().expect("bytes up") - 16896.0;
    assert!((0.0..=12.0).contains(&up), "{d}");
    assert_eq!(
        (d["bytes_down"].as_f64(), d["graph_launches"].as_f64(), d["calls_issued"].as_f64()),
        (Some(4.0), Some(1.0), Some(0.0)),
        "{d}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
