//! What the grammar does not see but a formatter must keep: comments and blank lines, recorded by
//! the lexer beside the AST ([`Program::trivia`](super::ast::Program)), and the lossless stream
//! of a file ([`pieces`]): every byte of the source in exactly one token, comment or run of
//! whitespace, in order, so that `dlc fmt` and the language server can map any position back to
//! what is there.

use super::lexer::lex_with_trivia;
use super::token::Tok;
use crate::span::{FileId, Span};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriviaKind {
    /// `# ...` up to the end of its line (the span excludes the line break).
    Comment,
    /// A line holding nothing but whitespace (the span excludes the line break).
    BlankLine,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trivia {
    pub kind: TriviaKind,
    pub span: Span,
}

/// One piece of the lossless stream.
#[derive(Clone, Debug, PartialEq)]
pub enum PieceKind {
    Token(Tok),
    Comment,
    /// Spaces and tabs, and characters the lexer rejected (they have a diagnostic).
    Whitespace,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    pub kind: PieceKind,
    pub span: Span,
}

/// The whole file as pieces; concatenating their text gives the source back byte for byte.
pub fn pieces(file: FileId, src: &str) -> Vec<Piece> {
    let lexed = lex_with_trivia(file, src);
    let comments = lexed.trivia.iter().filter(|t| t.kind == TriviaKind::Comment).map(|t| (PieceKind::Comment, t.span));
    let tokens = lexed.tokens.into_iter().filter(|t| t.tok != Tok::Eof).map(|t| (PieceKind::Token(t.tok), t.span));
    let mut covered: Vec<(PieceKind, Span)> = tokens.chain(comments).collect();
    covered.sort_by_key(|(_, s)| s.start);
    let mut out = Vec::with_capacity(covered.len() * 2);
    let mut at = 0u32;
    for (kind, span) in covered {
        if span.start > at {
            out.push(Piece { kind: PieceKind::Whitespace, span: Span { file, start: at, end: span.start } });
        }
        at = at.max(span.end);
        out.push(Piece { kind, span });
    }
    if (at as usize) < src.len() {
        out.push(Piece { kind: PieceKind::Whitespace, span: Span::new(file, at as usize, src.len()) });
    }
    out
}

impl super::ast::Program {
    /// The comments and blank lines inside `span`, in source order (for a formatter: what lies
    /// before an item, or between two statements).
    pub fn trivia_in(&self, span: Span) -> impl Iterator<Item = &Trivia> {
        let from = self.trivia.partition_point(|t| t.span.start < span.start);
        self.trivia[from..].iter().take_while(move |t| t.span.end <= span.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::parse;

    #[test]
    fn pieces_give_the_source_back() {
        for src in [
            "# header\n\nlet x = 1  # trailing\n\t\nmodel M { w = 2 } # end\n\"open\nlet é = 3 & 4",
            "\u{feff}let a = 1\r\n\r\nlet b = 2\r\n",
        ] {
            let text: String = pieces(FileId(0), src).iter().map(|p| &src[p.span.range()]).collect();
            assert_eq!(text, src);
        }
        // A byte-order mark is not a character of the program; Windows line ends are line ends.
        let (p, d) = parse(FileId(0), "\u{feff}let a = 1\r\n\r\nlet b = a\r\n");
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(p.items.len(), 2);
        assert_eq!(p.trivia.iter().filter(|t| t.kind == TriviaKind::BlankLine).count(), 1);
    }

    #[test]
    fn comments_and_blank_lines_sit_beside_the_items() {
        let src = "# the data\nlet a = 1\n\n\n# the model\nlet b = 2 # two\n";
        let (p, d) = parse(FileId(0), src);
        assert!(d.is_empty(), "{d:?}");
        let kinds: Vec<(TriviaKind, &str)> = p.trivia.iter().map(|t| (t.kind, &src[t.span.range()])).collect();
        assert_eq!(
            kinds,
            vec![
                (TriviaKind::Comment, "# the data"),
                (TriviaKind::BlankLine, ""),
                (TriviaKind::BlankLine, ""),
                (TriviaKind::Comment, "# the model"),
                (TriviaKind::Comment, "# two"),
            ]
        );
        // What lies between the two items: the blank lines and the second item's heading comment.
        let between = Span::new(FileId(0), p.items[0].span.end as usize, p.items[1].span.start as usize);
        assert_eq!(p.trivia_in(between).count(), 3);
    }
}
