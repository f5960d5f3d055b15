//! The open documents: their text as the client edits it (incremental sync: each change a range
//! in UTF-16 positions and its new text) and the analysis of their latest checked version.

use super::analysis::Analysis;
use super::line_index::LineIndex;
use lsp_types::{TextDocumentContentChangeEvent, Uri};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

pub struct Document {
    pub uri: Uri,
    /// The file's path, for `file:` URIs (module loading and data paths are relative to it).
    pub path: Option<PathBuf>,
    pub text: String,
    pub lines: LineIndex,
    pub version: i32,
    /// The analysis of `text` at `version`, or of an earlier version while `due` is set.
    pub analysis: Option<Rc<Analysis>>,
    /// When the text changed and is not analysed yet: when to analyse it (the debounce).
    pub due: Option<Instant>,
}

impl Document {
    pub fn new(uri: Uri, text: String, version: i32) -> Document {
        let path = super::uri::to_path(&uri);
        let lines = LineIndex::new(&text);
        Document { uri, path, text, lines, version, analysis: None, due: Some(Instant::now()) }
    }

    /// Apply the client's changes in order: a change with a range replaces that range, one
    /// without replaces the whole text.
    pub fn apply(&mut self, changes: Vec<TextDocumentContentChangeEvent>, version: i32) {
        for change in changes {
            match change.range {
                Some(range) => {
                    let (start, end) = self.lines.span(&self.text, range);
                    self.text.replace_range(start..end, &change.text);
                }
                None => self.text = change.text,
            }
            self.lines = LineIndex::new(&self.text);
        }
        self.version = version;
    }

    /// The analysis of the current text, if it is up to date.
    pub fn current(&self) -> Option<&Rc<Analysis>> {
        self.analysis.as_ref().filter(|a| a.version == self.version && self.due.is_none())
    }
}
