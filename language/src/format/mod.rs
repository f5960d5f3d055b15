//! `dlc fmt`: DL's one layout, from source text to source text.
//!
//! The formatter works on the tokens and comments of a file that parses, nested in their
//! brackets ([`tree`]), with what only the syntax tree knows beside them ([`facts`]): which `-`
//! negates, which braces hold an item's body. It changes only what lies between tokens, drops
//! the `;` and `,` that separate statements and members (each goes on its own line instead), and
//! then checks that the result is the same program: the same tokens, the same statement breaks,
//! the same comments in the same order (otherwise it refuses, [`FormatError::Internal`]).
//!
//! The layout:
//! - one statement, member or recipe entry a line, indented two spaces a level; at most one blank
//!   line between them, none at the start or end of a block or the file;
//! - one space around binary operators, `=`, `->`, `=>`, `|>`, after `,` and `:`, and inside a
//!   one-line block `{ x }`; none inside `( )` and `[ ]`, around `.`, after `-` that negates,
//!   around a slice's `:` (`x[1:, :T]`), before a call's `(` or an index's `[`;
//! - the body of a `model`, recipe, `fn`, method or `step` is always one entry a line; another
//!   block stays on one line if it was written on one line and holds one statement;
//! - a line break inside `( )` or `[ ]` is kept (tensor literals and long argument lists stay as
//!   written): the next line aligns after the bracket, or goes two spaces in from the bracket's
//!   line when the bracket ends it;
//! - a statement's continuation lines (after `=`, `and`, `or`, around `|>`) are joined when the
//!   statement then fits in [`WIDTH`] characters; otherwise a pipeline goes one `|>` stage a
//!   line, two spaces in (a break after `=` before it dropped), and other continuations stay as
//!   written, two spaces in; `else` always follows its `}`;
//! - a recipe's consecutive fields are aligned at `=`;
//! - own-line comments keep their line, at the indentation of what follows; a comment after code
//!   stays there, two spaces after it;
//! - `# fmt: off` ... `# fmt: on` (own-line comments at top level) leave what lies between as
//!   written.

mod facts;
mod out;
mod render;
mod space;
mod tree;

pub use render::WIDTH;

use crate::diag::Diagnostic;
use crate::span::FileId;
use crate::syntax::layout::layout;
use crate::syntax::lexer::lex_with_trivia;
use crate::syntax::token::{Punct, Tok};
use crate::syntax::trivia::TriviaKind;

#[derive(Debug)]
pub enum FormatError {
    /// The file does not parse: the parser's diagnostics. A file with syntax errors is never
    /// formatted.
    Syntax(Vec<Diagnostic>),
    /// The layout would have changed the program (a formatter bug); the file is left as it is.
    Internal(String),
}

/// `src` in DL's layout. `file` is the file id the diagnostics of a syntax error point into.
pub fn format(file: FileId, src: &str) -> Result<String, FormatError> {
    let (program, diags) = crate::syntax::parse(file, src);
    let errors: Vec<Diagnostic> = diags.into_iter().filter(|d| d.is_error()).collect();
    if !errors.is_empty() {
        return Err(FormatError::Syntax(errors));
    }
    let facts = facts::Facts::of(&program);
    let entries = tree::build(src, &facts);
    let out = render::Renderer::new(&facts).file(&entries);
    if statements(src) != statements(&out) {
        return Err(FormatError::Internal("the formatted text parses to a different program".into()));
    }
    if comments(src) != comments(&out) {
        return Err(FormatError::Internal("the formatted text lost or reordered a comment".into()));
    }
    Ok(out)
}

/// What the grammar sees of a file: its tokens after layout, with every statement separator
/// (a line break that ends a statement, `;`, a `,` between a block's members) one `Newline`,
/// and none where the grammar skips them (after `{`, before `}`, at either end).
fn statements(src: &str) -> Vec<Tok> {
    let tokens = layout(lex_with_trivia(FileId(0), src).tokens).tokens;
    let mut out: Vec<Tok> = vec![];
    let mut open: Vec<Punct> = vec![];
    for (tok, _) in tokens {
        let tok = match tok {
            Tok::Punct(Punct::Semi) => Tok::Newline,
            Tok::Punct(Punct::Comma) if open.last() == Some(&Punct::LBrace) => Tok::Newline,
            Tok::Punct(p @ (Punct::LParen | Punct::LBracket | Punct::LBrace)) => {
                open.push(p);
                tok
            }
            Tok::Punct(Punct::RParen | Punct::RBracket | Punct::RBrace) => {
                open.pop();
                if out.last() == Some(&Tok::Newline) {
                    out.pop();
                }
                tok
            }
            tok => tok,
        };
        let skip = tok == Tok::Newline && matches!(out.last(), None | Some(Tok::Newline | Tok::Punct(Punct::LBrace)));
        if !skip {
            out.push(tok);
        }
    }
    if out.last() == Some(&Tok::Newline) {
        out.pop();
    }
    out
}

/// The text of every comment, in order.
fn comments(src: &str) -> Vec<String> {
    let lexed = lex_with_trivia(FileId(0), src);
    lexed.trivia.iter().filter(|t| t.kind == TriviaKind::Comment).map(|t| src[t.span.range()].trim_end().to_string()).collect()
}

#[cfg(test)]
mod tests;
