//! A hand-written recursive-descent parser with a Pratt loop for operators.
//!
//! Recovery: each statement-level loop (top-level items, model members, recipe entries, block
//! statements) catches a failed parse, skips to the next line at the same nesting depth, and goes on,
//! so one run reports every syntax error of a file. The parser never panics: every token access is
//! bounds-checked and `Eof` is sticky.

mod expr;
mod item;

use super::ast::*;
use super::lexer::lex;
use super::token::{Kw, Punct, Tok, Token};
use crate::diag::Diagnostic;
use crate::span::{FileId, Span};

/// Parse one file. Always returns a program (possibly partial) and every diagnostic found.
pub fn parse(file: FileId, src: &str) -> (Program, Vec<Diagnostic>) {
    let (toks, mut diags) = lex(file, src);
    let mut p = Parser { toks, pos: 0, diags: vec![], newline_significant: vec![true] };
    let program = p.program();
    // A bad character or literal already explains its line; a parse error it caused on the same
    // line would be noise (`3 & 4` is one mistake, not two).
    let line_of = |off: u32| src.as_bytes()[..(off as usize).min(src.len())].iter().filter(|b| **b == b'\n').count();
    let lexed_lines: Vec<usize> = diags.iter().map(|d| line_of(d.primary_span().start)).collect();
    p.diags.retain(|d| !lexed_lines.contains(&line_of(d.primary_span().start)));
    diags.append(&mut p.diags);
    (program, diags)
}

/// Marker: an error was reported and the caller should recover.
pub(crate) struct Fail;
pub(crate) type PResult<T> = Result<T, Fail>;

pub(crate) struct Parser {
    toks: Vec<Token>,
    pos: usize,
    diags: Vec<Diagnostic>,
    /// Inside `( )` and `[ ]` newlines mean nothing; inside `{ }` and at top level they end statements.
    newline_significant: Vec<bool>,
}

impl Parser {
    fn nl_significant(&self) -> bool {
        *self.newline_significant.last().unwrap_or(&true)
    }

    fn skip_insignificant(&mut self) {
        if !self.nl_significant() {
            while matches!(self.toks.get(self.pos).map(|t| &t.tok), Some(Tok::Newline)) {
                self.pos += 1;
            }
        }
    }

    fn token(&mut self) -> &Token {
        self.skip_insignificant();
        let last = self.toks.len() - 1;
        &self.toks[self.pos.min(last)]
    }

    pub(crate) fn peek(&mut self) -> &Tok {
        &self.token().tok
    }

    pub(crate) fn span(&mut self) -> Span {
        self.token().span
    }

    /// The raw token `k` places ahead, newlines included.
    fn raw(&self, k: usize) -> &Tok {
        let last = self.toks.len() - 1;
        &self.toks[(self.pos + k).min(last)].tok
    }

    /// The token after the current one, skipping newlines when they are insignificant.
    pub(crate) fn peek2(&mut self) -> &Tok {
        self.skip_insignificant();
        let sig = self.nl_significant();
        let mut i = self.pos + 1;
        let last = self.toks.len() - 1;
        while !sig && i < last && self.toks[i].tok == Tok::Newline {
            i += 1;
        }
        &self.toks[i.min(last)].tok
    }

    pub(crate) fn bump(&mut self) -> Token {
        let t = self.token().clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    pub(crate) fn at_punct(&mut self, p: Punct) -> bool {
        *self.peek() == Tok::Punct(p)
    }

    pub(crate) fn at_kw(&mut self, k: Kw) -> bool {
        *self.peek() == Tok::Kw(k)
    }

    pub(crate) fn eat_punct(&mut self, p: Punct) -> Option<Span> {
        if self.at_punct(p) {
            Some(self.bump().span)
        } else {
            None
        }
    }

    pub(crate) fn eat_kw(&mut self, k: Kw) -> Option<Span> {
        if self.at_kw(k) {
            Some(self.bump().span)
        } else {
            None
        }
    }

    pub(crate) fn error_here(&mut self, expected: &str) -> Fail {
        let t = self.token().clone();
        let found = t.tok.describe();
        let d =
            Diagnostic::error("E0101", format!("expected {expected}, found {found}"), t.span).with_label(format!("expected {expected}"));
        self.push_diag(d);
        Fail
    }

    pub(crate) fn push_diag(&mut self, d: Diagnostic) {
        // Two failures at one token say the same thing twice; keep the first.
        if !self.diags.iter().any(|x| x.primary_span() == d.primary_span() && x.code == d.code) {
            self.diags.push(d);
        }
    }

    pub(crate) fn expect_punct(&mut self, p: Punct) -> PResult<Span> {
        match self.eat_punct(p) {
            Some(s) => Ok(s),
            None => Err(self.error_here(&format!("`{}`", p.as_str()))),
        }
    }

    /// Expect the closing delimiter of a group opened at `open`; at the end of the file say which
    /// delimiter was left open (E0104) rather than "unexpected end of file".
    pub(crate) fn expect_close(&mut self, close: Punct, open: Span) -> PResult<Span> {
        if let Some(s) = self.eat_punct(close) {
            return Ok(s);
        }
        if *self.peek() == Tok::Eof {
            let open_str = match close {
                Punct::RParen => "(",
                Punct::RBracket => "[",
                _ => "{",
            };
            let d = Diagnostic::error("E0104", format!("unclosed delimiter `{open_str}`"), open)
                .with_label("opened here and never closed")
                .with_help(format!("add `{}`", close.as_str()));
            self.push_diag(d);
            return Err(Fail);
        }
        Err(self.error_here(&format!("`{}`", close.as_str())))
    }

    pub(crate) fn ident(&mut self, what: &str) -> PResult<Ident> {
        let t = self.token().clone();
        match t.tok {
            Tok::Ident(name) => {
                self.bump();
                Ok(Ident { name, span: t.span })
            }
            Tok::Kw(k) if k.soft() => {
                self.bump();
                Ok(Ident { name: k.as_str().to_string(), span: t.span })
            }
            _ => Err(self.error_here(what)),
        }
    }

    pub(crate) fn with_newlines<T>(&mut self, significant: bool, f: impl FnOnce(&mut Self) -> T) -> T {
        self.newline_significant.push(significant);
        let depth = self.newline_significant.len();
        let r = f(self);
        self.newline_significant.truncate(depth - 1);
        r
    }

    /// A line break right after `=` continues the definition on the next line.
    pub(crate) fn skip_newlines(&mut self) {
        while matches!(self.raw(0), Tok::Newline) {
            self.pos += 1;
        }
    }

    /// Skip blank lines and `;` between statements.
    pub(crate) fn skip_separators(&mut self) {
        while matches!(self.raw(0), Tok::Newline | Tok::Punct(Punct::Semi)) {
            self.pos += 1;
        }
    }

    /// After a statement: a newline, `;`, or a closing `}` / end of file must follow.
    pub(crate) fn end_of_statement(&mut self, allow_comma: bool) -> PResult<()> {
        match self.raw(0) {
            Tok::Newline | Tok::Punct(Punct::Semi) | Tok::Eof | Tok::Punct(Punct::RBrace) => Ok(()),
            Tok::Punct(Punct::Comma) if allow_comma => {
                self.pos += 1;
                Ok(())
            }
            _ => Err(self.error_here("end of line")),
        }
    }

    /// Error recovery: skip to the end of the current line at the current nesting depth, or to a
    /// `}` that closes the enclosing block (left for the caller), or to the end of the file.
    pub(crate) fn recover(&mut self) {
        let mut depth: i32 = 0;
        loop {
            match self.raw(0) {
                Tok::Eof => return,
                Tok::Newline | Tok::Punct(Punct::Semi) if depth <= 0 => return,
                Tok::Punct(Punct::RBrace) if depth <= 0 => return,
                Tok::Punct(Punct::LParen | Punct::LBracket | Punct::LBrace) => depth += 1,
                Tok::Punct(Punct::RParen | Punct::RBracket | Punct::RBrace) => depth = (depth - 1).max(0),
                _ => {}
            }
            self.pos += 1;
        }
    }

    fn program(&mut self) -> Program {
        let mut items = vec![];
        loop {
            self.skip_separators();
            if *self.raw(0) == Tok::Eof {
                break;
            }
            let start = self.pos;
            match self.item().and_then(|it| self.end_of_statement(false).map(|_| it)) {
                Ok(it) => items.push(it),
                Err(Fail) => {
                    self.newline_significant.truncate(1);
                    self.recover();
                    // A stray `}` at top level would stop recovery forever; step over it.
                    if *self.raw(0) == Tok::Punct(Punct::RBrace) {
                        self.pos += 1;
                    }
                }
            }
            if self.pos == start {
                self.pos += 1; // always make progress
            }
        }
        Program { items }
    }
}

#[cfg(test)]
mod tests;
