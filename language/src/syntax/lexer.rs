//! The lexer: text to tokens. It never fails: bad characters and unterminated strings become
//! diagnostics and lexing goes on, so the parser sees the rest of the file.
//!
//! It stays hand-written rather than a chumsky text parser: it is one linear pass with no
//! alternatives to backtrack over, it must accept every input (a chumsky lexer would have to be
//! taught to turn every bad character into a diagnostic and carry on, which is what this loop
//! does), and it records the comments and blank lines that the grammar never sees but a formatter
//! must reproduce ([`Trivia`]).

use super::token::{Kw, Punct, Tok, Token};
use super::trivia::{Trivia, TriviaKind};
use crate::diag::Diagnostic;
use crate::span::{FileId, Span};
use crate::types::DType;

pub fn lex(file: FileId, src: &str) -> (Vec<Token>, Vec<Diagnostic>) {
    let lexed = lex_with_trivia(file, src);
    (lexed.tokens, lexed.diags)
}

/// Tokens (ending with `Eof`), the lexical diagnostics, and the comments and blank lines.
pub struct Lexed {
    pub tokens: Vec<Token>,
    pub diags: Vec<Diagnostic>,
    pub trivia: Vec<Trivia>,
}

pub fn lex_with_trivia(file: FileId, src: &str) -> Lexed {
    // A byte-order mark (some Windows editors write one) is not part of the program.
    let start = if src.starts_with('\u{feff}') { '\u{feff}'.len_utf8() } else { 0 };
    let out = Vec::with_capacity(src.len() / 4);
    let mut lx = Lexer { file, src, pos: start, out, diags: vec![], trivia: vec![], line_start: start, line_blank: true };
    lx.run();
    Lexed { tokens: lx.out, diags: lx.diags, trivia: lx.trivia }
}

struct Lexer<'a> {
    file: FileId,
    src: &'a str,
    /// Byte offset of the next character.
    pos: usize,
    out: Vec<Token>,
    diags: Vec<Diagnostic>,
    trivia: Vec<Trivia>,
    /// Byte offset where the current line starts, and whether it has held only whitespace so far.
    line_start: usize,
    line_blank: bool,
}

impl Lexer<'_> {
    fn peek(&self, k: usize) -> Option<char> {
        self.src[self.pos..].chars().nth(k)
    }
    /// Move over `n` characters.
    fn bump(&mut self, n: usize) {
        for c in self.src[self.pos..].chars().take(n) {
            self.pos += c.len_utf8();
        }
    }
    fn offset(&self) -> usize {
        self.pos
    }
    fn span(&self, start: usize) -> Span {
        Span::new(self.file, start, self.offset())
    }
    fn push(&mut self, tok: Tok, start: usize) {
        let span = self.span(start);
        self.out.push(Token { tok, span });
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            let start = self.offset();
            if c != '\n' && !c.is_whitespace() {
                self.line_blank = false;
            }
            match c {
                '\n' => {
                    if self.line_blank {
                        self.trivia.push(Trivia { kind: TriviaKind::BlankLine, span: Span::new(self.file, self.line_start, start) });
                    }
                    self.bump(1);
                    self.push(Tok::Newline, start);
                    self.line_start = start + 1;
                    self.line_blank = true;
                }
                ' ' | '\t' | '\r' => self.pos += 1,
                c if c.is_whitespace() => self.bump(1),
                '#' => {
                    self.pos = self.src[self.pos..].find('\n').map_or(self.src.len(), |k| self.pos + k);
                    self.trivia.push(Trivia { kind: TriviaKind::Comment, span: self.span(start) });
                }
                '"' => self.string(start),
                c if c.is_ascii_digit() => self.number(start),
                c if c.is_alphabetic() || c == '_' => self.word(start),
                _ => self.punct(start, c),
            }
        }
        let end = self.src.len();
        self.out.push(Token { tok: Tok::Eof, span: Span::new(self.file, end, end) });
    }

    fn string(&mut self, start: usize) {
        self.bump(1);
        let mut s = String::new();
        loop {
            match self.peek(0) {
                None | Some('\n') => {
                    self.diags.push(
                        Diagnostic::error("E0102", "unterminated string", self.span(start))
                            .with_label("this string has no closing `\"`")
                            .with_help("add a `\"` before the end of the line"),
                    );
                    break;
                }
                Some('"') => {
                    self.bump(1);
                    break;
                }
                // A `\` at the end of the line escapes nothing: the string is unterminated there.
                Some('\\') if matches!(self.peek(1), None | Some('\n')) => {
                    self.bump(1);
                }
                Some('\\') => {
                    let esc = self.peek(1);
                    self.bump(2);
                    match esc {
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        Some('"') => s.push('"'),
                        Some('\\') => s.push('\\'),
                        Some(other) => {
                            s.push('\\');
                            s.push(other)
                        }
                        None => {}
                    }
                }
                Some(c) => {
                    s.push(c);
                    self.bump(1);
                }
            }
        }
        self.push(Tok::Str(s), start);
    }

    fn number(&mut self, start: usize) {
        let mut is_float = false;
        while matches!(self.peek(0), Some(c) if c.is_ascii_digit() || c == '_') {
            self.bump(1);
        }
        // A `.` followed by a digit continues the number; `1..` or `x.0` stay separate.
        if self.peek(0) == Some('.') && matches!(self.peek(1), Some(c) if c.is_ascii_digit()) {
            is_float = true;
            self.bump(1);
            while matches!(self.peek(0), Some(c) if c.is_ascii_digit() || c == '_') {
                self.bump(1);
            }
        }
        if matches!(self.peek(0), Some('e' | 'E')) {
            let sign = matches!(self.peek(1), Some('+' | '-'));
            let digit_at = if sign { 2 } else { 1 };
            if matches!(self.peek(digit_at), Some(c) if c.is_ascii_digit()) {
                is_float = true;
                self.bump(digit_at);
                while matches!(self.peek(0), Some(c) if c.is_ascii_digit()) {
                    self.bump(1);
                }
            }
        }
        // Letters glued to a number (`12abc`, `1e`) are a malformed literal, not two tokens.
        let mut bad = false;
        while matches!(self.peek(0), Some(c) if c.is_alphanumeric() || c == '_') {
            bad = true;
            self.bump(1);
        }
        let text: String = self.src[start..self.offset()].chars().filter(|c| *c != '_').collect();
        let span = self.span(start);
        if bad {
            self.diags.push(
                Diagnostic::error("E0105", format!("invalid number literal `{}`", &self.src[start..self.offset()]), span)
                    .with_label("not a number")
                    .with_help("numbers look like `42`, `0.5`, `1e-3` or `2.5E+4`"),
            );
            self.push(Tok::Int(0), start);
            return;
        }
        if is_float {
            match text.parse::<f64>() {
                Ok(v) => self.push(Tok::Float(v), start),
                Err(_) => {
                    self.diags.push(Diagnostic::error("E0105", format!("invalid number literal `{text}`"), span));
                    self.push(Tok::Float(0.0), start)
                }
            }
        } else {
            match text.parse::<i64>() {
                Ok(v) => self.push(Tok::Int(v), start),
                Err(_) => {
                    self.diags.push(
                        Diagnostic::error("E0105", format!("integer literal `{text}` does not fit in 64 bits"), span)
                            .with_label("too large"),
                    );
                    self.push(Tok::Int(0), start)
                }
            }
        }
    }

    fn word(&mut self, start: usize) {
        loop {
            // ASCII letters and digits byte by byte; anything else through `char`.
            match self.src.as_bytes().get(self.pos) {
                Some(b) if b.is_ascii_alphanumeric() || *b == b'_' => self.pos += 1,
                Some(b) if b.is_ascii() => break,
                Some(_) if matches!(self.peek(0), Some(c) if c.is_alphanumeric()) => self.bump(1),
                _ => break,
            }
        }
        let text = &self.src[start..self.offset()];
        let tok = if let Some(k) = Kw::lookup(text) {
            Tok::Kw(k)
        } else if let Some(d) = DType::from_name(text) {
            Tok::DType(d)
        } else {
            Tok::Ident(text.to_string())
        };
        self.push(tok, start);
    }

    fn punct(&mut self, start: usize, c: char) {
        use Punct::*;
        let two = |a: char, b: char| c == a && self.peek(1) == Some(b);
        let (p, len) = if c == '.' && self.peek(1) == Some('.') && self.peek(2) == Some('.') {
            (Some(Ellipsis), 3)
        } else if two('-', '>') {
            (Some(Arrow), 2)
        } else if two('=', '>') {
            (Some(FatArrow), 2)
        } else if two('|', '>') {
            (Some(Pipe), 2)
        } else if two('/', '/') {
            (Some(SlashSlash), 2)
        } else if two('*', '*') {
            (Some(StarStar), 2)
        } else if two('=', '=') {
            (Some(EqEq), 2)
        } else if two('!', '=') {
            (Some(NotEq), 2)
        } else if two('<', '=') {
            (Some(Le), 2)
        } else if two('>', '=') {
            (Some(Ge), 2)
        } else {
            let p = match c {
                '(' => Some(LParen),
                ')' => Some(RParen),
                '[' => Some(LBracket),
                ']' => Some(RBracket),
                '{' => Some(LBrace),
                '}' => Some(RBrace),
                ',' => Some(Comma),
                ':' => Some(Colon),
                ';' => Some(Semi),
                '.' => Some(Dot),
                '=' => Some(Eq),
                '+' => Some(Plus),
                '-' => Some(Minus),
                '*' => Some(Star),
                '/' => Some(Slash),
                '%' => Some(Percent),
                '@' => Some(At),
                '<' => Some(Lt),
                '>' => Some(Gt),
                _ => None,
            };
            (p, 1)
        };
        self.bump(len);
        match p {
            Some(p) => self.push(Tok::Punct(p), start),
            None => {
                let span = self.span(start);
                let mut d = Diagnostic::error("E0103", format!("invalid character `{c}`"), span).with_label("not part of DL's syntax");
                d = match c {
                    '!' => d.with_help("use `not` for logical negation"),
                    '&' => d.with_help("use `and`"),
                    '|' => d.with_help("use `or`, or `|>` to pipe a value into a function"),
                    '\'' => d.with_help("strings use double quotes: \"...\""),
                    _ => d,
                };
                self.diags.push(d);
            }
        }
    }
}
