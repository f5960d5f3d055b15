//! Quick fixes for the diagnostics whose help says exactly what to write: "did you mean `x`?"
//! replaces the misspelt name, a layer's "change to `Linear(64, 10)`" replaces its
//! construction, "add `use std.nn` at the top of the file" adds the `use`, and "DL writes this
//! as a function: `sum(x, axis: 1)`" replaces the PyTorch-style method call. The checker keeps
//! help as text (`Diagnostic::help`); these are its forms that carry an edit.

use super::analysis::Analysis;
use super::walk::{self, Node};
use dlc_language::syntax::ast::ExprKind;
use dlc_language::{Diagnostic, Span};
use lsp_types::{CodeAction, CodeActionKind, CodeActionOrCommand, TextEdit, Uri, WorkspaceEdit};
use std::collections::HashMap;

pub fn actions(a: &Analysis, uri: &Uri, start: usize, end: usize, lsp_diags: &[lsp_types::Diagnostic]) -> Vec<CodeActionOrCommand> {
    let mut out = vec![];
    for d in a.diagnostics() {
        let span = d.primary_span();
        // Touching the range counts: a cursor at a name's end asks for its fix.
        if span.file != a.file || span.end < start as u32 || span.start > end as u32 {
            continue;
        }
        let Some((title, edit)) = fix(a, d) else { continue };
        let range = a.range(span);
        let code = Some(lsp_types::NumberOrString::String(d.code.to_string()));
        let fixes: Vec<lsp_types::Diagnostic> = lsp_diags.iter().filter(|x| x.range == range && x.code == code).cloned().collect();
        out.push(CodeActionOrCommand::CodeAction(CodeAction {
            title,
            kind: Some(CodeActionKind::QUICKFIX),
            diagnostics: (!fixes.is_empty()).then_some(fixes),
            edit: Some(WorkspaceEdit { changes: Some(HashMap::from([(uri.clone(), vec![edit])])), ..Default::default() }),
            is_preferred: Some(true),
            ..Default::default()
        }));
    }
    out
}

/// The text between the first pair of backticks after `prefix` in `help`.
fn quoted<'h>(help: &'h str, prefix: &str) -> Option<&'h str> {
    let rest = &help[help.find(prefix)? + prefix.len()..];
    let rest = rest.strip_prefix('`')?;
    Some(&rest[..rest.find('`')?])
}

fn fix(a: &Analysis, d: &Diagnostic) -> Option<(String, TextEdit)> {
    let help = d.help.as_deref()?;
    let span = d.primary_span();
    let written = a.slice(span);
    if let Some(name) = quoted(help, "did you mean ") {
        // `use std.nnn`'s span is the whole line: only its path changes.
        let (start, old) = match written.strip_prefix("use") {
            Some(rest) if rest.starts_with(char::is_whitespace) => {
                (span.start + (written.len() - rest.trim_start().len()) as u32, rest.trim())
            }
            _ => (span.start, written),
        };
        let plain = !old.is_empty() && old.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '.');
        let at = Span { start, end: start + old.len() as u32, ..span };
        return plain.then(|| (format!("Change to `{name}`"), edit(a, at, name)));
    }
    if let Some(call) = quoted(help, "change to ") {
        let call_like = written.contains('(') && written.ends_with(')');
        return call_like.then(|| (format!("Change to `{call}`"), edit(a, span, call)));
    }
    if let Some(module) = quoted(help, "add ").and_then(|u| u.strip_prefix("use ")) {
        if help.contains("at the top of the file") {
            return Some((format!("Add `use {module}`"), super::completion::use_edit(a, module)));
        }
    }
    if let Some(form) = quoted(help, "DL writes this as a function: ") {
        let call = method_call(a, span)?;
        return Some((format!("Write `{form}`"), edit(a, call, form)));
    }
    None
}

fn edit(a: &Analysis, span: Span, text: &str) -> TextEdit {
    TextEdit { range: a.range(span), new_text: text.to_string() }
}

/// The call `x.name(...)` whose method name is at `name`.
fn method_call(a: &Analysis, name: Span) -> Option<Span> {
    let mut found = None;
    walk::program(&a.program, &mut |n| {
        if let Node::Expr(e) = n {
            if let ExprKind::Call(f, _) = &e.kind {
                if matches!(&f.kind, ExprKind::Field(_, m) if m.span == name) {
                    found = Some(e.span);
                }
            }
        }
    });
    found
}
