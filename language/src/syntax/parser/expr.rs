//! Expressions: atoms, postfix calls/indexing/fields, `if`, lambdas, `checkpoint { }` and
//! `precision bf16 { }`; the operators are in `operators.rs`, blocks and statements in `block.rs`.

use super::block::{block_of, statement};
use super::error::{Expect, GrammarError};
use super::operators::operators;
use super::recover::{skip_group, skip_line};
use super::tokens::{at, followed_by_end, kw, name, punct, Spans, P};
use super::types::{tensor_type, type_expr};
use crate::diag::Diagnostic;
use crate::span::Span;
use crate::syntax::ast::*;
use crate::syntax::token::{Kw, Punct, Tok};
use chumsky::prelude::*;
use std::rc::Rc;

/// The expression-level parsers the items are built from.
pub(super) struct Exprs<'a, E: GrammarError<'a>> {
    pub expr: P<'a, E, Expr>,
    /// An expression that must end its line; if it does not parse, an error node standing for the
    /// rest of the line (so `let x = <bad>` still defines `x`).
    pub rhs: P<'a, E, Expr>,
    pub block: P<'a, E, Expr>,
    /// A `step` block: `update` and `log` statements allowed.
    pub step_block: P<'a, E, Expr>,
    pub params: P<'a, E, Vec<Param>>,
}

/// What stands for something that did not parse (already reported); later stages skip it.
pub(super) fn error_node(span: Span) -> Expr {
    Expr { kind: ExprKind::Error, span }
}

pub(super) fn exprs<'a, E: GrammarError<'a>>(sp: Spans, tokens: &'a [(Tok, SimpleSpan)]) -> Exprs<'a, E> {
    let mut expr = Recursive::declare();
    let mut block = Recursive::declare();
    let mut if_expr = Recursive::declare();
    let rhs = expr
        .clone()
        .then_ignore(followed_by_end())
        .recover_with(via_parser(skip_line(false).map_with(move |_, e| error_node(sp.of(e.span())))))
        .boxed();

    block.define(block_of(sp, statement(sp, &expr, &rhs, false)));
    let step_block = block_of(sp, statement(sp, &expr, &rhs, true));

    if_expr.define(
        at(kw(Kw::If), sp)
            .then(expr.clone())
            .then(block.clone())
            .then(kw(Kw::Else).ignore_then(choice((if_expr.clone(), block.clone()))).or_not())
            .validate(move |(((start, cond), then), other), _, emitter| match other {
                Some(other) => Expr { span: start.to(other.span), kind: ExprKind::If(Box::new(cond), Box::new(then), Box::new(other)) },
                None => {
                    emitter.emit(E::named(
                        Diagnostic::error("E0101", "`if` needs an `else` branch", then.span)
                            .with_label("this branch has no `else`")
                            .with_help("DL's `if` is an expression: both branches give a value"),
                    ));
                    error_node(start.to(then.span))
                }
            }),
    );

    let atom = atom(sp, &expr, &block, &if_expr);
    let postfix = postfix(sp, atom, &expr);
    expr.define(operators(sp, tokens, postfix).labelled(Expect::Expression));

    let params = params(sp, &expr);
    Exprs { expr: expr.boxed(), rhs, block: block.boxed(), step_block, params }
}

/// `(name[: type][= default], ...)`.
fn params<'a, E: GrammarError<'a>>(sp: Spans, expr: &P2<'a, E>) -> P<'a, E, Vec<Param>> {
    let param = name(sp)
        .labelled(Expect::ParamName)
        .then(punct(Punct::Colon).ignore_then(type_expr(sp)).or_not())
        .then(punct(Punct::Eq).ignore_then(expr.clone()).or_not())
        .map_with(move |((name, ty), default), e| Param { name, ty, default, span: sp.of(e.span()) });
    param
        .separated_by(punct(Punct::Comma))
        .allow_trailing()
        .collect::<Vec<_>>()
        .delimited_by(punct(Punct::LParen), punct(Punct::RParen))
        .recover_with(via_parser(skip_group(Punct::LParen).to(vec![])))
        .boxed()
}

fn atom<'a, E: GrammarError<'a>>(sp: Spans, expr: &P2<'a, E>, block: &P2<'a, E>, if_expr: &P2<'a, E>) -> P<'a, E, Expr> {
    let ident = name(sp);
    let literal = select_ref! {
        Tok::Int(v) => ExprKind::Int(*v),
        Tok::Float(v) => ExprKind::Float(*v),
        Tok::Str(s) => ExprKind::Str(s.clone()),
        Tok::Kw(Kw::True) => ExprKind::Bool(true),
        Tok::Kw(Kw::False) => ExprKind::Bool(false),
        Tok::Kw(Kw::Auto) => ExprKind::Auto,
    }
    .map_with(move |kind, e| Expr { kind, span: sp.of(e.span()) });
    // `precision bf16 { ... }`: `precision` followed by a word cannot be anything else.
    let precision = select_ref! { Tok::Ident(n) if n == "precision" => () }
        .ignore_then(select_ref! {
            Tok::DType(d) = e => Ident { name: d.to_string(), span: sp.of(e.span()) },
            Tok::Ident(n) = e => Ident { name: n.clone(), span: sp.of(e.span()) },
        })
        .then(block.clone())
        .map_with(move |(word, body), e| Expr { kind: ExprKind::Precision(word, Box::new(body)), span: sp.of(e.span()) });
    let checkpoint = kw(Kw::Checkpoint)
        .ignore_then(block.clone())
        .map_with(move |body, e| Expr { kind: ExprKind::Checkpoint(Box::new(body)), span: sp.of(e.span()) });
    // A name, or a one-parameter lambda `x => body`.
    let name_or_lambda =
        ident.clone().then(punct(Punct::FatArrow).ignore_then(expr.clone()).or_not()).map_with(move |(id, body), e| match body {
            Some(body) => Expr { kind: ExprKind::Lambda(vec![id], Rc::new(body)), span: sp.of(e.span()) },
            None => Expr { kind: ExprKind::Name(id.name), span: id.span },
        });
    let type_atom = tensor_type(sp).map(|ty| Expr { span: ty.span, kind: ExprKind::Type(ty) });
    let list = expr
        .clone()
        .separated_by(punct(Punct::Comma))
        .allow_trailing()
        .collect::<Vec<_>>()
        .delimited_by(punct(Punct::LBracket), punct(Punct::RBracket))
        .map_with(move |elems, e| Expr { kind: ExprKind::List(elems), span: sp.of(e.span()) })
        .recover_with(via_parser(skip_group(Punct::LBracket).map_with(move |_, e| error_node(sp.of(e.span())))));
    choice((
        // `precision` and `checkpoint` are names unless a block follows; one token test keeps
        // them off the path of every other name.
        select_ref! { Tok::Ident(n) if n == "precision" => (), Tok::Kw(Kw::Checkpoint) => () }
            .rewind()
            .ignore_then(choice((precision.boxed(), checkpoint.boxed())))
            .boxed(),
        name_or_lambda.boxed(),
        literal.boxed(),
        type_atom,
        paren(sp, expr),
        list.boxed(),
        block.clone().boxed(),
        if_expr.clone().boxed(),
    ))
    .labelled(Expect::Expression)
    .boxed()
}

pub(super) type P2<'a, E> = Recursive<chumsky::recursive::Indirect<'a, 'a, super::Input<'a>, Expr, super::tokens::Ex<E>>>;

/// `( ... )`: unit, a parenthesised expression, a tuple, a record, or a lambda's parameters.
fn paren<'a, E: GrammarError<'a>>(sp: Spans, expr: &P2<'a, E>) -> P<'a, E, Expr> {
    let unit = punct(Punct::RParen).rewind().to(ExprKind::Tuple(vec![]));
    let record = name(sp)
        .then_ignore(punct(Punct::Colon))
        .then(expr.clone())
        .separated_by(punct(Punct::Comma))
        .allow_trailing()
        .at_least(1)
        .collect::<Vec<_>>()
        .map(ExprKind::Record);
    let elems = expr
        .clone()
        .then(punct(Punct::Comma).ignore_then(expr.clone()).repeated().collect::<Vec<_>>())
        .then(punct(Punct::Comma).or_not())
        .map(|((first, mut rest), trailing)| {
            if rest.is_empty() && trailing.is_none() {
                // A parenthesised expression keeps the span of its parentheses so labels cover them.
                let mut first = first;
                std::mem::replace(&mut first.kind, ExprKind::Error)
            } else {
                rest.insert(0, first);
                ExprKind::Tuple(rest)
            }
        });
    let group = punct(Punct::LParen)
        .ignore_then(choice((unit.boxed(), record.boxed(), elems.boxed())))
        .then_ignore(punct(Punct::RParen))
        .map_with(move |kind, e| Expr { kind, span: sp.of(e.span()) })
        .recover_with(via_parser(skip_group(Punct::LParen).map_with(move |_, e| error_node(sp.of(e.span())))));
    group
        .then(at(punct(Punct::FatArrow), sp).then(expr.clone()).or_not())
        .validate(move |(group, lambda), e, emitter| {
            let Some((arrow, body)) = lambda else { return group };
            let span = sp.of(e.span());
            let as_param = |x: &Expr| match &x.kind {
                ExprKind::Name(n) => Some(Ident { name: n.clone(), span: x.span }),
                _ => None,
            };
            let params = match &group.kind {
                ExprKind::Tuple(elems) => elems.iter().map(as_param).collect::<Option<Vec<_>>>(),
                ExprKind::Name(n) => Some(vec![Ident { name: n.clone(), span: group.span }]),
                _ => None,
            };
            match params {
                Some(params) => Expr { kind: ExprKind::Lambda(params, Rc::new(body)), span },
                None => {
                    emitter.emit(E::named(
                        Diagnostic::error("E0101", "lambda parameters must be plain names", group.span)
                            .with_label("expected names like `(a, b)`")
                            .with_secondary(arrow, "this `=>` starts a lambda"),
                    ));
                    error_node(span)
                }
            }
        })
        .boxed()
}

enum Postfix {
    /// `None`: the group did not parse (already reported).
    Call(Option<Vec<Arg>>),
    Index(Option<Vec<IndexItem>>),
    Field(Ident),
}

/// Calls, indexing and fields. In a block they must sit on the line of what they apply to: the
/// line break (a token there) ends the expression.
fn postfix<'a, E: GrammarError<'a>>(sp: Spans, atom: P<'a, E, Expr>, expr: &P2<'a, E>) -> P<'a, E, Expr> {
    let arg = name(sp).then_ignore(punct(Punct::Colon)).or_not().then(expr.clone()).map(|(name, value)| Arg { name, value });
    let call = arg
        .separated_by(punct(Punct::Comma))
        .allow_trailing()
        .collect::<Vec<_>>()
        .delimited_by(punct(Punct::LParen), punct(Punct::RParen))
        .map(Some)
        .recover_with(via_parser(skip_group(Punct::LParen).to(None)))
        .map(Postfix::Call);
    // `a`, `a:b`, `:b`, `a:b:c`, `::c`, ...: the first expression is parsed once.
    let slice_rest =
        punct(Punct::Colon).ignore_then(expr.clone().or_not()).then(punct(Punct::Colon).ignore_then(expr.clone().or_not()).or_not());
    let single_or_slice = expr.clone().or_not().then(slice_rest.or_not()).try_map_with(move |(first, rest), e| match (first, rest) {
        (first, Some((end, step))) => Ok(IndexItem::Slice { start: first, end, step: step.flatten(), span: sp.of(e.span()) }),
        (Some(x), None) => Ok(IndexItem::Single(x)),
        (None, None) => {
            Err(<E as chumsky::label::LabelError<'a, super::Input<'a>, Expect>>::expected_found([Expect::Expression], None, e.span()))
        }
    });
    let item = choice((at(punct(Punct::Ellipsis), sp).map(IndexItem::Ellipsis).boxed(), single_or_slice.boxed()));
    // `x[]` indexes nothing (Python rejects it too; `x[...]` is the whole tensor).
    let index = item
        .separated_by(punct(Punct::Comma))
        .allow_trailing()
        .at_least(1)
        .collect::<Vec<_>>()
        .delimited_by(punct(Punct::LBracket), punct(Punct::RBracket))
        .map(Some)
        .recover_with(via_parser(skip_group(Punct::LBracket).to(None)))
        .map(Postfix::Index);
    let field_name = select_ref! { Tok::Int(i) = e => Ident { name: i.to_string(), span: sp.of(e.span()) } }.or(name(sp));
    let field = punct(Punct::Dot).ignore_then(field_name.labelled(Expect::FieldName)).map(Postfix::Field);
    let any_postfix = select_ref! { Tok::Punct(Punct::LParen | Punct::LBracket | Punct::Dot) => () }.rewind();
    let postfix = any_postfix.ignore_then(choice((call.boxed(), index.boxed(), field.boxed())));
    atom.foldl_with(postfix.repeated(), move |e, post, x| {
        let span = sp.of(x.span());
        let kind = match post {
            Postfix::Call(Some(args)) => ExprKind::Call(Box::new(e), args),
            Postfix::Index(Some(items)) => ExprKind::Index(Box::new(e), items),
            Postfix::Field(name) => ExprKind::Field(Box::new(e), name),
            Postfix::Call(None) | Postfix::Index(None) => ExprKind::Error,
        };
        Expr { kind, span }
    })
    .boxed()
}
