//! The checker's diagnostics as LSP diagnostics: the CLI's code (`E0302`) and message, help and
//! notes as further lines (as `dlc check` prints them under the message), and the other labels
//! as related information, wherever they point (this file, a module, the stdlib).

use super::analysis::Analysis;
use super::stdlib::Stdlib;
use dlc_language::{Diagnostic, Severity, Span};
use lsp_types::{DiagnosticRelatedInformation, DiagnosticSeverity, Location, NumberOrString, Range, Uri};

/// More are counted in one last diagnostic: a file that is not DL at all can have thousands.
const MAX: usize = 200;

pub fn for_document(a: &Analysis, std: &Stdlib, uri: &Uri) -> Vec<lsp_types::Diagnostic> {
    let mut out: Vec<lsp_types::Diagnostic> = a.diagnostics().filter_map(|d| convert(a, std, uri, d)).collect();
    if out.len() > MAX {
        let hidden = out.len() - MAX;
        out.truncate(MAX);
        out.push(lsp_types::Diagnostic {
            range: Range::default(),
            severity: Some(DiagnosticSeverity::INFORMATION),
            source: Some("dlc".into()),
            message: format!("... and {hidden} more (`dlc check --json` lists them all)"),
            ..Default::default()
        });
    }
    if let Some(e) = &a.internal_error {
        out.push(lsp_types::Diagnostic {
            range: Range::default(),
            severity: Some(DiagnosticSeverity::ERROR),
            source: Some("dlc".into()),
            message: format!("internal error in the checker (please report it): {e}"),
            ..Default::default()
        });
    }
    out
}

fn convert(a: &Analysis, std: &Stdlib, uri: &Uri, d: &Diagnostic) -> Option<lsp_types::Diagnostic> {
    let primary = d.primary_span();
    let range = if primary.file == a.file {
        a.range(primary)
    } else {
        // A module's error is shown at the `use` that loaded it; the stdlib's are re-pointed
        // at the user's call by the checker, so what is left has no line here.
        use_line(a, primary)?
    };
    let mut message = d.message.clone();
    if primary.file != a.file {
        let file = &a.session.t.sources.get(primary.file).name;
        let (line, col) = a.session.t.sources.line_col(primary.file, primary.start);
        message = format!("{file}:{line}:{col}: {message}");
    }
    for note in &d.notes {
        message += &format!("\nnote: {note}");
    }
    if let Some(help) = &d.help {
        message += &format!("\nhelp: {help}");
    }
    let related: Vec<DiagnosticRelatedInformation> = d
        .labels
        .iter()
        .filter(|l| !l.message.is_empty())
        .filter_map(|l| Some(DiagnosticRelatedInformation { location: label_location(a, std, uri, l.span)?, message: l.message.clone() }))
        .collect();
    Some(lsp_types::Diagnostic {
        range,
        severity: Some(match d.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        code: Some(NumberOrString::String(d.code.to_string())),
        source: Some("dlc".into()),
        message,
        related_information: (!related.is_empty()).then_some(related),
        ..Default::default()
    })
}

fn label_location(a: &Analysis, std: &Stdlib, uri: &Uri, span: Span) -> Option<Location> {
    if span.file == a.file {
        return Some(Location { uri: uri.clone(), range: a.range(span) });
    }
    let name = &a.session.t.sources.files.get(span.file.0 as usize)?.name;
    if let Some(module) = name.strip_prefix('<').and_then(|n| n.strip_suffix('>')) {
        let text = dlc_language::stdlib::source(module)?;
        let lines = super::line_index::LineIndex::new(text);
        let uri = super::uri::from_path(&std.path(module)?)?;
        return Some(Location { uri, range: lines.range(text, span.start as usize, span.end as usize) });
    }
    super::resolve::span_location(&a.session, span)
}

/// The `use` of this file that loaded the module `span` is in (`use a.b` reads `a/b.dl`).
fn use_line(a: &Analysis, span: Span) -> Option<Range> {
    use dlc_language::syntax::ast::ItemKind;
    let name = &a.session.t.sources.files.get(span.file.0 as usize)?.name;
    a.program.items.iter().find_map(|it| match &it.kind {
        ItemKind::Use(path) => {
            let file = format!("{}.dl", path.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join("/"));
            name.ends_with(&file).then(|| a.range(it.span))
        }
        _ => None,
    })
}
