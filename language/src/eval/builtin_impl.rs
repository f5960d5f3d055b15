//! The builtins' implementations: each binds its arguments (see `builtins::TABLE`) and builds
//! graph nodes through the op builders.

use super::builtins::{bind, TABLE};
use super::call::Args;
use super::tracer::Tracer;
use super::value::Value;
use super::R;
use crate::ir::{Init, Op, ParamInfo, PoolKind, RandDist, ReduceOp, UnaryOp};
use crate::span::Span;
use crate::types::rules::{self, Conv2dAttrs};
use crate::types::{DType, Dim};

pub fn call(t: &mut Tracer, name: &'static str, args: Args, span: Span) -> R<Value> {
    let params = TABLE.iter().find(|(n, _, _)| *n == name).map(|x| x.2).unwrap_or(&[]);
    if let Some(module) = TABLE.iter().find(|(n, _, _)| *n == name).map(|x| x.1) {
        if module == "std.data" {
            let b = bind(t, name, params, args, span)?;
            return t.data_builtin(name, &b);
        }
    }
    // `take(pipeline, n)` is the data stage; `take(tensor, idx)` the gather.
    if name == "take" && matches!(args.first(), Some((None, Value::Pipeline(_), _))) {
        let b = bind(t, "take", &["pipeline", "n"], args, span)?;
        return t.data_builtin("take", &b);
    }
    let b = bind(t, name, params, args, span)?;
    let tv = |n| Ok(Value::Tensor(n));
    match name {
        "print" => {
            if t.mode == super::Mode::Run {
                t.effects.push((b.rest.iter().map(|(v, _)| v.clone()).collect(), span));
            }
            Ok(Value::unit())
        }
        "zeros" | "ones" | "full" => {
            let ty = t.arg_type(&b, "type")?;
            let v = match name {
                "zeros" => 0.0,
                "ones" => 1.0,
                _ => t.arg_float(&b, "value", 0.0)?,
            };
            let c = t.constant(v, ty.dtype, span);
            tv(t.expand_to(c, &ty.shape, span))
        }
        "randn" | "rand" | "rand_like" | "randn_like" => {
            let ty = if name.ends_with("_like") {
                let x = t.arg_tensor(&b, "x")?;
                t.ty(x)
            } else {
                t.arg_type(&b, "type")?
            };
            if !ty.dtype.is_float() {
                return t.err("E0307", format!("`{name}` makes float tensors, found {}", ty.dtype), b.span_of("type"), "not a float type");
            }
            let default_seed = t.next_seed() as i64;
            let seed = t.arg_int(&b, "seed", default_seed)? as u64;
            let dist = if name.starts_with("randn") { RandDist::Normal } else { RandDist::Uniform };
            // Inside a training step the stream also depends on the step number, so dropout
            // masks differ from step to step yet repeat exactly on a resumed run.
            let src = if t.training { t.step_input.into_iter().collect() } else { vec![] };
            tv(t.node(Op::Rand { dist, seed }, ty.dtype, ty.shape, src, span))
        }
        "arange" => {
            // `arange(T)` with a symbolic size (checking a generic function).
            if let (Some((Value::Dim(d), _)), None) = (b.get("start").cloned(), b.get("end")) {
                if d.as_known().is_none() {
                    return tv(t.node(Op::Iota, DType::I64, vec![d], vec![], span));
                }
            }
            let a = t.arg_int(&b, "start", 0)?;
            let (start, end) = match b.get("end") {
                Some(_) => (a, t.arg_int(&b, "end", 0)?),
                None => (0, a),
            };
            let step = t.arg_int(&b, "step", 1)?;
            if step == 0 {
                return t.err("E0311", "arange step cannot be zero", b.span_of("step"), "zero");
            }
            let n = ((end - start) as f64 / step as f64).ceil().max(0.0) as i64;
            let iota = t.node(Op::Iota, DType::I64, vec![Dim::known(n)], vec![], span);
            if start == 0 && step == 1 {
                return tv(iota);
            }
            let sc = t.constant(step as f64, DType::I64, span);
            let st = t.constant(start as f64, DType::I64, span);
            let m = t.tensor_binary(crate::ir::BinaryOp::Mul, iota, sc, span)?;
            tv(t.tensor_binary(crate::ir::BinaryOp::Add, m, st, span)?)
        }
        "eye" => {
            let n = t.arg_int(&b, "n", 0)?;
            let i = t.node(Op::Iota, DType::I64, vec![Dim::known(n)], vec![], span);
            let r = t.reshape(i, vec![Dim::known(n), Dim::known(1)], span);
            let eq = t.tensor_binary(crate::ir::BinaryOp::CmpEq, r, i, span)?;
            tv(t.cast(eq, DType::F32, span))
        }
        "exp" | "log" | "sqrt" | "rsqrt" | "sin" | "cos" | "tanh" | "erf" | "abs" | "floor" => {
            let (v, s) = b.get("x").cloned().ok_or(super::Reported)?;
            if let Some(f) = v.as_float() {
                // Compile-time math on plain numbers (e.g. `1.0 / sqrt(fan_in)` in an initialiser).
                let r = match name {
                    "exp" => f.exp(),
                    "log" => f.ln(),
                    "sqrt" => f.sqrt(),
                    "rsqrt" => 1.0 / f.sqrt(),
                    "sin" => f.sin(),
                    "cos" => f.cos(),
                    "tanh" => f.tanh(),
                    "erf" => erf(f),
                    "abs" => return Ok(if let Value::Int(i) = v { Value::Int(i.abs()) } else { Value::Float(f.abs()) }),
                    _ => f.floor(),
                };
                return Ok(Value::Float(r));
            }
            let x = t.to_tensor(&v, None, s)?;
            let op = match name {
                "exp" => UnaryOp::Exp,
                "log" => UnaryOp::Log,
                "sqrt" | "rsqrt" => UnaryOp::Sqrt,
                "sin" => UnaryOp::Sin,
                "cos" => UnaryOp::Cos,
                "tanh" => UnaryOp::Tanh,
                "erf" => UnaryOp::Erf,
                "abs" => UnaryOp::Abs,
                _ => UnaryOp::Floor,
            };
            let y = t.unary(op, x, span);
            tv(if name == "rsqrt" { t.unary(UnaryOp::Recip, y, span) } else { y })
        }
        "maximum" | "minimum" => {
            let (va, sa) = b.get("a").cloned().ok_or(super::Reported)?;
            let (vb, _) = b.get("b").cloned().ok_or(super::Reported)?;
            let op = if name == "maximum" { crate::ir::BinaryOp::Max } else { crate::ir::BinaryOp::Min };
            if let (Some(x), Some(y)) = (va.as_float(), vb.as_float()) {
                if !matches!(va, Value::Tensor(_)) && !matches!(vb, Value::Tensor(_)) {
                    return Ok(Value::Float(if name == "maximum" { x.max(y) } else { x.min(y) }));
                }
            }
            let (x, y) = t.promote_pair(&va, &vb, sa)?;
            tv(t.tensor_binary(op, x, y, span)?)
        }
        "where" => {
            let c = t.arg_tensor(&b, "cond")?;
            let (va, sa) = b.get("a").cloned().ok_or(super::Reported)?;
            let (vb, _) = b.get("b").cloned().ok_or(super::Reported)?;
            let (x, y) = t.promote_pair(&va, &vb, sa)?;
            tv(t.where_(c, x, y, span)?)
        }
        "clamp" => {
            let mut x = t.arg_tensor(&b, "x")?;
            let dt = t.ty(x).dtype;
            if let Some((v, s)) = b.get("min").cloned() {
                let lo = t.to_tensor(&v, Some(dt), s)?;
                x = t.tensor_binary(crate::ir::BinaryOp::Max, x, lo, span)?;
            }
            if let Some((v, s)) = b.get("max").cloned() {
                let hi = t.to_tensor(&v, Some(dt), s)?;
                x = t.tensor_binary(crate::ir::BinaryOp::Min, x, hi, span)?;
            }
            tv(x)
        }
        "cast" => {
            let x = t.arg_tensor(&b, "x")?;
            let dt = match b.value("dtype") {
                Some(Value::DType(d)) => d,
                Some(Value::Type(ty)) => ty.dtype,
                other => {
                    let kind = other.map(|v| v.kind()).unwrap_or("nothing");
                    return t.err(
                        "E0310",
                        format!("`cast` needs a dtype like `f32`, found {kind}"),
                        b.span_of("dtype"),
                        "expected a dtype",
                    );
                }
            };
            tv(t.cast(x, dt, span))
        }
        "sum" | "max" | "min" | "argmax" | "mean" | "var" => {
            let x = t.arg_tensor(&b, "x")?;
            let axes = t.arg_axes(&b, "axis")?;
            let keepdim = t.arg_bool(&b, "keepdim", false)?;
            match name {
                "mean" => tv(t.mean(x, axes.as_deref(), keepdim, span)?),
                "var" => {
                    let correction = t.arg_int(&b, "correction", 1)?;
                    let ty = t.ty(x);
                    let m = t.mean(x, axes.as_deref(), true, span)?;
                    let xf = t.cast(x, t.ty(m).dtype, span);
                    let d = t.tensor_binary(crate::ir::BinaryOp::Sub, xf, m, span)?;
                    let sq = t.tensor_binary(crate::ir::BinaryOp::Mul, d, d, span)?;
                    let s = t.reduce(ReduceOp::Sum, sq, axes.as_deref(), keepdim, span)?;
                    let n = t.reduced_count(&ty.shape, axes.as_deref(), span)?.as_known().unwrap_or(2);
                    let c = t.constant((n - correction).max(0) as f64, t.ty(s).dtype, span);
                    tv(t.tensor_binary(crate::ir::BinaryOp::Div, s, c, span)?)
                }
                "argmax" => {
                    let ty = t.ty(x);
                    let axes = match axes {
                        Some(a) if a.len() == 1 => a,
                        Some(_) => return t.err("E0310", "argmax takes a single axis", b.span_of("axis"), "one axis"),
                        None => {
                            let flat = t.reshape(x, vec![crate::types::shape::numel(&ty.shape)], span);
                            return tv(t.reduce(ReduceOp::ArgMax, flat, Some(&[0]), false, span)?);
                        }
                    };
                    tv(t.reduce(ReduceOp::ArgMax, x, Some(&axes), keepdim, span)?)
                }
                _ => {
                    let op = match name {
                        "sum" => ReduceOp::Sum,
                        "max" => ReduceOp::Max,
                        _ => ReduceOp::Min,
                    };
                    tv(t.reduce(op, x, axes.as_deref(), keepdim, span)?)
                }
            }
        }
        "reshape" | "broadcast_to" => {
            let x = t.arg_tensor(&b, "x")?;
            let target = t.arg_shape(&b, "shape")?;
            let ty = t.ty(x);
            if name == "broadcast_to" {
                let target: Vec<Dim> = target.into_iter().map(|d| d.unwrap_or(Dim::Any)).collect();
                let shape = rules::broadcast(&ty.shape, &target).map_err(|e| t.rule_error(e, span))?;
                if shape != target && shape.len() != target.len() {
                    return t.err(
                        "E0301",
                        format!("cannot broadcast {} to [{}]", ty, crate::types::shape::shape_str(&target)),
                        span,
                        "here",
                    );
                }
                return tv(t.expand_to(x, &target, span));
            }
            let shape = rules::reshape(&ty.shape, &target).map_err(|e| t.rule_error(e, span))?;
            tv(t.reshape(x, shape, span))
        }
        "flatten" => {
            let x = t.arg_tensor(&b, "x")?;
            let ty = t.ty(x);
            if ty.rank() == 0 {
                return tv(t.reshape(x, vec![Dim::known(1)], span));
            }
            let start = t.arg_int(&b, "start", 0)?;
            let end = t.arg_int(&b, "end", -1)?;
            let s = rules::axis(start, ty.rank()).map_err(|e| t.rule_error(e, b.span_of("start")))?;
            let e = rules::axis(end, ty.rank()).map_err(|e| t.rule_error(e, b.span_of("end")))?;
            if e < s {
                return t.err("E0305", "flatten: `end` comes before `start`", span, "empty range");
            }
            let mut shape: Vec<Dim> = ty.shape[..s].to_vec();
            shape.push(crate::types::shape::numel(&ty.shape[s..=e]));
            shape.extend(ty.shape[e + 1..].iter().cloned());
            tv(t.reshape(x, shape, span))
        }
        "transpose" => {
            let x = t.arg_tensor(&b, "x")?;
            let r = t.ty(x).rank();
            let a0 = t.arg_int(&b, "dim0", 0)?;
            let a1 = t.arg_int(&b, "dim1", 0)?;
            let a = rules::axis(a0, r).map_err(|e| t.rule_error(e, b.span_of("dim0")))?;
            let c = rules::axis(a1, r).map_err(|e| t.rule_error(e, b.span_of("dim1")))?;
            let mut perm: Vec<usize> = (0..r).collect();
            perm.swap(a, c);
            tv(t.permute(x, &perm, span))
        }
        "permute" => {
            let x = t.arg_tensor(&b, "x")?;
            let r = t.ty(x).rank();
            let dims = t.arg_axes(&b, "dims")?.unwrap_or_default();
            let mut perm = vec![];
            for d in &dims {
                perm.push(rules::axis(*d, r).map_err(|e| t.rule_error(e, b.span_of("dims")))?);
            }
            let mut sorted = perm.clone();
            sorted.sort();
            if sorted != (0..r).collect::<Vec<_>>() {
                return t.err(
                    "E0305",
                    format!("permute needs each of the {r} axes exactly once, found {dims:?}"),
                    b.span_of("dims"),
                    "not a permutation",
                );
            }
            tv(t.permute(x, &perm, span))
        }
        "unsqueeze" => {
            let x = t.arg_tensor(&b, "x")?;
            let ty = t.ty(x);
            let a = t.arg_int(&b, "axis", 0)?;
            let ax = rules::axis(a, ty.rank() + 1).map_err(|e| t.rule_error(e, b.span_of("axis")))?;
            let mut shape = ty.shape.clone();
            shape.insert(ax, Dim::known(1));
            tv(t.reshape(x, shape, span))
        }
        "squeeze" => {
            let x = t.arg_tensor(&b, "x")?;
            let ty = t.ty(x);
            let shape: Vec<Dim> = match t.arg_axes(&b, "axis")? {
                Some(axes) => {
                    let axes = t.normalize_axes(&axes, ty.rank(), b.span_of("axis"))?;
                    for &a in &axes {
                        if !ty.shape[a].is_one() && ty.shape[a].as_known().is_some() {
                            return t.err(
                                "E0303",
                                format!("cannot squeeze axis {a} of {ty}: its size is {}", ty.shape[a]),
                                b.span_of("axis"),
                                "not size 1",
                            );
                        }
                    }
                    rules::drop_axes(&ty.shape, &axes)
                }
                None => ty.shape.iter().filter(|d| !d.is_one()).cloned().collect(),
            };
            tv(t.reshape(x, shape, span))
        }
        "concat" | "stack" => {
            let xs = t.tensor_list(&b, "tensors")?;
            let mut xs2 = xs.clone();
            let dtype = xs.iter().map(|x| t.ty(*x).dtype).reduce(DType::promote).unwrap_or(DType::F32);
            for x in xs2.iter_mut() {
                *x = t.cast(*x, dtype, span);
            }
            let a = t.arg_int(&b, "axis", 0)?;
            let rank = t.ty(xs2[0]).rank();
            if name == "stack" {
                let ax = rules::axis(a, rank + 1).map_err(|e| t.rule_error(e, b.span_of("axis")))?;
                for x in xs2.iter_mut() {
                    let mut s = t.ty(*x).shape;
                    if ax <= s.len() {
                        s.insert(ax, Dim::known(1));
                    }
                    *x = t.reshape(*x, s, span);
                }
            }
            let rank = t.ty(xs2[0]).rank();
            let ax = rules::axis(a, rank).map_err(|e| t.rule_error(e, b.span_of("axis")))?;
            let shapes: Vec<_> = xs2.iter().map(|x| t.ty(*x).shape).collect();
            let shape = rules::concat(&shapes, ax).map_err(|e| t.rule_error(e, span))?;
            if xs2.len() == 1 {
                return tv(xs2[0]);
            }
            tv(t.node(Op::Concat(ax), dtype, shape, xs2, span))
        }
        "conv2d" => {
            let x = t.arg_tensor(&b, "x")?;
            let w = t.arg_tensor(&b, "weight")?;
            let attrs = Conv2dAttrs::nchw(
                t.arg_pair(&b, "stride", 1)?,
                t.arg_pair(&b, "padding", 0)?,
                t.arg_pair(&b, "dilation", 1)?,
                t.arg_int(&b, "groups", 1)?,
            );
            if attrs.stride.0 < 1
                || attrs.stride.1 < 1
                || attrs.dilation.0 < 1
                || attrs.dilation.1 < 1
                || attrs.padding.0 < 0
                || attrs.padding.1 < 0
            {
                return t.err("E0306", "conv2d needs stride ≥ 1, dilation ≥ 1 and padding ≥ 0", span, "invalid window");
            }
            let (tx, tw) = (t.ty(x), t.ty(w));
            let channels = tx.shape.get(1).and_then(|c| c.as_known());
            let shape = rules::conv2d(&tx.shape, &tw.shape, &attrs).map_err(|e| t.conv_error(e, span, channels, w, attrs.groups))?;
            let dtype = DType::promote(tx.dtype, tw.dtype);
            if !dtype.is_float() {
                return t.err("E0307", format!("conv2d needs float tensors, found {dtype}"), span, "not float");
            }
            let x = t.cast(x, dtype, span);
            let w = t.cast(w, dtype, span);
            let y = t.node(Op::Conv2d(attrs), dtype, shape.clone(), vec![x, w], span);
            match b.get("bias").cloned() {
                None | Some((Value::Tuple(_), _)) => tv(y),
                Some((bv, bs)) => {
                    let bias = t.to_tensor(&bv, Some(dtype), bs)?;
                    let tb = t.ty(bias);
                    if tb.rank() != 1 || !tb.shape[0].compatible(&shape[1]) {
                        return t.err("E0306", format!("conv2d bias should be [{}], found {}", shape[1], tb), bs, "wrong bias shape");
                    }
                    let bias = t.reshape(bias, vec![Dim::known(1), tb.shape[0].clone(), Dim::known(1), Dim::known(1)], span);
                    tv(t.tensor_binary(crate::ir::BinaryOp::Add, y, bias, span)?)
                }
            }
        }
        "max_pool2d" | "avg_pool2d" => {
            let x = t.arg_tensor(&b, "x")?;
            let kernel = t.arg_pair(&b, "kernel", 2)?;
            let stride = match b.get("stride") {
                Some(_) => t.arg_pair(&b, "stride", 1)?,
                None => kernel,
            };
            let padding = t.arg_pair(&b, "padding", 0)?;
            if kernel.0 < 1 || kernel.1 < 1 || stride.0 < 1 || stride.1 < 1 {
                return t.err("E0313", "pooling needs kernel ≥ 1 and stride ≥ 1", span, "invalid window");
            }
            let tx = t.ty(x);
            let shape = rules::pool2d(&tx.shape, kernel, stride, padding).map_err(|e| t.rule_error(e, span))?;
            let kind = if name == "max_pool2d" { PoolKind::Max } else { PoolKind::Avg };
            let x = if kind == PoolKind::Avg && !tx.dtype.is_float() { t.cast(x, DType::F32, span) } else { x };
            let dtype = t.ty(x).dtype;
            tv(t.node(Op::Pool2d { kind, kernel, stride, padding, channels_last: false }, dtype, shape, vec![x], span))
        }
        "take" => {
            let x = t.arg_tensor(&b, "x")?;
            let idx = t.arg_tensor(&b, "indices")?;
            let it = t.ty(idx);
            if !it.dtype.is_int() {
                return t.err(
                    "E0307",
                    format!("indices must be an integer tensor, found {}", it.dtype),
                    b.span_of("indices"),
                    "not integer",
                );
            }
            let r = t.ty(x).rank();
            let a = t.arg_int(&b, "axis", 0)?;
            let ax = rules::axis(a, r).map_err(|e| t.rule_error(e, b.span_of("axis")))?;
            tv(t.take(x, idx, ax, span)?)
        }
        "one_hot" => {
            let y = t.arg_tensor(&b, "labels")?;
            let n = t.arg_int(&b, "classes", 0)?;
            let ty = t.ty(y);
            if !ty.dtype.is_int() {
                return t.err("E0307", format!("one_hot needs integer labels, found {}", ty.dtype), b.span_of("labels"), "not integer");
            }
            let mut s = ty.shape.clone();
            s.push(Dim::known(1));
            let y = t.reshape(y, s, span);
            // Compared as f32 where every class index is exact in f32 (and a label past 2^24
            // rounds to no class below it): the comparison then fuses with the f32 kernels that
            // read the rows, where i64 comparisons ran as kernels of their own (an iota, two
            // expands and a compare: 25 µs of a 4.8 ms step at batch 1024 and ten classes).
            let dtype = if n <= 1 << 24 { DType::F32 } else { DType::I64 };
            let y = t.cast(y, dtype, span);
            let i = t.node(Op::Iota, dtype, vec![Dim::known(n)], vec![], span);
            let eq = t.tensor_binary(crate::ir::BinaryOp::CmpEq, y, i, span)?;
            tv(t.cast(eq, DType::F32, span))
        }
        // Forward value unchanged; autodiff (next milestone) stops gradients here.
        "chain" => {
            // `chain(x, (f, g, h))` is `h(g(f(x)))`: the body of `Sequential`.
            let (mut x, xs) = b.get("x").cloned().ok_or(super::Reported)?;
            let (fns, fs) = b.get("fns").cloned().ok_or(super::Reported)?;
            let list = match fns {
                Value::Tuple(items) => items.as_ref().clone(),
                f @ (Value::Func(_) | Value::Model(_)) => vec![f],
                other => {
                    return t.err(
                        "E0310",
                        format!("`chain` needs a tuple of layers or functions, found {}", other.kind()),
                        fs,
                        "not a tuple",
                    )
                }
            };
            for f in &list {
                x = t.call(f, vec![(None, x, xs)], fs, fs)?;
            }
            Ok(x)
        }
        "stop_grad" => {
            let x = t.arg_tensor(&b, "x")?;
            let ty = t.ty(x);
            tv(t.node(Op::Detach, ty.dtype, ty.shape, vec![x], span))
        }
        "param" | "buffer" => {
            let ty = t.arg_type(&b, "type")?;
            let init = match b.value("init") {
                Some(Value::Init(i)) => i,
                Some(v) if v.as_float().is_some() => Init::constant(v.as_float().unwrap_or(0.0)),
                other => {
                    let kind = other.map(|v| v.kind()).unwrap_or("nothing");
                    return t.err(
                        "E0310",
                        format!(
                            "`{name}` needs an initialiser like `uniform(-0.1, 0.1)`, `normal(0, 0.02)` or `constant(1.0)`, found {kind}"
                        ),
                        b.span_of("init"),
                        "expected an initialiser",
                    );
                }
            };
            if crate::types::shape::concrete(&ty.shape).is_none() {
                return t.err(
                    "E0303",
                    format!("parameter shapes must be known when the model is built, found {ty}"),
                    b.span_of("type"),
                    "unknown size",
                );
            }
            let path = if t.path.is_empty() { "param".to_string() } else { t.path.join(".") };
            let id = t.graph.add_param(ParamInfo { path, ty: ty.clone(), init, span, trainable: name == "param" });
            tv(t.node(Op::Param(id), ty.dtype, ty.shape, vec![], span))
        }
        "uniform" => {
            let lo = t.arg_float(&b, "low", 0.0)?;
            let hi = t.arg_float(&b, "high", 1.0)?;
            Ok(Value::Init(Init::uniform(lo, hi)))
        }
        "normal" => {
            let m = t.arg_float(&b, "mean", 0.0)?;
            let s = t.arg_float(&b, "std", 1.0)?;
            Ok(Value::Init(Init::normal(m, s)))
        }
        "constant" => {
            let v = t.arg_float(&b, "value", 0.0)?;
            Ok(Value::Init(Init::constant(v)))
        }
        "training" => Ok(Value::Bool(t.training)),
        // The new value of a buffer (running statistics) after this training step; nothing
        // outside training, where buffers are read-only.
        "assign" => {
            let target = t.arg_tensor(&b, "buffer")?;
            let value = t.arg_tensor(&b, "value")?;
            let Op::Param(id) = t.graph.node(target).op else {
                return t.err("E0310", "`assign` updates a `buffer(...)` of a model", b.span_of("buffer"), "not a buffer");
            };
            if t.graph.params[id as usize].trainable {
                return t.err(
                    "E0310",
                    "`assign` updates buffers; parameters are updated by the optimiser",
                    b.span_of("buffer"),
                    "a trainable parameter",
                );
            }
            let (bt, vt) = (t.ty(target), t.ty(value));
            let shape = rules::broadcast(&bt.shape, &vt.shape).map_err(|e| t.rule_error(e, span))?;
            if shape != bt.shape {
                return t.err(
                    "E0301",
                    format!("`assign` needs a value of the buffer's shape {bt}, found {vt}"),
                    b.span_of("value"),
                    "wrong shape",
                );
            }
            if t.training {
                let v = t.cast(value, bt.dtype, span);
                let v = t.expand_to(v, &bt.shape, span);
                t.buffer_updates.push((id, v));
            }
            Ok(Value::unit())
        }
        "numel" => {
            let x = t.arg_tensor(&b, "x")?;
            let n = crate::types::shape::numel(&t.ty(x).shape);
            Ok(n.as_known().map(Value::Int).unwrap_or(Value::Dim(n)))
        }
        "float" => Ok(Value::Float(t.arg_float(&b, "x", 0.0)?)),
        "int" => {
            let f = t.arg_float(&b, "x", 0.0)?;
            Ok(Value::Int(f.trunc() as i64))
        }
        "grad" => {
            let loss = t.arg_tensor(&b, "loss")?;
            let lt = t.ty(loss);
            if lt.rank() != 0 {
                return t.err("E0303", format!("`grad` needs a scalar loss (a 0-d tensor), found {lt}"), b.span_of("loss"), "not a scalar");
            }
            match b.value("model") {
                Some(Value::Model(m)) => Ok(Value::Grads(m, loss)),
                other => {
                    let kind = other.map(|v| v.kind()).unwrap_or("nothing");
                    t.err(
                        "E0310",
                        format!("`grad` differentiates with respect to a model's parameters, found {kind}"),
                        b.span_of("model"),
                        "expected a model",
                    )
                }
            }
        }
        other => t.err("E0201", format!("builtin `{other}` is not available here"), span, "unknown builtin"),
    }
}

/// erf for compile-time folding (Abramowitz–Stegun 7.1.26 refined by one Newton step is not
/// needed here: this only folds constants in initialisers; tensors use the runtime's erf).
fn erf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.3275911 * x.abs());
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * (-x * x).exp();
    if x >= 0.0 {
        y
    } else {
        -y
    }
}
