//! Which name means what, from the syntax tree alone: every definition in a file (items, a
//! function's or method's parameters and the sizes its annotations name, a model's
//! hyper-parameters, fields and methods, `let`s, lambda parameters, what a recipe binds) and
//! every use of a name, linked to its definition by DL's scoping (innermost block first, then
//! the model instance, then the file's items). A use that links to nothing here is a global the
//! checker's session resolves (an imported or stdlib item, a builtin). Definition, references,
//! rename, completion and document symbols read it; it works on the partial trees of files with
//! syntax errors too.

use dlc_language::syntax::ast::*;
use dlc_language::Span;
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefKind {
    Fn,
    Model,
    Let,
    Data,
    /// A parameter of a function, a method or a `step` block.
    Param,
    /// A model's hyper-parameter.
    HParam,
    Field,
    Method,
    /// A `let` inside a block.
    Local,
    LambdaParam,
    /// A size an annotation names (`B` in `x: f32[B, 784]`).
    Dim,
    /// `model`, the models of `models`, and the data element's names in a recipe.
    RecipeBinding,
}

impl DefKind {
    /// Names no other file can see, which rename may change.
    pub fn is_local(self) -> bool {
        matches!(self, DefKind::Param | DefKind::Local | DefKind::LambdaParam | DefKind::Dim)
    }
}

#[derive(Clone, Debug)]
pub struct Def {
    pub name: String,
    /// The name where it is defined.
    pub span: Span,
    pub kind: DefKind,
    /// Where uses may see it, in bytes.
    pub scope: (u32, u32),
    /// The expression it is bound to, whose recorded value is its value.
    pub value: Option<Span>,
    /// The declaration it belongs to (the function or model of a parameter; the item itself).
    pub owner: Span,
}

#[derive(Clone, Debug)]
pub struct Ref {
    pub name: String,
    pub span: Span,
    /// The definition in this file; `None` for a global (imported, stdlib or builtin).
    pub def: Option<usize>,
}

#[derive(Default)]
pub struct Index {
    pub defs: Vec<Def>,
    pub refs: Vec<Ref>,
}

/// What is at a position: a definition's name or a use.
#[derive(Clone, Copy, Debug)]
pub enum Hit {
    Def(usize),
    Ref(usize),
}

impl Index {
    /// `element` names what the data of a recipe binds, given its `data = ...` expression.
    pub fn build(program: &Program, text_len: usize, element: &dyn Fn(&Expr) -> Vec<String>) -> Index {
        let mut w = Walker { index: Index::default(), scopes: vec![], top: HashMap::new(), element, file_end: text_len as u32 };
        w.items(program);
        w.index
    }

    /// The definition or use under byte `offset` (a cursor just after a name is on it).
    pub fn at(&self, offset: usize) -> Option<Hit> {
        let on = |s: &Span| (s.start as usize) <= offset && offset <= s.end as usize;
        if let Some(i) = self.defs.iter().position(|d| on(&d.span)) {
            return Some(Hit::Def(i));
        }
        self.refs.iter().position(|r| on(&r.span)).map(Hit::Ref)
    }

    /// The definition a hit is or links to.
    pub fn def_of(&self, hit: Hit) -> Option<usize> {
        match hit {
            Hit::Def(i) => Some(i),
            Hit::Ref(r) => self.refs[r].def,
        }
    }

    pub fn name_of(&self, hit: Hit) -> &str {
        match hit {
            Hit::Def(i) => &self.defs[i].name,
            Hit::Ref(r) => &self.refs[r].name,
        }
    }

    pub fn span_of(&self, hit: Hit) -> Span {
        match hit {
            Hit::Def(i) => self.defs[i].span,
            Hit::Ref(r) => self.refs[r].span,
        }
    }

    /// The uses of definition `def`.
    pub fn uses(&self, def: usize) -> impl Iterator<Item = &Ref> {
        self.refs.iter().filter(move |r| r.def == Some(def))
    }

    /// The definitions visible at `offset`, innermost first, each name once.
    pub fn visible(&self, offset: usize) -> Vec<usize> {
        let o = offset as u32;
        let mut seen = std::collections::HashSet::new();
        let mut out: Vec<usize> = (0..self.defs.len()).filter(|&i| self.defs[i].scope.0 <= o && o <= self.defs[i].scope.1).collect();
        // Narrower scopes are inner ones.
        out.sort_by_key(|&i| self.defs[i].scope.1 - self.defs[i].scope.0);
        out.retain(|&i| seen.insert(self.defs[i].name.clone()));
        out
    }
}

struct Walker<'a> {
    index: Index,
    /// Innermost last: the names each open scope defines.
    scopes: Vec<Vec<(String, usize)>>,
    /// The file's items.
    top: HashMap<String, usize>,
    element: &'a dyn Fn(&Expr) -> Vec<String>,
    file_end: u32,
}

impl Walker<'_> {
    fn def(&mut self, name: &Ident, kind: DefKind, scope: (u32, u32), value: Option<Span>, owner: Span) -> usize {
        let i = self.index.defs.len();
        self.index.defs.push(Def { name: name.name.clone(), span: name.span, kind, scope, value, owner });
        if let Some(s) = self.scopes.last_mut() {
            s.push((name.name.clone(), i));
        }
        i
    }

    fn lookup(&self, name: &str) -> Option<usize> {
        for scope in self.scopes.iter().rev() {
            if let Some((_, i)) = scope.iter().rev().find(|(n, _)| n == name) {
                return Some(*i);
            }
        }
        self.top.get(name).copied()
    }

    fn reference(&mut self, name: &str, span: Span) {
        let def = self.lookup(name);
        self.index.refs.push(Ref { name: name.to_string(), span, def });
    }

    fn items(&mut self, program: &Program) {
        let whole = (0, self.file_end);
        for item in &program.items {
            let (name, kind, value) = match &item.kind {
                ItemKind::Fn(f) => (&f.name, DefKind::Fn, None),
                ItemKind::Model(m) => (&m.name, DefKind::Model, None),
                ItemKind::Let(n, e) => (n, DefKind::Let, Some(e.span)),
                ItemKind::Data(n, e) => (n, DefKind::Data, Some(e.span)),
                _ => continue,
            };
            let i = self.def(name, kind, whole, value, item.span);
            // A second definition is an error the checker reports; uses link to the first.
            self.top.entry(name.name.clone()).or_insert(i);
        }
        for item in &program.items {
            match &item.kind {
                ItemKind::Fn(f) => self.function(f, item.span),
                ItemKind::Model(m) => self.model(m),
                ItemKind::Let(_, e) | ItemKind::Data(_, e) | ItemKind::Expr(e) => self.expr(e),
                ItemKind::Recipe(r) => self.recipe(r),
                ItemKind::Use(_) => {}
            }
        }
    }

    /// Parameters (with the sizes their annotations name) in a new scope over `owner`.
    fn params(&mut self, params: &[Param], owner: Span) {
        let scope = (owner.start, owner.end);
        for p in params {
            if let Some(d) = &p.default {
                self.expr(d);
            }
            if let Some(t) = &p.ty {
                self.ty(t, Some(owner));
            }
            self.def(&p.name, DefKind::Param, scope, p.default.as_ref().map(|d| d.span), owner);
        }
    }

    fn function(&mut self, f: &FnDecl, owner: Span) {
        self.scopes.push(vec![]);
        self.params(&f.params, owner);
        if let Some(t) = &f.ret {
            self.ty(t, Some(owner));
        }
        self.expr(&f.body);
        self.scopes.pop();
    }

    fn model(&mut self, m: &ModelDecl) {
        let scope = (m.span.start, m.span.end);
        self.scopes.push(vec![]);
        for p in &m.params {
            if let Some(d) = &p.default {
                self.expr(d);
            }
            if let Some(t) = &p.ty {
                self.ty(t, None);
            }
            self.def(&p.name, DefKind::HParam, scope, p.default.as_ref().map(|d| d.span), m.span);
        }
        for f in &m.fields {
            self.expr(&f.value);
            self.def(&f.name, DefKind::Field, scope, Some(f.value.span), m.span);
        }
        for method in &m.methods {
            self.def(&method.name, DefKind::Method, scope, None, method.span);
        }
        for method in &m.methods {
            self.function(method, method.span);
        }
        self.scopes.pop();
    }

    fn recipe(&mut self, r: &Recipe) {
        let scope = (r.span.start, r.span.end);
        self.scopes.push(vec![]);
        // The models and the data element first: the loss may be written before them.
        for e in &r.entries {
            let RecipeEntry::Field(f) = e else { continue };
            match (f.name.name.as_str(), &f.value.kind) {
                ("model", _) => {
                    self.def(&f.name, DefKind::RecipeBinding, scope, Some(f.value.span), r.span);
                }
                ("models", ExprKind::Record(items)) => {
                    for (n, v) in items {
                        self.def(n, DefKind::RecipeBinding, scope, Some(v.span), r.span);
                    }
                }
                ("data", _) => {
                    for n in (self.element)(&f.value) {
                        let at = Ident { name: n, span: f.name.span };
                        self.def(&at, DefKind::RecipeBinding, scope, None, r.span);
                    }
                }
                _ => {}
            }
        }
        for e in &r.entries {
            match e {
                RecipeEntry::Field(f) => self.expr(&f.value),
                RecipeEntry::Evaluate { data, every, body, .. } => {
                    self.expr(data);
                    self.every(every);
                    self.expr(body);
                }
                RecipeEntry::Checkpoint { dir, every, .. } => {
                    self.expr(dir);
                    self.every(every);
                }
                RecipeEntry::Log { every, .. } => self.every(every),
                RecipeEntry::Step { params, body, span } => {
                    self.scopes.push(vec![]);
                    self.params(params, *span);
                    self.stmts(body, span.end);
                    self.scopes.pop();
                }
            }
        }
        self.scopes.pop();
    }

    fn every(&mut self, every: &Every) {
        if let Some(c) = &every.count {
            self.expr(c);
        }
    }

    fn stmts(&mut self, stmts: &[Stmt], end: u32) {
        for s in stmts {
            match s {
                Stmt::Let(name, e) => {
                    self.expr(e);
                    let owner = name.span.to(e.span);
                    self.def(name, DefKind::Local, (name.span.start, end), Some(e.span), owner);
                }
                Stmt::Update { target, grads, .. } => {
                    self.expr(target);
                    self.expr(grads);
                }
                Stmt::Log(e, _) | Stmt::Expr(e) => self.expr(e),
            }
        }
    }

    fn expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Name(n) => self.reference(n, e.span),
            ExprKind::List(xs) | ExprKind::Tuple(xs) => xs.iter().for_each(|x| self.expr(x)),
            ExprKind::Record(fields) => fields.iter().for_each(|(_, x)| self.expr(x)),
            ExprKind::Unary(_, x) | ExprKind::Field(x, _) | ExprKind::Checkpoint(x) | ExprKind::Precision(_, x) => self.expr(x),
            ExprKind::Binary(_, a, b) | ExprKind::Pipe(a, b) => {
                self.expr(a);
                self.expr(b);
            }
            ExprKind::Call(f, args) => {
                self.expr(f);
                args.iter().for_each(|a| self.expr(&a.value));
            }
            ExprKind::Index(x, items) => {
                self.expr(x);
                for item in items {
                    match item {
                        IndexItem::Single(i) => self.expr(i),
                        IndexItem::Slice { start, end, step, .. } => {
                            [start, end, step].into_iter().flatten().for_each(|x| self.expr(x));
                        }
                        IndexItem::Ellipsis(_) => {}
                    }
                }
            }
            ExprKind::Lambda(params, body) => {
                self.scopes.push(vec![]);
                for p in params {
                    self.def(p, DefKind::LambdaParam, (e.span.start, e.span.end), None, e.span);
                }
                self.expr(body);
                self.scopes.pop();
            }
            ExprKind::Block(stmts, tail) => {
                self.scopes.push(vec![]);
                self.stmts(stmts, e.span.end);
                if let Some(t) = tail {
                    self.expr(t);
                }
                self.scopes.pop();
            }
            ExprKind::If(c, a, b) => {
                self.expr(c);
                self.expr(a);
                self.expr(b);
            }
            ExprKind::Type(t) => self.ty(t, None),
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Str(_) | ExprKind::Bool(_) | ExprKind::Auto | ExprKind::Error => {}
        }
    }

    /// A type's sizes. In a declaration's signature (`owner`), a size no scope defines is
    /// defined there (the annotation binds it); elsewhere an unknown size is symbolic and no use.
    fn ty(&mut self, t: &TypeExpr, owner: Option<Span>) {
        match &t.kind {
            TypeKind::Tensor { dims: Some(dims), .. } => dims.iter().for_each(|d| self.dim(d, owner)),
            TypeKind::Union(ts) => ts.iter().for_each(|t| self.ty(t, owner)),
            TypeKind::Tensor { dims: None, .. } | TypeKind::Scalar(_) | TypeKind::Error => {}
        }
    }

    fn dim(&mut self, d: &DimExpr, owner: Option<Span>) {
        match d {
            DimExpr::Name(n, span) | DimExpr::Pack(n, span) => {
                // A pack's span has its `*`: the name is its end.
                let span = Span { start: span.end.saturating_sub(n.len() as u32).max(span.start), ..*span };
                if self.lookup(n).is_some() {
                    self.reference(n, span);
                } else if let Some(owner) = owner {
                    let at = Ident { name: n.clone(), span };
                    self.def(&at, DefKind::Dim, (owner.start, owner.end), None, owner);
                }
            }
            DimExpr::Product(ds, _) => ds.iter().for_each(|d| self.dim(d, owner)),
            DimExpr::Int(..) | DimExpr::Wild(_) | DimExpr::Ellipsis(_) => {}
        }
    }
}
