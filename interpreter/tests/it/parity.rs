//! Parity with PyTorch: every case under tests/parity/ (written by
//! tests/fixtures/gen_torch_parity.py; see docs/parity.md) trains a small model from the same
//! initial parameters, data and recipe that PyTorch ran, and must reproduce, within the case's
//! tolerance `|got - want| <= tol * (1 + |want|)`:
//! - the loss of each step (before its update),
//! - the gradient of every parameter at step 1 (the case run again with `sgd(lr: 1.0)` for one
//!   step, so that the gradient is the initial minus the updated parameter),
//! - every parameter after the recipe's steps,
//! - the evaluation metric after each step, where the case has one (BatchNorm's running statistics).
//!
//! The fixtures are committed; the test needs no Python.

use dlc::train::{Control, StepEvent, TrainOptions, Trainer};
use dlc::Program;
use serde_json::Value as Json;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Cases where dlc knowingly computes something different from PyTorch: (case, what differs,
/// as measured). They still run and must still differ: one that starts to match has to leave
/// this list. See docs/parity.md.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[
    // None today. relu's gradient at 0 and sigmoid/silu's saturated gradients differed until
    // the prelude took PyTorch's definitions (see docs/parity.md).
];

fn parity_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/parity")
}

/// What one training run produced; `error` when it stopped early (the losses are those of the
/// steps that completed, the parameters the last ones it had).
struct Run {
    losses: Vec<f64>,
    params: Vec<(String, Vec<f64>)>,
    evals: Vec<Vec<f64>>,
    error: Option<String>,
}

/// Train `text` (the case's program, possibly edited) from init.safetensors; `steps` overrides
/// the recipe's step count.
fn train(case: &str, dir: &Path, text: &str, steps: Option<usize>) -> Result<Run, String> {
    let mut p = Program::run(&format!("{case}/case.dl"), text, Some(dir), false);
    if !p.ok {
        return Err(format!("the program does not check:\n{:?}", p.diagnostics()));
    }
    let mut info = p.session.t.recipes.first().cloned().ok_or("the program has no recipe")?;
    if let Some(n) = steps {
        dlc::train::apply_overrides(&mut info, &[("steps".into(), n.to_string())])?;
    }
    let losses = Rc::new(RefCell::new(vec![]));
    let seen = losses.clone();
    let mut opts = TrainOptions::new(dir.to_path_buf(), 0);
    opts.on_step = Some(Box::new(move |ev: &StepEvent| {
        seen.borrow_mut().push(ev.logged[0].1);
        Control::Continue
    }));
    let mut trainer = Trainer::new(&mut p.session, info, opts).map_err(|e| format!("trainer: {e}"))?;
    let init = dlc::train::checkpoint::read_safetensors(&dir.join("init.safetensors"))?;
    trainer.set_parameters(&init, "init.safetensors").map_err(|e| e.to_string())?;
    let (evals, error) = match trainer.run() {
        Ok(report) => (report.evals.into_iter().map(|e| e.values).collect(), None),
        Err(e) => (vec![], Some(format!("training stopped: {e}"))),
    };
    let params = trainer.parameters().into_iter().map(|(n, t)| (n, t.to_f64())).collect();
    let losses = losses.borrow().clone();
    Ok(Run { losses, params, evals, error })
}

/// The program with its optimiser replaced by plain SGD with learning rate 1 (`--set` cannot
/// replace a whole optimiser, so the recipe's `optimizer = ...` line is rewritten).
fn with_unit_sgd(text: &str) -> Result<String, String> {
    let mut found = 0;
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("optimizer") && l.contains('=') {
                found += 1;
                "  optimizer = sgd(lr: 1.0)".to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    if found != 1 {
        return Err(format!("expected one `optimizer = ...` line in case.dl, found {found}"));
    }
    Ok(lines.join("\n") + "\n")
}

fn floats(v: &Json) -> Vec<f64> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_f64()).collect()).unwrap_or_default()
}

/// The comparisons of one case: the mismatches, and the largest error seen relative to the
/// tolerance's scale, `|got - want| / (1 + |want|)`, which the test prints.
struct Checker {
    case: String,
    tol: f64,
    out: Vec<String>,
    worst: f64,
}

impl Checker {
    /// Compare element by element; every mismatch is one message naming the case, the quantity,
    /// the index, got and want.
    fn compare(&mut self, what: &str, got: &[f64], want: &[f64]) {
        let (case, tol) = (&self.case, self.tol);
        if got.len() != want.len() {
            self.out.push(format!("{case}: {what}: {} values, expected {}", got.len(), want.len()));
        }
        let mut bad = 0;
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let diff = (g - w).abs();
            let scaled = diff / (1.0 + w.abs());
            self.worst = if scaled.is_nan() { f64::INFINITY } else { self.worst.max(scaled) };
            // Written so that NaN fails too.
            if diff.is_nan() || diff > tol * (1.0 + w.abs()) {
                bad += 1;
                if bad <= 3 {
                    self.out.push(format!("{case}: {what}[{i}]: got {g:.9}, want {w:.9} (|diff| {diff:.3e}, tol {tol:e})"));
                }
            }
        }
        if bad > 3 {
            self.out.push(format!("{case}: {what}: {} more mismatches", bad - 3));
        }
    }
}

/// Check one case: the mismatches (none when it matches PyTorch) and the largest scaled error.
fn check_case(dir: &Path) -> Result<Checker, String> {
    let case = dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).map_err(|e| format!("{case}: {name}: {e}"));
    let text = read("case.dl")?;
    let expected: Json = serde_json::from_str(&read("expected.json")?).map_err(|e| format!("{case}: expected.json: {e}"))?;
    let tol = expected["tol"].as_f64().ok_or(format!("{case}: expected.json has no tol"))?;
    let mut c = Checker { case: case.clone(), tol, out: vec![], worst: 0.0 };

    let run = train(&case, dir, &text, None).map_err(|e| format!("{case}: {e}"))?;
    c.compare("loss by step", &run.losses, &floats(&expected["losses"]));
    if let Some(e) = &run.error {
        // The parameters and evaluations of a run that stopped early are not comparable.
        c.out.push(format!("{case}: {e}"));
    } else {
        let want_params = expected["params"].as_object().ok_or(format!("{case}: expected.json has no params"))?;
        let names: Vec<&String> = run.params.iter().map(|(n, _)| n).collect();
        if names.len() != want_params.len() || want_params.keys().any(|k| !names.contains(&k)) {
            c.out.push(format!("{case}: parameters {names:?}, expected {:?}", want_params.keys().collect::<Vec<_>>()));
        }
        for (name, got) in &run.params {
            if let Some(want) = want_params.get(name) {
                c.compare(&format!("parameter `{name}` after training"), got, &floats(want));
            }
        }
        if let Some(evals) = expected["evals"].as_array() {
            let got: Vec<f64> = run.evals.iter().flatten().copied().collect();
            let want: Vec<f64> = evals.iter().flat_map(floats).collect();
            c.compare("evaluation after each step", &got, &want);
        }
    }

    // Gradients: one step of SGD with lr 1 from the same start moves each parameter by -grad.
    let unit = train(&case, dir, &with_unit_sgd(&text).map_err(|e| format!("{case}: {e}"))?, Some(1))
        .map_err(|e| format!("{case} (gradient run): {e}"))?;
    if let Some(e) = &unit.error {
        c.out.push(format!("{case} (gradient run): {e}"));
    }
    let init = dlc::train::checkpoint::read_safetensors(&dir.join("init.safetensors")).map_err(|e| format!("{case}: {e}"))?;
    let want_grads = expected["grads"].as_object().ok_or(format!("{case}: expected.json has no grads"))?;
    for (name, after) in &unit.params {
        let Some(before) = init.iter().find(|(n, _)| n == name).map(|(_, t)| t.to_f64()) else {
            c.out.push(format!("{case}: init.safetensors has no `{name}`"));
            continue;
        };
        let got: Vec<f64> = before.iter().zip(after).map(|(b, a)| b - a).collect();
        match want_grads.get(name) {
            Some(want) => c.compare(&format!("gradient of `{name}` at step 1"), &got, &floats(want)),
            None => c.out.push(format!("{case}: expected.json has no gradient for `{name}`")),
        }
    }
    Ok(c)
}

#[test]
fn stdlib_matches_pytorch() {
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(parity_dir()).expect("tests/parity exists").flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    assert!(dirs.len() >= 30, "expected the parity cases under tests/parity, found {}", dirs.len());
    let mut failures = vec![];
    for dir in &dirs {
        let case = dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        let known = KNOWN_DIFFERENCES.iter().find(|(c, _)| *c == case);
        match (check_case(dir), known) {
            (Ok(c), None) if c.out.is_empty() => println!("{case}: matches PyTorch (largest error {:.1e}, tol {:e})", c.worst, c.tol),
            (Ok(c), None) => failures.extend(c.out),
            (Err(e), None) => failures.push(e),
            (Ok(c), Some(_)) if c.out.is_empty() => failures.push(format!("{case}: now matches PyTorch; remove it from KNOWN_DIFFERENCES")),
            (Ok(c), Some((_, why))) => {
                println!("{case}: known difference ({why}); first mismatches: {}", c.out[..c.out.len().min(3)].join("; "))
            }
            (Err(e), Some(_)) => failures.push(e),
        }
    }
    for (c, _) in KNOWN_DIFFERENCES {
        if !dirs.iter().any(|d| d.ends_with(c)) {
            failures.push(format!("KNOWN_DIFFERENCES names `{c}`, which is not a case under tests/parity"));
        }
    }
    assert!(failures.is_empty(), "{} parity failure(s):\n{}", failures.len(), failures.join("\n"));
}
