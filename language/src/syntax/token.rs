//! Tokens of DL.

use crate::span::Span;
use crate::types::DType;

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Int(i64),
    Float(f64),
    Str(String),
    Ident(String),
    Kw(Kw),
    DType(DType),
    Punct(Punct),
    Newline,
    Eof,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kw {
    Use,
    Fn,
    Model,
    Data,
    Train,
    Evaluate,
    Infer,
    Let,
    If,
    Else,
    And,
    Or,
    Not,
    True,
    False,
    Auto,
    Every,
    Checkpoint,
    Log,
    Step,
    Update,
    By,
    As,
}

impl Kw {
    pub const ALL: &'static [(&'static str, Kw)] = &[
        ("use", Kw::Use),
        ("fn", Kw::Fn),
        ("model", Kw::Model),
        ("data", Kw::Data),
        ("train", Kw::Train),
        ("evaluate", Kw::Evaluate),
        ("infer", Kw::Infer),
        ("let", Kw::Let),
        ("if", Kw::If),
        ("else", Kw::Else),
        ("and", Kw::And),
        ("or", Kw::Or),
        ("not", Kw::Not),
        ("true", Kw::True),
        ("false", Kw::False),
        ("auto", Kw::Auto),
        ("every", Kw::Every),
        ("checkpoint", Kw::Checkpoint),
        ("log", Kw::Log),
        ("step", Kw::Step),
        ("update", Kw::Update),
        ("by", Kw::By),
        ("as", Kw::As),
    ];
    pub fn lookup(s: &str) -> Option<Kw> {
        // Most words are not keywords: a keyword is 2 to 10 lowercase ASCII letters.
        if !(2..=10).contains(&s.len()) || !s.as_bytes()[0].is_ascii_lowercase() {
            return None;
        }
        Kw::ALL.iter().find(|(n, _)| *n == s).map(|(_, k)| *k)
    }
    pub fn as_str(self) -> &'static str {
        Kw::ALL.iter().find(|(_, k)| *k == self).map(|(n, _)| *n).unwrap_or("?")
    }
    /// Keywords that are also usable as plain names where no keyword meaning applies
    /// (`log`, `step` and `checkpoint` are recipe clauses but also common identifiers).
    pub fn soft(self) -> bool {
        matches!(self, Kw::Log | Kw::Step | Kw::Checkpoint | Kw::Every | Kw::By | Kw::Data | Kw::Model)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Punct {
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Colon,
    Semi,
    Dot,
    Ellipsis,
    Eq,
    Arrow,
    FatArrow,
    Pipe,
    Plus,
    Minus,
    Star,
    StarStar,
    Slash,
    SlashSlash,
    Percent,
    At,
    EqEq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Punct {
    /// The opening delimiter a closing one closes (`)` → `(`); other punctuation is its own.
    pub fn opener(self) -> Punct {
        match self {
            Punct::RParen => Punct::LParen,
            Punct::RBracket => Punct::LBracket,
            Punct::RBrace => Punct::LBrace,
            p => p,
        }
    }
    /// The closing delimiter of an opening one (`(` → `)`); other punctuation is its own.
    pub fn closer(self) -> Punct {
        match self {
            Punct::LParen => Punct::RParen,
            Punct::LBracket => Punct::RBracket,
            Punct::LBrace => Punct::RBrace,
            p => p,
        }
    }
    pub fn as_str(self) -> &'static str {
        use Punct::*;
        match self {
            LParen => "(",
            RParen => ")",
            LBracket => "[",
            RBracket => "]",
            LBrace => "{",
            RBrace => "}",
            Comma => ",",
            Colon => ":",
            Semi => ";",
            Dot => ".",
            Ellipsis => "...",
            Eq => "=",
            Arrow => "->",
            FatArrow => "=>",
            Pipe => "|>",
            Plus => "+",
            Minus => "-",
            Star => "*",
            StarStar => "**",
            Slash => "/",
            SlashSlash => "//",
            Percent => "%",
            At => "@",
            EqEq => "==",
            NotEq => "!=",
            Lt => "<",
            Le => "<=",
            Gt => ">",
            Ge => ">=",
        }
    }
}

impl Tok {
    /// How the token is named in "expected X, found Y" messages.
    pub fn describe(&self) -> String {
        match self {
            Tok::Int(v) => format!("integer `{v}`"),
            Tok::Float(v) => format!("number `{v}`"),
            Tok::Str(_) => "a string".into(),
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Kw(k) => format!("keyword `{}`", k.as_str()),
            Tok::DType(d) => format!("`{}`", d.name()),
            Tok::Punct(p) => format!("`{}`", p.as_str()),
            Tok::Newline => "end of line".into(),
            Tok::Eof => "end of file".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}
