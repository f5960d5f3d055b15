//! Custom `step` blocks, `accumulate = N` and the per-step callback, checked against the
//! classic recipe they must agree with.

use dlc::train::{Control, TrainOptions, Trainer};
use dlc::Program;
use std::path::Path;

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Train `src`'s first recipe; returns the report and the final parameters.
fn train(src: &str, opts: TrainOptions) -> (dlc::train::TrainReport, Vec<(String, Vec<f64>)>) {
    let mut p = Program::run("step_test.dl", src, Some(&examples()), false);
    assert!(p.ok, "{:?}", p.diagnostics());
    let info = p.session.t.recipes[0].clone();
    let mut t = Trainer::new(&mut p.session, info, opts).expect("trainer");
    let r = t.run().expect("training runs");
    (r, t.parameters().into_iter().map(|(n, v)| (n, v.to_f64())).collect())
}

fn opts() -> TrainOptions {
    TrainOptions::new(examples(), 0)
}

const HEAD: &str = r#"
use std.nn
use std.data
use std.optim
model Classifier() {
  fc1 = Linear(4, 16)
  fc2 = Linear(16, 3)
  forward(x: f32[B, 4]) -> f32[B, 3] = x |> fc1 |> relu |> fc2
}
data flowers = csv("data/sklearn/iris.csv", features: 4, label: 4, header: 1) |> map(r => (r.features / 8.0, r.label)) |> BATCHING
"#;

fn recipe(batching: &str, body: &str) -> String {
    format!("{}\ntrain {{\n  model = Classifier()\n  data = flowers\n{body}\n}}\n", HEAD.replace("BATCHING", batching))
}

fn max_diff(a: &[(String, Vec<f64>)], b: &[(String, Vec<f64>)]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .flat_map(|((na, va), (nb, vb))| {
            assert_eq!(na, nb);
            va.iter().zip(vb).map(|(x, y)| (x - y).abs())
        })
        .fold(0.0, f64::max)
}

/// A custom step that does what the classic recipe does traces to the same graph: the same
/// losses and parameters, bit for bit, with Adam's state and the learning-rate schedule.
#[test]
fn custom_step_equals_the_classic_recipe() {
    let common = "  optimizer = adam(lr: 0.01)\n  schedule = cosine()\n  epochs = 3\n  log every 5 steps\n";
    let classic = recipe("shuffle(seed: 2) |> batch(16)", &format!("  loss = cross_entropy(model(x), y)\n{common}"));
    let custom = recipe(
        "shuffle(seed: 2) |> batch(16)",
        &format!(
            "{common}  step(b) {{\n    let loss = cross_entropy(model(x), y)\n    update model by grad(loss, model)\n    log loss\n  }}\n"
        ),
    );
    let (ra, pa) = train(&classic, opts());
    let (rb, pb) = train(&custom, opts());
    assert_eq!(ra.steps, 30);
    assert_eq!(ra.losses, rb.losses);
    assert_eq!(pa, pb);
}

/// After `update model by ...` the rest of the step sees the new parameters: two plain SGD
/// updates on one batch in one step equal two classic steps on that batch.
#[test]
fn later_statements_see_updated_parameters() {
    let classic = recipe("batch(150)", "  loss = cross_entropy(model(x), y)\n  optimizer = sgd(lr: 0.5)\n  epochs = 2\n");
    let custom = recipe(
        "batch(150)",
        "  optimizer = sgd(lr: 0.5)\n  steps = 1\n  step(b) {\n    update model by grad(cross_entropy(model(x), y), model)\n    let second = cross_entropy(model(x), y)\n    update model by grad(second, model)\n    log second\n  }\n",
    );
    let (ra, pa) = train(&classic, opts());
    let (rb, pb) = train(&custom, opts());
    assert_eq!((ra.steps, rb.steps), (2, 1));
    assert!(max_diff(&pa, &pb) < 1e-6, "{}", max_diff(&pa, &pb));
    // The second loss is computed after the first update: it equals the classic run's step 2.
    assert!((ra.losses[1].1 - rb.losses[0].1).abs() < 1e-6, "{:?} vs {:?}", ra.losses, rb.losses);
}

/// Two models, two optimisers: each `update` moves only its own model, checkpoint names carry
/// the model's name, and both losses are reported.
#[test]
fn two_models_update_independently() {
    let src = format!(
        "{}\ntrain {{\n  models = (a: Classifier(), b: Classifier())\n  optimizers = (a: sgd(lr: 0.1), b: adam(lr: 0.01))\n  data = flowers\n  steps = 20\n  step(batch) {{\n    let la = cross_entropy(a(x), y)\n    update a by grad(la, a)\n    let lb = cross_entropy(b(x), y) + 0.0 * la\n    update b by grad(lb, b)\n    log (la, lb)\n  }}\n}}\n",
        HEAD.replace("BATCHING", "batch(50)")
    );
    let mut seen = vec![];
    let mut o = opts();
    o.on_step = Some(Box::new(move |ev| {
        seen.push(ev.logged.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>());
        assert_eq!(ev.lr.len(), 2);
        assert_eq!(seen[0], vec!["la".to_string(), "lb".to_string()]);
        Control::Continue
    }));
    let (r, params) = train(&src, o);
    assert_eq!(r.steps, 20);
    let names: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["a.fc1.weight", "a.fc1.bias", "a.fc2.weight", "a.fc2.bias", "b.fc1.weight", "b.fc1.bias", "b.fc2.weight", "b.fc2.bias"]
    );
    // Same initialisation seed per path would make them equal; different optimisers move them apart.
    assert!(max_diff(&params[..4], &params[4..].iter().map(|(n, v)| (n.replacen('b', "a", 1), v.clone())).collect::<Vec<_>>()) > 1e-3);
}

/// `accumulate = 2` over batches of 8 takes the same steps as batches of 16: the update sees the
/// mean gradient of the two micro-batches.
#[test]
fn accumulate_matches_the_larger_batch() {
    let body = "  loss = cross_entropy(model(x), y)\n  optimizer = sgd(lr: 0.3, momentum: 0.9)\n  epochs = 2\n";
    let big = recipe("batch(16, drop_last: true)", body);
    let acc = recipe("batch(8, drop_last: true)", &format!("{body}  accumulate = 2\n"));
    let (ra, pa) = train(&big, opts());
    let (rb, pb) = train(&acc, opts());
    assert_eq!(ra.steps, 18);
    assert_eq!(rb.steps, 18, "two micro-batches per optimiser step");
    assert!(max_diff(&pa, &pb) < 1e-5, "{}", max_diff(&pa, &pb));
    for ((_, a), (_, b)) in ra.losses.iter().zip(&rb.losses) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
}

/// The callback can stop training early; the run ends at that step.
#[test]
fn callback_stops_training() {
    let src = recipe("batch(16)", "  loss = cross_entropy(model(x), y)\n  optimizer = adam(lr: 0.01)\n  epochs = 5\n");
    let mut o = opts();
    o.on_step = Some(Box::new(|ev| if ev.step == 7 { Control::Stop } else { Control::Continue }));
    let (r, _) = train(&src, o);
    assert_eq!(r.steps, 7);
}
