//! The typed fields of a record source: `jsonl(path, fields: (features: f32[4], label: i64[]))`
//! and `parquet(path, fields: ...)` read each named field of a record (a JSON key, a Parquet
//! column) as a tensor of the declared type. The checker and the readers both ask here what a
//! `fields` argument means, so they cannot disagree.

use super::builtins::Bound;
use super::tracer::Tracer;
use super::value::Value;
use super::R;
use crate::types::TensorTy;

/// What a `fields` argument must be, for messages.
const FIELDS_LIKE: &str = "a record of tensor types like `(features: f32[4], label: i64[])`";

/// A `fields` argument as (name, type) pairs in the order written, or what is wrong with it.
pub fn record_fields(v: &Value) -> Result<Vec<(String, TensorTy)>, String> {
    let Value::Record(items) = v else {
        return Err(format!("`fields` must be {FIELDS_LIKE}, found {}", v.kind()));
    };
    items
        .iter()
        .map(|(name, ty)| match ty {
            Value::Type(t) => Ok((name.clone(), t.clone())),
            other => Err(format!("field `{name}` of `fields` must be a tensor type like `f32[4]` or `i64[]`, found {}", other.kind())),
        })
        .collect()
}

/// `on_error` of a source that can leave out what it cannot read: `"stop"` (the default) or
/// `"skip"`; `None` when it is neither.
pub fn skips(on_error: Option<&Value>) -> Option<bool> {
    match on_error {
        None => Some(false),
        Some(Value::Str(s)) if &**s == "stop" => Some(false),
        Some(Value::Str(s)) if &**s == "skip" => Some(true),
        Some(_) => None,
    }
}

impl Tracer {
    /// A record source's declared fields (E0310 at `fields` when it is not a record of tensor
    /// types), its `path` a string and its `on_error` `"stop"` or `"skip"` (E0403).
    pub(super) fn record_source_fields(&mut self, b: &Bound) -> R<Vec<(String, TensorTy)>> {
        if let Some((v, s)) = b.get("path").cloned() {
            if !matches!(v, Value::Str(_)) {
                return self.err("E0310", format!("`path` must be a string, found {}", v.kind()), s, "expected a file name");
            }
        }
        let (v, s) = b.get("fields").cloned().ok_or(super::Reported)?;
        let fields = match record_fields(&v) {
            Ok(f) => f,
            Err(message) => return self.err("E0310", message, s, "expected a record of tensor types"),
        };
        if skips(b.value("on_error").as_ref()).is_none() {
            let found = match b.value("on_error") {
                Some(Value::Str(s)) => format!("\"{s}\""),
                other => other.map(|v| v.kind().to_string()).unwrap_or_default(),
            };
            return self.err(
                "E0403",
                format!("`on_error` must be \"stop\" or \"skip\", found {found}"),
                b.span_of("on_error"),
                "stop or skip",
            );
        }
        Ok(fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{DType, Dim};
    use std::rc::Rc;

    #[test]
    fn a_record_of_types_is_fields_in_order_and_anything_else_says_what_it_found() {
        let f32_4 = TensorTy::new(DType::F32, vec![Dim::known(4)]);
        let i64_0 = TensorTy::new(DType::I64, vec![]);
        let v = Value::Record(Rc::new(vec![("x".into(), Value::Type(f32_4.clone())), ("y".into(), Value::Type(i64_0.clone()))]));
        assert_eq!(record_fields(&v).unwrap(), vec![("x".to_string(), f32_4.clone()), ("y".to_string(), i64_0)]);
        let e = record_fields(&Value::Type(f32_4.clone())).unwrap_err();
        assert!(e.contains("must be a record of tensor types") && e.contains("found a tensor type"), "{e}");
        let v = Value::Record(Rc::new(vec![("x".into(), Value::Type(f32_4)), ("y".into(), Value::Int(3))]));
        let e = record_fields(&v).unwrap_err();
        assert!(e.contains("field `y`") && e.contains("found an int"), "{e}");
        assert_eq!(skips(None), Some(false));
        assert_eq!(skips(Some(&Value::Str("skip".into()))), Some(true));
        assert_eq!(skips(Some(&Value::Str("ignore".into()))), None);
    }
}
