//! The code's shape, as ARCHITECTURE.md states it: no import cycle between the top-level
//! modules of a crate (`cli`, `train`, `runner`, `exec`, ...; unit-test modules aside), no
//! command that imports another, no source file over 600 lines, no function over 120 lines
//! except the one-match-per-op tables named below.

use crate::repo;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() && !matches!(name, "target" | ".git" | ".cuda" | "node_modules") {
            rust_files(&p, out);
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

/// The code of a file without comments and without its `#[cfg(test)] mod tests { ... }`.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// The top-level modules each top-level module of a crate names (`crate::x`, and `super::x`
/// from a file one level down).
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = vec![];
    rust_files(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(src).expect("under src");
        let parts: Vec<&str> = rel.iter().filter_map(|p| p.to_str()).collect();
        let top = parts[0].trim_end_matches(".rs").to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = code(&std::fs::read_to_string(f).expect("readable"));
        // How many `super::` reach the crate's root from this file: `cli.rs` and `train/mod.rs`
        // one, `train/step.rs` two.
        let depth = parts.len() - usize::from(parts.len() > 1 && parts[parts.len() - 1] == "mod.rs");
        let entry = graph.entry(top.clone()).or_default();
        for prefix in ["crate::".to_string(), "super::".repeat(depth)] {
            for (i, _) in text.match_indices(&prefix) {
                let before = text[..i].chars().last().unwrap_or(' ');
                let rest = &text[i + prefix.len()..];
                // `super::super::x` is not `super::x` one level up.
                if before.is_alphanumeric() || before == '_' || before == ':' || rest.starts_with("super::") {
                    continue;
                }
                for name in first_names(rest) {
                    if name != top {
                        entry.insert(name);
                    }
                }
            }
        }
    }
    let tops: BTreeSet<String> = graph.keys().cloned().collect();
    for deps in graph.values_mut() {
        deps.retain(|d| tops.contains(d));
    }
    graph
}

/// The module names a path after `crate::` starts with: `x` in `x::y`, `a` and `b` in
/// `{a::c, b}`.
fn first_names(rest: &str) -> Vec<String> {
    let ident = |s: &str| s.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    let Some(group) = rest.strip_prefix('{') else { return vec![ident(rest)].into_iter().filter(|n| !n.is_empty()).collect() };
    let (mut depth, mut names, mut start) = (0, vec![], 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                names.push(ident(&group[start..i]));
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                names.push(ident(&group[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    names.into_iter().filter(|n| !n.is_empty()).collect()
}

/// A cycle through `start`, if any.
fn cycle_from(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    fn walk(g: &BTreeMap<String, BTreeSet<String>>, at: &str, start: &str, path: &mut Vec<String>, seen: &mut BTreeSet<String>) -> bool {
        for next in g.get(at).into_iter().flatten() {
            if next == start {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(g, next, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_string()];
    walk(graph, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn no_import_cycle_between_top_level_modules() {
    let mut cycles = vec![];
    for krate in ["language", "jit", "interpreter"] {
        let graph = module_graph(&repo().join(krate).join("src"));
        for m in graph.keys() {
            if let Some(c) = cycle_from(&graph, m) {
                cycles.push(format!("{krate}: {}", c.join(" -> ")));
            }
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn grouped_paths_name_each_module() {
    assert_eq!(first_names("train::{a, b}"), vec!["train"]);
    assert_eq!(first_names("{exec::{fused, x}, runner::Slot, self}"), vec!["exec", "runner", "self"]);
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let graph: BTreeMap<String, BTreeSet<String>> =
        [("a", "b"), ("b", "c"), ("c", "a")].iter().map(|(x, y)| (x.to_string(), [y.to_string()].into())).collect();
    assert_eq!(cycle_from(&graph, "a"), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
}

#[test]
fn no_command_imports_another() {
    let dir = repo().join("interpreter/src/commands");
    let mut files = vec![];
    rust_files(&dir, &mut files);
    let commands: Vec<String> = std::fs::read_dir(&dir)
        .expect("commands/")
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(|n| n.trim_end_matches(".rs").to_string()))
        .filter(|n| n != "mod")
        .collect();
    let mut found = vec![];
    for f in files {
        let rel = f.strip_prefix(&dir).expect("under commands").to_string_lossy().to_string();
        let own = rel.split('/').next().unwrap_or("").trim_end_matches(".rs").to_string();
        let text = code(&std::fs::read_to_string(&f).expect("readable"));
        for c in commands.iter().filter(|c| **c != own) {
            for pattern in [format!("commands::{c}"), format!("super::{c}::")] {
                // `super::x` from commands/x/y.rs is its own command.
                if text.contains(&pattern) && !(rel.contains('/') && pattern.starts_with("super::")) {
                    found.push(format!("{rel} names {pattern}"));
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Functions whose length is one arm per op, builtin or syntax kind: splitting them would only
/// scatter the table.
const TABLES: &[&str] = &[
    "language/src/ir/verify.rs node_rule",
    "language/src/passes/autodiff.rs rule",
    "language/src/eval/builtin_impl.rs call",
    "language/src/eval/data.rs data_builtin",
    "language/src/eval/expr.rs eval",
];

/// Every function of a file longer than `limit` lines: (name, lines).
fn long_functions(text: &str, limit: usize) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = vec![];
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let indent = &l[..l.len() - t.len()];
        let sig = ["pub fn ", "fn ", "pub(crate) fn ", "pub(super) fn ", "const fn ", "pub const fn ", "unsafe fn ", "pub unsafe fn "]
            .iter()
            .find_map(|p| t.strip_prefix(p));
        let Some(sig) = sig else { continue };
        // A declaration, or a line of a string literal (DL source in a test).
        if l.trim_end().ends_with(';') || l.trim_end().ends_with('\\') {
            continue;
        }
        let name: String = sig.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let close = format!("{indent}}}");
        let Some(end) = lines[i..].iter().position(|x| *x == close) else { continue };
        if end + 1 > limit {
            out.push((name, end + 1));
        }
    }
    out
}

#[test]
fn files_and_functions_stay_small() {
    let mut files = vec![];
    for dir in ["language", "jit", "interpreter", "tests", "examples"] {
        rust_files(&repo().join(dir), &mut files);
    }
    let mut problems = vec![];
    for f in files {
        let rel = f.strip_prefix(repo()).expect("in the repository").to_string_lossy().to_string();
        let text = std::fs::read_to_string(&f).expect("readable");
        let n = text.lines().count();
        if n > 600 {
            problems.push(format!("{rel}: {n} lines (at most 600)"));
        }
        for (name, len) in long_functions(&text, 120) {
            let key = format!("{rel} {name}");
            if !TABLES.contains(&key.as_str()) {
                problems.push(format!("{key}: {len} lines (at most 120)"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_length_check_sees_a_long_function() {
    let body = "    x += 1;\n".repeat(130);
    let text = format!("fn long() {{\n{body}}}\n\nfn short() {{\n}}\n");
    assert_eq!(long_functions(&text, 120), vec![("long".to_string(), 132)]);
}
