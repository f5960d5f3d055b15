//! Blocks and statements: `{ ... }` holds one statement per line (or `;`), each recovered on its
//! own, and its last expression statement is the block's value.

use super::error::{Expect, GrammarError};
use super::expr::{error_node, P2};
use super::recover::{skip_group, skip_line};
use super::tokens::{at, kw, line_end, name, punct, seps, Spans, P};
use crate::diag::Diagnostic;
use crate::syntax::ast::*;
use crate::syntax::token::{Kw, Punct};
use chumsky::prelude::*;

/// A statement; `in_step`: in a recipe's `step` block, where `update` and `log` belong.
pub(super) fn statement<'a, E: GrammarError<'a>>(sp: Spans, expr: &P2<'a, E>, rhs: &P<'a, E, Expr>, in_step: bool) -> P<'a, E, Stmt> {
    let let_ = kw(Kw::Let)
        .ignore_then(name(sp).labelled(Expect::Name))
        .then_ignore(punct(Punct::Eq))
        .then(rhs.clone())
        .map(|(n, e)| Stmt::Let(n, e));
    // `update` parses anywhere so that misplacing it is reported as such (E0310), whether or
    // not the code is ever called; `log` stays an ordinary name outside `step` blocks (it is
    // also the logarithm).
    let update = at(kw(Kw::Update), sp).then(expr.clone()).then_ignore(kw(Kw::By)).then(expr.clone()).validate(
        move |((start, target), grads), _, emitter| {
            let span = start.to(grads.span);
            if !in_step {
                emitter.emit(E::named(
                    Diagnostic::error("E0310", "`update` statements belong in a `step` block of a `train` recipe", span)
                        .with_label("not allowed here")
                        .with_help(
                            "compute new values with an expression here; parameters are updated by a recipe's optimiser or `step` block",
                        ),
                ));
            }
            Stmt::Update { target, grads, span }
        },
    );
    let expr_stmt = expr.clone().map(Stmt::Expr);
    if in_step {
        let log = at(kw(Kw::Log), sp).then(expr.clone()).map(|(start, e)| {
            let span = start.to(e.span);
            Stmt::Log(e, span)
        });
        choice((let_.boxed(), update.boxed(), log.boxed(), expr_stmt.boxed())).boxed()
    } else {
        choice((let_.boxed(), update.boxed(), expr_stmt.boxed())).boxed()
    }
}

/// `{ line* }` where each line is one statement, member or entry, recovered on its own (with
/// `comma`, lines may also end with a `,`). A line followed by something else keeps its tree; the
/// rest of the line is skipped.
pub(super) fn braced_lines<'a, E: GrammarError<'a>, T: Clone + 'a>(line: P<'a, E, T>, comma: bool) -> P<'a, E, Vec<T>> {
    let end = line_end(comma).recover_with(via_parser(skip_line(false)));
    let line = line.then_ignore(end).map(Some).recover_with(via_parser(skip_line(false).to(None)));
    punct(Punct::LBrace)
        .ignore_then(seps().ignore_then(line).repeated().collect::<Vec<_>>())
        .then_ignore(seps())
        .then_ignore(punct(Punct::RBrace))
        .map(|lines| lines.into_iter().flatten().collect())
        .boxed()
}

/// `{ statement* }`, whose last expression statement is its value; a block whose braces hold
/// something unparseable is one error node.
pub(super) fn block_of<'a, E: GrammarError<'a>>(sp: Spans, stmt: P<'a, E, Stmt>) -> P<'a, E, Expr> {
    braced_lines(stmt, false)
        .map_with(move |mut stmts, e| {
            let tail = match stmts.pop() {
                Some(Stmt::Expr(t)) => Some(Box::new(t)),
                Some(other) => {
                    stmts.push(other);
                    None
                }
                None => None,
            };
            Expr { kind: ExprKind::Block(stmts, tail), span: sp.of(e.span()) }
        })
        .recover_with(via_parser(skip_group(Punct::LBrace).map_with(move |_, e| error_node(sp.of(e.span())))))
        .boxed()
}
