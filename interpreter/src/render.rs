//! Rendering diagnostics: rustc-like reports through ariadne for people, JSON for tools.

use ariadne::{Color, Config, IndexType, Label, Report, ReportKind, Source};
use dlc_language::{Diagnostic, Severity, SourceMap};
use std::io::Write;

/// Render one diagnostic as text. `color` is off when the output is not a terminal.
pub fn render(d: &Diagnostic, sources: &SourceMap, color: bool) -> String {
    let primary = d.primary_span();
    let file = primary.file;
    let name = sources.files.get(file.0 as usize).map(|f| f.name.clone()).unwrap_or_else(|| "<unknown>".into());
    let text = sources.files.get(file.0 as usize).map(|f| f.text.clone()).unwrap_or_default();
    let kind = match d.severity {
        Severity::Error => ReportKind::Error,
        Severity::Warning => ReportKind::Warning,
    };
    let config = Config::default().with_index_type(IndexType::Byte).with_color(color);
    let clamp = |r: std::ops::Range<usize>| r.start.min(text.len())..r.end.min(text.len()).max(r.start.min(text.len()));
    let mut b = Report::build(kind, (name.clone(), clamp(primary.range()))).with_config(config).with_code(d.code).with_message(&d.message);
    let mut notes: Vec<String> = vec![];
    for l in &d.labels {
        // Labels in other files become notes with a position: one report shows one source.
        if l.span.file != file {
            if !l.message.is_empty() {
                let (line, col) = sources.line_col(l.span.file, l.span.start);
                let other = sources.files.get(l.span.file.0 as usize).map(|f| f.name.as_str()).unwrap_or("?");
                notes.push(format!("{} ({other}:{line}:{col})", l.message));
            }
            continue;
        }
        let mut label = Label::new((name.clone(), clamp(l.span.range()))).with_color(if l.primary { Color::Red } else { Color::Blue });
        if !l.message.is_empty() {
            label = label.with_message(&l.message);
        }
        // By line, the primary first within its line: ariadne starts a new snippet whenever a
        // label sits on a line above the one before it, and heads every snippet of the report's
        // file with the primary's position, so ordering the primary first overall put `file:17:30`
        // above a snippet of line 7. One snippet, as rustc has.
        let (line, _) = sources.line_col(l.span.file, l.span.start);
        let line = i32::try_from(line).unwrap_or(i32::MAX / 2);
        label = label.with_order(line.saturating_mul(2) + i32::from(!l.primary));
        b = b.with_label(label);
    }
    for n in d.notes.iter().chain(notes.iter()) {
        b = b.with_note(n);
    }
    if let Some(h) = &d.help {
        b = b.with_help(h);
    }
    let mut out = Vec::new();
    let cache = (name.clone(), Source::from(text));
    if b.finish().write(cache, &mut out).is_err() {
        let _ = writeln!(out, "error[{}]: {}", d.code, d.message);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `dlc check --json`: one object per diagnostic with 1-based line/column positions.
pub fn to_json(d: &Diagnostic, sources: &SourceMap) -> serde_json::Value {
    let pos = |s: dlc_language::Span| {
        let (line, col) = sources.line_col(s.file, s.start);
        let (end_line, end_col) = sources.line_col(s.file, s.end);
        serde_json::json!({
            "file": sources.files.get(s.file.0 as usize).map(|f| f.name.as_str()).unwrap_or(""),
            "line": line, "column": col, "end_line": end_line, "end_column": end_col,
            "start": s.start, "end": s.end,
        })
    };
    serde_json::json!({
        "severity": d.severity,
        "code": d.code,
        "message": d.message,
        "labels": d.labels.iter().map(|l| serde_json::json!({"primary": l.primary, "message": l.message, "span": pos(l.span)})).collect::<Vec<_>>(),
        "notes": d.notes,
        "help": d.help,
    })
}
