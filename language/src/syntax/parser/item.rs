//! Items: `use`, `fn`, `model`, `data`, `let`, recipes, and expression statements.

use super::{Fail, PResult, Parser};
use crate::syntax::ast::*;
use crate::syntax::token::{Kw, Punct, Tok};
use std::rc::Rc;

impl Parser {
    pub(super) fn item(&mut self) -> PResult<Item> {
        let start = self.span();
        let kind = match self.peek().clone() {
            Tok::Kw(Kw::Use) => {
                self.bump();
                let mut path = vec![self.ident("a module name")?];
                while self.eat_punct(Punct::Dot).is_some() {
                    path.push(self.ident("a module name")?);
                }
                ItemKind::Use(path)
            }
            Tok::Kw(Kw::Fn) => {
                self.bump();
                ItemKind::Fn(Rc::new(self.fn_rest(start)?))
            }
            Tok::Kw(Kw::Model) if matches!(self.peek2(), Tok::Ident(_)) => ItemKind::Model(Rc::new(self.model()?)),
            Tok::Kw(Kw::Data) if matches!(self.peek2(), Tok::Ident(_)) => {
                self.bump();
                let name = self.ident("a pipeline name")?;
                self.expect_punct(Punct::Eq)?;
                self.skip_newlines();
                ItemKind::Data(name, self.expr()?)
            }
            Tok::Kw(Kw::Let) => {
                self.bump();
                let name = self.ident("a name")?;
                self.expect_punct(Punct::Eq)?;
                self.skip_newlines();
                ItemKind::Let(name, self.expr()?)
            }
            Tok::Kw(k @ (Kw::Train | Kw::Evaluate | Kw::Infer)) => {
                let kind = match k {
                    Kw::Train => RecipeKind::Train,
                    Kw::Evaluate => RecipeKind::Evaluate,
                    _ => RecipeKind::Infer,
                };
                ItemKind::Recipe(Rc::new(self.recipe(kind)?))
            }
            _ => ItemKind::Expr(self.expr()?),
        };
        let end = self.prev_span();
        Ok(Item { kind, span: start.to(end) })
    }

    pub(super) fn prev_span(&self) -> crate::span::Span {
        let mut i = self.pos.saturating_sub(1);
        while i > 0 && self.toks[i].tok == Tok::Newline {
            i -= 1;
        }
        self.toks[i].span
    }

    /// After `fn`: `name(params) [-> type] = expr` or `name(params) [-> type] { block }`.
    fn fn_rest(&mut self, start: crate::span::Span) -> PResult<FnDecl> {
        let name = self.ident("a function name")?;
        self.method_rest(name, start)
    }

    fn method_rest(&mut self, name: Ident, start: crate::span::Span) -> PResult<FnDecl> {
        let params = self.params()?;
        let ret = if self.eat_punct(Punct::Arrow).is_some() { Some(self.type_expr()?) } else { None };
        let body = if self.eat_punct(Punct::Eq).is_some() {
            self.skip_newlines();
            self.expr()?
        } else if self.at_punct(Punct::LBrace) {
            self.block(false)?
        } else {
            return Err(self.error_here("`=` or `{` to start the body"));
        };
        let span = start.to(body.span);
        Ok(FnDecl { name, params, ret, body, span })
    }

    pub(super) fn params(&mut self) -> PResult<Vec<Param>> {
        let open = self.expect_punct(Punct::LParen)?;
        self.with_newlines(false, |p| {
            let mut params = vec![];
            while !p.at_punct(Punct::RParen) {
                let name = p.ident("a parameter name")?;
                let ty = if p.eat_punct(Punct::Colon).is_some() { Some(p.type_expr()?) } else { None };
                let default = if p.eat_punct(Punct::Eq).is_some() { Some(p.expr()?) } else { None };
                let end = p.prev_span();
                params.push(Param { span: name.span.to(end), name, ty, default });
                if p.eat_punct(Punct::Comma).is_none() {
                    break;
                }
            }
            p.expect_close(Punct::RParen, open)?;
            Ok(params)
        })
    }

    fn model(&mut self) -> PResult<ModelDecl> {
        let start = self.bump().span;
        let name = self.ident("a model name")?;
        let params = if self.at_punct(Punct::LParen) { self.params()? } else { vec![] };
        let open = self.expect_punct(Punct::LBrace)?;
        let mut fields = vec![];
        let mut methods = vec![];
        self.with_newlines(true, |p| {
            p.members(open, |p| {
                let mstart = p.span();
                let member = p.ident("a field or method name")?;
                if p.at_punct(Punct::LParen) {
                    methods.push(Rc::new(p.method_rest(member, mstart)?));
                } else {
                    p.expect_punct(Punct::Eq)?;
                    let value = p.expr()?;
                    fields.push(Field { span: member.span.to(value.span), name: member, value });
                }
                Ok(())
            })
        })?;
        let span = start.to(self.prev_span());
        Ok(ModelDecl { name, params, fields, methods, span })
    }

    /// The body of a `{ ... }` of members, one per line, with per-member recovery. Consumes the `}`.
    fn members(&mut self, open: crate::span::Span, mut member: impl FnMut(&mut Self) -> PResult<()>) -> PResult<()> {
        loop {
            self.skip_separators();
            match self.raw(0) {
                Tok::Punct(Punct::RBrace) => {
                    self.pos += 1;
                    return Ok(());
                }
                Tok::Eof => {
                    self.expect_close(Punct::RBrace, open)?;
                    return Ok(());
                }
                _ => {}
            }
            let start = self.pos;
            let depth = self.newline_significant.len();
            if member(self).and_then(|_| self.end_of_statement(true)).is_err() {
                self.newline_significant.truncate(depth);
                self.recover();
            }
            if self.pos == start {
                self.pos += 1;
            }
        }
    }

    fn recipe(&mut self, kind: RecipeKind) -> PResult<Recipe> {
        let start = self.bump().span;
        let name = if matches!(self.peek(), Tok::Ident(_)) { Some(self.ident("a recipe name")?) } else { None };
        let open = self.expect_punct(Punct::LBrace)?;
        let mut entries = vec![];
        self.with_newlines(true, |p| {
            p.members(open, |p| {
                entries.push(p.recipe_entry()?);
                Ok(())
            })
        })?;
        Ok(Recipe { kind, name, entries, span: start.to(self.prev_span()) })
    }

    fn recipe_entry(&mut self) -> PResult<RecipeEntry> {
        let start = self.span();
        let next_is_eq = *self.peek2() == Tok::Punct(Punct::Eq);
        match self.peek().clone() {
            Tok::Kw(Kw::Evaluate) if !next_is_eq => {
                self.bump();
                let data = self.expr()?;
                let every = self.every()?;
                let body = self.block(false)?;
                Ok(RecipeEntry::Evaluate { span: start.to(body.span), data, every, body })
            }
            Tok::Kw(Kw::Checkpoint) if !next_is_eq => {
                self.bump();
                let dir = self.expr()?;
                let every = self.every()?;
                Ok(RecipeEntry::Checkpoint { span: start.to(every.span), dir, every })
            }
            Tok::Kw(Kw::Log) if !next_is_eq => {
                self.bump();
                let every = self.every()?;
                Ok(RecipeEntry::Log { span: start.to(every.span), every })
            }
            Tok::Kw(Kw::Step) if !next_is_eq => {
                self.bump();
                let params = self.params()?;
                let body = self.block(true)?;
                let stmts = match body.kind {
                    ExprKind::Block(mut stmts, tail) => {
                        if let Some(t) = tail {
                            stmts.push(Stmt::Expr(*t));
                        }
                        stmts
                    }
                    _ => vec![],
                };
                Ok(RecipeEntry::Step { params, body: stmts, span: start.to(body.span) })
            }
            _ => {
                let name = self.ident("a recipe field such as `model = ...`")?;
                self.expect_punct(Punct::Eq)?;
                let value = self.expr()?;
                Ok(RecipeEntry::Field(Field { span: name.span.to(value.span), name, value }))
            }
        }
    }

    /// `every epoch`, `every 2 epochs`, `every 50 steps`.
    fn every(&mut self) -> PResult<Every> {
        let start = match self.eat_kw(Kw::Every) {
            Some(s) => s,
            None => return Err(self.error_here("`every`")),
        };
        let count = match self.peek().clone() {
            Tok::Int(v) => {
                let span = self.bump().span;
                Some(Expr { kind: ExprKind::Int(v), span })
            }
            _ => None,
        };
        let unit = self.ident("`epoch` or `steps`")?;
        Ok(Every { span: start.to(unit.span), count, unit })
    }

    pub(super) fn type_expr(&mut self) -> PResult<TypeExpr> {
        let t = self.token().clone();
        match t.tok {
            Tok::DType(dtype) => {
                self.bump();
                if self.at_punct(Punct::LBracket) {
                    let open = self.bump().span;
                    let dims = self.with_newlines(false, |p| {
                        let mut dims = vec![];
                        while !p.at_punct(Punct::RBracket) {
                            dims.push(p.dim()?);
                            if p.eat_punct(Punct::Comma).is_none() {
                                break;
                            }
                        }
                        p.expect_close(Punct::RBracket, open)?;
                        Ok(dims)
                    })?;
                    Ok(TypeExpr { kind: TypeKind::Tensor { dtype, dims: Some(dims) }, span: t.span.to(self.prev_span()) })
                } else if dtype == crate::types::DType::Bool {
                    Ok(TypeExpr { kind: TypeKind::Scalar(ScalarKind::Bool), span: t.span })
                } else {
                    Ok(TypeExpr { kind: TypeKind::Tensor { dtype, dims: None }, span: t.span })
                }
            }
            Tok::Ident(name) => {
                let kind = match name.as_str() {
                    "int" => ScalarKind::Int,
                    "float" => ScalarKind::Float,
                    "str" => ScalarKind::Str,
                    _ => {
                        let d = crate::diag::Diagnostic::error("E0101", format!("expected a type, found `{name}`"), t.span)
                            .with_label("not a type")
                            .with_help("types are `int`, `float`, `bool`, `str`, or tensor types like `f32[B, 784]`");
                        self.push_diag(d);
                        return Err(Fail);
                    }
                };
                self.bump();
                Ok(TypeExpr { kind: TypeKind::Scalar(kind), span: t.span })
            }
            _ => Err(self.error_here("a type such as `f32[B, 784]` or `int`")),
        }
    }

    fn dim(&mut self) -> PResult<DimExpr> {
        let first = self.dim_atom()?;
        if !self.at_punct(Punct::Star) {
            return Ok(first);
        }
        let start = self.span();
        let mut factors = vec![first];
        while self.eat_punct(Punct::Star).is_some() {
            factors.push(self.dim_atom()?);
        }
        Ok(DimExpr::Product(factors, start.to(self.prev_span())))
    }

    fn dim_atom(&mut self) -> PResult<DimExpr> {
        let t = self.token().clone();
        let d = match t.tok {
            Tok::Int(v) => DimExpr::Int(v, t.span),
            Tok::Ident(ref n) if n == "_" => DimExpr::Wild(t.span),
            Tok::Ident(n) => DimExpr::Name(n, t.span),
            Tok::Punct(Punct::Ellipsis) => DimExpr::Ellipsis(t.span),
            _ => return Err(self.error_here("a dimension (a number, a name, `_` or `...`)")),
        };
        self.bump();
        Ok(d)
    }
}
