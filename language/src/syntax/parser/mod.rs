//! The parser: chumsky combinators over the token stream that [`layout`](super::layout) prepared.
//!
//! - `item.rs` builds the grammar of a file (once per parse) from `expr.rs` (atoms and postfixes),
//!   `operators.rs` (chumsky's pratt parser), `block.rs` (blocks and statements), `types.rs` and
//!   `tokens.rs` (the terminals).
//! - `error.rs` is the error type chumsky builds while it tries alternatives, and its message.
//! - `recover.rs` holds the recovery strategies: a failed statement, item, member or recipe entry
//!   skips to the end of its line (nested groups skipped whole); a group whose contents do not
//!   parse becomes an error node (`nested_delimiters`); a definition whose value does not parse
//!   keeps its name with an error value, so the checker can go on with the rest.
//!
//! One run reports every syntax error of a file and never panics.

mod block;
mod error;
mod expr;
mod item;
mod operators;
mod recover;
mod tokens;
mod types;

use super::ast::Program;
use super::layout::layout;
use super::lexer::lex_with_trivia;
use super::token::Tok;
use crate::diag::Diagnostic;
use crate::span::{FileId, Span};
use chumsky::error::EmptyErr;
use chumsky::input::{Input as _, MappedInput};
use chumsky::prelude::*;
use error::SyntaxError;
use std::collections::HashSet;

/// What the grammar parses: tokens with their byte spans.
pub(crate) type Input<'a> = MappedInput<'a, Tok, SimpleSpan, &'a [(Tok, SimpleSpan)]>;

/// Parse one file. Always returns a program (partial where there were errors: what parsed is
/// there, what did not is an error node) and every diagnostic found.
pub fn parse(file: FileId, src: &str) -> (Program, Vec<Diagnostic>) {
    let lexed = lex_with_trivia(file, src);
    let laid = layout(lexed.tokens);
    // "found end of file" points just after the last token, as rustc does, not at a line of
    // its own after the trailing line breaks.
    let end = laid.tokens.last().map_or(0, |(_, s)| s.end);
    let eoi = SimpleSpan::from(end..end);
    let input = || laid.tokens.as_slice().split_token_span(eoi);
    // The fast pass: errors that carry nothing. A file without syntax errors is done here.
    let (items, errors) = item::program::<EmptyErr>(file, &laid.tokens).parse(input()).into_output_errors();
    let (items, errors) = match items {
        Some(items) if errors.is_empty() => (Some(items), vec![]),
        _ => item::program::<SyntaxError>(file, &laid.tokens).parse(input()).into_output_errors(),
    };
    let mut diags = lexed.diags;
    // All of this is linear in the number of errors: a file that is not DL at all can have
    // hundreds of thousands.
    let line_starts: Vec<u32> = std::iter::once(0).chain(src.match_indices('\n').map(|(i, _)| i as u32 + 1)).collect();
    let line_of = |off: u32| line_starts.partition_point(|&s| s <= off);
    let lexed_lines: HashSet<usize> = diags.iter().map(|d| line_of(d.primary_span().start)).collect();
    diags.extend(laid.diags);
    let mut seen: HashSet<(Span, &'static str)> = diags.iter().map(|d| (d.primary_span(), d.code)).collect();
    for e in errors {
        let d = e.into_diagnostic(file, &laid.tokens);
        let at = d.primary_span().start;
        // A bad character or literal already explains its line (`3 & 4` is one mistake, not two),
        // and an unclosed delimiter explains the errors where the parser ran out of its group.
        if lexed_lines.contains(&line_of(at)) || laid.quiet.iter().any(|&(a, b)| a <= at && at <= b) {
            continue;
        }
        // Two failures at one token say the same thing twice; keep the first.
        if seen.insert((d.primary_span(), d.code)) {
            diags.push(d);
        }
    }
    let mut program = Program { items: items.unwrap_or_default(), trivia: lexed.trivia };
    crate::syntax::depth::limit_depth(&mut program, &mut diags);
    (program, diags)
}

#[cfg(test)]
mod tests;
