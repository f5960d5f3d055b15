//! Layout: which line breaks end a statement, decided once over the tokens so that the grammar
//! (chumsky) sees a plain token stream in which a `Newline` token always means "end of line".
//!
//! The rules, as DL has always had them:
//! - inside `( )` and `[ ]` a line break means nothing; at top level and inside `{ }` it ends a
//!   statement (a `{` inside parentheses starts a block, where lines matter again);
//! - a line that starts with `|>`, `and`, `or` or `else` continues the line before, and so does
//!   a line after one that ends with `=`, `|>`, `and`, `or` or `else`;
//! - blank lines collapse into one break.
//!
//! It also finds delimiters that are never closed (E0104, reported at the opener): at the end of
//! the file, and where a line at column 1 starts a new item while a group is still open: `fn`,
//! `use`, `train`, `infer`, `model Name` and `data name` close every open group (they never
//! stand inside braces), `let` and `evaluate` the `( )` and `[ ]` inside the nearest `{ }`; a
//! line that starts a new statement no deeper than the line that opened a `( )` or `[ ]` (see
//! `dangling`); and a `}` whose block still holds an open `( )` or `[ ]`. Each is reported at its
//! opener. The parser's own errors at those points are consequences of the same mistake and are
//! dropped (`quiet`).

use super::token::{Kw, Punct, Tok, Token};
use crate::diag::Diagnostic;
use crate::span::Span;
use chumsky::span::SimpleSpan;

pub struct Layout {
    /// The tokens the grammar parses, with byte spans; no trailing `Eof` (chumsky has its own).
    pub tokens: Vec<(Tok, SimpleSpan)>,
    /// E0104 for delimiters left open, E0106 for groups nested too deep.
    pub diags: Vec<Diagnostic>,
    /// Byte ranges at which a parse error only restates an unclosed delimiter.
    pub quiet: Vec<(u32, u32)>,
}

struct Open {
    punct: Punct,
    span: Span,
    /// The indentation of the line it was opened on.
    indent: u32,
}

pub fn layout(mut toks: Vec<Token>) -> Layout {
    let mut out: Vec<(Tok, SimpleSpan)> = Vec::with_capacity(toks.len());
    let mut stack: Vec<Open> = vec![];
    let mut diags = vec![];
    let mut quiet = vec![];
    let simple = |s: Span| SimpleSpan::from(s.start as usize..s.end as usize);
    // The indentation of the current line (the file's first line counts as unindented).
    let mut indent = 0u32;
    let mut i = 0;
    while i < toks.len() {
        let span = toks[i].span;
        match toks[i].tok {
            Tok::Eof => break,
            // A run of line breaks is decided at its last one (the others are blank lines).
            Tok::Newline if matches!(toks.get(i + 1).map(|t| &t.tok), Some(Tok::Newline)) => {}
            Tok::Newline => {
                let next = &toks[(i + 1).min(toks.len() - 1)];
                let item = starts_item(&toks, i);
                // A new item at column 1: the groups opened before it were never closed (for
                // `let`, which also starts statements inside blocks, only `( )` and `[ ]`).
                let next_indent = next.span.start.saturating_sub(span.end);
                let unclosed = match item {
                    ItemStart::No => dangling(&stack, out.last().map(|(t, _)| t), &next.tok, next_indent),
                    ItemStart::Let => stack.len() - stack.iter().rposition(|o| o.punct == Punct::LBrace).map_or(0, |k| k + 1),
                    ItemStart::Definition => stack.len(),
                };
                if unclosed > 0 {
                    let last_end = out.last().map(|(_, s)| s.end).unwrap_or(0);
                    quiet.push((last_end as u32, next.span.start));
                    let open: Vec<Open> = stack.drain(stack.len() - unclosed..).rev().collect();
                    close_all(&open, last_end, &mut out, &mut diags);
                }
                let significant = !in_group(&stack);
                let continues = matches!(next.tok, Tok::Punct(Punct::Pipe) | Tok::Kw(Kw::And | Kw::Or | Kw::Else));
                // A line that ends with `=`, `else`, `|>`, `and` or `or` goes on below, unless a
                // new item starts there.
                let open_ended = item == ItemStart::No
                    && matches!(out.last(), Some((Tok::Punct(Punct::Eq | Punct::Pipe) | Tok::Kw(Kw::Else | Kw::And | Kw::Or), _)));
                let repeated = matches!(out.last(), Some((Tok::Newline, _)) | None);
                if significant && !continues && !open_ended && !repeated {
                    out.push((Tok::Newline, simple(span)));
                }
                indent = next_indent;
            }
            Tok::Punct(p @ (Punct::LParen | Punct::LBracket | Punct::LBrace)) if stack.len() >= MAX_NESTING => {
                // Deeper than any program needs, and deep enough to exhaust the stack of the
                // stages after the parser: the group is reported and parsed as empty.
                diags.push(
                    Diagnostic::error("E0106", format!("delimiters nested more than {MAX_NESTING} deep"), span)
                        .with_label("this group is one too deep")
                        .with_help("split the expression with `let`"),
                );
                let close = p.closer();
                let skipped_to = group_end(&toks, i);
                out.push((Tok::Punct(p), simple(span)));
                let end = toks.get(skipped_to).map(|t| t.span).unwrap_or(span);
                out.push((Tok::Punct(close), SimpleSpan::from(end.start as usize..end.start as usize)));
                quiet.push((span.start, end.end));
                i = skipped_to;
            }
            Tok::Punct(p @ (Punct::LParen | Punct::LBracket | Punct::LBrace)) => {
                stack.push(Open { punct: p, span, indent });
                out.push((Tok::Punct(p), simple(span)));
            }
            Tok::Punct(p @ (Punct::RParen | Punct::RBracket | Punct::RBrace)) => {
                let opener = p.opener();
                // Close the matching group; a mismatched closer closes the innermost one (the parser
                // reports the mismatch), so that one wrong bracket does not change the layout of the
                // rest of the file.
                match stack.iter().rposition(|o| o.punct == opener) {
                    // A `}` with a `(` or `[` still open inside its block: that one was never
                    // closed (reported at its opener); the block itself ends here as written.
                    Some(k) if p == Punct::RBrace && k + 1 < stack.len() => {
                        let last_end = out.last().map(|(_, s)| s.end).unwrap_or(0);
                        quiet.push((last_end as u32, span.end));
                        let open: Vec<Open> = stack.drain(k + 1..).rev().collect();
                        close_all(&open, last_end, &mut out, &mut diags);
                        stack.truncate(k);
                    }
                    Some(k) => stack.truncate(k),
                    None => {
                        stack.pop();
                    }
                }
                out.push((Tok::Punct(p), simple(span)));
            }
            // Moved, not cloned: names and strings own their text.
            _ => out.push((std::mem::replace(&mut toks[i].tok, Tok::Newline), simple(span))),
        }
        i += 1;
    }
    // Trailing line breaks carry nothing.
    while matches!(out.last(), Some((Tok::Newline, _))) {
        out.pop();
    }
    if !stack.is_empty() {
        let last_end = out.last().map(|(_, s)| s.end).unwrap_or(0);
        let eof = toks.last().map(|t| t.span.end).unwrap_or(0);
        quiet.push((last_end as u32, eof));
        stack.reverse();
        close_all(&stack, last_end, &mut out, &mut diags);
    }
    Layout { tokens: out, diags, quiet }
}

/// Close the groups `open` (innermost first) with zero-width closers at `at`, so that the parser
/// sees whole groups and keeps what they hold; report them as one E0104 at the innermost opener.
fn close_all(open: &[Open], at: usize, out: &mut Vec<(Tok, SimpleSpan)>, unclosed: &mut Vec<Diagnostic>) {
    for o in open {
        out.push((Tok::Punct(o.punct.closer()), SimpleSpan::from(at..at)));
    }
    let Some((first, rest)) = open.split_first() else { return };
    let mut d = unclosed_at(first);
    // The others that end at the same place, outermost last; a few are enough to see the pattern.
    for o in rest.iter().take(3) {
        d = d.with_secondary(o.span, format!("`{}` also never closed", o.punct.as_str()));
    }
    if rest.len() > 3 {
        d = d.with_note(format!("{} more delimiters are never closed", rest.len() - 3));
    }
    unclosed.push(d);
}

/// The deepest nesting of delimiters the parser accepts.
pub const MAX_NESTING: usize = 256;

/// The index of the token that closes the group opened at `open` (or of the `Eof`); the caller
/// resumes after it.
fn group_end(toks: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().skip(open) {
        match t.tok {
            Tok::Punct(Punct::LParen | Punct::LBracket | Punct::LBrace) => depth += 1,
            Tok::Punct(Punct::RParen | Punct::RBracket | Punct::RBrace) => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            Tok::Eof => return k,
            _ => {}
        }
    }
    toks.len().saturating_sub(1)
}

/// How many of the innermost `( )` and `[ ]` groups a line ends that goes on as a new statement:
/// the line before ends a value (not with `,`, an operator or an opener), the line starts with
/// no operator, and it is indented no deeper than the lines that opened them. `fc = Linear(4, 2`
/// followed by `g = Linear(2, 2)` inside a model is one unclosed `(`, not one long call.
fn dangling(stack: &[Open], before: Option<&Tok>, next: &Tok, indent: u32) -> usize {
    let ends_value = match before {
        Some(Tok::Punct(p)) => matches!(p, Punct::RParen | Punct::RBracket | Punct::RBrace),
        Some(Tok::Kw(k)) => matches!(k, Kw::True | Kw::False | Kw::Auto),
        Some(Tok::Newline) | None => false,
        Some(_) => true,
    };
    let starts_statement = match next {
        Tok::Punct(p) => matches!(p, Punct::LParen | Punct::LBracket),
        Tok::Kw(k) => !matches!(k, Kw::And | Kw::Or | Kw::Else | Kw::By | Kw::As | Kw::Every),
        Tok::Eof | Tok::Newline => false,
        _ => true,
    };
    if !in_group(stack) || !ends_value || !starts_statement {
        return 0;
    }
    stack.iter().rev().take_while(|o| o.punct != Punct::LBrace && o.indent >= indent).count()
}

/// Inside a `( )` or `[ ]` that is not itself inside a nearer `{ }`.
fn in_group(stack: &[Open]) -> bool {
    matches!(stack.last(), Some(o) if o.punct != Punct::LBrace)
}

fn unclosed_at(open: &Open) -> Diagnostic {
    Diagnostic::error("E0104", format!("unclosed delimiter `{}`", open.punct.as_str()), open.span)
        .with_label("opened here and never closed")
        .with_help(format!("add `{}`", open.punct.closer().as_str()))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ItemStart {
    No,
    /// `let` or `evaluate`: an item at top level, but also a statement or a clause inside braces.
    Let,
    /// `fn`, `use`, `train`, `infer`, `model Name`, `data name`: never inside braces.
    Definition,
}

/// Whether the line after the newline at `i` starts, at column 1, with an item keyword.
fn starts_item(toks: &[Token], i: usize) -> ItemStart {
    let Some(first) = toks.get(i + 1) else { return ItemStart::No };
    if first.span.start != toks[i].span.end {
        return ItemStart::No; // indented, or another blank line
    }
    match &first.tok {
        Tok::Kw(Kw::Let | Kw::Evaluate) => ItemStart::Let,
        Tok::Kw(Kw::Fn | Kw::Use | Kw::Train | Kw::Infer) => ItemStart::Definition,
        Tok::Kw(Kw::Model | Kw::Data) if matches!(toks.get(i + 2).map(|t| &t.tok), Some(Tok::Ident(_))) => ItemStart::Definition,
        _ => ItemStart::No,
    }
}
