//! `dlc fmt` over every DL file of the repository: formatting twice changes nothing more,
//! the formatted file parses to the same tree (spans aside) with the same comments in the same
//! order, and the examples, the stdlib, the benchmarks and the corpus's valid and numeric cases are
//! already formatted (CI runs `dlc fmt --check` on them too).

use crate::{dl_files, repo};
use dlc_language::format::{format, FormatError};
use dlc_language::syntax::parse;
use dlc_language::syntax::trivia::TriviaKind;
use dlc_language::FileId;
use std::path::PathBuf;

/// The folders whose files must be formatted.
const FORMATTED: [&str; 5] = ["examples", "stdlib", "bench", "tests/cases/valid", "tests/cases/numeric"];

fn files(dirs: &[&str]) -> Vec<PathBuf> {
    dirs.iter().flat_map(|d| dl_files(&repo().join(d))).collect()
}

/// The syntax tree's items as text, without a single span: two trees that differ only in
/// where their nodes sit print the same.
fn tree_without_spans(src: &str) -> String {
    let (program, _) = parse(FileId(0), src);
    let text = format!("{:?}", program.items);
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find("Span { file: FileId(") {
        out.push_str(&rest[..at]);
        // A span prints as `Span { file: FileId(0), start: 12, end: 15 }`: no nested braces.
        let end = rest[at..].find('}').map_or(rest.len(), |k| at + k + 1);
        out.push_str("Span");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn comments(src: &str) -> Vec<String> {
    let (program, _) = parse(FileId(0), src);
    program.trivia.iter().filter(|t| t.kind == TriviaKind::Comment).map(|t| src[t.span.range()].trim_end().to_string()).collect()
}

#[test]
fn spans_are_what_the_comparison_erases() {
    // The comparison must see a change of the tree, and only that.
    let a = tree_without_spans("let x = 1 + 2\n");
    assert_eq!(a, tree_without_spans("let   x=(1+\n  2)\n"));
    assert_ne!(a, tree_without_spans("let x = 1 - 2\n"));
    assert_ne!(a, tree_without_spans("let y = 1 + 2\n"));
    assert!(!a.contains("start:"), "{a}");
}

#[test]
fn formatting_keeps_the_program_and_its_comments_and_is_stable() {
    let mut all = files(&FORMATTED);
    all.extend(dl_files(&repo().join("tests/cases/invalid")));
    all.extend(dl_files(&repo().join("tests/parity")));
    let (mut formatted, mut syntax_errors) = (0, 0);
    for f in &all {
        let src = std::fs::read_to_string(f).unwrap_or_default();
        let once = match format(FileId(0), &src) {
            Ok(text) => text,
            // Only the corpus's invalid cases may fail to parse; they are not formatted.
            Err(FormatError::Syntax(_)) if f.starts_with(repo().join("tests/cases/invalid")) => {
                syntax_errors += 1;
                continue;
            }
            Err(e) => panic!("{}: {e:?}", f.display()),
        };
        let twice = format(FileId(0), &once).unwrap_or_else(|e| panic!("{} formatted does not format: {e:?}", f.display()));
        assert!(twice == once, "{}: formatting the formatted text changes it:\n{once}\n---\n{twice}", f.display());
        assert!(tree_without_spans(&once) == tree_without_spans(&src), "{}: the formatted text is another program:\n{once}", f.display());
        assert_eq!(comments(&once), comments(&src), "{}: comments", f.display());
        formatted += 1;
    }
    assert!(formatted > 250 && syntax_errors > 10, "corpus not found: {formatted} formatted, {syntax_errors} with syntax errors");
}

#[test]
fn the_repository_is_formatted() {
    let all = files(&FORMATTED);
    assert!(all.len() > 150, "files not found");
    let unformatted: Vec<String> = all
        .iter()
        .filter(|f| {
            let src = std::fs::read_to_string(f).unwrap_or_default();
            format(FileId(0), &src).map_or(true, |out| out != src)
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(unformatted.is_empty(), "not formatted (run `dlc fmt` on them): {unformatted:#?}");
}
