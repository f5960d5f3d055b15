//! Document symbols (the outline: models with their hyper-parameters, layers and methods;
//! functions; data pipelines; `let`s; recipes with their fields) and workspace symbols (the
//! items of the open documents, of every `.dl` file under the workspace folders, and of the
//! standard library).

use super::analysis::Analysis;
use super::line_index::LineIndex;
use super::stdlib::{StdKind, Stdlib};
use dlc_language::syntax::ast::{ItemKind, Program, RecipeEntry};
use dlc_language::{FileId, Span};
use lsp_types::{DocumentSymbol, Location, SymbolInformation, SymbolKind, Uri};
use std::path::{Path, PathBuf};

#[allow(deprecated)] // `DocumentSymbol::deprecated` must be written; `tags` replaced it.
fn symbol(name: String, detail: Option<String>, kind: SymbolKind, range: lsp_types::Range, selection: lsp_types::Range) -> DocumentSymbol {
    DocumentSymbol { name, detail, kind, tags: None, deprecated: None, range, selection_range: selection, children: None }
}

pub fn document(a: &Analysis) -> Vec<DocumentSymbol> {
    outline(&a.program, &|s: Span| a.range(s), &|s: Span| a.slice(s).to_string())
}

fn outline(p: &Program, range: &dyn Fn(Span) -> lsp_types::Range, text: &dyn Fn(Span) -> String) -> Vec<DocumentSymbol> {
    let mut out = vec![];
    let first_line = |s: Span| text(s).lines().next().unwrap_or("").trim_end_matches(['{', ' ', '=']).to_string();
    for item in &p.items {
        let r = range(item.span);
        let sym =
            match &item.kind {
                ItemKind::Use(path) => {
                    let name = path.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(".");
                    symbol(name, None, SymbolKind::MODULE, r, r)
                }
                ItemKind::Fn(f) => symbol(f.name.name.clone(), Some(first_line(item.span)), SymbolKind::FUNCTION, r, range(f.name.span)),
                ItemKind::Model(m) => {
                    let mut s = symbol(m.name.name.clone(), Some(first_line(item.span)), SymbolKind::CLASS, r, range(m.name.span));
                    let mut children: Vec<DocumentSymbol> = m
                        .params
                        .iter()
                        .map(|p| {
                            symbol(p.name.name.clone(), Some(text(p.span)), SymbolKind::TYPE_PARAMETER, range(p.span), range(p.name.span))
                        })
                        .collect();
                    children.extend(m.fields.iter().map(|f| {
                        symbol(f.name.name.clone(), Some(text(f.value.span)), SymbolKind::FIELD, range(f.span), range(f.name.span))
                    }));
                    children.extend(m.methods.iter().map(|f| {
                        symbol(f.name.name.clone(), Some(first_line(f.span)), SymbolKind::METHOD, range(f.span), range(f.name.span))
                    }));
                    s.children = Some(children);
                    s
                }
                ItemKind::Data(n, _) => symbol(n.name.clone(), Some("data".into()), SymbolKind::VARIABLE, r, range(n.span)),
                ItemKind::Let(n, _) => symbol(n.name.clone(), Some("let".into()), SymbolKind::CONSTANT, r, range(n.span)),
                ItemKind::Expr(_) => continue,
                ItemKind::Recipe(rec) => {
                    let name = match &rec.name {
                        Some(n) => format!("{} {}", rec.kind.keyword(), n.name),
                        None => rec.kind.keyword().to_string(),
                    };
                    let sel = rec.name.as_ref().map_or(r, |n| range(n.span));
                    let mut s = symbol(name, None, SymbolKind::EVENT, r, sel);
                    let children = rec
                        .entries
                        .iter()
                        .filter_map(|e| match e {
                            RecipeEntry::Field(f) => Some(symbol(
                                f.name.name.clone(),
                                Some(text(f.value.span)),
                                SymbolKind::PROPERTY,
                                range(f.span),
                                range(f.name.span),
                            )),
                            _ => None,
                        })
                        .collect();
                    s.children = Some(children);
                    s
                }
            };
        out.push(sym);
    }
    out
}

/// Whether `name` matches `query` as a subsequence, ignoring case (`tfb` finds `TransformerBlock`).
fn matches(name: &str, query: &str) -> bool {
    let mut chars = name.chars().flat_map(char::to_lowercase);
    query.chars().flat_map(char::to_lowercase).all(|q| chars.any(|c| c == q))
}

/// At most this many files are read from the workspace folders per query.
const MAX_FILES: usize = 2000;

#[allow(deprecated)] // `SymbolInformation::deprecated` must be written.
pub fn workspace(query: &str, open: &[(&Uri, &Analysis)], roots: &[PathBuf], std: &Stdlib) -> Vec<SymbolInformation> {
    let mut out = vec![];
    let mut push = |name: &str, kind: SymbolKind, location: Location, container: Option<String>| {
        if matches(name, query) {
            out.push(SymbolInformation { name: name.to_string(), kind, tags: None, deprecated: None, location, container_name: container });
        }
    };
    let mut seen: Vec<PathBuf> = vec![];
    for (uri, a) in open {
        for s in document(a) {
            push(&s.name, s.kind, Location { uri: (*uri).clone(), range: s.selection_range }, None);
        }
        seen.extend(a.path.clone());
    }
    let mut files = vec![];
    for root in roots {
        dl_files(root, &mut files);
    }
    for file in files.into_iter().filter(|f| !seen.contains(f) && !std.owns(f)).take(MAX_FILES) {
        let (Ok(text), Some(uri)) = (std::fs::read_to_string(&file), super::uri::from_path(&file)) else { continue };
        let (program, _) = dlc_language::syntax::parse(FileId(0), &text);
        let lines = LineIndex::new(&text);
        let range = |s: Span| lines.range(&text, s.start as usize, s.end as usize);
        for s in outline(&program, &range, &|s: Span| text.get(s.range()).unwrap_or("").to_string()) {
            push(&s.name, s.kind, Location { uri: uri.clone(), range: s.selection_range }, None);
        }
    }
    for item in &std.items {
        let kind = match item.kind {
            StdKind::Fn => SymbolKind::FUNCTION,
            StdKind::Model => SymbolKind::CLASS,
            StdKind::Let => SymbolKind::CONSTANT,
        };
        if let Some(location) = std.location(item) {
            push(&item.name, kind, location, Some(item.module.to_string()));
        }
    }
    out
}

/// Every `.dl` file under `dir`, build and VCS folders skipped.
fn dl_files(dir: &Path, out: &mut Vec<PathBuf>) {
    if out.len() >= MAX_FILES {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() && !name.starts_with('.') && !matches!(name, "target" | "node_modules") {
            dl_files(&p, out);
        } else if name.ends_with(".dl") {
            out.push(p);
        }
    }
}
