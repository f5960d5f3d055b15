//! Evaluation of expressions: literals, names, operators, pipes, blocks, `if`, indexing, fields.

use super::tracer::Tracer;
use super::value::{Func, Value};
use super::R;
use crate::diag::{did_you_mean, Diagnostic};
use crate::ir::{Op, UnaryOp};
use crate::span::Span;
use crate::syntax::ast::*;
use crate::types::{DType, Dim, TensorTy};
use std::rc::Rc;

impl Tracer {
    pub fn eval(&mut self, e: &Expr) -> R<Value> {
        let span = e.span;
        let r = match &e.kind {
            ExprKind::Int(v) => Ok(Value::Int(*v)),
            ExprKind::Float(v) => Ok(Value::Float(*v)),
            ExprKind::Str(s) => Ok(Value::Str(s.as_str().into())),
            ExprKind::Bool(b) => Ok(Value::Bool(*b)),
            ExprKind::Auto => Ok(Value::Auto),
            ExprKind::Name(n) => match self.lookup(n) {
                Some(v) => Ok(v),
                None if self.poisoned.contains(n) => Err(super::Reported),
                None => Err(self.unknown_name(n, span)),
            },
            ExprKind::List(elems) => self.tensor_literal(elems, span),
            ExprKind::Tuple(elems) => {
                let vals = elems.iter().map(|x| self.eval(x)).collect::<R<Vec<_>>>()?;
                Ok(Value::Tuple(Rc::new(vals)))
            }
            ExprKind::Record(fields) => {
                let mut out: Vec<(String, Value)> = vec![];
                for (name, x) in fields {
                    if out.iter().any(|(n, _)| *n == name.name) {
                        return self.err("E0203", format!("field `{}` is given twice", name.name), name.span, "second time");
                    }
                    let v = self.eval(x)?;
                    out.push((name.name.clone(), v));
                }
                Ok(Value::Record(Rc::new(out)))
            }
            ExprKind::Unary(op, x) => {
                let v = self.eval(x)?;
                self.unary_value(*op, v, span)
            }
            ExprKind::Binary(op, a, b) => {
                let va = self.eval(a)?;
                let vb = self.eval(b)?;
                self.binary_values(*op, &va, &vb, span)
            }
            ExprKind::Pipe(lhs, rhs) => {
                let v = self.eval(lhs)?;
                let lhs_span = lhs.span;
                if let Value::Pipeline(_) = v {
                    self.check_stage_name(rhs)?;
                }
                match &rhs.kind {
                    ExprKind::Call(f, args) => {
                        let fv = self.eval(f)?;
                        if let (Value::Func(func), Value::Tensor(_)) = (&fv, &v) {
                            if let Func::ModelCtor { decl, .. } = func.as_ref() {
                                return Err(self.layer_ctor_in_pipe(decl, rhs.span));
                            }
                        }
                        let mut vals = vec![(None, v, lhs_span)];
                        vals.extend(self.eval_args(args)?);
                        self.call(&fv, vals, span, f.span)
                    }
                    _ => {
                        let fv = self.eval(rhs)?;
                        self.call(&fv, vec![(None, v, lhs_span)], span, rhs.span)
                    }
                }
            }
            ExprKind::Call(f, args) => {
                let fv = match &f.kind {
                    ExprKind::Field(recv, name) => {
                        let rv = self.eval(recv)?;
                        if let Value::Tensor(_) = rv {
                            if let Some(d) = self.method_habit(recv.span, name, args, span) {
                                return Err(self.error(d));
                            }
                        }
                        self.field(rv, name, f.span)?
                    }
                    _ => self.eval(f)?,
                };
                let vals = self.eval_args(args)?;
                self.call(&fv, vals, span, f.span)
            }
            ExprKind::Index(x, items) => {
                let v = self.eval(x)?;
                self.index(v, items, span)
            }
            ExprKind::Field(x, name) => {
                let v = self.eval(x)?;
                self.field(v, name, span)
            }
            ExprKind::Lambda(params, body) => {
                Ok(Value::Func(Rc::new(Func::Lambda { params: params.clone(), body: body.clone(), ctx: self.ctx.clone() })))
            }
            ExprKind::Block(stmts, tail) => {
                let depth = self.ctx.env.len();
                let r = self.block(stmts, tail.as_deref());
                self.ctx.env.truncate(depth);
                r
            }
            ExprKind::If(c, a, b) => {
                let cv = self.eval(c)?;
                match cv {
                    Value::Bool(true) => self.eval(a),
                    Value::Bool(false) => self.eval(b),
                    Value::Tensor(_) => Err(self.error(
                        Diagnostic::error("E0314", "`if` needs a condition known at compile time, found a tensor", c.span)
                            .with_label("a tensor value")
                            .with_help("to choose elementwise, use `where(cond, a, b)`"),
                    )),
                    other => self.err(
                        "E0314",
                        format!("`if` needs a bool condition, found {}", other.kind()),
                        c.span,
                        format!("this is {}", other.kind()),
                    ),
                }
            }
            ExprKind::Checkpoint(body) => {
                let g = &mut self.graph;
                let block = g.checkpoints.iter().position(|s| *s == span).unwrap_or_else(|| {
                    g.checkpoints.push(span);
                    g.checkpoints.len() - 1
                });
                // A block inside another is part of the outer one.
                let outer = g.active_checkpoint;
                g.active_checkpoint = Some(outer.unwrap_or(block));
                let v = self.eval(body);
                self.graph.active_checkpoint = outer;
                v
            }
            ExprKind::Precision(word, body) => {
                let dtype = match word.name.as_str() {
                    // There is no TF32 on the CPU: f32 products, as the recipe's `tf32` gives.
                    "f32" | "tf32" => DType::F32,
                    "bf16" => DType::BF16,
                    "f16" => DType::F16,
                    other => {
                        let found = if DType::from_name(other).is_some() { "a dtype" } else { "a name" };
                        return self.err(
                            "E0403",
                            format!("`precision` should be one of `f32`, `bf16`, `f16`, `tf32`, found {found}"),
                            word.span,
                            format!("this is `{other}`"),
                        );
                    }
                };
                let outer = self.graph.active_precision;
                self.graph.active_precision = Some(dtype);
                let v = self.eval(body);
                self.graph.active_precision = outer;
                v
            }
            ExprKind::Type(t) => self.type_value(t),
            ExprKind::Error => Err(super::Reported),
        };
        if let (Ok(v), Some(_)) = (&r, &self.recorded) {
            self.record_value(span, v);
        }
        r
    }

    /// Keep the first value traced at `span` outside the standard library (`Tracer::recorded`).
    fn record_value(&mut self, span: Span, v: &Value) {
        if self.is_std_file(span) {
            return;
        }
        if let Some(rec) = self.recorded.as_mut() {
            rec.entry(span).or_insert_with(|| v.clone());
        }
    }

    /// `x |> MaxPool2d(2)`: the constructor would take the tensor as its first argument. In
    /// PyTorch `nn.Sequential(..., nn.MaxPool2d(2))` builds the layer; here a layer is a field.
    fn layer_ctor_in_pipe(&mut self, decl: &crate::syntax::ast::ModelDecl, span: Span) -> super::Reported {
        let name = &decl.name.name;
        let first = decl.params.first().map(|p| format!(" (its `{}`)", p.name.name)).unwrap_or_default();
        self.error(
            Diagnostic::error(
                "E0308",
                format!("`{name}(...)` builds a layer: a tensor piped into it would be its first argument{first}"),
                span,
            )
            .with_label("a layer constructor, not a layer")
            .with_help(format!("declare the layer as a field of the model (`layer = {name}(...)`) and pipe into the field (`|> layer`)")),
        )
    }

    /// `pipeline |> stage(...)` with a stage name that does not exist: say which stages do.
    fn check_stage_name(&mut self, rhs: &Expr) -> R<()> {
        let callee = match &rhs.kind {
            ExprKind::Call(f, _) => f,
            _ => rhs,
        };
        if let ExprKind::Name(n) = &callee.kind {
            if self.lookup(n).is_none() && !self.poisoned.contains(n) {
                let stages = ["map", "shuffle", "batch", "pad_batch", "bucket", "pack", "prefetch", "take", "skip", "split"];
                let mut d = Diagnostic::error("E0404", format!("unknown data stage `{n}`"), callee.span).with_label("not a pipeline stage");
                d = match did_you_mean(n, stages) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_note(format!("stages: {}", stages.join(", "))),
                };
                if self.lookup("shuffle").is_none() {
                    d = d.with_note("data stages come from `std.data`: add `use std.data`");
                }
                return Err(self.error(d));
            }
        }
        Ok(())
    }

    fn block(&mut self, stmts: &[Stmt], tail: Option<&Expr>) -> R<Value> {
        for s in stmts {
            match s {
                Stmt::Let(name, x) => {
                    let v = self.eval(x)?;
                    self.bind(&name.name, v);
                }
                Stmt::Expr(x) => {
                    self.eval(x)?;
                }
                Stmt::Update { span, .. } | Stmt::Log(_, span) => {
                    return self.err(
                        "E0310",
                        "`update` and `log` statements belong in a `step` block of a `train` recipe",
                        *span,
                        "not allowed here",
                    );
                }
            }
        }
        match tail {
            Some(t) => self.eval(t),
            None => Ok(Value::unit()),
        }
    }

    pub fn eval_args(&mut self, args: &[Arg]) -> R<Vec<(Option<Ident>, Value, Span)>> {
        let mut out = vec![];
        for a in args {
            let v = self.eval(&a.value)?;
            out.push((a.name.clone(), v, a.value.span));
        }
        Ok(out)
    }

    fn unary_value(&mut self, op: UnOp, v: Value, span: Span) -> R<Value> {
        match (op, v) {
            (UnOp::Neg, Value::Int(i)) => Ok(Value::Int(i.wrapping_neg())),
            (UnOp::Neg, Value::Float(f)) => Ok(Value::Float(-f)),
            (UnOp::Not, Value::Bool(b)) => Ok(Value::Bool(!b)),
            (UnOp::Neg, Value::Tensor(n)) => {
                if self.ty(n).dtype == DType::Bool {
                    return self.err("E0307", "`-` is not defined on bool tensors; use `not`", span, "bool tensor");
                }
                Ok(Value::Tensor(self.unary(UnaryOp::Neg, n, span)))
            }
            (UnOp::Not, Value::Tensor(n)) => {
                if self.ty(n).dtype != DType::Bool {
                    let d = self.ty(n).dtype;
                    return self.err("E0307", format!("`not` needs a bool tensor, found {d}"), span, "not bool");
                }
                Ok(Value::Tensor(self.unary(UnaryOp::Not, n, span)))
            }
            (op, v) => {
                let sym = if op == UnOp::Neg { "-" } else { "not" };
                self.err("E0310", format!("`{sym}` cannot be applied to {}", v.kind()), span, format!("this is {}", v.kind()))
            }
        }
    }

    /// `[[1, 2], [3, 4]]`: a rectangular nest of numbers.
    fn tensor_literal(&mut self, elems: &[Expr], span: Span) -> R<Value> {
        fn walk(t: &mut Tracer, e: &Expr, depth: usize, shape: &mut Vec<usize>, vals: &mut Vec<(f64, u8)>) -> R<()> {
            match &e.kind {
                ExprKind::List(inner) => {
                    if inner.is_empty() {
                        return t.err("E0310", "empty tensor literals are not allowed", e.span, "empty").map(|_: ()| ());
                    }
                    if shape.len() == depth {
                        shape.push(inner.len());
                    } else if shape.len() < depth || shape[depth] != inner.len() {
                        return t.err("E0303", "tensor literal is not rectangular", e.span, format!("{} elements here", inner.len()));
                    }
                    for x in inner {
                        walk(t, x, depth + 1, shape, vals)?;
                    }
                    Ok(())
                }
                _ => {
                    if shape.len() != depth {
                        return t.err("E0303", "tensor literal is not rectangular", e.span, "a number where a list was expected");
                    }
                    match t.eval(e)? {
                        Value::Int(i) => vals.push((i as f64, 1)),
                        Value::Float(f) => vals.push((f, 2)),
                        Value::Bool(b) => vals.push((if b { 1.0 } else { 0.0 }, 0)),
                        other => {
                            return t.err(
                                "E0310",
                                format!("tensor literal elements must be numbers, found {}", other.kind()),
                                e.span,
                                "not a number",
                            )
                        }
                    }
                    Ok(())
                }
            }
        }
        let whole = Expr { kind: ExprKind::List(elems.to_vec()), span };
        let mut shape = vec![];
        let mut vals = vec![];
        walk(self, &whole, 0, &mut shape, &mut vals)?;
        let kind = vals.iter().map(|v| v.1).max().unwrap_or(2);
        if vals.iter().any(|v| v.1 == 0) && kind != 0 {
            return self.err("E0307", "tensor literal mixes bools and numbers", span, "mixed element kinds");
        }
        let dtype = match kind {
            0 => DType::Bool,
            1 => DType::I64,
            _ => DType::F32,
        };
        let id = self.graph.add_literal(vals.into_iter().map(|v| v.0).collect());
        let shape = shape.into_iter().map(|d| Dim::known(d as i64)).collect();
        Ok(Value::Tensor(self.node(Op::Literal(id), dtype, shape, vec![], span)))
    }

    /// A type written as a value: `f32[2, 3]` is a tensor type, a bare `f32` a dtype.
    pub fn type_value(&mut self, t: &TypeExpr) -> R<Value> {
        match &t.kind {
            TypeKind::Tensor { dtype, dims: None } => Ok(Value::DType(*dtype)),
            TypeKind::Scalar(ScalarKind::Bool) => Ok(Value::DType(DType::Bool)),
            TypeKind::Tensor { dtype, dims: Some(dims) } => {
                let mut shape = vec![];
                for d in dims {
                    shape.push(match d {
                        DimExpr::Int(n, _) => Dim::known(*n),
                        DimExpr::Wild(_) => Dim::Any,
                        DimExpr::Name(n, s) => match self.lookup(n) {
                            Some(Value::Int(i)) => Dim::known(i),
                            Some(Value::Dim(d)) => d,
                            Some(other) => {
                                return self.err("E0310", format!("`{n}` is {}, not a size", other.kind()), *s, "expected an int");
                            }
                            None => return Err(self.unknown_name(n, *s)),
                        },
                        DimExpr::Product(factors, s) => {
                            let mut acc = Dim::known(1);
                            for f in factors {
                                let one = TypeExpr { kind: TypeKind::Tensor { dtype: *dtype, dims: Some(vec![f.clone()]) }, span: *s };
                                match self.type_value(&one)? {
                                    Value::Type(t) => acc = acc.mul(&t.shape[0]),
                                    _ => return Err(super::Reported),
                                }
                            }
                            acc
                        }
                        DimExpr::Ellipsis(s) => {
                            return self.err("E0310", "`...` is only allowed in type annotations", *s, "not allowed in a value");
                        }
                        DimExpr::Pack(n, s) => {
                            return self.err("E0310", format!("`*{n}` is only allowed in type annotations"), *s, "not allowed in a value");
                        }
                    });
                }
                for d in &shape {
                    if let Some(v) = d.as_known() {
                        if v < 0 {
                            return self.err("E0303", format!("dimension sizes cannot be negative, found {v}"), t.span, "negative size");
                        }
                    }
                }
                Ok(Value::Type(TensorTy::new(*dtype, shape)))
            }
            TypeKind::Scalar(_) => self.err("E0310", "a scalar type is not a value", t.span, "use it in a parameter annotation"),
            TypeKind::Union(_) => self.err("E0310", "`or` between types is only allowed in annotations", t.span, "not a value"),
            TypeKind::Error => Err(super::Reported),
        }
    }

    /// `x.reshape(3, 4)`, a PyTorch tensor method: DL tensors have fields but no methods, so the
    /// answer is the function that does it, written with the call's own operands.
    fn method_habit(&self, recv: Span, name: &Ident, args: &[Arg], call: Span) -> Option<Diagnostic> {
        let text = &self.sources.get(call.file).text;
        let src = |s: Span| text.get(s.range()).unwrap_or("").to_string();
        let written = match (args.first(), args.last()) {
            (Some(first), Some(last)) => {
                let start = first.name.as_ref().map_or(first.value.span, |n| n.span);
                src(start.to(last.value.span))
            }
            _ => String::new(),
        };
        let form = crate::habits::tensor_method(&name.name, &src(recv), &written)?;
        Some(
            Diagnostic::error("E0204", format!("a tensor has no method `{}`", name.name), name.span)
                .with_label("a PyTorch tensor method")
                .with_help(format!("DL writes this as a function: `{form}`"))
                .with_note("tensors have the fields shape, dtype, ndim and T; operations are functions that take the tensor first"),
        )
    }

    fn field(&mut self, v: Value, name: &Ident, span: Span) -> R<Value> {
        let n = name.name.as_str();
        let fail = |t: &mut Tracer, what: &str, candidates: Vec<String>| -> R<Value> {
            let mut d = Diagnostic::error("E0204", format!("{what} has no field or method `{n}`"), name.span).with_label("unknown field");
            if let Some(s) = did_you_mean(n, candidates.iter().map(|s| s.as_str())) {
                d = d.with_help(format!("did you mean `{s}`?"));
            } else if !candidates.is_empty() {
                d = d.with_note(format!("available: {}", candidates.join(", ")));
            }
            Err(t.error(d))
        };
        match &v {
            Value::Tensor(x) => {
                let ty = self.ty(*x);
                match n {
                    "shape" => Ok(shape_value(&ty.shape)),
                    "dtype" => Ok(Value::DType(ty.dtype)),
                    "ndim" => Ok(Value::Int(ty.rank() as i64)),
                    "T" => {
                        let perm: Vec<usize> = (0..ty.rank()).rev().collect();
                        Ok(Value::Tensor(self.permute(*x, &perm, span)))
                    }
                    _ => fail(self, "a tensor", vec!["shape".into(), "dtype".into(), "ndim".into(), "T".into()]),
                }
            }
            Value::Type(ty) => match n {
                "shape" => Ok(shape_value(&ty.shape)),
                "dtype" => Ok(Value::DType(ty.dtype)),
                _ => fail(self, "a tensor type", vec!["shape".into(), "dtype".into()]),
            },
            Value::Record(fields) => match v.field(n) {
                Some(x) => Ok(x),
                None => fail(self, "this record", fields.iter().map(|(k, _)| k.clone()).collect()),
            },
            Value::Tuple(elems) => match n.parse::<usize>() {
                Ok(i) if i < elems.len() => Ok(elems[i].clone()),
                _ => fail(self, &format!("a tuple of {} elements", elems.len()), vec![]),
            },
            Value::Model(inst) => {
                if let Some(x) = inst.lookup(n) {
                    return Ok(x);
                }
                if let Some(m) = inst.decl.methods.iter().find(|m| m.name.name == n) {
                    return Ok(Value::Func(Rc::new(Func::Method { model: inst.clone(), decl: m.clone() })));
                }
                let mut c: Vec<String> = inst.fields.iter().chain(inst.hparams.iter()).map(|(k, _)| k.clone()).collect();
                c.extend(inst.decl.methods.iter().map(|m| m.name.name.clone()));
                let what = format!("model `{}`", inst.decl.name.name);
                fail(self, &what, c)
            }
            other => {
                let what = other.kind().to_string();
                fail(self, &what, vec![])
            }
        }
    }
}

pub fn shape_value(shape: &[Dim]) -> Value {
    Value::Tuple(Rc::new(
        shape
            .iter()
            .map(|d| match d.as_known() {
                Some(v) => Value::Int(v),
                None => Value::Dim(d.clone()),
            })
            .collect(),
    ))
}
