//! Recovery: where the parser goes on after a syntax error.

use super::error::GrammarError;
use super::Input;
use crate::syntax::token::{Punct, Tok};
use chumsky::prelude::*;

/// Skip the rest of a line from where a statement started: up to a line break or `;` at the same
/// nesting depth (groups are skipped whole, line breaks inside them too), or up to the `}` that
/// closes the enclosing block, which is left for the block. `stray_brace`: at top level a `}`
/// closes nothing and is skipped with its line. Consumes at least one token or fails, so a
/// repetition around it always ends.
pub(super) fn skip_line<'a, E: GrammarError<'a>>(stray_brace: bool) -> impl Parser<'a, Input<'a>, (), extra::Err<E>> + Clone {
    custom(move |inp| {
        let start = inp.cursor();
        // The groups opened since the statement started; a closer closes the nearest group of its
        // kind (and any left open inside it), and one that matches nothing closes the innermost, as
        // the layout pass does.
        let mut open: Vec<Punct> = vec![];
        let mut skipped = 0usize;
        while let Some(tok) = inp.peek() {
            match tok {
                Tok::Newline | Tok::Punct(Punct::Semi) if open.is_empty() => break,
                Tok::Punct(Punct::RBrace) if open.is_empty() && !(stray_brace && skipped == 0) => break,
                Tok::Punct(p @ (Punct::LParen | Punct::LBracket | Punct::LBrace)) => open.push(p),
                Tok::Punct(p @ (Punct::RParen | Punct::RBracket | Punct::RBrace)) => match open.iter().rposition(|o| *o == p.opener()) {
                    Some(k) => open.truncate(k),
                    None => {
                        open.pop();
                    }
                },
                _ => {}
            }
            inp.skip();
            skipped += 1;
        }
        if skipped == 0 {
            return Err(E::at(inp.span_since(&start)));
        }
        Ok(())
    })
}

/// A group `open ... close` skipped whole, nested groups included: what replaces a group whose
/// contents do not parse.
pub(super) fn skip_group<'a, E: GrammarError<'a>>(open: Punct) -> impl Parser<'a, Input<'a>, (), extra::Err<E>> + Clone {
    use Punct::*;
    let others = match open {
        LParen => [LBracket, LBrace],
        LBracket => [LParen, LBrace],
        _ => [LParen, LBracket],
    }
    .map(|o| (Tok::Punct(o), Tok::Punct(o.closer())));
    nested_delimiters(Tok::Punct(open), Tok::Punct(open.closer()), others, |_| ())
}
