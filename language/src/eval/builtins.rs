//! Builtin functions: the primitives DL code is written from. Composite functions (gelu, softmax,
//! layer_norm, losses, layers, optimisers) live in the stdlib, written in DL.

use super::call::Args;
use super::tracer::Tracer;
use super::value::{Func, Value};
use super::R;
use crate::diag::Diagnostic;
use crate::ir::Op;
use crate::span::Span;
use crate::types::{DType, Dim, TensorTy};

pub use super::builtin_impl::call;
use std::rc::Rc;

/// (name, module, parameters). `x=` marks an optional parameter, `*` a variadic one. Module ""
/// is the prelude (always visible); others need `use`.
pub const TABLE: &[(&str, &str, &[&str])] = &[
    ("print", "", &["*"]),
    ("zeros", "", &["type"]),
    ("ones", "", &["type"]),
    ("full", "", &["type", "value"]),
    ("randn", "", &["type", "seed="]),
    ("rand", "", &["type", "seed="]),
    ("rand_like", "", &["x", "seed="]),
    ("randn_like", "", &["x", "seed="]),
    ("arange", "", &["start", "end=", "step="]),
    ("eye", "", &["n"]),
    ("exp", "", &["x"]),
    ("log", "", &["x"]),
    ("sqrt", "", &["x"]),
    ("rsqrt", "", &["x"]),
    ("sin", "", &["x"]),
    ("cos", "", &["x"]),
    ("tanh", "", &["x"]),
    ("erf", "", &["x"]),
    ("abs", "", &["x"]),
    ("floor", "", &["x"]),
    ("maximum", "", &["a", "b"]),
    ("minimum", "", &["a", "b"]),
    ("where", "", &["cond", "a", "b"]),
    ("clamp", "", &["x", "min=", "max="]),
    ("cast", "", &["x", "dtype"]),
    ("sum", "", &["x", "axis=", "keepdim="]),
    ("mean", "", &["x", "axis=", "keepdim="]),
    ("max", "", &["x", "axis=", "keepdim="]),
    ("min", "", &["x", "axis=", "keepdim="]),
    ("argmax", "", &["x", "axis=", "keepdim="]),
    ("var", "", &["x", "axis=", "keepdim=", "correction="]),
    ("reshape", "", &["x", "shape"]),
    ("flatten", "", &["x", "start=", "end="]),
    ("transpose", "", &["x", "dim0", "dim1"]),
    ("permute", "", &["x", "dims"]),
    ("unsqueeze", "", &["x", "axis"]),
    ("squeeze", "", &["x", "axis="]),
    ("concat", "", &["tensors", "axis="]),
    ("stack", "", &["tensors", "axis="]),
    ("broadcast_to", "", &["x", "shape"]),
    ("conv2d", "", &["x", "weight", "bias=", "stride=", "padding=", "dilation=", "groups="]),
    ("max_pool2d", "", &["x", "kernel", "stride=", "padding="]),
    ("avg_pool2d", "", &["x", "kernel", "stride=", "padding="]),
    ("take", "", &["x", "indices", "axis="]),
    ("one_hot", "", &["labels", "classes"]),
    ("stop_grad", "", &["x"]),
    ("param", "", &["type", "init"]),
    ("buffer", "", &["type", "init"]),
    ("uniform", "", &["low", "high"]),
    ("normal", "", &["mean=", "std="]),
    ("constant", "", &["value"]),
    ("training", "", &[]),
    ("assign", "", &["buffer", "value"]),
    ("numel", "", &["x"]),
    ("float", "", &["x"]),
    ("int", "", &["x"]),
    ("grad", "", &["loss", "model"]),
    ("chain", "", &["x", "fns"]),
    // std.data: sources and stages (typed here; executed by the runtime).
    ("mnist", "std.data", &["dir", "split="]),
    ("fashion_mnist", "std.data", &["dir", "split="]),
    ("idx", "std.data", &["images", "labels"]),
    ("cifar", "std.data", &["files"]),
    ("images", "std.data", &["dir", "size=", "channels=", "on_error="]),
    ("shards", "std.data", &["files", "image=", "label=", "size=", "channels=", "on_error="]),
    ("csv", "std.data", &["path", "features=", "label=", "header=", "classes=", "label_row="]),
    ("npy", "std.data", &["path", "row=", "labels=", "label_row="]),
    ("safetensors", "std.data", &["path", "tensor", "row=", "labels=", "label_row="]),
    ("text", "std.data", &["path", "block=", "level=", "tokenizer="]),
    ("jsonl", "std.data", &["path", "fields", "on_error="]),
    ("parquet", "std.data", &["path", "fields", "on_error="]),
    ("tensors", "std.data", &["x", "y="]),
    ("map", "std.data", &["pipeline", "f"]),
    ("shuffle", "std.data", &["pipeline", "seed=", "buffer="]),
    ("batch", "std.data", &["pipeline", "size", "drop_last="]),
    ("pad_batch", "std.data", &["pipeline", "size", "length", "pad=", "drop_last="]),
    ("bucket", "std.data", &["pipeline", "size", "boundaries", "pad=", "seed=", "drop_last="]),
    ("pack", "std.data", &["pipeline", "length"]),
    ("prefetch", "std.data", &["pipeline", "n="]),
    ("random_crop", "std.data", &["pipeline", "padding=", "seed="]),
    ("random_flip", "std.data", &["pipeline", "p=", "seed="]),
    ("resize", "std.data", &["pipeline", "size"]),
    ("center_crop", "std.data", &["pipeline", "size"]),
    ("random_resized_crop", "std.data", &["pipeline", "size", "scale=", "ratio=", "seed="]),
    ("color_jitter", "std.data", &["pipeline", "brightness=", "contrast=", "saturation=", "hue=", "seed="]),
    ("skip", "std.data", &["pipeline", "n"]),
    ("split", "std.data", &["pipeline", "fraction", "part="]),
];

pub fn lookup(name: &str, module: &str) -> Option<Value> {
    TABLE.iter().find(|(n, m, _)| *n == name && *m == module).map(|(n, _, _)| Value::Func(Rc::new(Func::Builtin(n))))
}

pub fn names_in(module: &str) -> impl Iterator<Item = &'static str> + '_ {
    TABLE.iter().filter(move |(_, m, _)| *m == module).map(|(n, _, _)| *n)
}

/// Bound arguments of a builtin, one slot per declared parameter.
pub struct Bound {
    pub slots: Vec<Option<(Value, Span)>>,
    pub names: &'static [&'static str],
    pub rest: Vec<(Value, Span)>,
    pub span: Span,
    pub callee: &'static str,
}

impl Bound {
    fn idx(&self, name: &str) -> usize {
        self.names.iter().position(|n| n.trim_end_matches('=') == name).unwrap_or(usize::MAX)
    }
    pub fn get(&self, name: &str) -> Option<&(Value, Span)> {
        self.slots.get(self.idx(name)).and_then(|s| s.as_ref())
    }
    pub fn value(&self, name: &str) -> Option<Value> {
        self.get(name).map(|(v, _)| v.clone())
    }
    pub fn span_of(&self, name: &str) -> Span {
        self.get(name).map(|(_, s)| *s).unwrap_or(self.span)
    }
}

pub(super) fn bind(t: &mut Tracer, name: &'static str, params: &'static [&'static str], args: Args, span: Span) -> R<Bound> {
    let mut b = Bound { slots: vec![None; params.len()], names: params, rest: vec![], span, callee: name };
    let variadic = params.first() == Some(&"*");
    let mut next = 0;
    for (n, v, s) in args {
        match n {
            None if variadic => b.rest.push((v, s)),
            None => {
                if next >= params.len() {
                    return t.err("E0207", format!("`{name}` takes at most {} argument(s)", params.len()), s, "unexpected argument");
                }
                b.slots[next] = Some((v, s));
                next += 1;
            }
            Some(id) => {
                let i = b.idx(&id.name);
                if i == usize::MAX {
                    let names: Vec<&str> = params.iter().map(|p| p.trim_end_matches('=')).collect();
                    let mut d = Diagnostic::error("E0205", format!("`{name}` has no parameter named `{}`", id.name), id.span)
                        .with_label("unknown argument name");
                    d = match crate::habits::param_suggestion(&id.name, &names) {
                        Some(s) => d.with_help(format!("did you mean `{s}`?")),
                        None => d.with_note(format!("parameters: {}", names.join(", "))),
                    };
                    return Err(t.error(d));
                }
                if b.slots[i].is_some() {
                    return t.err("E0205", format!("argument `{}` is given twice", id.name), id.span, "given again here");
                }
                b.slots[i] = Some((v, s));
            }
        }
    }
    for (i, p) in params.iter().enumerate() {
        if *p != "*" && !p.ends_with('=') && b.slots[i].is_none() {
            return t.err("E0206", format!("missing argument `{p}` in call to `{name}`"), span, format!("`{p}` not given"));
        }
    }
    Ok(b)
}

impl Tracer {
    pub fn arg_tensor(&mut self, b: &Bound, name: &str) -> R<crate::ir::NodeId> {
        let (v, s) = b.get(name).cloned().ok_or(super::Reported)?;
        self.to_tensor(&v, None, s)
    }
    pub fn arg_int(&mut self, b: &Bound, name: &str, default: i64) -> R<i64> {
        match b.get(name).cloned() {
            None => Ok(default),
            Some((v, s)) => match v.as_int() {
                Some(i) => Ok(i),
                None => {
                    self.err("E0310", format!("`{name}` must be an int known at compile time, found {}", v.kind()), s, "expected an int")
                }
            },
        }
    }
    pub fn arg_float(&mut self, b: &Bound, name: &str, default: f64) -> R<f64> {
        match b.get(name).cloned() {
            None => Ok(default),
            Some((v, s)) => match v.as_float() {
                Some(f) => Ok(f),
                None => self.err("E0310", format!("`{name}` must be a number, found {}", v.kind()), s, "expected a number"),
            },
        }
    }
    pub fn arg_bool(&mut self, b: &Bound, name: &str, default: bool) -> R<bool> {
        match b.get(name).cloned() {
            None => Ok(default),
            Some((Value::Bool(x), _)) => Ok(x),
            Some((v, s)) => self.err("E0310", format!("`{name}` must be a bool, found {}", v.kind()), s, "expected true or false"),
        }
    }
    /// An int or a pair of ints (for stride, padding, ...).
    pub fn arg_pair(&mut self, b: &Bound, name: &str, default: i64) -> R<(i64, i64)> {
        match b.get(name).cloned() {
            None => Ok((default, default)),
            Some((Value::Tuple(items), s)) if items.len() == 2 => match (items[0].as_int(), items[1].as_int()) {
                (Some(a), Some(c)) => Ok((a, c)),
                _ => self.err("E0310", format!("`{name}` must be an int or a pair of ints"), s, "expected ints"),
            },
            Some((v, s)) => match v.as_int() {
                Some(i) => Ok((i, i)),
                None => self.err("E0310", format!("`{name}` must be an int or a pair of ints, found {}", v.kind()), s, "expected ints"),
            },
        }
    }
    /// A pair of numbers `(lo, hi)` with `0 < lo <= hi` (a scale or ratio range).
    pub fn arg_range(&mut self, b: &Bound, name: &str, default: (f64, f64)) -> R<(f64, f64)> {
        let Some((v, s)) = b.get(name).cloned() else { return Ok(default) };
        let pair = match &v {
            Value::Tuple(items) if items.len() == 2 => items[0].as_float().zip(items[1].as_float()),
            _ => None,
        };
        match pair {
            Some((lo, hi)) if lo > 0.0 && lo <= hi => Ok((lo, hi)),
            Some((lo, hi)) => {
                self.err("E0403", format!("`{name}` must be (lo, hi) with 0 < lo <= hi, found ({lo}, {hi})"), s, "not a range")
            }
            None => self.err("E0310", format!("`{name}` must be a pair of numbers (lo, hi), found {}", v.kind()), s, "expected (lo, hi)"),
        }
    }
    /// `axis: 1` or `axis: (0, 2)`; None when not given.
    pub fn arg_axes(&mut self, b: &Bound, name: &str) -> R<Option<Vec<i64>>> {
        match b.get(name).cloned() {
            None => Ok(None),
            Some((Value::Tuple(items), s)) => {
                let mut out = vec![];
                for it in items.iter() {
                    match it.as_int() {
                        Some(i) => out.push(i),
                        None => return self.err("E0310", "axes must be ints", s, "expected ints"),
                    }
                }
                Ok(Some(out))
            }
            Some((v, s)) => match v.as_int() {
                Some(i) => Ok(Some(vec![i])),
                None => self.err("E0310", format!("`{name}` must be an int or a tuple of ints, found {}", v.kind()), s, "expected an axis"),
            },
        }
    }
    pub fn arg_type(&mut self, b: &Bound, name: &str) -> R<TensorTy> {
        match b.get(name).cloned() {
            Some((Value::Type(t), _)) => Ok(t),
            Some((v, s)) => self.err(
                "E0310",
                format!("`{name}` must be a tensor type like `f32[2, 3]`, found {}", v.kind()),
                s,
                "expected a tensor type",
            ),
            None => Err(super::Reported),
        }
    }
    pub(super) fn arg_shape(&mut self, b: &Bound, name: &str) -> R<Vec<Option<Dim>>> {
        let (v, s) = b.get(name).cloned().ok_or(super::Reported)?;
        let items: Vec<Value> = match v {
            Value::Tuple(items) => items.to_vec(),
            Value::Type(t) => return Ok(t.shape.into_iter().map(Some).collect()),
            other => vec![other],
        };
        let mut out = vec![];
        for it in items {
            out.push(match it {
                Value::Int(-1) => None,
                Value::Int(i) if i >= 0 => Some(Dim::known(i)),
                Value::Dim(d) => Some(d),
                other => {
                    return self.err(
                        "E0310",
                        format!("a shape holds sizes (ints, -1 to infer one), found {}", other.kind()),
                        s,
                        "not a size",
                    )
                }
            });
        }
        Ok(out)
    }
    pub(super) fn tensor_list(&mut self, b: &Bound, name: &str) -> R<Vec<crate::ir::NodeId>> {
        let (v, s) = b.get(name).cloned().ok_or(super::Reported)?;
        let Value::Tuple(items) = v else {
            return self.err("E0310", format!("`{}` takes a tuple of tensors, like `(a, b)`", b.callee), s, "expected a tuple");
        };
        if items.is_empty() {
            return self.err("E0310", format!("`{}` needs at least one tensor", b.callee), s, "empty");
        }
        items.iter().map(|v| self.to_tensor(v, None, s)).collect()
    }

    pub fn take(&mut self, x: crate::ir::NodeId, idx: crate::ir::NodeId, axis: usize, span: Span) -> R<crate::ir::NodeId> {
        let (tx, ti) = (self.ty(x), self.ty(idx));
        if !ti.dtype.is_int() {
            return self.err("E0307", format!("indices must be an integer tensor, found {}", ti.dtype), span, "not integer");
        }
        if axis >= tx.rank() {
            // A 0-d tensor has no axis to take from (found by the no-panic property test).
            return self.err("E0305", format!("cannot take along axis {axis} of a tensor of rank {}", tx.rank()), span, "no such axis");
        }
        let idx = self.cast(idx, DType::I64, span);
        // take on another axis = move it to the front, take rows, move back.
        let perm: Vec<usize> = std::iter::once(axis).chain((0..tx.rank()).filter(|a| *a != axis)).collect();
        let xp = self.permute(x, &perm, span);
        let txp = self.ty(xp);
        let mut shape = ti.shape.clone();
        shape.extend(txp.shape[1..].iter().cloned());
        let out = self.node(Op::Take, tx.dtype, shape, vec![xp, idx], span);
        if axis == 0 {
            return Ok(out);
        }
        // Result dims: idx dims, then the other axes of x; put idx dims back at `axis`.
        let k = ti.rank();
        let rest = tx.rank() - 1;
        let mut back: Vec<usize> = (k..k + axis).collect();
        back.extend(0..k);
        back.extend(k + axis..k + rest);
        Ok(self.permute(out, &back, span))
    }
}
