//! Diagnostics as values. The core never prints: the CLI and the REPL render these with ariadne,
//! and `dlc check --json` serialises them.

use crate::span::Span;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Label {
    pub span: Span,
    pub message: String,
    pub primary: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    /// A stable code documented in docs/errors.md, e.g. `E0302`.
    pub code: &'static str,
    pub message: String,
    pub labels: Vec<Label>,
    pub notes: Vec<String>,
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn error(code: &'static str, message: impl Into<String>, span: Span) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            labels: vec![Label { span, message: String::new(), primary: true }],
            notes: vec![],
            help: None,
        }
    }
    /// The text under the primary label.
    pub fn with_label(mut self, text: impl Into<String>) -> Self {
        if let Some(l) = self.labels.iter_mut().find(|l| l.primary) {
            l.message = text.into();
        }
        self
    }
    pub fn with_secondary(mut self, span: Span, text: impl Into<String>) -> Self {
        self.labels.push(Label { span, message: text.into(), primary: false });
        self
    }
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
    pub fn primary_span(&self) -> Span {
        self.labels.iter().find(|l| l.primary).map(|l| l.span).unwrap_or_default()
    }
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Edit distance for "did you mean" suggestions: insertions, deletions and substitutions, and
/// with `swaps` a swap of neighbouring letters as one edit too (optimal string alignment: `lte`
/// is one edit from `let`).
pub fn edit_distance(a: &str, b: &str, swaps: bool) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows of the table: i - 2, i - 1 and i.
    let mut before: Vec<usize> = vec![];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j - 1] + cost).min(prev[j] + 1).min(cur[j - 1] + 1);
            if swaps && i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                cur[j] = cur[j].min(before[j - 2] + 1);
            }
        }
        before = std::mem::replace(&mut prev, cur);
    }
    prev[b.len()]
}

/// The closest candidate within a distance that scales with the name's length.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let limit = (name.chars().count() / 3).max(1);
    let lower = name.to_lowercase();
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .map(|c| {
            let d = edit_distance(&lower, &c.to_lowercase(), false);
            (d, c)
        })
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, c)| (*d, c.len()))
        .map(|(_, c)| c.to_string())
}

#[cfg(test)]
mod edit_distance_tests {
    use super::edit_distance;

    #[test]
    fn swaps_count_once_only_when_asked() {
        assert_eq!(edit_distance("kitten", "sitting", false), 3);
        assert_eq!(edit_distance("", "abc", true), 3);
        assert_eq!(edit_distance("lte", "let", false), 2);
        assert_eq!(edit_distance("lte", "let", true), 1);
        assert_eq!(edit_distance("modle", "model", true), 1);
        assert_eq!(edit_distance("logg", "log", true), 1);
    }
}
