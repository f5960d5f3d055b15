//! Expressions: a Pratt loop for binary operators, postfix calls/indexing/fields, and atoms.

use super::{Fail, PResult, Parser};
use crate::diag::Diagnostic;
use crate::syntax::ast::*;
use crate::syntax::token::{Kw, Punct, Tok};
use std::rc::Rc;

/// Binding powers (left, right); higher binds tighter. `**` is right-associative.
fn infix(tok: &Tok) -> Option<(BinOpOrPipe, u8, u8)> {
    use BinOp::*;
    let (op, l, r) = match tok {
        Tok::Punct(Punct::Pipe) => (BinOpOrPipe::Pipe, 2, 3),
        Tok::Kw(Kw::Or) => (BinOpOrPipe::Op(Or), 4, 5),
        Tok::Kw(Kw::And) => (BinOpOrPipe::Op(And), 6, 7),
        Tok::Punct(Punct::EqEq) => (BinOpOrPipe::Op(Eq), 10, 11),
        Tok::Punct(Punct::NotEq) => (BinOpOrPipe::Op(Ne), 10, 11),
        Tok::Punct(Punct::Lt) => (BinOpOrPipe::Op(Lt), 10, 11),
        Tok::Punct(Punct::Le) => (BinOpOrPipe::Op(Le), 10, 11),
        Tok::Punct(Punct::Gt) => (BinOpOrPipe::Op(Gt), 10, 11),
        Tok::Punct(Punct::Ge) => (BinOpOrPipe::Op(Ge), 10, 11),
        Tok::Punct(Punct::Plus) => (BinOpOrPipe::Op(Add), 12, 13),
        Tok::Punct(Punct::Minus) => (BinOpOrPipe::Op(Sub), 12, 13),
        Tok::Punct(Punct::Star) => (BinOpOrPipe::Op(Mul), 14, 15),
        Tok::Punct(Punct::Slash) => (BinOpOrPipe::Op(Div), 14, 15),
        Tok::Punct(Punct::SlashSlash) => (BinOpOrPipe::Op(FloorDiv), 14, 15),
        Tok::Punct(Punct::Percent) => (BinOpOrPipe::Op(Mod), 14, 15),
        Tok::Punct(Punct::At) => (BinOpOrPipe::Op(MatMul), 14, 15),
        Tok::Punct(Punct::StarStar) => (BinOpOrPipe::Op(Pow), 18, 17),
        _ => return None,
    };
    Some((op, l, r))
}

#[derive(Clone, Copy)]
enum BinOpOrPipe {
    Op(BinOp),
    Pipe,
}

const NOT_BP: u8 = 8;
const NEG_BP: u8 = 16;

fn is_comparison(op: BinOp) -> bool {
    matches!(op, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge)
}

impl Parser {
    pub(crate) fn expr(&mut self) -> PResult<Expr> {
        self.expr_bp(0)
    }

    /// The next infix operator, allowing a line that starts with `|>`, `and` or `or` to continue
    /// the expression on the line before.
    fn peek_infix(&mut self) -> Option<(BinOpOrPipe, u8, u8)> {
        if let Some(op) = infix(self.peek()) {
            return Some(op);
        }
        if self.nl_significant() && *self.raw(0) == Tok::Newline {
            let mut k = 0;
            while *self.raw(k) == Tok::Newline {
                k += 1;
            }
            if matches!(self.raw(k), Tok::Punct(Punct::Pipe) | Tok::Kw(Kw::And | Kw::Or)) {
                let op = infix(self.raw(k));
                self.pos += k;
                return op;
            }
        }
        None
    }

    fn expr_bp(&mut self, min_bp: u8) -> PResult<Expr> {
        let start = self.span();
        let mut lhs = if self.eat_kw(Kw::Not).is_some() {
            let e = self.expr_bp(NOT_BP)?;
            Expr { span: start.to(e.span), kind: ExprKind::Unary(UnOp::Not, Box::new(e)) }
        } else if self.eat_punct(Punct::Minus).is_some() {
            let e = self.expr_bp(NEG_BP)?;
            Expr { span: start.to(e.span), kind: ExprKind::Unary(UnOp::Neg, Box::new(e)) }
        } else {
            self.postfix()?
        };
        let mut last_cmp: Option<crate::span::Span> = None;
        loop {
            let save = self.pos;
            let Some((op, l_bp, r_bp)) = self.peek_infix() else { break };
            if l_bp < min_bp {
                self.pos = save;
                break;
            }
            let op_span = self.bump().span;
            if let BinOpOrPipe::Op(b) = op {
                if is_comparison(b) {
                    if let Some(prev) = last_cmp {
                        let d = Diagnostic::error("E0101", "comparison operators cannot be chained", op_span)
                            .with_label("second comparison")
                            .with_secondary(prev, "first comparison")
                            .with_help("split it: `a < b and b < c`");
                        self.push_diag(d);
                        return Err(Fail);
                    }
                    last_cmp = Some(op_span);
                }
            }
            let rhs = self.expr_bp(r_bp)?;
            let span = lhs.span.to(rhs.span);
            lhs = match op {
                BinOpOrPipe::Pipe => Expr { kind: ExprKind::Pipe(Box::new(lhs), Box::new(rhs)), span },
                BinOpOrPipe::Op(b) => Expr { kind: ExprKind::Binary(b, Box::new(lhs), Box::new(rhs)), span },
            };
        }
        Ok(lhs)
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let mut e = self.atom()?;
        loop {
            // Postfix operators must sit on the same line as what they apply to.
            if self.nl_significant() && *self.raw(0) == Tok::Newline {
                break;
            }
            if self.at_punct(Punct::LParen) {
                let open = self.bump().span;
                let args = self.with_newlines(false, |p| p.args(open))?;
                e = Expr { span: e.span.to(self.prev_span()), kind: ExprKind::Call(Box::new(e), args) };
            } else if self.at_punct(Punct::LBracket) {
                let open = self.bump().span;
                let items = self.with_newlines(false, |p| p.index_items(open))?;
                e = Expr { span: e.span.to(self.prev_span()), kind: ExprKind::Index(Box::new(e), items) };
            } else if self.eat_punct(Punct::Dot).is_some() {
                let t = self.token().clone();
                let name = match t.tok {
                    Tok::Int(i) => {
                        self.bump();
                        Ident { name: i.to_string(), span: t.span }
                    }
                    _ => self.ident("a field name")?,
                };
                e = Expr { span: e.span.to(name.span), kind: ExprKind::Field(Box::new(e), name) };
            } else {
                break;
            }
        }
        Ok(e)
    }

    fn args(&mut self, open: crate::span::Span) -> PResult<Vec<Arg>> {
        let mut args = vec![];
        while !self.at_punct(Punct::RParen) {
            let named = is_name(self.peek()) && *self.peek2() == Tok::Punct(Punct::Colon);
            let name = if named {
                let n = self.ident("an argument name")?;
                self.bump();
                Some(n)
            } else {
                None
            };
            let value = self.expr()?;
            args.push(Arg { name, value });
            if self.eat_punct(Punct::Comma).is_none() {
                break;
            }
        }
        self.expect_close(Punct::RParen, open)?;
        Ok(args)
    }

    fn index_items(&mut self, open: crate::span::Span) -> PResult<Vec<IndexItem>> {
        let mut items = vec![];
        while !self.at_punct(Punct::RBracket) {
            let start = self.span();
            if let Some(s) = self.eat_punct(Punct::Ellipsis) {
                items.push(IndexItem::Ellipsis(s));
            } else {
                let first = if self.at_punct(Punct::Colon) { None } else { Some(self.expr()?) };
                if self.eat_punct(Punct::Colon).is_some() {
                    let stop = |p: &mut Self| p.at_punct(Punct::Colon) || p.at_punct(Punct::Comma) || p.at_punct(Punct::RBracket);
                    let end = if stop(self) { None } else { Some(self.expr()?) };
                    let step = if self.eat_punct(Punct::Colon).is_some() {
                        if stop(self) {
                            None
                        } else {
                            Some(self.expr()?)
                        }
                    } else {
                        None
                    };
                    items.push(IndexItem::Slice { start: first, end, step, span: start.to(self.prev_span()) });
                } else if let Some(e) = first {
                    items.push(IndexItem::Single(e));
                }
            }
            if self.eat_punct(Punct::Comma).is_none() {
                break;
            }
        }
        self.expect_close(Punct::RBracket, open)?;
        Ok(items)
    }

    fn atom(&mut self) -> PResult<Expr> {
        let t = self.token().clone();
        let span = t.span;
        let simple = |kind| Ok(Expr { kind, span });
        match t.tok {
            Tok::Int(v) => {
                self.bump();
                simple(ExprKind::Int(v))
            }
            Tok::Float(v) => {
                self.bump();
                simple(ExprKind::Float(v))
            }
            Tok::Str(s) => {
                self.bump();
                simple(ExprKind::Str(s))
            }
            Tok::Kw(Kw::True) => {
                self.bump();
                simple(ExprKind::Bool(true))
            }
            Tok::Kw(Kw::False) => {
                self.bump();
                simple(ExprKind::Bool(false))
            }
            Tok::Kw(Kw::Auto) => {
                self.bump();
                simple(ExprKind::Auto)
            }
            Tok::Kw(Kw::Checkpoint) if *self.peek2() == Tok::Punct(Punct::LBrace) => {
                self.bump();
                let body = self.block(false)?;
                Ok(Expr { span: span.to(body.span), kind: ExprKind::Checkpoint(Box::new(body)) })
            }
            // `precision bf16 { ... }`: a name followed by a word cannot be anything else.
            Tok::Ident(name) if name == "precision" && matches!(self.peek2(), Tok::DType(_) | Tok::Ident(_)) => {
                self.bump();
                let word = self.bump();
                let name = match &word.tok {
                    Tok::DType(d) => d.to_string(),
                    Tok::Ident(n) => n.clone(),
                    _ => unreachable!("checked by peek2"),
                };
                let body = self.block(false)?;
                Ok(Expr { span: span.to(body.span), kind: ExprKind::Precision(Ident { name, span: word.span }, Box::new(body)) })
            }
            Tok::Ident(_) | Tok::Kw(Kw::Log | Kw::Step | Kw::Checkpoint | Kw::Every | Kw::By | Kw::Data | Kw::Model) => {
                let id = self.ident("a name")?;
                if self.at_punct(Punct::FatArrow) {
                    self.bump();
                    let body = self.expr()?;
                    return Ok(Expr { span: span.to(body.span), kind: ExprKind::Lambda(vec![id], Rc::new(body)) });
                }
                Ok(Expr { kind: ExprKind::Name(id.name), span })
            }
            Tok::DType(_) => {
                let ty = self.type_expr()?;
                Ok(Expr { span: ty.span, kind: ExprKind::Type(ty) })
            }
            Tok::Punct(Punct::LParen) => self.paren(),
            Tok::Punct(Punct::LBracket) => {
                let open = self.bump().span;
                let elems = self.with_newlines(false, |p| {
                    let mut elems = vec![];
                    while !p.at_punct(Punct::RBracket) {
                        elems.push(p.expr()?);
                        if p.eat_punct(Punct::Comma).is_none() {
                            break;
                        }
                    }
                    p.expect_close(Punct::RBracket, open)?;
                    Ok(elems)
                })?;
                Ok(Expr { kind: ExprKind::List(elems), span: span.to(self.prev_span()) })
            }
            Tok::Punct(Punct::LBrace) => self.block(false),
            Tok::Kw(Kw::If) => self.if_expr(),
            _ => Err(self.error_here("an expression")),
        }
    }

    /// `( ... )`: unit, parenthesised expression, tuple, record, or lambda parameters.
    fn paren(&mut self) -> PResult<Expr> {
        let open = self.bump().span;
        let (kind, trailing_comma) = self.with_newlines(false, |p| -> PResult<(ExprKind, bool)> {
            if p.at_punct(Punct::RParen) {
                p.bump();
                return Ok((ExprKind::Tuple(vec![]), false));
            }
            let is_record = is_name(p.peek()) && *p.peek2() == Tok::Punct(Punct::Colon);
            if is_record {
                let mut fields = vec![];
                while !p.at_punct(Punct::RParen) {
                    let name = p.ident("a field name")?;
                    p.expect_punct(Punct::Colon)?;
                    fields.push((name, p.expr()?));
                    if p.eat_punct(Punct::Comma).is_none() {
                        break;
                    }
                }
                p.expect_close(Punct::RParen, open)?;
                return Ok((ExprKind::Record(fields), false));
            }
            let mut elems = vec![p.expr()?];
            let mut comma = false;
            while p.eat_punct(Punct::Comma).is_some() {
                comma = true;
                if p.at_punct(Punct::RParen) {
                    break;
                }
                elems.push(p.expr()?);
            }
            p.expect_close(Punct::RParen, open)?;
            if elems.len() == 1 && !comma {
                Ok((elems.pop().map(|e| e.kind).unwrap_or(ExprKind::Error), false))
            } else {
                Ok((ExprKind::Tuple(elems), comma))
            }
        })?;
        let span = open.to(self.prev_span());
        let _ = trailing_comma;
        if self.at_punct(Punct::FatArrow) {
            let arrow = self.bump().span;
            let params = match &kind {
                ExprKind::Tuple(elems) => elems.iter().map(as_param).collect::<Option<Vec<_>>>(),
                ExprKind::Name(n) => Some(vec![Ident { name: n.clone(), span }]),
                _ => None,
            };
            let Some(params) = params else {
                let d = Diagnostic::error("E0101", "lambda parameters must be plain names", span)
                    .with_label("expected names like `(a, b)`")
                    .with_secondary(arrow, "this `=>` starts a lambda");
                self.push_diag(d);
                return Err(Fail);
            };
            let body = self.expr()?;
            return Ok(Expr { span: span.to(body.span), kind: ExprKind::Lambda(params, Rc::new(body)) });
        }
        // A parenthesised expression keeps the span of its parentheses so labels cover them.
        Ok(Expr { kind, span })
    }

    /// `{ stmt* expr? }`. In a `step` block, `update` and `log` statements are allowed.
    pub(crate) fn block(&mut self, in_step: bool) -> PResult<Expr> {
        let open = self.expect_punct(Punct::LBrace)?;
        let mut stmts: Vec<Stmt> = vec![];
        self.with_newlines(true, |p| -> PResult<()> {
            loop {
                p.skip_separators();
                match p.raw(0) {
                    Tok::Punct(Punct::RBrace) => {
                        p.pos += 1;
                        return Ok(());
                    }
                    Tok::Eof => {
                        p.expect_close(Punct::RBrace, open)?;
                        return Ok(());
                    }
                    _ => {}
                }
                let start = p.pos;
                let depth = p.newline_significant.len();
                match p.stmt(in_step).and_then(|s| p.end_of_statement(false).map(|_| s)) {
                    Ok(s) => stmts.push(s),
                    Err(Fail) => {
                        p.newline_significant.truncate(depth);
                        p.recover();
                    }
                }
                if p.pos == start {
                    p.pos += 1;
                }
            }
        })?;
        let span = open.to(self.prev_span());
        let tail = match stmts.last() {
            Some(Stmt::Expr(_)) => match stmts.pop() {
                Some(Stmt::Expr(e)) => Some(Box::new(e)),
                _ => None,
            },
            _ => None,
        };
        Ok(Expr { kind: ExprKind::Block(stmts, tail), span })
    }

    fn stmt(&mut self, in_step: bool) -> PResult<Stmt> {
        let start = self.span();
        if self.eat_kw(Kw::Let).is_some() {
            let name = self.ident("a name")?;
            self.expect_punct(Punct::Eq)?;
            return Ok(Stmt::Let(name, self.expr()?));
        }
        // `update` parses anywhere so that misplacing it gets E0310 from the checker, not a syntax
        // error; `log` stays an ordinary name outside `step` blocks (it is also the logarithm).
        if self.eat_kw(Kw::Update).is_some() {
            let target = self.expr()?;
            if self.eat_kw(Kw::By).is_none() {
                return Err(self.error_here("`by`"));
            }
            let grads = self.expr()?;
            let span = start.to(grads.span);
            if !in_step {
                // Reported here, where the structure is known, whether or not the code is ever called.
                let d = Diagnostic::error("E0310", "`update` statements belong in a `step` block of a `train` recipe", span)
                    .with_label("not allowed here")
                    .with_help(
                        "compute new values with an expression here; parameters are updated by a recipe's optimiser or `step` block",
                    );
                self.push_diag(d);
            }
            return Ok(Stmt::Update { span, target, grads });
        }
        if in_step && self.at_kw(Kw::Log) {
            self.bump();
            let e = self.expr()?;
            return Ok(Stmt::Log(e.clone(), start.to(e.span)));
        }
        Ok(Stmt::Expr(self.expr()?))
    }

    fn if_expr(&mut self) -> PResult<Expr> {
        let start = self.bump().span;
        let cond = self.expr()?;
        let then = self.block(false)?;
        let mut k = 0;
        while *self.raw(k) == Tok::Newline {
            k += 1;
        }
        if *self.raw(k) == Tok::Kw(Kw::Else) {
            self.pos += k;
        }
        if self.eat_kw(Kw::Else).is_none() {
            let d = Diagnostic::error("E0101", "`if` needs an `else` branch", then.span)
                .with_label("this branch has no `else`")
                .with_help("DL's `if` is an expression: both branches give a value");
            self.push_diag(d);
            return Err(Fail);
        }
        let other = if self.at_kw(Kw::If) { self.if_expr()? } else { self.block(false)? };
        Ok(Expr { span: start.to(other.span), kind: ExprKind::If(Box::new(cond), Box::new(then), Box::new(other)) })
    }
}

fn as_param(e: &Expr) -> Option<Ident> {
    match &e.kind {
        ExprKind::Name(n) => Some(Ident { name: n.clone(), span: e.span }),
        _ => None,
    }
}

/// Identifiers and the soft keywords that double as names (`step`, `log`, `data`, ...).
fn is_name(t: &Tok) -> bool {
    match t {
        Tok::Ident(_) => true,
        Tok::Kw(k) => k.soft(),
        _ => false,
    }
}
