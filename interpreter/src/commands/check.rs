//! `dlc check FILE`: parse and type-check; print diagnostics, or a summary of the models, the
//! recipes and each training step's planned memory. `--repeat N` times the check.

use crate::reports::{group_digits, median_ms, stats, Memory};
use crate::session::{read_error, report, root_of};
use dlc::render::to_json;
use dlc::Program;
use std::path::Path;

pub fn main(file: &Path, json: bool) -> i32 {
    let start = std::time::Instant::now();
    let p = match Program::load_file(file, false) {
        Ok(p) => p,
        Err(e) => return read_error(file, e),
    };
    let elapsed = start.elapsed();
    if json {
        let diags: Vec<_> = p.diagnostics().iter().map(|d| to_json(d, p.sources())).collect();
        let out = serde_json::json!({
            "file": file.display().to_string(),
            "ok": p.ok,
            "diagnostics": diags,
            "models": models_json(&p),
            "check_ms": elapsed.as_secs_f64() * 1e3,
        });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return if p.ok { 0 } else { 1 };
    }
    let errors = report(&p);
    if errors > 0 {
        eprintln!("error: could not check `{}`: {errors} error{}", file.display(), if errors == 1 { "" } else { "s" });
        return 1;
    }
    println!("{}: ok ({:.1} ms)", file.display(), elapsed.as_secs_f64() * 1e3);
    for m in p.models() {
        println!("model {}: {} parameters", m.name, group_digits(m.total));
        for (path, ty) in &m.params {
            println!("  {path:<32} {ty}");
        }
    }
    for line in dlc::api::recipe_lines(&p.session) {
        println!("{line}");
    }
    // The memory each training step will need, planned before anything runs.
    let mut p = p;
    let opts = dlc::compile::Options::new(root_of(file));
    let recipes: Vec<_> = p.session.t.recipes.iter().filter(|r| r.kind == dlc_language::syntax::ast::RecipeKind::Train).cloned().collect();
    for info in recipes {
        let t = dlc::compile::train(&mut p, info, &opts);
        match t.step {
            Ok(step) => println!(
                "train `{}` step for batch {}: {}",
                t.name,
                dlc::compile::shapes_text(&step.shapes),
                Memory::of(&step.memory).line()
            ),
            Err(e) => println!("train `{}`: no memory plan before the run: {e}", t.name),
        }
    }
    0
}

/// The models' parameters with their types written as the messages write them
/// (`"type": "f32[B, 128]"`) and their shapes as lists whose known sizes are numbers and whose
/// symbolic ones are strings (`[512, 784]`, `["B", 128]`).
fn models_json(p: &Program) -> Vec<serde_json::Value> {
    p.models()
        .iter()
        .map(|m| {
            let params: Vec<_> = m
                .params
                .iter()
                .map(|(name, ty)| {
                    let shape: Vec<_> = ty
                        .shape
                        .iter()
                        .map(|d| d.as_known().map(|n| serde_json::json!(n)).unwrap_or_else(|| serde_json::json!(d.to_string())))
                        .collect();
                    serde_json::json!({"name": name, "type": ty.to_string(), "dtype": ty.dtype.to_string(), "shape": shape})
                })
                .collect();
            serde_json::json!({"name": m.name, "total": m.total, "params": params})
        })
        .collect()
}

/// `dlc check --repeat N`: parse + check from source text N times, as a user's `dlc check` does
/// (file reading excluded), and report the distribution.
pub fn timed(file: &Path, n: usize, json: bool) -> i32 {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => return read_error(file, e),
    };
    let name = file.display().to_string();
    let mut ms = vec![];
    for _ in 0..n {
        let t0 = std::time::Instant::now();
        let p = Program::check(&name, &text, file.parent());
        ms.push(t0.elapsed().as_secs_f64() * 1e3);
        if !p.ok {
            report(&p);
            return 1;
        }
    }
    let (median, min, max) = stats(ms);
    // Parsing alone, of this file and of the whole standard library (which every check parses).
    let parse_file = median_ms(n, || {
        std::hint::black_box(dlc_language::syntax::parse(dlc_language::FileId(0), &text));
    });
    let parse_std = median_ms(n, || {
        for (_, src) in dlc_language::stdlib::MODULES {
            std::hint::black_box(dlc_language::syntax::parse(dlc_language::FileId(0), src));
        }
    });
    if json {
        println!(
            "{}",
            serde_json::json!({"bench": "check", "file": name, "runs": n, "min_ms": min, "median_ms": median, "max_ms": max,
                "parse_file_median_ms": parse_file, "parse_stdlib_median_ms": parse_std})
        );
    } else {
        println!("{name}: check {n} runs: median {median:.2} ms, min {min:.2} ms, max {max:.2} ms");
        println!("{name}: parse median {:.1} us; the whole stdlib: parse median {:.1} us", parse_file * 1e3, parse_std * 1e3);
    }
    0
}
