//! One version of a document, checked: the real parser's (possibly partial) tree, the checker's
//! session after `Session::check_partial` (its diagnostics, its modules, its graph), the value
//! of every expression the checker traced in the file (so a type is a lookup, not a new check),
//! and the file's names. Every feature reads this; nothing re-checks to answer a request.

use super::line_index::LineIndex;
use super::scopes::Index;
use crate::api::RuntimeHost;
use dlc_language::eval::{Mode, Session, Value};
use dlc_language::syntax::ast::{Expr, Program};
use dlc_language::{Diagnostic, FileId, Span};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct Analysis {
    pub version: i32,
    pub text: String,
    pub lines: LineIndex,
    pub path: Option<PathBuf>,
    /// The file's id in the session's source map.
    pub file: FileId,
    pub program: Program,
    pub session: Session,
    /// The value of each expression of this file the checker traced, first trace kept, ordered
    /// by start (outer before inner at one start).
    pub values: Vec<(Span, Value)>,
    pub index: Index,
    /// A panic inside the checker, turned into a diagnostic instead of ending the server.
    pub internal_error: Option<String>,
    pub elapsed: Duration,
}

/// The name diagnostics and module loading know a document by.
pub fn display_name(path: Option<&Path>) -> String {
    path.map(|p| p.display().to_string()).unwrap_or_else(|| "untitled.dl".into())
}

pub fn analyze(path: Option<&Path>, text: &str, version: i32) -> Analysis {
    let start = Instant::now();
    let name = display_name(path);
    let root = path.map(crate::paths::program_root);
    let mut session = Session::new(Mode::Check);
    session.t.recorded = Some(HashMap::new());
    // `check_partial` adds the file to the source map first.
    let file = FileId(session.t.sources.files.len() as u32);
    let mut host = RuntimeHost::new(root, false);
    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        session.check_partial(&name, text, &mut host);
    }));
    let internal_error = checked.err().map(|e| panic_text(&*e));
    if session.t.sources.files.len() <= file.0 as usize {
        session.t.sources.add(name.clone(), text);
    }
    let (program, _) = dlc_language::syntax::parse(file, text);
    let mut values: Vec<(Span, Value)> =
        session.t.recorded.take().unwrap_or_default().into_iter().filter(|(s, _)| s.file == file).collect();
    values.sort_by_key(|(s, _)| (s.start, std::cmp::Reverse(s.end)));
    let index = {
        let element = |data: &Expr| element_names(&values, data);
        Index::build(&program, text.len(), &element)
    };
    Analysis {
        version,
        text: text.to_string(),
        lines: LineIndex::new(text),
        path: path.map(Path::to_path_buf),
        file,
        program,
        session,
        values,
        index,
        internal_error,
        elapsed: start.elapsed(),
    }
}

pub use crate::runtime::data::contained::panic_text;

/// What a recipe's data element binds: `x` and `y` for pairs, a record's fields, `x` for a
/// tensor, and `batch` always; `x`, `y` and `batch` when the data did not check.
fn element_names(values: &[(Span, Value)], data: &Expr) -> Vec<String> {
    let pipeline = values.iter().find(|(s, _)| *s == data.span).and_then(|(_, v)| match v {
        Value::Pipeline(p) => Some(p.clone()),
        _ => None,
    });
    let mut names: Vec<String> = match pipeline.as_ref().map(|p| &p.elem) {
        Some(Value::Tuple(items)) if items.len() == 2 => vec!["x".into(), "y".into()],
        Some(Value::Record(items)) => items.iter().map(|(n, _)| n.clone()).collect(),
        Some(Value::Tensor(_)) => vec!["x".into()],
        Some(_) => vec![],
        None => vec!["x".into(), "y".into()],
    };
    names.push("batch".into());
    names
}

impl Analysis {
    /// The checker's diagnostics, the parser's included (`diagnostics::for_document` places
    /// those of the modules this file loads on their `use`).
    pub fn diagnostics(&self) -> impl Iterator<Item = &Diagnostic> {
        self.session.diagnostics().iter()
    }

    /// The value of exactly this expression.
    pub fn value_at_span(&self, span: Span) -> Option<&Value> {
        let i = self.values.partition_point(|(s, _)| s.start < span.start);
        self.values[i..].iter().take_while(|(s, _)| s.start == span.start).find(|(s, _)| *s == span).map(|(_, v)| v)
    }

    /// The innermost traced expression containing byte `offset`, with its value.
    pub fn value_around(&self, offset: usize) -> Option<(Span, &Value)> {
        let o = offset as u32;
        let end = self.values.partition_point(|(s, _)| s.start <= o);
        self.values[..end]
            .iter()
            .filter(|(s, _)| o < s.end || (o == s.end && s.start < s.end))
            .min_by_key(|(s, _)| s.end - s.start)
            .map(|(s, v)| (*s, v))
    }

    /// A definition's value: its expression's, else that of its first traced use.
    pub fn def_value(&self, def: usize) -> Option<&Value> {
        let d = &self.index.defs[def];
        if let Some(v) = d.value.and_then(|s| self.value_at_span(s)) {
            return Some(v);
        }
        self.index.uses(def).find_map(|r| self.value_at_span(r.span))
    }

    pub fn range(&self, span: Span) -> lsp_types::Range {
        self.lines.range(&self.text, span.start as usize, span.end as usize)
    }

    pub fn offset(&self, pos: lsp_types::Position) -> usize {
        self.lines.offset(&self.text, pos)
    }

    pub fn slice(&self, span: Span) -> &str {
        self.text.get(span.range()).unwrap_or("")
    }
}
