//! A plan's intermediate values in one arena on the device (runner/device_executor/arena.rs):
//! on the emulated GPU, a few training steps of a conv -> batch norm -> MLP net write their
//! convolutions', products' and generated kernels' outputs at planned offsets of one allocation,
//! and end with the same checkpoint, bit for bit, as the same steps with every output allocated
//! on its own (`DLC_ARENA=0`). Two values sharing bytes while both alive would change it.

mod common;
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
  steps     = 6
  checkpoint "run" every 6 steps
}
"#;

/// Train NET on the emulated GPU with the arena on or off; the checkpoint's two files and what
/// the run printed.
fn train(arena: bool) -> (Vec<u8>, Vec<u8>, String) {
    let dir = scratch(if arena { "arena-on" } else { "arena-off" });
    let digits = std::path::Path::new(ROOT).join("examples/data/sklearn/digits.csv.gz");
    std::fs::write(dir.join("net.dl"), NET.replace("DIGITS", digits.to_str().expect("utf-8 path"))).expect("write net.dl");
    let o = command(&dir)
        .args(["run", "net.dl", "--device", "cuda"])
        .env("DLC_EMULATE_GPU", "1")
        .env("DLC_ARENA", if arena { "1" } else { "0" })
        .output()
        .expect("run dlc");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let step = dir.join("run/step-00000006");
    let read = |f: &str| std::fs::read(step.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    (read("model.safetensors"), read("optimizer.safetensors"), text(&o.stdout) + &text(&o.stderr))
}

#[test]
fn intermediates_in_one_arena_train_as_outputs_allocated_one_by_one() {
    let (model, optimizer, printed) = train(true);
    let (model_off, optimizer_off, printed_off) = train(false);
    assert!(model == model_off, "the parameters differ with the arena");
    assert!(optimizer == optimizer_off, "the optimiser's state differs with the arena");
    // Every step's intermediates went into the arena; only results were allocated.
    let placed: usize = printed
        .split("outputs placed")
        .next()
        .and_then(|s| s.rsplit(' ').nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no arena in the run's summary: {printed}"));
    assert!(placed >= 6 * 40, "{placed} outputs placed in 6 steps: {printed}");
    assert!(!printed_off.contains("plan arenas"), "{printed_off}");
}
