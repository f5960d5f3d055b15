//! Items: `use`, `fn`, `model`, `data`, `let`, recipes, and expression statements; a file is
//! items, one per line, each recovered on its own.

use super::block::braced_lines;
use super::error::{Expect, GrammarError};
use super::expr::{exprs, Exprs};
use super::recover::skip_line;
use super::tokens::{at, kw, name, plain_name, punct, sep, seps, Spans, P};
use super::types::type_expr;
use crate::span::FileId;
use crate::syntax::ast::*;
use crate::syntax::token::{Kw, Punct, Tok};
use chumsky::prelude::*;
use std::rc::Rc;

/// The grammar of a file.
pub(super) fn program<'a, E: GrammarError<'a>>(file: FileId, tokens: &'a [(Tok, SimpleSpan)]) -> P<'a, E, Vec<Item>> {
    let sp = Spans(file);
    let g = exprs(sp, tokens);
    let item = choice((
        use_item(sp),
        fn_item(sp, &g),
        model(sp, &g),
        data(sp, &g),
        let_item(sp, &g),
        recipe(sp, &g),
        g.expr.clone().map(ItemKind::Expr).boxed(),
    ))
    .map_with(move |kind, e| Item { kind, span: sp.of(e.span()) });
    let end_of_item = choice((sep(), end())).labelled(Expect::EndOfLine);
    // An item followed by something else keeps its tree (`let x = 1, 2` still defines `x`); the
    // rest of its line is skipped.
    let end_of_item = end_of_item.recover_with(via_parser(skip_line(true)));
    let line = item.then_ignore(end_of_item).map(Some).recover_with(via_parser(skip_line(true).to(None)));
    seps()
        .ignore_then(line)
        .repeated()
        .collect::<Vec<_>>()
        .then_ignore(seps())
        .then_ignore(end())
        .map(|items| items.into_iter().flatten().collect())
        .boxed()
}

fn use_item<'a, E: GrammarError<'a>>(sp: Spans) -> P<'a, E, ItemKind> {
    kw(Kw::Use)
        .ignore_then(name(sp).labelled(Expect::ModuleName).separated_by(punct(Punct::Dot)).at_least(1).collect::<Vec<_>>())
        .map(ItemKind::Use)
        .boxed()
}

fn let_item<'a, E: GrammarError<'a>>(sp: Spans, g: &Exprs<'a, E>) -> P<'a, E, ItemKind> {
    kw(Kw::Let)
        .ignore_then(name(sp).labelled(Expect::Name))
        .then_ignore(punct(Punct::Eq))
        .then(g.rhs.clone())
        .map(|(n, e)| ItemKind::Let(n, e))
        .boxed()
}

/// `data name = pipeline` (`data` alone is an ordinary name).
fn data<'a, E: GrammarError<'a>>(sp: Spans, g: &Exprs<'a, E>) -> P<'a, E, ItemKind> {
    kw(Kw::Data).ignore_then(plain_name(sp)).then_ignore(punct(Punct::Eq)).then(g.rhs.clone()).map(|(n, e)| ItemKind::Data(n, e)).boxed()
}

fn fn_item<'a, E: GrammarError<'a>>(sp: Spans, g: &Exprs<'a, E>) -> P<'a, E, ItemKind> {
    at(kw(Kw::Fn), sp)
        .then(name(sp).labelled(Expect::FunctionName))
        .then(fn_rest(sp, g))
        .map(|((start, name), (params, ret, body))| ItemKind::Fn(Rc::new(FnDecl { span: start.to(body.span), name, params, ret, body })))
        .boxed()
}

/// After a function's or method's name: `(params) [-> type] = expr` or `(params) [-> type] { block }`.
fn fn_rest<'a, E: GrammarError<'a>>(sp: Spans, g: &Exprs<'a, E>) -> P<'a, E, (Vec<Param>, Option<TypeExpr>, Expr)> {
    let body = choice((punct(Punct::Eq).ignore_then(g.rhs.clone()), g.block.clone()));
    g.params
        .clone()
        .then(punct(Punct::Arrow).ignore_then(type_expr(sp)).or_not().then(body).labelled(Expect::BodyStart))
        .map(|(params, (ret, body))| (params, ret, body))
        .boxed()
}

#[derive(Clone)]
enum Member {
    Field(Field),
    Method(FnDecl),
}

/// `model Name(params) { field = expr; method(params) = expr }` (`model` alone is a name).
fn model<'a, E: GrammarError<'a>>(sp: Spans, g: &Exprs<'a, E>) -> P<'a, E, ItemKind> {
    // `...name = expr`: a spread field (its items are named directly under the model).
    let spread =
        at(punct(Punct::Ellipsis), sp).then(name(sp).labelled(Expect::MemberName)).then_ignore(punct(Punct::Eq)).then(g.rhs.clone());
    let spread = spread.map(|((start, name), value)| Member::Field(Field { span: start.to(value.span), name, value, spread: true }));
    let member = name(sp).labelled(Expect::MemberName).then(choice((
        fn_rest(sp, g).map(|(params, ret, body)| (Some((params, ret)), body)),
        punct(Punct::Eq).ignore_then(g.rhs.clone()).map(|value| (None, value)),
    )));
    let member = member
        .map(|(name, (method, value))| match method {
            Some((params, ret)) => Member::Method(FnDecl { span: name.span.to(value.span), name, params, ret, body: value }),
            None => Member::Field(Field { span: name.span.to(value.span), name, value, spread: false }),
        })
        .or(spread)
        .boxed();
    at(kw(Kw::Model), sp)
        .then(plain_name(sp).labelled(Expect::ModelName))
        .then(g.params.clone().or_not())
        .then(braced_lines(member, true))
        .map_with(move |(((_, name), params), members), e| {
            let (mut fields, mut methods) = (vec![], vec![]);
            for m in members {
                match m {
                    Member::Field(f) => fields.push(f),
                    Member::Method(f) => methods.push(Rc::new(f)),
                }
            }
            ItemKind::Model(Rc::new(ModelDecl { name, params: params.unwrap_or_default(), fields, methods, span: sp.of(e.span()) }))
        })
        .boxed()
}

/// `train [name] { entries }`, `evaluate ...`, `infer ...`.
fn recipe<'a, E: GrammarError<'a>>(sp: Spans, g: &Exprs<'a, E>) -> P<'a, E, ItemKind> {
    let kind =
        choice((kw(Kw::Train).to(RecipeKind::Train), kw(Kw::Evaluate).to(RecipeKind::Evaluate), kw(Kw::Infer).to(RecipeKind::Infer)));
    kind.then(plain_name(sp).labelled(Expect::RecipeName).or_not())
        .then(braced_lines(recipe_entry(sp, g), true))
        .map_with(move |((kind, name), entries), e| ItemKind::Recipe(Rc::new(Recipe { kind, name, entries, span: sp.of(e.span()) })))
        .boxed()
}

fn recipe_entry<'a, E: GrammarError<'a>>(sp: Spans, g: &Exprs<'a, E>) -> P<'a, E, RecipeEntry> {
    // `evaluate`, `checkpoint`, `log` and `step` start clauses unless they are assigned to.
    let clause = |k: Kw| kw(k).then_ignore(punct(Punct::Eq).not());
    let evaluate = clause(Kw::Evaluate)
        .ignore_then(g.expr.clone())
        .then(every(sp))
        .then(g.block.clone())
        .map_with(move |((data, every), body), e| RecipeEntry::Evaluate { data, every, body, span: sp.of(e.span()) });
    let checkpoint = clause(Kw::Checkpoint)
        .ignore_then(g.expr.clone())
        .then(every(sp))
        .map_with(move |(dir, every), e| RecipeEntry::Checkpoint { dir, every, span: sp.of(e.span()) });
    let log = clause(Kw::Log).ignore_then(every(sp)).map_with(move |every, e| RecipeEntry::Log { every, span: sp.of(e.span()) });
    let step = clause(Kw::Step).ignore_then(g.params.clone()).then(g.step_block.clone()).map_with(move |(params, body), e| {
        let mut body = body;
        let body = match std::mem::replace(&mut body.kind, ExprKind::Error) {
            ExprKind::Block(mut stmts, tail) => {
                stmts.extend(tail.map(|t| Stmt::Expr(*t)));
                stmts
            }
            _ => vec![],
        };
        RecipeEntry::Step { params, body, span: sp.of(e.span()) }
    });
    // A field, unless the line starts a clause (so a clause's own error is not mixed with "or `=`").
    let clause_start = choice((kw(Kw::Evaluate), kw(Kw::Checkpoint), kw(Kw::Log), kw(Kw::Step))).then(punct(Punct::Eq).not());
    let field = clause_start
        .not()
        .ignore_then(name(sp))
        .labelled(Expect::RecipeField)
        .then_ignore(punct(Punct::Eq))
        .then(g.rhs.clone())
        .map(|(name, value)| RecipeEntry::Field(Field { span: name.span.to(value.span), name, value, spread: false }));
    choice((evaluate.boxed(), checkpoint.boxed(), log.boxed(), step.boxed(), field.boxed())).boxed()
}

/// `every epoch`, `every 2 epochs`, `every 50 steps`.
fn every<'a, E: GrammarError<'a>>(sp: Spans) -> P<'a, E, Every> {
    let count = select_ref! { Tok::Int(v) = e => Expr { kind: ExprKind::Int(*v), span: sp.of(e.span()) } };
    kw(Kw::Every)
        .ignore_then(count.or_not())
        .then(name(sp).labelled(Expect::EveryUnit))
        .map_with(move |(count, unit), e| Every { count, unit, span: sp.of(e.span()) })
        .boxed()
}
