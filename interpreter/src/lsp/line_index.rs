//! Positions: LSP speaks in lines and UTF-16 code units (the protocol's default encoding, the
//! one every client supports), the front end in byte offsets. Every conversion goes through here.

use lsp_types::{Position, Range};

/// The byte offset where each line starts, for one version of a text.
#[derive(Clone, Debug)]
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(text.bytes().enumerate().filter(|(_, b)| *b == b'\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    pub fn line_count(&self) -> usize {
        self.starts.len()
    }

    /// The byte offset of `pos` in `text`. A line past the end is the end of the text, a
    /// character past the end of its line the line's end (before `\r\n`), and a position inside a
    /// character (between the halves of a surrogate pair) that character's start: clients send
    /// such positions while a file changes under them, and none of them is an error.
    pub fn offset(&self, text: &str, pos: Position) -> usize {
        let Some(&start) = self.starts.get(pos.line as usize) else { return text.len() };
        let start = start.min(text.len());
        let line = &text[start..self.line_end(text, pos.line as usize)];
        let mut units = 0u32;
        for (i, c) in line.char_indices() {
            let next = units + c.len_utf16() as u32;
            if next > pos.character {
                return start + i;
            }
            units = next;
        }
        start + line.len()
    }

    /// The end of line `line`'s content: before its `\n` (and a `\r` before that).
    fn line_end(&self, text: &str, line: usize) -> usize {
        let end = self.starts.get(line + 1).map_or(text.len(), |s| s - 1).min(text.len());
        let start = self.starts[line].min(end);
        if text[start..end].ends_with('\r') {
            end - 1
        } else {
            end
        }
    }

    /// The position of byte `offset` (clamped to the text, moved back to a character start).
    pub fn position(&self, text: &str, offset: usize) -> Position {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset).saturating_sub(1);
        let start = self.starts[line];
        let character = text[start..offset].chars().map(|c| c.len_utf16() as u32).sum();
        Position { line: line as u32, character }
    }

    pub fn range(&self, text: &str, start: usize, end: usize) -> Range {
        Range { start: self.position(text, start), end: self.position(text, end.max(start)) }
    }

    /// A range as bytes, start before end whatever order the client sent.
    pub fn span(&self, text: &str, range: Range) -> (usize, usize) {
        let (a, b) = (self.offset(text, range.start), self.offset(text, range.end));
        (a.min(b), a.max(b))
    }
}
