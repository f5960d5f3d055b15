//! Typed stages for variable-length sequences: `pad_batch(size, length: n)` pads every
//! variable-length tensor of the element (first dim `_`, as `jsonl`'s `i64[_]`) to `n` and adds
//! the mask; `bucket(size, boundaries: (32, 64, 128))` pads each batch to its length bucket, a
//! symbolic `L`; `pack(length: n)` concatenates sequences into rows of `n` tokens with each
//! token's document index. The runtime is `interpreter/src/pipeline/sequences.rs`.

use super::builtins::Bound;
use super::tracer::Tracer;
use super::value::Value;
use super::R;
use crate::types::{DType, Dim};
use std::rc::Rc;

/// The field (of a record: `(x: ..., mask: ...)` for a single tensor) or the last item (of a
/// tuple) that holds the mask.
pub const MASK: &str = "mask";

/// A `bucket` stage's `boundaries` as lengths, or what is wrong with them: at least one, each at
/// least 1, strictly increasing. The checker and the runtime both read them here.
pub fn boundaries(v: Option<&Value>) -> Result<Vec<usize>, String> {
    let items: Vec<Value> = match v {
        Some(Value::Tuple(items)) => items.to_vec(),
        Some(v @ Value::Int(_)) => vec![v.clone()],
        Some(v) => return Err(format!("`boundaries` must be a tuple of lengths like `(32, 64, 128)`, found {}", v.kind())),
        None => return Err("`boundaries` is missing".into()),
    };
    let mut out: Vec<usize> = vec![];
    for it in &items {
        let Some(n) = it.as_int() else {
            return Err(format!("`boundaries` holds lengths (ints), found {}", it.kind()));
        };
        if n < 1 {
            return Err(format!("a bucket boundary is a length of at least 1, found {n}"));
        }
        if let Some(&last) = out.last() {
            if n as usize <= last {
                return Err(format!("`boundaries` must increase: {n} comes after {last}"));
            }
        }
        out.push(n as usize);
    }
    if out.is_empty() {
        return Err("`boundaries` needs at least one length".into());
    }
    Ok(out)
}

impl Tracer {
    /// `pad_batch`, `bucket` and `pack`: check the arguments and type the element they yield.
    pub(super) fn sequence_stage(&mut self, name: &'static str, b: &Bound) -> R<Value> {
        let p = self.pipeline_arg(b)?;
        let span = self.stage_span(b);
        if !has_variable(self, &p.elem) {
            let found = describe(self, &p.elem);
            return self.err(
                "E0403",
                format!("`{name}` works on variable-length sequences: the element needs a tensor whose first dimension is `_` (like `jsonl`'s `tokens: i64[_]`), found {found}"),
                span,
                "no variable-length tensor",
            );
        }
        if name == "pack" {
            return self.pack_stage(b, &p);
        }
        let size = self.arg_int(b, "size", 1)?;
        if size < 1 {
            return self.err("E0403", format!("batch size must be at least 1, found {size}"), b.span_of("size"), "too small");
        }
        let drop_last = self.arg_bool(b, "drop_last", false)?;
        if let Some((v, s)) = b.get("pad").cloned() {
            if v.as_float().is_none() {
                return self.err("E0310", format!("`pad` must be a number, found {}", v.kind()), s, "expected a number");
            }
        }
        let length = if name == "pad_batch" {
            let n = self.arg_int(b, "length", 1)?;
            if n < 1 {
                return self.err("E0403", format!("`length` must be at least 1, found {n}"), b.span_of("length"), "too small");
            }
            Dim::known(n)
        } else {
            if let Err(message) = boundaries(b.value("boundaries").as_ref()) {
                let code = if matches!(b.value("boundaries"), Some(Value::Tuple(_) | Value::Int(_))) { "E0403" } else { "E0310" };
                return self.err(code, message, b.span_of("boundaries"), "not bucket boundaries");
            }
            if b.get("seed").is_some() {
                self.arg_int(b, "seed", 0)?;
            }
            // One length per bucket: the step compiles a plan for each.
            Dim::sym("L")
        };
        if let Value::Record(items) = &p.elem {
            if items.iter().any(|(k, _)| k == MASK) {
                return self.err(
                    "E0403",
                    format!("`{name}` adds a field `mask`, and the element has one already"),
                    span,
                    "rename the element's `mask` field with `map`",
                );
            }
        }
        let rows = if drop_last { Dim::known(size) } else { Dim::sym("B") };
        let padded = self.pad_elem(&p.elem, &rows, &length, span);
        let mask = self.elem_input(&format!("{name}.mask"), DType::F32, vec![rows, length], span);
        let elem = match padded {
            Value::Record(items) => {
                let mut items = items.to_vec();
                items.push((MASK.to_string(), mask));
                Value::Record(Rc::new(items))
            }
            Value::Tuple(items) => {
                let mut items = items.to_vec();
                items.push(mask);
                Value::Tuple(Rc::new(items))
            }
            // A single tensor becomes a record, so that a recipe binds `x` and `mask`.
            single => Value::Record(Rc::new(vec![("x".to_string(), single), (MASK.to_string(), mask)])),
        };
        Ok(self.stage(&p, name, b, elem))
    }

    /// The stage's own call in `pipeline |> stage(...)` (the call's span holds the pipeline too).
    fn stage_span(&self, b: &Bound) -> crate::span::Span {
        let (span, Some((_, lhs))) = (b.span, b.get("pipeline")) else { return b.span };
        if lhs.file != span.file || lhs.end < span.start || lhs.end >= span.end {
            return span;
        }
        let text = &self.sources.get(span.file).text;
        let Some(between) = text.get(lhs.end as usize..span.end as usize) else { return span };
        let rest = between.trim_start().trim_start_matches("|>").trim_start();
        crate::span::Span { start: span.end - rest.len() as u32, ..span }
    }

    /// `pack(length: n)`: the element's first variable-length tensor, 1-d, becomes rows of
    /// `n` tokens, with `segments: i64[n]` beside it (a record of the two).
    fn pack_stage(&mut self, b: &Bound, p: &super::value::Pipeline) -> R<Value> {
        let n = self.arg_int(b, "length", 1)?;
        if n < 1 {
            return self.err("E0403", format!("`length` must be at least 1, found {n}"), b.span_of("length"), "too small");
        }
        let first = first_variable(self, &p.elem).expect("checked: the element has one");
        let ty = self.ty(first);
        if ty.rank() != 1 {
            return self.err(
                "E0403",
                format!("`pack` concatenates token sequences: the variable-length tensor must be 1-d like `i64[_]`, found {ty}"),
                self.stage_span(b),
                "not a sequence of tokens",
            );
        }
        let tokens = self.elem_input("pack.tokens", ty.dtype, vec![Dim::known(n)], b.span);
        let segments = self.elem_input("pack.segments", DType::I64, vec![Dim::known(n)], b.span);
        let elem = Value::Record(Rc::new(vec![("tokens".into(), tokens), ("segments".into(), segments)]));
        Ok(self.stage(p, "pack", b, elem))
    }

    /// The element batched to `rows`, its variable-length tensors `[rows, length, ...]`.
    fn pad_elem(&mut self, v: &Value, rows: &Dim, length: &Dim, span: crate::span::Span) -> Value {
        match v {
            Value::Tensor(n) => {
                let ty = self.ty(*n);
                if ty.shape.first() == Some(&Dim::Any) {
                    let mut shape = vec![rows.clone(), length.clone()];
                    shape.extend(ty.shape[1..].iter().cloned());
                    self.elem_input("padded", ty.dtype, shape, span)
                } else {
                    self.batch_elem(v, rows, span)
                }
            }
            Value::Tuple(items) => Value::Tuple(Rc::new(items.iter().map(|x| self.pad_elem(x, rows, length, span)).collect())),
            Value::Record(items) => {
                Value::Record(Rc::new(items.iter().map(|(k, x)| (k.clone(), self.pad_elem(x, rows, length, span))).collect()))
            }
            other => other.clone(),
        }
    }
}

/// Whether a tensor of the element has `_` as its first dimension.
fn has_variable(t: &Tracer, v: &Value) -> bool {
    first_variable(t, v).is_some()
}

/// The element's first tensor (depth-first) whose first dimension is `_`.
fn first_variable(t: &Tracer, v: &Value) -> Option<crate::ir::NodeId> {
    match v {
        Value::Tensor(n) => (t.ty(*n).shape.first() == Some(&Dim::Any)).then_some(*n),
        Value::Tuple(items) => items.iter().find_map(|x| first_variable(t, x)),
        Value::Record(items) => items.iter().find_map(|(_, x)| first_variable(t, x)),
        _ => None,
    }
}

/// The element's type in words, for messages: `(tokens: i64[8], label: i64[])`.
fn describe(t: &Tracer, v: &Value) -> String {
    match v {
        Value::Tensor(n) => t.ty(*n).to_string(),
        Value::Tuple(items) => format!("({})", items.iter().map(|x| describe(t, x)).collect::<Vec<_>>().join(", ")),
        Value::Record(items) => {
            format!("({})", items.iter().map(|(k, x)| format!("{k}: {}", describe(t, x))).collect::<Vec<_>>().join(", "))
        }
        other => other.kind().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(xs: &[i64]) -> Value {
        Value::Tuple(Rc::new(xs.iter().map(|x| Value::Int(*x)).collect()))
    }

    #[test]
    fn boundaries_are_increasing_positive_lengths() {
        assert_eq!(boundaries(Some(&ints(&[32, 64, 128]))).unwrap(), vec![32, 64, 128]);
        assert_eq!(boundaries(Some(&Value::Int(16))).unwrap(), vec![16]);
        assert!(boundaries(Some(&ints(&[64, 32]))).unwrap_err().contains("must increase: 32 comes after 64"));
        assert!(boundaries(Some(&ints(&[8, 8]))).unwrap_err().contains("must increase"));
        assert!(boundaries(Some(&ints(&[0, 8]))).unwrap_err().contains("at least 1, found 0"));
        assert!(boundaries(Some(&ints(&[]))).unwrap_err().contains("at least one"));
        assert!(boundaries(Some(&Value::Str("x".into()))).unwrap_err().contains("must be a tuple of lengths"));
    }
}
