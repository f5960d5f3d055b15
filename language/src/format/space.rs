//! Spacing between two tokens on one line: one space around binary operators, `=`, `->`, `=>`
//! and after `,` and `:`; none inside brackets, around `.`, after a prefix operator, before a
//! call's or an index's bracket, or around the `:` of a slice (`x[1:, :T]`).

use super::tree::Leaf;
use crate::syntax::token::{Kw, Punct, Tok};

/// Whether a space goes between `prev` and `next`; `in_index`: the innermost bracket is `[ ]`,
/// where a `:` makes a slice.
pub(super) fn space(prev: &Leaf, next: &Leaf, in_index: bool) -> bool {
    use Punct::*;
    if next.detached {
        return true;
    }
    let (p, n) = (punct(&prev.tok), punct(&next.tok));
    if matches!(n, Some(Comma | RParen | RBracket | Dot)) || matches!(p, Some(LParen | LBracket | Dot | Ellipsis)) {
        return false;
    }
    // A slice's `:` after a `,` starts the next index (`x[:, :T]`).
    if n == Some(Colon) {
        return p == Some(Comma);
    }
    if prev.prefix {
        return false;
    }
    if p == Some(Colon) {
        return !in_index;
    }
    if matches!(n, Some(LParen | LBracket)) {
        return prev.statement || !callee(&prev.tok);
    }
    true
}

fn punct(t: &Tok) -> Option<Punct> {
    match t {
        Tok::Punct(p) => Some(*p),
        _ => None,
    }
}

/// What a `(` or `[` right after it calls or indexes: a name, a dtype (`f32[B, 784]`), a closing
/// bracket, a tuple field (`layers.0(x)`), or a keyword used as a name (`log(x)`, `step(x)`).
fn callee(t: &Tok) -> bool {
    match t {
        Tok::Ident(_) | Tok::DType(_) | Tok::Int(_) => true,
        Tok::Punct(p) => matches!(p, Punct::RParen | Punct::RBracket | Punct::RBrace),
        Tok::Kw(k) => matches!(k, Kw::Log | Kw::Step | Kw::Checkpoint | Kw::Data | Kw::Model),
        _ => false,
    }
}
