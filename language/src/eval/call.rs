//! Calls: argument binding (positional, named, defaults), type annotations with symbolic dims,
//! and the frames that function, lambda and method bodies run in.

use super::tracer::Tracer;
use super::value::{Ctx, Func, Value};
use super::R;
use crate::diag::Diagnostic;
use crate::span::Span;
use crate::syntax::ast::*;
use crate::types::{Dim, TensorTy};
use std::collections::HashMap;
use std::rc::Rc;

pub type Args = Vec<(Option<Ident>, Value, Span)>;

impl Tracer {
    pub fn call(&mut self, f: &Value, args: Args, span: Span, callee_span: Span) -> R<Value> {
        match f {
            Value::Func(func) => match &**func {
                Func::Builtin(name) => {
                    self.call_stack.push((name.to_string(), span));
                    let r = super::builtins::call(self, name, args, span);
                    self.call_stack.pop();
                    r
                }
                Func::User { decl, module } => {
                    let ctx = Ctx { module: *module, instance: None, env: vec![] };
                    self.call_decl(decl.clone(), ctx, args, span)
                }
                Func::Method { model, decl } => {
                    let ctx = Ctx { module: model.module, instance: Some(model.clone()), env: vec![] };
                    self.call_decl(decl.clone(), ctx, args, span)
                }
                Func::Lambda { params, body, ctx } => {
                    if let Some((Some(name), _, _)) = args.iter().find(|a| a.0.is_some()) {
                        return self.err("E0205", "lambdas take positional arguments only", name.span, "named argument");
                    }
                    if args.len() > params.len() {
                        let extra = args[params.len()].2;
                        return self.err(
                            "E0207",
                            format!("this lambda takes {} argument(s) but {} were given", params.len(), args.len()),
                            extra,
                            "unexpected argument",
                        );
                    }
                    if args.len() < params.len() {
                        let missing = &params[args.len()].name;
                        return self.err(
                            "E0206",
                            format!("this lambda takes {} argument(s) but {} were given", params.len(), args.len()),
                            span,
                            format!("`{missing}` not given"),
                        );
                    }
                    let mut ctx = ctx.clone();
                    for (p, (_, v, _)) in params.iter().zip(args) {
                        ctx.env.push((p.name.clone(), v));
                    }
                    let body = body.clone();
                    self.call_stack.push(("lambda".into(), span));
                    let r = self.in_frame(ctx, |t| t.eval(&body));
                    self.call_stack.pop();
                    r
                }
                Func::ModelCtor { decl, module } => self.instantiate(decl.clone(), *module, args, span),
            },
            Value::Model(inst) => match inst.decl.methods.iter().find(|m| m.name.name == "forward") {
                Some(fwd) => {
                    let ctx = Ctx { module: inst.module, instance: Some(inst.clone()), env: vec![] };
                    self.call_decl(fwd.clone(), ctx, args, span)
                }
                None => self.err(
                    "E0204",
                    format!("model `{}` has no `forward` method, so it cannot be called", inst.decl.name.name),
                    callee_span,
                    "no forward",
                ),
            },
            other => {
                let kind = other.kind();
                self.err("E0310", format!("expected a function, found {kind}"), callee_span, format!("this is {kind}, not callable"))
            }
        }
    }

    fn call_decl(&mut self, decl: Rc<FnDecl>, ctx: Ctx, args: Args, span: Span) -> R<Value> {
        let key = Rc::as_ptr(&decl) as usize;
        let name = match &ctx.instance {
            Some(m) => format!("{}.{}", m.decl.name.name, decl.name.name),
            None => decl.name.name.clone(),
        };
        if self.active_fns.contains(&key) {
            return Err(self.error(
                Diagnostic::error("E0208", format!("`{name}` calls itself"), span)
                    .with_label("recursive call")
                    .with_note("DL functions are inlined into the graph at compile time, so recursion has no end")
                    .with_help("write the repetition with a fixed number of layers or a tensor op"),
            ));
        }
        self.active_fns.push(key);
        self.call_stack.push((name.clone(), span));
        let r = self.in_frame(ctx, |t| {
            let mut dims = HashMap::new();
            let bound = t.bind_params(&decl.params, args, &name, span, &mut dims)?;
            for (n, v) in bound {
                t.bind(&n, v);
            }
            // Symbolic dims of the annotations are names in the body: `forward(x: f32[B, T])`
            // can use `T` (an int when known, a symbolic size otherwise).
            let mut syms: Vec<(&String, &Dim)> = dims.iter().collect();
            syms.sort_by(|a, b| a.0.cmp(b.0));
            for (n, d) in syms {
                if t.lookup(n).is_none() {
                    let v = d.as_known().map(Value::Int).unwrap_or_else(|| Value::Dim(d.clone()));
                    t.bind(n, v);
                }
            }
            let out = t.eval(&decl.body)?;
            if let Some(ret) = &decl.ret {
                let what = format!("the result of `{name}`");
                return t.check_annot(out, ret, &mut dims, decl.body.span, &what, "E0309");
            }
            Ok(out)
        });
        self.call_stack.pop();
        self.active_fns.pop();
        r
    }

    /// Match arguments to parameters; evaluates defaults and checks annotations in the current
    /// (callee's) frame, binding each parameter as it goes so later defaults can use it.
    pub fn bind_params(
        &mut self,
        params: &[Param],
        args: Args,
        callee: &str,
        span: Span,
        dims: &mut HashMap<String, Dim>,
    ) -> R<Vec<(String, Value)>> {
        let mut slots: Vec<Option<(Value, Span)>> = vec![None; params.len()];
        let mut next = 0;
        for (name, v, s) in args {
            match name {
                None => {
                    if next >= params.len() {
                        return Err(self.error(
                            Diagnostic::error("E0207", format!("`{callee}` takes {} argument(s) but more were given", params.len()), s)
                                .with_label("unexpected argument"),
                        ));
                    }
                    slots[next] = Some((v, s));
                    next += 1;
                }
                Some(n) => match params.iter().position(|p| p.name.name == n.name) {
                    Some(i) if slots[i].is_none() => slots[i] = Some((v, s)),
                    Some(_) => return self.err("E0205", format!("argument `{}` is given twice", n.name), n.span, "given again here"),
                    None => {
                        let mut d = Diagnostic::error("E0205", format!("`{callee}` has no parameter named `{}`", n.name), n.span)
                            .with_label("unknown argument name");
                        let names: Vec<&str> = params.iter().map(|p| p.name.name.as_str()).collect();
                        if let Some(s) = crate::habits::param_suggestion(&n.name, &names) {
                            d = d.with_help(format!("did you mean `{s}`?"));
                        } else {
                            d = d.with_note(format!("parameters: {}", names.join(", ")));
                        }
                        return Err(self.error(d));
                    }
                },
            }
        }
        let mut out = vec![];
        for (p, slot) in params.iter().zip(slots) {
            let (v, s) = match slot {
                Some(x) => x,
                None => match &p.default {
                    Some(d) => (self.eval(d)?, d.span),
                    None => {
                        return Err(self.error(
                            Diagnostic::error("E0206", format!("missing argument `{}` in call to `{callee}`", p.name.name), span)
                                .with_label(format!("`{}` not given", p.name.name))
                                .with_secondary(p.span, "parameter declared here"),
                        ))
                    }
                },
            };
            let v = match &p.ty {
                Some(t) => {
                    let what = format!("argument `{}` of `{callee}`", p.name.name);
                    self.check_annot(v, t, dims, s, &what, "E0308")?
                }
                None => v,
            };
            self.bind(&p.name.name, v.clone());
            out.push((p.name.name.clone(), v));
        }
        Ok(out)
    }

    /// Check a value against a type annotation, binding symbolic dims on first use.
    /// Numbers are converted where the annotation asks (an int for a `float`, a number for `f32`).
    pub fn check_annot(
        &mut self,
        v: Value,
        t: &TypeExpr,
        dims: &mut HashMap<String, Dim>,
        at: Span,
        what: &str,
        code: &'static str,
    ) -> R<Value> {
        let mismatch = |tr: &mut Tracer, found: String| -> R<Value> {
            Err(tr.error(
                Diagnostic::error(code, format!("{what} should be {}, found {found}", type_text(t)), at)
                    .with_label(format!("this is {found}"))
                    .with_secondary(t.span, "expected because of this type"),
            ))
        };
        match &t.kind {
            TypeKind::Error => Ok(v),
            TypeKind::Scalar(k) => match (k, &v) {
                (ScalarKind::Int, Value::Int(_) | Value::Dim(_)) => Ok(v),
                (ScalarKind::Float, Value::Float(_)) => Ok(v),
                (ScalarKind::Float, Value::Int(i)) => Ok(Value::Float(*i as f64)),
                (ScalarKind::Bool, Value::Bool(_)) => Ok(v),
                (ScalarKind::Str, Value::Str(_)) => Ok(v),
                _ => mismatch(self, v.kind().to_string()),
            },
            TypeKind::Tensor { dtype, dims: pat } => {
                let node = match &v {
                    Value::Tensor(n) => *n,
                    Value::Int(_) | Value::Float(_) | Value::Bool(_) if pat.as_ref().map(|p| p.is_empty()).unwrap_or(true) => {
                        self.to_tensor(&v, Some(*dtype), at)?
                    }
                    _ => return mismatch(self, v.kind().to_string()),
                };
                let ty = self.ty(node);
                if ty.dtype != *dtype {
                    return mismatch(self, ty.to_string());
                }
                let pat: Vec<DimExpr> = pat.clone().unwrap_or_default();
                match self.match_dims(&ty, &pat, dims) {
                    Ok(()) => Ok(Value::Tensor(node)),
                    Err(detail) => {
                        let r = mismatch(self, ty.to_string());
                        if let Some(d) = self.diags.last_mut() {
                            if d.code == code {
                                d.notes.push(detail);
                            }
                        }
                        r
                    }
                }
            }
        }
    }

    fn match_dims(&mut self, ty: &TensorTy, pat: &[DimExpr], dims: &mut HashMap<String, Dim>) -> Result<(), String> {
        let ell = pat.iter().position(|d| matches!(d, DimExpr::Ellipsis(_)));
        let fixed = pat.len() - ell.map(|_| 1).unwrap_or(0);
        if (ell.is_none() && ty.rank() != fixed) || (ell.is_some() && ty.rank() < fixed) {
            return Err(format!("expected rank {}{}, found rank {}", if ell.is_some() { "at least " } else { "" }, fixed, ty.rank()));
        }
        let mut pairs: Vec<(&DimExpr, &Dim, usize)> = vec![];
        match ell {
            None => pairs.extend(pat.iter().zip(ty.shape.iter()).enumerate().map(|(i, (p, d))| (p, d, i))),
            Some(e) => {
                for (i, p) in pat[..e].iter().enumerate() {
                    pairs.push((p, &ty.shape[i], i));
                }
                let tail = pat.len() - e - 1;
                for (j, p) in pat[e + 1..].iter().enumerate() {
                    let i = ty.rank() - tail + j;
                    pairs.push((p, &ty.shape[i], i));
                }
            }
        }
        for (p, d, i) in pairs {
            match p {
                DimExpr::Int(n, _) => {
                    if !d.compatible(&Dim::known(*n)) {
                        return Err(format!("dimension {i} is {d}, expected {n}"));
                    }
                }
                DimExpr::Name(n, _) => {
                    let expected = match self.lookup(n) {
                        Some(Value::Int(v)) => Some(Dim::known(v)),
                        Some(Value::Dim(x)) => Some(x),
                        _ => dims.get(n).cloned(),
                    };
                    match expected {
                        Some(e) => {
                            if !d.compatible(&e) {
                                return Err(format!("dimension {i} is {d}, but `{n}` is {e}"));
                            }
                        }
                        None => {
                            dims.insert(n.clone(), d.clone());
                        }
                    }
                }
                DimExpr::Product(factors, _) => {
                    // Checkable once every factor is known here; a product does not bind names.
                    if let Some(expected) = self.product_dim(factors, dims) {
                        if !d.compatible(&expected) {
                            return Err(format!("dimension {i} is {d}, expected {expected}"));
                        }
                    }
                }
                DimExpr::Wild(_) | DimExpr::Ellipsis(_) => {}
            }
        }
        Ok(())
    }

    fn product_dim(&self, factors: &[DimExpr], dims: &HashMap<String, Dim>) -> Option<Dim> {
        let mut acc = Dim::known(1);
        for f in factors {
            let d = match f {
                DimExpr::Int(n, _) => Dim::known(*n),
                DimExpr::Name(n, _) => match self.lookup(n) {
                    Some(Value::Int(v)) => Dim::known(v),
                    Some(Value::Dim(x)) => x,
                    _ => dims.get(n)?.clone(),
                },
                _ => return None,
            };
            acc = acc.mul(&d);
        }
        Some(acc)
    }

    /// A tensor of the annotated type with symbolic dims, for checking a definition on its own.
    pub fn symbolic_arg(&mut self, name: &str, t: &TypeExpr) -> Option<Value> {
        match &t.kind {
            TypeKind::Tensor { dtype, dims } => {
                let mut shape = vec![];
                for d in dims.clone().unwrap_or_default() {
                    shape.push(match d {
                        DimExpr::Int(n, _) => Dim::known(n),
                        DimExpr::Wild(_) => Dim::Any,
                        DimExpr::Name(n, _) => match self.lookup(&n) {
                            Some(Value::Int(v)) => Dim::known(v),
                            _ => Dim::sym(&n),
                        },
                        DimExpr::Ellipsis(_) => return None,
                        DimExpr::Product(factors, _) => {
                            let mut acc = Dim::known(1);
                            for f in &factors {
                                acc = acc.mul(&match f {
                                    DimExpr::Int(n, _) => Dim::known(*n),
                                    DimExpr::Name(n, _) => match self.lookup(n) {
                                        Some(Value::Int(v)) => Dim::known(v),
                                        _ => Dim::sym(n),
                                    },
                                    _ => return None,
                                });
                            }
                            acc
                        }
                    });
                }
                let ty = TensorTy::new(*dtype, shape);
                let id = self.graph.add_input(name, ty.clone());
                Some(Value::Tensor(self.node(crate::ir::Op::Input(id), ty.dtype, ty.shape, vec![], t.span)))
            }
            _ => None,
        }
    }
}

pub fn type_text(t: &TypeExpr) -> String {
    match &t.kind {
        TypeKind::Scalar(k) => match k {
            ScalarKind::Int => "an int",
            ScalarKind::Float => "a float",
            ScalarKind::Bool => "a bool",
            ScalarKind::Str => "a string",
        }
        .to_string(),
        TypeKind::Tensor { dtype, dims: None } => format!("{dtype}[]"),
        TypeKind::Tensor { dtype, dims: Some(d) } => {
            let ds: Vec<String> = d
                .iter()
                .map(|x| match x {
                    DimExpr::Int(n, _) => n.to_string(),
                    DimExpr::Name(n, _) => n.clone(),
                    DimExpr::Wild(_) => "_".into(),
                    DimExpr::Ellipsis(_) => "...".into(),
                    DimExpr::Product(f, _) => f
                        .iter()
                        .map(|x| match x {
                            DimExpr::Int(n, _) => n.to_string(),
                            DimExpr::Name(n, _) => n.clone(),
                            _ => "?".into(),
                        })
                        .collect::<Vec<_>>()
                        .join(" * "),
                })
                .collect();
            format!("{dtype}[{}]", ds.join(", "))
        }
        TypeKind::Error => "?".into(),
    }
}
