//! The terminals of the grammar: single tokens, names, line ends, and spans.

use super::error::{Expect, GrammarError};
use super::Input;
use crate::span::{FileId, Span};
use crate::syntax::ast::Ident;
use crate::syntax::token::{Kw, Punct, Tok};
use chumsky::prelude::*;

pub(super) type Ex<E> = extra::Err<E>;
/// Every named parser is boxed: it keeps the types (and the compile time) small.
pub(super) type P<'a, E, O> = Boxed<'a, 'a, Input<'a>, O, Ex<E>>;

/// Byte spans of the grammar to the AST's spans.
#[derive(Clone, Copy)]
pub(super) struct Spans(pub FileId);

impl Spans {
    pub fn of(self, s: SimpleSpan) -> Span {
        Span::new(self.0, s.start, s.end)
    }
}

pub(super) fn punct<'a, E: GrammarError<'a>>(p: Punct) -> impl Parser<'a, Input<'a>, Tok, Ex<E>> + Clone {
    just(Tok::Punct(p))
}

pub(super) fn kw<'a, E: GrammarError<'a>>(k: Kw) -> impl Parser<'a, Input<'a>, Tok, Ex<E>> + Clone {
    just(Tok::Kw(k))
}

/// The span of a token.
pub(super) fn at<'a, E: GrammarError<'a>>(
    tok: impl Parser<'a, Input<'a>, Tok, Ex<E>> + Clone,
    sp: Spans,
) -> impl Parser<'a, Input<'a>, Span, Ex<E>> + Clone {
    tok.map_with(move |_, e| sp.of(e.span()))
}

/// A name: an identifier, or a soft keyword (`log`, `step`, `data`, ...) where it is no keyword.
pub(super) fn name<'a, E: GrammarError<'a>>(sp: Spans) -> P<'a, E, Ident> {
    select_ref! {
        Tok::Ident(name) = e => Ident { name: name.clone(), span: sp.of(e.span()) },
        Tok::Kw(k) = e if k.soft() => Ident { name: k.as_str().to_string(), span: sp.of(e.span()) },
    }
    .boxed()
}

/// An identifier proper: after `model` and `data` (where a soft keyword would be ambiguous) and
/// for recipe names.
pub(super) fn plain_name<'a, E: GrammarError<'a>>(sp: Spans) -> P<'a, E, Ident> {
    select_ref! { Tok::Ident(name) = e => Ident { name: name.clone(), span: sp.of(e.span()) } }.boxed()
}

/// A line break or `;`.
pub(super) fn sep<'a, E: GrammarError<'a>>() -> P<'a, E, ()> {
    choice((just(Tok::Newline), punct(Punct::Semi))).ignored().boxed()
}

/// Any number of line breaks and `;`.
pub(super) fn seps<'a, E: GrammarError<'a>>() -> P<'a, E, ()> {
    sep().repeated().boxed()
}

/// The end of a line inside braces: a separator (consumed) or the closing `}` (left), and with
/// `comma`, a `,` (consumed; members may be listed on one line).
pub(super) fn line_end<'a, E: GrammarError<'a>>(comma: bool) -> P<'a, E, ()> {
    let close = punct(Punct::RBrace).rewind().ignored();
    let end = if comma { choice((sep(), punct(Punct::Comma).ignored(), close)).boxed() } else { choice((sep(), close)).boxed() };
    end.labelled(Expect::EndOfLine).boxed()
}

/// What may follow a complete definition, without consuming it: the end of its line, a `}` or
/// `,` that ends it, or the end of the file.
pub(super) fn followed_by_end<'a, E: GrammarError<'a>>() -> P<'a, E, ()> {
    choice((sep(), punct(Punct::RBrace).ignored(), punct(Punct::Comma).ignored(), end())).rewind().labelled(Expect::EndOfLine).boxed()
}
