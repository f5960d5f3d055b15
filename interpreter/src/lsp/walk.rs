//! Every expression of a program in source order, and every name a `let` or `data` binds, for
//! the features that look at all of them (inlay hints, code actions).

use dlc_language::syntax::ast::*;

pub enum Node<'a> {
    Expr(&'a Expr),
    /// `let name = value` (an item or a statement) or `data name = value`.
    Binding(&'a Ident, &'a Expr),
}

pub fn program(p: &Program, f: &mut dyn FnMut(Node<'_>)) {
    for item in &p.items {
        match &item.kind {
            ItemKind::Let(n, e) | ItemKind::Data(n, e) => {
                f(Node::Binding(n, e));
                expr(e, f);
            }
            ItemKind::Expr(e) => expr(e, f),
            ItemKind::Fn(d) => function(d, f),
            ItemKind::Model(m) => {
                m.params.iter().filter_map(|p| p.default.as_ref()).for_each(|e| expr(e, f));
                m.fields.iter().for_each(|x| expr(&x.value, f));
                m.methods.iter().for_each(|d| function(d, f));
            }
            ItemKind::Recipe(r) => recipe(r, f),
            ItemKind::Use(_) => {}
        }
    }
}

fn function(d: &FnDecl, f: &mut dyn FnMut(Node<'_>)) {
    d.params.iter().filter_map(|p| p.default.as_ref()).for_each(|e| expr(e, f));
    expr(&d.body, f);
}

fn recipe(r: &Recipe, f: &mut dyn FnMut(Node<'_>)) {
    for entry in &r.entries {
        match entry {
            RecipeEntry::Field(x) => expr(&x.value, f),
            RecipeEntry::Evaluate { data, every, body, .. } => {
                expr(data, f);
                every.count.iter().for_each(|c| expr(c, f));
                expr(body, f);
            }
            RecipeEntry::Checkpoint { dir, every, .. } => {
                expr(dir, f);
                every.count.iter().for_each(|c| expr(c, f));
            }
            RecipeEntry::Log { every, .. } => every.count.iter().for_each(|c| expr(c, f)),
            RecipeEntry::Step { params, body, .. } => {
                params.iter().filter_map(|p| p.default.as_ref()).for_each(|e| expr(e, f));
                stmts(body, f);
            }
        }
    }
}

fn stmts(body: &[Stmt], f: &mut dyn FnMut(Node<'_>)) {
    for s in body {
        match s {
            Stmt::Let(n, e) => {
                f(Node::Binding(n, e));
                expr(e, f);
            }
            Stmt::Update { target, grads, .. } => {
                expr(target, f);
                expr(grads, f);
            }
            Stmt::Log(e, _) | Stmt::Expr(e) => expr(e, f),
        }
    }
}

pub fn expr(e: &Expr, f: &mut dyn FnMut(Node<'_>)) {
    f(Node::Expr(e));
    match &e.kind {
        ExprKind::List(xs) | ExprKind::Tuple(xs) => xs.iter().for_each(|x| expr(x, f)),
        ExprKind::Record(fields) => fields.iter().for_each(|(_, x)| expr(x, f)),
        ExprKind::Unary(_, x) | ExprKind::Field(x, _) | ExprKind::Checkpoint(x) | ExprKind::Precision(_, x) => expr(x, f),
        ExprKind::Binary(_, a, b) | ExprKind::Pipe(a, b) => {
            expr(a, f);
            expr(b, f);
        }
        ExprKind::Call(c, args) => {
            expr(c, f);
            args.iter().for_each(|a| expr(&a.value, f));
        }
        ExprKind::Index(x, items) => {
            expr(x, f);
            for item in items {
                match item {
                    IndexItem::Single(i) => expr(i, f),
                    IndexItem::Slice { start, end, step, .. } => [start, end, step].into_iter().flatten().for_each(|x| expr(x, f)),
                    IndexItem::Ellipsis(_) => {}
                }
            }
        }
        ExprKind::Lambda(_, body) => expr(body, f),
        ExprKind::Block(body, tail) => {
            stmts(body, f);
            tail.iter().for_each(|t| expr(t, f));
        }
        ExprKind::If(c, a, b) => {
            expr(c, f);
            expr(a, f);
            expr(b, f);
        }
        ExprKind::Name(_)
        | ExprKind::Type(_)
        | ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::Auto
        | ExprKind::Error => {}
    }
}
