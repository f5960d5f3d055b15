//! The lexer: text to tokens. It never fails: bad characters and unterminated strings become
//! diagnostics and lexing goes on, so the parser sees the rest of the file.

use super::token::{Kw, Punct, Tok, Token};
use crate::diag::Diagnostic;
use crate::span::{FileId, Span};
use crate::types::DType;

pub fn lex(file: FileId, src: &str) -> (Vec<Token>, Vec<Diagnostic>) {
    let mut lx = Lexer { file, src, chars: src.char_indices().collect(), pos: 0, out: vec![], diags: vec![] };
    lx.run();
    (lx.out, lx.diags)
}

struct Lexer<'a> {
    file: FileId,
    src: &'a str,
    chars: Vec<(usize, char)>,
    pos: usize,
    out: Vec<Token>,
    diags: Vec<Diagnostic>,
}

impl Lexer<'_> {
    fn peek(&self, k: usize) -> Option<char> {
        self.chars.get(self.pos + k).map(|c| c.1)
    }
    fn offset(&self) -> usize {
        self.chars.get(self.pos).map(|c| c.0).unwrap_or(self.src.len())
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
            match c {
                '\n' => {
                    self.pos += 1;
                    self.push(Tok::Newline, start);
                }
                c if c.is_whitespace() => self.pos += 1,
                '#' => {
                    while let Some(c) = self.peek(0) {
                        if c == '\n' {
                            break;
                        }
                        self.pos += 1;
                    }
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
        self.pos += 1;
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
                    self.pos += 1;
                    break;
                }
                Some('\\') => {
                    let esc = self.peek(1);
                    self.pos += 2;
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
                    self.pos += 1;
                }
            }
        }
        self.push(Tok::Str(s), start);
    }

    fn number(&mut self, start: usize) {
        let mut is_float = false;
        while matches!(self.peek(0), Some(c) if c.is_ascii_digit() || c == '_') {
            self.pos += 1;
        }
        // A `.` followed by a digit continues the number; `1..` or `x.0` stay separate.
        if self.peek(0) == Some('.') && matches!(self.peek(1), Some(c) if c.is_ascii_digit()) {
            is_float = true;
            self.pos += 1;
            while matches!(self.peek(0), Some(c) if c.is_ascii_digit() || c == '_') {
                self.pos += 1;
            }
        }
        if matches!(self.peek(0), Some('e' | 'E')) {
            let sign = matches!(self.peek(1), Some('+' | '-'));
            let digit_at = if sign { 2 } else { 1 };
            if matches!(self.peek(digit_at), Some(c) if c.is_ascii_digit()) {
                is_float = true;
                self.pos += digit_at;
                while matches!(self.peek(0), Some(c) if c.is_ascii_digit()) {
                    self.pos += 1;
                }
            }
        }
        // Letters glued to a number (`12abc`, `1e`) are a malformed literal, not two tokens.
        let mut bad = false;
        while matches!(self.peek(0), Some(c) if c.is_alphanumeric() || c == '_') {
            bad = true;
            self.pos += 1;
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
        while matches!(self.peek(0), Some(c) if c.is_alphanumeric() || c == '_') {
            self.pos += 1;
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
        self.pos += len;
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
