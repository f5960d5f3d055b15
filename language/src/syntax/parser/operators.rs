//! The operators, with chumsky's pratt parser. Loosest first: `|>`, `or`, `and`, `not`,
//! comparisons (which do not chain: `a < b < c` is a named error), `+ -`, `* / // % @`, unary
//! `-`, `**` (right-associative).

use super::error::GrammarError;
use super::expr::error_node;
use super::tokens::{at, kw, punct, Spans, P};
use crate::diag::Diagnostic;
use crate::span::Span;
use crate::syntax::ast::*;
use crate::syntax::token::{Kw, Punct, Tok};
use chumsky::pratt::{infix, left, prefix, right};
use chumsky::prelude::*;

fn is_comparison(op: BinOp) -> bool {
    matches!(op, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge)
}

/// Operators over `operand` (an atom with its postfixes).
pub(super) fn operators<'a, E: GrammarError<'a>>(sp: Spans, tokens: &'a [(Tok, SimpleSpan)], operand: P<'a, E, Expr>) -> P<'a, E, Expr> {
    // The operands travel boxed: pratt hands the left operand through every operator it tries,
    // and a pointer moves faster than a whole `Expr` (a tenth of the parse time with it unboxed).
    let binary =
        move |l: Box<Expr>, op: BinOp, r: Box<Expr>, e: &mut chumsky::input::MapExtra<'a, '_, super::Input<'a>, super::tokens::Ex<E>>| {
            Box::new(Expr { kind: ExprKind::Binary(op, l, r), span: sp.of(e.span()) })
        };
    // One token test per precedence level (not one per operator): the operators are tried after
    // every operand, so this is the parser's hottest spot.
    let comparison = select_ref! {
        Tok::Punct(Punct::EqEq) => BinOp::Eq,
        Tok::Punct(Punct::NotEq) => BinOp::Ne,
        Tok::Punct(Punct::Le) => BinOp::Le,
        Tok::Punct(Punct::Ge) => BinOp::Ge,
        Tok::Punct(Punct::Lt) => BinOp::Lt,
        Tok::Punct(Punct::Gt) => BinOp::Gt,
    }
    .map_with(move |op, e| (op, sp.of(e.span())));
    let sum = select_ref! { Tok::Punct(Punct::Plus) => BinOp::Add, Tok::Punct(Punct::Minus) => BinOp::Sub };
    let product = select_ref! {
        Tok::Punct(Punct::Star) => BinOp::Mul,
        Tok::Punct(Punct::Slash) => BinOp::Div,
        Tok::Punct(Punct::SlashSlash) => BinOp::FloorDiv,
        Tok::Punct(Punct::Percent) => BinOp::Mod,
        Tok::Punct(Punct::At) => BinOp::MatMul,
    };
    operand
        .map(Box::new)
        .pratt((
            infix(left(1), punct(Punct::Pipe), move |l, _, r, e| Box::new(Expr { kind: ExprKind::Pipe(l, r), span: sp.of(e.span()) })),
            infix(left(2), kw(Kw::Or).to(BinOp::Or), binary),
            infix(left(3), kw(Kw::And).to(BinOp::And), binary),
            prefix(4, at(kw(Kw::Not), sp), move |_, x: Box<Expr>, e| {
                Box::new(Expr { kind: ExprKind::Unary(UnOp::Not, x), span: sp.of(e.span()) })
            }),
            infix(left(5), comparison, move |l: Box<Expr>, (op, op_span): (BinOp, Span), r, e| {
                if let Some(first) = chained(&l, tokens, sp) {
                    e.emit(E::named(
                        Diagnostic::error("E0101", "comparison operators cannot be chained", op_span)
                            .with_label("second comparison")
                            .with_secondary(first, "first comparison")
                            .with_help("split it: `a < b and b < c`"),
                    ));
                    return Box::new(error_node(sp.of(e.span())));
                }
                binary(l, op, r, e)
            }),
            infix(left(6), sum, binary),
            infix(left(7), product, binary),
            prefix(8, punct(Punct::Minus), move |_, x: Box<Expr>, e| {
                Box::new(Expr { kind: ExprKind::Unary(UnOp::Neg, x), span: sp.of(e.span()) })
            }),
            infix(right(9), punct(Punct::StarStar).to(BinOp::Pow), binary),
        ))
        .map(|e| *e)
        .boxed()
}

/// If `l` is itself an unparenthesised comparison, the span of its operator.
fn chained(l: &Expr, tokens: &[(Tok, SimpleSpan)], sp: Spans) -> Option<Span> {
    let ExprKind::Binary(op, a, b) = &l.kind else { return None };
    if !is_comparison(*op) || l.span != a.span.to(b.span) {
        return None;
    }
    let from = tokens.partition_point(|(_, s)| s.start < a.span.end as usize);
    let between = tokens[from..]
        .iter()
        .take_while(|(_, s)| s.end <= b.span.start as usize)
        .find(|(t, _)| matches!(t, Tok::Punct(Punct::EqEq | Punct::NotEq | Punct::Lt | Punct::Le | Punct::Gt | Punct::Ge)));
    Some(between.map(|(_, s)| sp.of(*s)).unwrap_or(l.span))
}
