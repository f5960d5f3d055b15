//! The grammar against the repository: every valid `.dl` file parses without an ERROR or MISSING
//! node, every query compiles, and the highlights query colours an example as expected.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tree_sitter::{Language, Node, Parser, Query, QueryCursor, StreamingIterator, Tree};

fn language() -> Language {
    tree_sitter_dl::LANGUAGE.into()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the repository root")
}

fn parse(text: &str) -> Tree {
    let mut parser = Parser::new();
    parser.set_language(&language()).expect("the DL grammar loads");
    parser.parse(text, None).expect("a tree")
}

/// Every `.dl` file under `dir`, skipping build outputs, hidden folders and folders of programs
/// that are wrong on purpose (`tests/cases/invalid`).
fn dl_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() {
            if !(name.starts_with('.') || matches!(name, "target" | "node_modules" | "invalid")) {
                dl_files(&p, out);
            }
        } else if name.ends_with(".dl") {
            out.push(p);
        }
    }
}

/// The ERROR and MISSING nodes of a tree, as `line:column what`.
fn syntax_errors(tree: &Tree, text: &str) -> Vec<String> {
    fn walk(node: Node, text: &str, out: &mut Vec<String>) {
        if node.is_error() || node.is_missing() {
            let at = node.start_position();
            let what = if node.is_missing() {
                format!("MISSING {}", node.kind())
            } else {
                let snippet: String = text[node.byte_range()].chars().take(40).collect();
                format!("ERROR at {snippet:?}")
            };
            out.push(format!("{}:{} {what}", at.row + 1, at.column + 1));
        }
        // An ERROR node's children are only examined for the first problem inside it.
        if node.has_error() {
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                walk(child, text, out);
            }
        }
    }
    let mut out = vec![];
    walk(tree.root_node(), text, &mut out);
    out
}

/// The ```dl blocks of the documents whose blocks the repository's own tests check as complete
/// programs (tests/src/corpus.rs), as (where, source).
fn doc_blocks(root: &Path) -> Vec<(String, String)> {
    let mut blocks = vec![];
    for doc in ["docs/language.md", "README.md"] {
        let Ok(text) = std::fs::read_to_string(root.join(doc)) else { continue };
        let mut block: Option<(usize, String)> = None;
        for (i, line) in text.lines().enumerate() {
            match &mut block {
                None if line.trim_start().starts_with("```dl") => block = Some((i + 1, String::new())),
                Some((start, src)) if line.trim_start().starts_with("```") => {
                    blocks.push((format!("{doc}:{start}"), std::mem::take(src)));
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
    blocks
}

#[test]
fn every_valid_dl_file_parses_without_errors() {
    let root = repo();
    let mut files = vec![];
    dl_files(&root, &mut files);
    // The folders the issue names must be there: a walk that found nothing would prove nothing.
    for dir in ["examples", "stdlib", "bench", "tests/cases/valid", "tests/cases/numeric"] {
        let n = files.iter().filter(|f| f.starts_with(root.join(dir))).count();
        assert!(n > 0, "no .dl file found under {dir}");
    }
    assert!(!files.iter().any(|f| f.starts_with(root.join("tests/cases/invalid"))));
    let mut sources: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).expect("a readable .dl file");
            (f.strip_prefix(&root).unwrap_or(f).display().to_string(), text)
        })
        .collect();
    let blocks = doc_blocks(&root);
    assert!(blocks.len() >= 10, "expected the docs to hold ```dl examples, found {}", blocks.len());
    sources.extend(blocks.iter().cloned());
    let start = Instant::now();
    let (mut failures, mut bytes) = (vec![], 0usize);
    for (name, text) in &sources {
        bytes += text.len();
        let tree = parse(text);
        let errors = syntax_errors(&tree, text);
        if !errors.is_empty() {
            failures.push(format!("{name}:\n  {}", errors.join("\n  ")));
        }
    }
    let ms = start.elapsed().as_secs_f64() * 1e3;
    println!("parsed {} .dl files and {} doc blocks ({} KiB) in {ms:.1} ms", files.len(), blocks.len(), bytes / 1024);
    assert!(failures.is_empty(), "{} of {} sources do not parse:\n{}", failures.len(), sources.len(), failures.join("\n"));
}

#[test]
fn syntax_errors_are_found() {
    // The check above must be able to fail: broken programs give ERROR or MISSING nodes.
    for bad in ["let x = (1, 2\n", "model M( { a = 1 }\n", "let = 3\n", "x |> \n}\n", "fn f(x) = x x\n", "print(\"a)\n"] {
        let tree = parse(bad);
        assert!(!syntax_errors(&tree, bad).is_empty(), "no syntax error found in {bad:?}:\n{}", tree.root_node().to_sexp());
    }
    let good = "let x = (1, 2)\n";
    assert_eq!(syntax_errors(&parse(good), good), Vec::<String>::new());
}

#[test]
fn line_breaks_follow_dlc_layout() {
    // A line break ends a statement at top level and in braces, not inside brackets, not after
    // `=`, `|>`, `and`, `or`, `else`, and not before a line that starts with one of
    // `|>`, `and`, `or`, `else` (blank and comment lines between).
    let text = "let a = f(1,\n  2)\nlet b = a\n  # note\n\n  |> g\nlet c =\n  a and\n  b\n  or c\nlet d = if c { 1 }\nelse { 2 }\nd\n(a)\n";
    let tree = parse(text);
    assert_eq!(syntax_errors(&tree, text), Vec::<String>::new());
    let kinds: Vec<&str> = {
        let root = tree.root_node();
        let mut cursor = root.walk();
        root.named_children(&mut cursor).filter(|n| n.kind() != "comment").map(|n| n.kind()).collect()
    };
    let expected =
        ["let_declaration", "let_declaration", "let_declaration", "let_declaration", "expression_statement", "expression_statement"];
    assert_eq!(kinds, expected, "{}", tree.root_node().to_sexp());
}

#[test]
fn every_query_compiles() {
    let queries = [
        ("highlights", tree_sitter_dl::HIGHLIGHTS_QUERY),
        ("locals", tree_sitter_dl::LOCALS_QUERY),
        ("indents", tree_sitter_dl::INDENTS_QUERY),
        ("textobjects", tree_sitter_dl::TEXTOBJECTS_QUERY),
    ];
    for (name, source) in queries {
        let query = Query::new(&language(), source).unwrap_or_else(|e| panic!("queries/{name}.scm: {e}"));
        assert!(query.pattern_count() > 0, "queries/{name}.scm has no pattern");
    }
    // The files on disk are the ones the crate embeds.
    for name in ["highlights", "locals", "indents", "textobjects"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("queries/{name}.scm"));
        assert!(path.exists(), "{}", path.display());
    }
}

/// The highlight of each node as tree-sitter-highlight, Helix and GitHub choose it: the capture
/// of the first pattern that matches the node. Keyed by the node's byte range.
fn highlights(text: &str) -> HashMap<(usize, usize), String> {
    let query = Query::new(&language(), tree_sitter_dl::HIGHLIGHTS_QUERY).expect("highlights.scm compiles");
    let tree = parse(text);
    let mut cursor = QueryCursor::new();
    let mut first: HashMap<(usize, usize), (usize, String)> = HashMap::new();
    let mut captures = cursor.captures(&query, tree.root_node(), text.as_bytes());
    while let Some((m, index)) = captures.next() {
        let capture = m.captures[*index];
        let range = (capture.node.start_byte(), capture.node.end_byte());
        let name = query.capture_names()[capture.index as usize].to_string();
        let entry = first.entry(range).or_insert((m.pattern_index, name.clone()));
        if m.pattern_index < entry.0 {
            *entry = (m.pattern_index, name);
        }
    }
    first.into_iter().map(|(range, (_, name))| (range, name)).collect()
}

#[test]
fn highlights_colour_an_example() {
    let text = std::fs::read_to_string(repo().join("examples/gan.dl")).expect("examples/gan.dl");
    let colours = highlights(&text);
    // (text, which occurrence (0-based), expected capture)
    let expected = [
        ("# A GAN on MNIST", 0, "comment"),
        ("use", 0, "keyword"),
        ("std", 0, "module"),
        ("model", 0, "keyword.type"),
        ("Generator", 0, "type"),
        ("z", 0, "variable.parameter"),
        ("int", 0, "type.builtin"),
        ("64", 0, "number"),
        ("fc1", 0, "property"),
        ("Linear", 0, "constructor"),
        ("forward", 0, "function.method"),
        ("f32", 0, "type.builtin"),
        ("B", 0, "type.parameter"),
        ("->", 0, "operator"),
        ("|>", 0, "operator"),
        ("fc2", 1, "function.call"),
        ("leaky_relu", 0, "function.call"),
        ("slope", 0, "variable.parameter"),
        ("0.2", 0, "number.float"),
        ("data", 1, "keyword.type"),
        ("\"data/mnist\"", 0, "string"),
        ("=>", 0, "operator"),
        ("train", 1, "keyword.type"),
        ("models", 1, "property"),
        ("log", 0, "keyword"),
        ("every", 0, "keyword"),
        ("steps", 0, "constant"),
        ("step", 1, "keyword"),
        ("let", 0, "keyword"),
        ("update", 0, "keyword"),
        ("by", 1, "keyword"),
        ("d_loss", 0, "variable"),
    ];
    let mut wrong = vec![];
    for (needle, nth, want) in expected {
        let Some((start, _)) = find_token(&text, needle, nth) else {
            wrong.push(format!("{needle:?} #{nth} not in examples/gan.dl"));
            continue;
        };
        let got = colours.get(&(start, start + needle.len())).map(String::as_str);
        // A comment is one node: its text is longer than the needle.
        let got = got.or_else(|| colours.iter().find(|(r, _)| r.0 == start).map(|(_, c)| c.as_str()));
        if got != Some(want) {
            wrong.push(format!("{needle:?} #{nth}: expected @{want}, got {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The byte range of the `nth` occurrence of `needle` as a whole token (not inside a longer word).
fn find_token(text: &str, needle: &str, nth: usize) -> Option<(usize, usize)> {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = text.match_indices(needle).filter(|(i, _)| {
        let before = text[..*i].chars().next_back();
        let after = text[i + needle.len()..].chars().next();
        let glued_before = needle.starts_with(word) && before.is_some_and(word);
        let glued_after = needle.ends_with(word) && after.is_some_and(word);
        !glued_before && !glued_after
    });
    found.nth(nth).map(|(i, _)| (i, i + needle.len()))
}

/// The cases of a `tree-sitter test` corpus file: (name, source, expected tree).
fn corpus_cases(text: &str) -> Vec<(String, String, String)> {
    let is_rule = |l: &str, c: char| l.len() >= 3 && l.chars().all(|x| x == c);
    let lines: Vec<&str> = text.lines().collect();
    let mut cases = vec![];
    let mut i = 0;
    while i + 2 < lines.len() {
        if !(is_rule(lines[i], '=') && is_rule(lines[i + 2], '=')) {
            i += 1;
            continue;
        }
        let name = lines[i + 1].trim().to_string();
        let body_start = i + 3;
        let divider = (body_start..lines.len()).find(|&k| is_rule(lines[k], '-')).expect("a `---` divider after the source");
        let next = (divider + 1..lines.len()).find(|&k| k + 2 < lines.len() && is_rule(lines[k], '=') && is_rule(lines[k + 2], '='));
        let end = next.unwrap_or(lines.len());
        cases.push((name, lines[body_start..divider].join("\n").trim_matches('\n').to_string() + "\n", lines[divider + 1..end].join("\n")));
        i = end;
    }
    cases
}

/// An S-expression with whitespace collapsed and field names (`name:`) dropped, as
/// `tree-sitter test` compares trees written without fields.
fn normalise(sexp: &str) -> String {
    let spaced = sexp.replace('(', " ( ").replace(')', " ) ");
    spaced.split_whitespace().filter(|t| !t.ends_with(':')).collect::<Vec<_>>().join(" ")
}

#[test]
fn corpus_trees_match() {
    // The corpus of `tree-sitter test` (test/corpus/*.txt), checked here too so that CI, which
    // has no tree-sitter CLI, still compares the trees.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("test/corpus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).expect("test/corpus").flatten().map(|e| e.path()).collect();
    files.sort();
    let (mut count, mut wrong) = (0, vec![]);
    for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "txt")) {
        for (name, source, expected) in corpus_cases(&std::fs::read_to_string(f).expect("a corpus file")) {
            count += 1;
            let got = parse(&source).root_node().to_sexp();
            if normalise(&got) != normalise(&expected) {
                wrong.push(format!("{}: {name}\n  expected {}\n  got      {}", f.display(), normalise(&expected), normalise(&got)));
            }
        }
    }
    assert!(count >= 10, "only {count} corpus cases found in {}", dir.display());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The text of every node a query captures under `capture`.
fn captured<'t>(query_source: &str, capture: &str, text: &'t str) -> Vec<&'t str> {
    let query = Query::new(&language(), query_source).expect("the query compiles");
    let index = query.capture_index_for_name(capture).unwrap_or_else(|| panic!("no @{capture} in the query"));
    let tree = parse(text);
    let mut cursor = QueryCursor::new();
    let mut out = vec![];
    let mut matches = cursor.matches(&query, tree.root_node(), text.as_bytes());
    while let Some(m) = matches.next() {
        out.extend(m.captures.iter().filter(|c| c.index == index).map(|c| &text[c.node.byte_range()]));
    }
    out
}

#[test]
fn locals_indents_and_textobjects_capture_an_example() {
    let text = std::fs::read_to_string(repo().join("examples/tour.dl")).expect("examples/tour.dl");
    let classes = captured(tree_sitter_dl::TEXTOBJECTS_QUERY, "class.outer", &text);
    assert!(classes.iter().any(|c| c.starts_with("model Mlp(") && c.ends_with('}')), "{classes:?}");
    let functions = captured(tree_sitter_dl::TEXTOBJECTS_QUERY, "function.around", &text);
    assert!(functions.iter().any(|f| f.starts_with("forward(x: f32[B, 784])")), "{functions:?}");
    let parameters = captured(tree_sitter_dl::TEXTOBJECTS_QUERY, "parameter.inner", &text);
    assert!(parameters.contains(&"hidden: int = 32"), "{parameters:?}");
    let definitions = captured(tree_sitter_dl::LOCALS_QUERY, "local.definition", &text);
    for name in ["x", "m", "net", "hidden", "classes"] {
        assert!(definitions.contains(&name), "{name} is not a definition in {definitions:?}");
    }
    let scopes = captured(tree_sitter_dl::LOCALS_QUERY, "local.scope", &text);
    assert!(scopes.iter().any(|s| s.starts_with("forward(")), "{scopes:?}");
    let indented = captured(tree_sitter_dl::INDENTS_QUERY, "indent", &text);
    assert!(indented.iter().any(|s| s.starts_with("{\n  fc1 = Linear(784, hidden)")), "{indented:?}");
    let closers = captured(tree_sitter_dl::INDENTS_QUERY, "outdent", &text);
    assert!(closers.contains(&"}") && closers.contains(&")") && closers.contains(&"]"), "{closers:?}");
}
