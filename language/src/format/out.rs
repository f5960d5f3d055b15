//! The text being written, with the column of its current line and that line's indentation
//! level (`base`: where a block opened on it indents from, whatever column a continuation line
//! was aligned to). A probe writes nothing lasting: it measures whether a statement fits on one
//! line and stops at the first line break or past the width.

pub(super) struct Out {
    text: String,
    /// Characters on the current line.
    col: usize,
    base: usize,
    /// Nothing but indentation on the current line yet.
    fresh: bool,
    /// The width a probe measures against (`None`: not a probe).
    limit: Option<usize>,
    broke: bool,
    too_wide: bool,
}

impl Out {
    pub fn new() -> Out {
        Out { text: String::new(), col: 0, base: 0, fresh: true, limit: None, broke: false, too_wide: false }
    }

    /// A probe starting at column `col` of a line indented `col`.
    pub fn probe(col: usize, width: usize) -> Out {
        Out { col, base: col, fresh: false, limit: Some(width), ..Out::new() }
    }

    pub fn col(&self) -> usize {
        self.col
    }
    pub fn base(&self) -> usize {
        self.base
    }
    pub fn fresh(&self) -> bool {
        self.fresh
    }
    /// A probe that has seen enough.
    pub fn stopped(&self) -> bool {
        self.broke || self.too_wide
    }
    pub fn broke(&self) -> bool {
        self.broke
    }
    pub fn too_wide(&self) -> bool {
        self.too_wide
    }

    pub fn text(&mut self, t: &str) {
        if self.stopped() {
            return;
        }
        self.col += t.chars().count();
        self.fresh = false;
        match self.limit {
            Some(width) => self.too_wide = self.col > width,
            None => self.text.push_str(t),
        }
    }

    /// Text as written (a `# fmt: off` region); the column is that of its last line.
    pub fn raw(&mut self, t: &str) {
        if self.limit.is_some() {
            self.broke |= t.contains('\n');
            return self.text(t);
        }
        self.text.push_str(t);
        self.col = t.rsplit('\n').next().map_or(0, |l| l.chars().count());
        self.fresh = false;
    }

    /// End the line (and leave an empty one when `blank`); the next starts at column `col`.
    pub fn newline(&mut self, col: usize, base: usize, blank: bool) {
        if self.limit.is_some() {
            self.broke = true;
            return;
        }
        self.text.truncate(self.text.trim_end_matches(' ').len());
        self.text.push('\n');
        if blank {
            self.text.push('\n');
        }
        self.text.extend(std::iter::repeat_n(' ', col));
        (self.col, self.base, self.fresh) = (col, base, true);
    }

    pub fn finish(self) -> String {
        self.text.trim_end().to_string()
    }
}
