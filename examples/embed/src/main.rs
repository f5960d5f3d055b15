//! dlc as a library, the way the CLI uses it: load a program, check it (diagnostics are values),
//! run it, override recipe fields, train, and read the trained parameters back; then train on
//! batches made in Rust, with a per-step callback that stops early, and save and reload the weights.
//!
//! Run with `cargo run -p dlc-embed-example` from the repository root.

use dlc::runtime::tensor::Tensor;
use dlc::train::{apply_overrides, Control, TrainOptions, Trainer};
use dlc::DType;
use dlc::Program;
use std::path::Path;

fn main() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let path = examples.join("iris.dl");
    let text = std::fs::read_to_string(&path).expect("examples/iris.dl");

    // 1. Check: nothing runs; problems come back as values with spans.
    let checked = Program::check("iris.dl", &text, Some(&examples));
    assert!(checked.ok, "{:?}", checked.diagnostics());
    for m in checked.models() {
        println!("model {}: {} parameters", m.name, m.total);
    }

    // 2. A program with an error: the diagnostic says what and where.
    let bad = Program::check("bad.dl", "let x = [1.0, 2.0] @ [1.0, 2.0, 3.0]\n", None);
    let d = &bad.diagnostics()[0];
    let (line, col) = bad.sources().line_col(d.primary_span().file, d.primary_span().start);
    println!("bad.dl:{line}:{col}: error[{}]: {}", d.code, d.message);

    // 3. Run the top-level statements, then train the recipe with an override.
    let mut program = Program::run("iris.dl", &text, Some(&examples), false);
    assert!(program.ok, "{:?}", program.diagnostics());
    let mut recipe = program.session.t.recipes[0].clone();
    apply_overrides(&mut recipe, &[("epochs".into(), "20".into())]).expect("override");
    let mut trainer = Trainer::new(&mut program.session, recipe, TrainOptions::new(examples.clone(), 0)).expect("trainer");
    let report = trainer.run().expect("training");
    for e in report.evals.iter().filter(|e| e.epoch % 5 == 0) {
        println!("epoch {}: {} {:.3}", e.epoch, e.names[0], e.values[0]);
    }

    // 4. The trained weights, by the names a PyTorch state dict would use.
    for (name, t) in trainer.parameters() {
        println!("{name}: {:?}", t.shape);
    }
    let accuracy = report.evals.last().map(|e| e.values[0]).unwrap_or(0.0);
    assert!(accuracy > 0.8, "accuracy {accuracy}");

    // 5. Data from Rust: a synthetic 3-class task (which of x0, x1 + x2, x3 is largest), 8 batches of
    //    32 rows an epoch, made by a small generator. The callback sees every step and stops
    //    training once the loss is low.
    let mut program = Program::run("iris.dl", &text, Some(&examples), false);
    let recipe = program.session.t.recipes[0].clone();
    let mut opts = TrainOptions::new(examples.clone(), 0);
    opts.batches = Some(Box::new(|epoch| Ok((0..8).map(|b| synthetic_batch(epoch * 8 + b, 32)).collect())));
    let mut last = (0, f64::NAN);
    let stop_below = 0.15;
    opts.on_step = Some(Box::new(move |ev| {
        if ev.step % 50 == 0 {
            println!("step {}: loss {:.4}", ev.step, ev.logged[0].1);
        }
        if ev.logged[0].1 < stop_below {
            println!("step {}: loss {:.4} < {stop_below}, stopping", ev.step, ev.logged[0].1);
            Control::Stop
        } else {
            Control::Continue
        }
    }));
    let mut trainer = Trainer::new(&mut program.session, recipe, opts).expect("trainer");
    let report = trainer.run().expect("training on Rust batches");
    if let Some(l) = report.losses.last() {
        last = *l;
    }
    println!("trained {} steps on Rust batches, last loss {:.4}", report.steps, last.1);
    assert!(report.steps < 60 * 8, "the callback stopped training early");

    // 6. Save the weights, perturb nothing, load them into a fresh trainer: the same parameters.
    let dir = std::env::temp_dir().join(format!("dlc-embed-{}", std::process::id()));
    trainer.save(&dir, report.steps, 0).expect("checkpoint");
    let saved = trainer.parameters();
    let mut fresh = Program::run("iris.dl", &text, Some(&examples), false);
    let recipe = fresh.session.t.recipes[0].clone();
    let mut other = Trainer::new(&mut fresh.session, recipe, TrainOptions::new(examples.clone(), 7)).expect("trainer");
    other.load_weights(&dir).expect("load");
    assert!(other.parameters().iter().zip(&saved).all(|(a, b)| a.0 == b.0 && a.1.to_f64() == b.1.to_f64()));
    println!("saved to and reloaded from {}", dir.display());
    std::fs::remove_dir_all(&dir).ok();
}

/// One batch of the synthetic task: features f32[n, 4] in [0, 1), labels i64[n].
fn synthetic_batch(index: u64, n: usize) -> Vec<Tensor> {
    // A 64-bit LCG (Knuth's MMIX constants): enough for toy data, reproducible.
    let mut state = index.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut x = Vec::with_capacity(n * 4);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let row: Vec<f64> = (0..4).map(|_| next()).collect();
        let scores = [row[0], row[1] + row[2], row[3]];
        let label = (0..3).max_by(|&a, &b| scores[a].total_cmp(&scores[b])).unwrap_or(0);
        x.extend(row);
        y.push(label as f64);
    }
    vec![Tensor::from_f64(DType::F32, vec![n, 4], x), Tensor::from_f64(DType::I64, vec![n], y)]
}
