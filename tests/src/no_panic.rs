//! The parser and checker never panic: token-level mutations (delete, insert, swap) of every
//! corpus program are parsed and checked, and must come back as diagnostics, not panics.

use crate::{dl_files, repo};
use proptest::prelude::*;
use std::sync::OnceLock;

fn corpus() -> &'static Vec<String> {
    static C: OnceLock<Vec<String>> = OnceLock::new();
    C.get_or_init(|| {
        let mut files = dl_files(&repo().join("tests/cases"));
        files.extend(dl_files(&repo().join("examples")));
        files.iter().filter_map(|f| std::fs::read_to_string(f).ok()).collect()
    })
}

/// Split into lexer-ish pieces, keeping whitespace, so mutations operate on tokens.
fn pieces(src: &str) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    let mut cur = String::new();
    for c in src.chars() {
        let boundary = !(c.is_alphanumeric() || c == '_' || c == '.');
        if boundary {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            out.push(c.to_string());
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

const NOISE: &[&str] = &[
    "(", ")", "[", "]", "{", "}", ",", ":", "=", "=>", "|>", "@", "**", "-", "let", "fn", "model", "if", "else", "\n", "\"", "...", "f32[",
    "1e", "0", "x", "#", "train {", "é", "_",
];

fn mutate(src: &str, ops: &[(u8, usize, usize)]) -> String {
    let mut p = pieces(src);
    for &(kind, a, b) in ops {
        if p.is_empty() {
            break;
        }
        let i = a % p.len();
        match kind % 3 {
            0 => {
                p.remove(i);
            }
            1 => p.insert(i, NOISE[b % NOISE.len()].to_string()),
            _ => {
                let j = b % p.len();
                p.swap(i, j);
            }
        }
    }
    p.concat()
}

fn check_no_panic(src: &str) {
    let r = std::panic::catch_unwind(|| {
        let p = dlc::Program::check("mutant.dl", src, None);
        // Rendering must not panic either (spans must stay inside the source).
        for d in p.diagnostics() {
            let _ = dlc::render::render(d, p.sources(), false);
        }
    });
    assert!(r.is_ok(), "panicked on:\n{src}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300), failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn parser_and_checker_never_panic(file in 0usize..10_000, ops in proptest::collection::vec((0u8..3, 0usize..100_000, 0usize..100_000), 1..6)) {
        let c = corpus();
        prop_assume!(!c.is_empty());
        let src = mutate(&c[file % c.len()], &ops);
        check_no_panic(&src);
    }
}

#[test]
fn raw_bytes_never_panic() {
    for src in [
        "",
        "(",
        "[[[[",
        "}",
        "\"",
        "fn",
        "model M {",
        "train {",
        "let x = [1, [2]]",
        "x |> |> y",
        "1e999999",
        "99999999999999999999",
        "f32[-1]",
        "é = 3",
        "use",
        "use std.",
        "a.0.1.2",
        ":",
        "\u{0}",
    ] {
        check_no_panic(src);
    }
}

/// The deepest trees the parser lets through are checked on a test thread's small stack (2 MiB
/// in debug builds), and deeper ones are refused with E0106 instead of overflowing it.
#[test]
fn the_deepest_accepted_trees_are_checked() {
    let depth = dlc_language::syntax::depth::MAX_DEPTH;
    let sum = |n: usize| format!("let x = {}\nprint(x)\n", vec!["1.0"; n].join(" + "));
    let lists = |n: usize| format!("let x = {}1{}\nprint(x)\n", "[".repeat(n), "]".repeat(n));
    for src in
        [sum(depth - 1), lists(dlc_language::syntax::layout::MAX_NESTING), format!("let x = {}1.0\nprint(x)\n", "-".repeat(depth - 2))]
    {
        check_no_panic(&src);
        let p = dlc::Program::check("deep.dl", &src, None);
        assert!(p.ok, "{:?}", p.diagnostics().first());
    }
    for src in [sum(50_000), format!("let x = {}1.0\n", "-".repeat(50_000))] {
        check_no_panic(&src);
        let p = dlc::Program::check("deep.dl", &src, None);
        assert_eq!(p.diagnostics().iter().map(|d| d.code).collect::<Vec<_>>(), ["E0106"]);
    }
}
