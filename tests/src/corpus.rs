//! Runs every program of tests/cases and examples/ against its expectations, and type-checks the
//! ```dl blocks of docs/*.md. Each test collects every failing file before failing, so one run
//! shows all of them.

use crate::directives::{self, Expect};
use crate::{dl_files, repo};
use dlc::Program;
use std::path::Path;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (1.0 + b.abs())
}

/// Check one corpus file; Err describes the first mismatch.
pub fn run_case(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let d = directives::parse(&text)?;
    // Names relative to the repository, so rendered snapshots do not depend on the checkout.
    let name = path.strip_prefix(repo()).unwrap_or(path).display().to_string();
    let root = path.parent();
    if !d.errors.is_empty() {
        let p = Program::check(&name, &text, root);
        let sources = p.sources();
        let got: Vec<(String, usize, usize, String)> = p
            .diagnostics()
            .iter()
            .filter(|x| x.is_error())
            .map(|x| {
                let s = x.primary_span();
                let (l, c) = sources.line_col(s.file, s.start);
                let mut all = x.message.clone();
                for lab in &x.labels {
                    all.push(' ');
                    all.push_str(&lab.message);
                }
                if let Some(h) = &x.help {
                    all.push(' ');
                    all.push_str(h);
                }
                for n in &x.notes {
                    all.push(' ');
                    all.push_str(n);
                }
                (x.code.to_string(), l, c, all.to_lowercase())
            })
            .collect();
        let fmt = |v: &[(String, usize, usize, String)]| {
            v.iter().map(|g| format!("{} {}:{} ({})", g.0, g.1, g.2, g.3)).collect::<Vec<_>>().join("; ")
        };
        for e in &d.errors {
            let hit = got.iter().any(|g| {
                g.0 == e.code
                    && g.1 == e.line
                    && g.2 == e.col
                    && e.substring.as_ref().map(|s| g.3.contains(&s.to_lowercase())).unwrap_or(true)
            });
            if !hit {
                return Err(format!(
                    "expected {} at {}:{}{}; got: {}",
                    e.code,
                    e.line,
                    e.col,
                    e.substring.as_ref().map(|s| format!(" mentioning `{s}`")).unwrap_or_default(),
                    fmt(&got)
                ));
            }
        }
        if got.len() != d.errors.len() {
            return Err(format!("expected {} error(s), got {}: {}", d.errors.len(), got.len(), fmt(&got)));
        }
        return snapshot(path, &p);
    }
    let p = if d.check_only { Program::check(&name, &text, root) } else { Program::run(&name, &text, root, false) };
    if !p.ok {
        let msgs: Vec<String> = p.diagnostics().iter().map(|x| dlc::render::render(x, p.sources(), false)).collect();
        return Err(format!("unexpected errors:\n{}", msgs.join("\n")));
    }
    if d.check_only {
        return Ok(());
    }
    let printed = &p.output().printed;
    // The same program with one kernel per op must print the same, bit for bit: fused kernels
    // compute each op exactly as the eager ones do.
    // So must the fused kernels compiled to native code by Cranelift (`--jit`).
    let bits = |t: &dlc::Tensor| t.to_f64().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    for (mode, label) in [(dlc::ExecMode::Eager, "eager"), (dlc::ExecMode::FusedJit, "JIT")] {
        let other = Program::run_with(&name, &text, root, false, 0, mode);
        let other_printed = &other.output().printed;
        if other_printed.len() != printed.len() {
            return Err(format!("{label}: {} prints, fused: {}", other_printed.len(), printed.len()));
        }
        for (i, (f, e)) in printed.iter().zip(other_printed).enumerate() {
            if f.text != e.text || f.tensors.iter().map(bits).ne(e.tensors.iter().map(bits)) {
                return Err(format!("print #{}: fused `{}` differs from {label} `{}`", i + 1, f.text, e.text));
            }
        }
    }
    if printed.len() != d.outputs.len() {
        return Err(format!(
            "{} print(s) expected, {} happened: {:?}",
            d.outputs.len(),
            printed.len(),
            printed.iter().map(|x| x.text.clone()).collect::<Vec<_>>()
        ));
    }
    let tol = d.tol.unwrap_or(1e-5);
    for (i, (want, got)) in d.outputs.iter().zip(printed).enumerate() {
        match want {
            Expect::Out(s) => {
                if got.text != *s {
                    return Err(format!("print #{}: expected `{s}`, got `{}`", i + 1, got.text));
                }
            }
            Expect::Tensor { dtype, shape, values } => {
                let [t] = got.tensors.as_slice() else {
                    return Err(format!("print #{}: expected one tensor, got `{}`", i + 1, got.text));
                };
                if t.dtype != *dtype || t.shape != *shape {
                    return Err(format!("print #{}: expected {dtype}{shape:?}, got {}{:?}", i + 1, t.dtype, t.shape));
                }
                for (j, (a, b)) in t.to_f64().iter().zip(values).enumerate() {
                    if !close(*a, *b, tol) {
                        return Err(format!("print #{}: element {j} is {a}, expected {b} (tol {tol})", i + 1));
                    }
                }
            }
        }
    }
    Ok(())
}

/// The rendered diagnostics of an invalid program, compared with `<name>.stderr` beside it (as
/// rustc's UI tests do). `UPDATE_EXPECT=1 cargo test` rewrites the snapshots; review the diff.
fn snapshot(path: &Path, p: &Program) -> Result<(), String> {
    let rendered: String = p.diagnostics().iter().map(|x| dlc::render::render(x, p.sources(), false)).collect();
    let file = path.with_extension("stderr");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        return std::fs::write(&file, &rendered).map_err(|e| e.to_string());
    }
    let want = std::fs::read_to_string(&file)
        .map_err(|_| format!("no snapshot {}: run `UPDATE_EXPECT=1 cargo test` and review it", file.display()))?;
    if want != rendered {
        return Err(format!("rendered diagnostics differ from {}:\n--- expected\n{want}\n--- got\n{rendered}", file.display()));
    }
    Ok(())
}

fn run_all(files: &[std::path::PathBuf], min: usize, what: &str) {
    assert!(files.len() >= min, "expected at least {min} {what}, found {}", files.len());
    let failures: Vec<String> = files.iter().filter_map(|f| run_case(f).err().map(|e| format!("{}: {e}", f.display()))).collect();
    println!("{what}: {} passed, {} failed", files.len() - failures.len(), failures.len());
    assert!(failures.is_empty(), "{} of {} {what} failed:\n{}", failures.len(), files.len(), failures.join("\n\n"));
}

#[test]
fn valid_programs() {
    // Files under helpers/ are modules that other cases `use`, not programs of their own.
    let files: Vec<_> =
        dl_files(&repo().join("tests/cases/valid")).into_iter().filter(|f| !f.components().any(|c| c.as_os_str() == "helpers")).collect();
    run_all(&files, 30, "valid programs");
}

#[test]
fn invalid_programs() {
    run_all(&dl_files(&repo().join("tests/cases/invalid")), 25, "invalid programs");
}

#[test]
fn numeric_references() {
    run_all(&dl_files(&repo().join("tests/cases/numeric")), 15, "numeric reference programs");
}

/// Every example type-checks; examples that do not train also run.
#[test]
fn examples_check() {
    let files = dl_files(&repo().join("examples"));
    assert!(files.len() >= 5, "expected examples, found {}", files.len());
    let mut failures = vec![];
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        let p = Program::check(&f.display().to_string(), &text, f.parent());
        if !p.ok {
            let msgs: Vec<String> = p.diagnostics().iter().map(|x| dlc::render::render(x, p.sources(), false)).collect();
            failures.push(format!("{}:\n{}", f.display(), msgs.join("\n")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every ```dl block in docs/ is a complete program that type-checks.
#[test]
fn docs_examples_check() {
    let mut failures = vec![];
    let mut count = 0;
    for doc in ["docs/language.md", "README.md"] {
        let Ok(text) = std::fs::read_to_string(repo().join(doc)) else { continue };
        let mut block: Option<(usize, String)> = None;
        for (i, line) in text.lines().enumerate() {
            match &mut block {
                None if line.trim_start().starts_with("```dl") => block = Some((i + 1, String::new())),
                Some((start, src)) if line.trim_start().starts_with("```") => {
                    count += 1;
                    let name = format!("{doc}:{start}");
                    let p = Program::check(&name, src, Some(&repo().join("examples")));
                    if !p.ok {
                        let msgs: Vec<String> = p.diagnostics().iter().map(|x| dlc::render::render(x, p.sources(), false)).collect();
                        failures.push(format!("{name}:\n{}", msgs.join("\n")));
                    }
                    block = None;
                }
                Some((_, src)) => {
                    src.push_str(line);
                    src.push('\n');
                }
                None => {}
            }
        }
    }
    println!("doc blocks: {count} checked, {} failed", failures.len());
    assert!(count >= 10, "expected the docs to hold examples, found {count}");
    assert!(failures.is_empty(), "{} doc block(s) fail to check:\n{}", failures.len(), failures.join("\n"));
}

/// The bar of the issue: three independent syntax errors are all reported in one run.
#[test]
fn three_syntax_errors_in_one_run() {
    let src = "let a = (1 +\nlet b = 2\nfn f(x) = x +* 2\nlet c = [1, 2\nprint(b)\nmodel M { w = ) }\n";
    let (_, diags) = dlc_language::syntax::parse(dlc_language::FileId(0), src);
    let lines: std::collections::BTreeSet<usize> = diags
        .iter()
        .map(|d| {
            let mut sm = dlc_language::SourceMap::default();
            sm.add("t", src);
            sm.line_col(dlc_language::FileId(0), d.primary_span().start).0
        })
        .collect();
    assert!(lines.len() >= 3, "expected errors on at least three lines, got {diags:#?}");
}

/// Every error code the compiler can emit is documented in docs/errors.md, and every documented
/// code is exercised by at least one invalid program of the corpus (E0501 by a run-time case).
#[test]
fn error_codes_are_documented_and_tested() {
    let mut emitted = std::collections::BTreeSet::new();
    let mut files = vec![];
    for dir in ["language/src", "interpreter/src"] {
        let mut stack = vec![repo().join(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().map(|x| x == "rs").unwrap_or(false) {
                    files.push(p);
                }
            }
        }
    }
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for (i, _) in text.match_indices("\"E0") {
            let code = &text[i + 1..(i + 6).min(text.len())];
            if code.len() == 5 && code[1..].chars().all(|c| c.is_ascii_digit()) {
                emitted.insert(code.to_string());
            }
        }
    }
    let docs = std::fs::read_to_string(repo().join("docs/errors.md")).unwrap_or_default();
    let undocumented: Vec<&String> = emitted.iter().filter(|c| !docs.contains(&format!("### {c}"))).collect();
    assert!(undocumented.is_empty(), "codes emitted but not documented in docs/errors.md: {undocumented:?}");
    let mut exercised = String::new();
    for f in dl_files(&repo().join("tests/cases/invalid")) {
        exercised.push_str(&std::fs::read_to_string(f).unwrap_or_default());
    }
    // Run-time codes (E05xx) are exercised by the CLI tests (interpreter/tests/it/cli.rs).
    let untested: Vec<&String> =
        emitted.iter().filter(|c| !c.starts_with("E05") && !exercised.contains(&format!("expect-error: {c}"))).collect();
    assert!(untested.is_empty(), "codes no invalid program exercises: {untested:?}");
}

/// The reports shown in docs/errors.md are what `dlc check` prints today (trailing spaces aside),
/// so the error index cannot drift from the compiler.
#[test]
fn error_index_reports_are_current() {
    let docs = std::fs::read_to_string(repo().join("docs/errors.md")).unwrap_or_default();
    let blocks: Vec<&str> = docs.split("```text\n").skip(1).map(|b| b.split("```").next().unwrap_or("")).collect();
    let trim = |s: &str| s.lines().map(|l| l.trim_end().to_string()).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n");
    let mut checked = 0;
    let mut failures = vec![];
    for pair in blocks.windows(2) {
        let (program, report) = (pair[0], pair[1]);
        let Some(rest) = report.strip_prefix("$ dlc check example.dl\n") else { continue };
        let expected: String = rest.lines().filter(|l| !l.starts_with("error: could not")).collect::<Vec<_>>().join("\n");
        let p = Program::check("example.dl", program, None);
        let got: String = p.diagnostics().iter().map(|x| dlc::render::render(x, p.sources(), false)).collect();
        checked += 1;
        if trim(&expected) != trim(&got) {
            failures.push(format!("--- docs\n{}\n--- dlc\n{}", trim(&expected), trim(&got)));
        }
    }
    assert!(checked >= 30, "expected the error index to show reports, found {checked}");
    assert!(failures.is_empty(), "{} report(s) in docs/errors.md are stale:\n{}", failures.len(), failures.join("\n\n"));
}
