//! Calls: argument binding (positional, named, defaults), type annotations with symbolic dims,
//! and the frames that function, lambda and method bodies run in.

use super::annot::DimEnv;
use super::tracer::Tracer;
use super::value::{Ctx, Func, Value};
use super::R;
use crate::diag::Diagnostic;
use crate::span::Span;
use crate::syntax::ast::*;
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
            let mut dims = DimEnv::default();
            let bound = t.bind_params(&decl.params, args, &name, span, &mut dims)?;
            for (n, v) in bound {
                t.bind(&n, v);
            }
            // Symbolic dims of the annotations are names in the body: `forward(x: f32[B, T])`
            // can use `T` (an int when known, a symbolic size otherwise).
            for (n, d) in dims.sizes() {
                if t.lookup(&n).is_none() {
                    let v = d.as_known().map(Value::Int).unwrap_or(Value::Dim(d));
                    t.bind(&n, v);
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
    pub fn bind_params(&mut self, params: &[Param], args: Args, callee: &str, span: Span, dims: &mut DimEnv) -> R<Vec<(String, Value)>> {
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
}
