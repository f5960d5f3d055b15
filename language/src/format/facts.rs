//! What the formatter learns from the syntax tree rather than from the tokens: which `-` is a
//! negation (`log -x` in a `step` block, `a - -b`), which `log` starts a statement, and which braces hold an item's body (always
//! one member or statement a line) or a recipe's entries (whose fields are aligned at `=`).

use crate::syntax::ast::*;
use std::collections::HashSet;

#[derive(Default)]
pub(super) struct Facts {
    /// Byte offsets of the `-` of every negation.
    pub negations: HashSet<u32>,
    /// Byte offsets of the `}` of every model, recipe, function, method and `step` body.
    pub bodies: HashSet<u32>,
    /// Byte offsets of the `}` of every recipe.
    pub recipes: HashSet<u32>,
    /// Byte offsets of the `log` of every `log value` statement (`log (a, b)` logs a tuple; it
    /// is no call).
    pub log_statements: HashSet<u32>,
}

impl Facts {
    pub fn of(program: &Program) -> Facts {
        let mut f = Facts::default();
        for item in &program.items {
            match &item.kind {
                ItemKind::Use(_) => {}
                ItemKind::Fn(d) => f.fn_decl(d),
                ItemKind::Model(m) => {
                    f.bodies.insert(closing(m.span));
                    f.params(&m.params);
                    m.fields.iter().for_each(|x| f.expr(&x.value));
                    m.methods.iter().for_each(|d| f.fn_decl(d));
                }
                ItemKind::Data(_, e) | ItemKind::Let(_, e) | ItemKind::Expr(e) => f.expr(e),
                ItemKind::Recipe(r) => {
                    f.bodies.insert(closing(r.span));
                    f.recipes.insert(closing(r.span));
                    r.entries.iter().for_each(|e| f.entry(e));
                }
            }
        }
        f
    }

    fn fn_decl(&mut self, d: &FnDecl) {
        self.params(&d.params);
        if matches!(d.body.kind, ExprKind::Block(..)) {
            self.bodies.insert(closing(d.body.span));
        }
        self.expr(&d.body);
    }

    fn params(&mut self, params: &[Param]) {
        params.iter().filter_map(|p| p.default.as_ref()).for_each(|e| self.expr(e));
    }

    fn entry(&mut self, entry: &RecipeEntry) {
        match entry {
            RecipeEntry::Field(x) => self.expr(&x.value),
            RecipeEntry::Evaluate { data, every, body, .. } => {
                self.expr(data);
                every.count.iter().for_each(|c| self.expr(c));
                self.expr(body);
            }
            RecipeEntry::Checkpoint { dir, .. } => self.expr(dir),
            RecipeEntry::Log { .. } => {}
            RecipeEntry::Step { params, body, span } => {
                self.bodies.insert(closing(*span));
                self.params(params);
                body.iter().for_each(|s| self.stmt(s));
            }
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Log(e, span) => {
                self.log_statements.insert(span.start);
                self.expr(e);
            }
            Stmt::Let(_, e) | Stmt::Expr(e) => self.expr(e),
            Stmt::Update { target, grads, .. } => {
                self.expr(target);
                self.expr(grads);
            }
        }
    }

    fn expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Unary(op, x) => {
                if *op == UnOp::Neg {
                    self.negations.insert(e.span.start);
                }
                self.expr(x);
            }
            ExprKind::Binary(_, a, b) | ExprKind::Pipe(a, b) => {
                self.expr(a);
                self.expr(b);
            }
            ExprKind::List(xs) | ExprKind::Tuple(xs) => xs.iter().for_each(|x| self.expr(x)),
            ExprKind::Record(fields) => fields.iter().for_each(|(_, x)| self.expr(x)),
            ExprKind::Call(callee, args) => {
                self.expr(callee);
                args.iter().for_each(|a| self.expr(&a.value));
            }
            ExprKind::Index(x, items) => {
                self.expr(x);
                for item in items {
                    match item {
                        IndexItem::Single(x) => self.expr(x),
                        IndexItem::Slice { start, end, step, .. } => {
                            [start, end, step].into_iter().flatten().for_each(|x| self.expr(x));
                        }
                        IndexItem::Ellipsis(_) => {}
                    }
                }
            }
            ExprKind::Field(x, _) | ExprKind::Checkpoint(x) | ExprKind::Precision(_, x) => self.expr(x),
            ExprKind::Lambda(_, body) => self.expr(body),
            ExprKind::Block(stmts, tail) => {
                stmts.iter().for_each(|s| self.stmt(s));
                tail.iter().for_each(|t| self.expr(t));
            }
            ExprKind::If(c, t, f) => {
                self.expr(c);
                self.expr(t);
                self.expr(f);
            }
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::Auto
            | ExprKind::Name(_)
            | ExprKind::Type(_)
            | ExprKind::Error => {}
        }
    }
}

/// The offset of the `}` that ends a braced span.
fn closing(span: crate::span::Span) -> u32 {
    span.end.saturating_sub(1)
}
