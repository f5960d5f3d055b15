//! `dlc run --set FIELD=VALUE`: overrides of a checked recipe's fields.

use dlc_language::diag::did_you_mean;
use dlc_language::eval::recipe::RecipeInfo;
use dlc_language::eval::Value;
use std::rc::Rc;

/// What `--set` can set, with what each does: the one list `dlc run --help` prints and an
/// unknown field's "did you mean" is drawn from. `NAME.FIELD` rows replace a field of the record
/// the recipe field holds (its stdlib constructor's names).
pub const SETTABLE: &[(&str, &str)] = &[
    ("epochs", "passes over the training data (replaces `steps`)"),
    ("steps", "optimiser steps to take in all (replaces `epochs`)"),
    ("accumulate", "micro-batches per optimiser step"),
    ("clip_grad_norm", "clip the gradients' global L2 norm to this"),
    ("precision", "f32, bf16, f16 or tf32"),
    ("optimizer.FIELD", "the optimiser's lr, weight_decay, momentum, eps, ..."),
    ("schedule.FIELD", "the schedule's warmup, min_lr, gamma, every, max_lr, ..."),
    ("parallel.FIELD", "data parallelism's ranks or bucket_mb"),
];

/// The top-level names in [`SETTABLE`].
fn top_level() -> impl Iterator<Item = &'static str> {
    SETTABLE.iter().map(|(n, _)| n.split('.').next().unwrap_or(n))
}

/// `--set epoch=1`: what was meant, and everything that can be set.
fn unknown_field(key: &str, raw: &str) -> String {
    let root = key.split('.').next().unwrap_or(key);
    let hint =
        did_you_mean(root, top_level()).map(|m| format!("did you mean `--set {}={raw}`? ", key.replacen(root, &m, 1))).unwrap_or_default();
    let all: Vec<&str> = SETTABLE.iter().map(|(n, _)| *n).collect();
    format!("`--set {key}={raw}`: `{root}` is not a recipe field that `--set` can set; {hint}settable: {}", all.join(", "))
}

/// Apply `--set key=value` overrides to a checked recipe: top-level fields (`epochs=1`,
/// `steps=100`) and fields of record fields (`optimizer.lr=3e-4`, `parallel.bucket_mb=10`,
/// `parallel.ranks=4`; `parallel.*` on a recipe without `parallel` starts from `data_parallel()`). The value's kind must match the
/// field's, so an override cannot smuggle in what the checker would have rejected.
pub fn apply_overrides(info: &mut RecipeInfo, overrides: &[(String, String)]) -> Result<(), String> {
    for (key, raw) in overrides {
        let parse = |old: Option<&Value>| -> Result<Value, String> {
            let v = match old {
                Some(Value::Int(_)) | Some(Value::Auto) | None if raw.parse::<i64>().is_ok() => Value::Int(raw.parse().unwrap_or(0)),
                Some(Value::Int(_)) | Some(Value::Auto) if raw == "auto" => Value::Auto,
                Some(Value::Float(_)) | Some(Value::Int(_)) if raw.parse::<f64>().is_ok() => Value::Float(raw.parse().unwrap_or(0.0)),
                None if raw.parse::<f64>().is_ok() => Value::Float(raw.parse().unwrap_or(0.0)),
                Some(Value::Bool(_)) if raw == "true" || raw == "false" => Value::Bool(raw == "true"),
                Some(Value::Str(_)) => Value::Str(raw.as_str().into()),
                Some(other) => return Err(format!("`{key}` holds {}, which `--set` cannot replace with `{raw}`", other.kind())),
                None => return Err(format!("`{raw}` is not a number")),
            };
            Ok(v)
        };
        if key == "precision" {
            // `--set precision=bf16`: the same four values the checker accepts in the source.
            let v = match raw.as_str() {
                "f32" | "bf16" | "f16" => Value::DType(dlc_language::types::DType::from_name(raw).expect("a dtype name")),
                "tf32" => Value::Str("tf32".into()),
                _ => return Err(format!("`precision` is one of f32, bf16, f16, tf32; found `{raw}`")),
            };
            info.fields.retain(|(n, _)| n != "precision");
            info.fields.push((key.clone(), v));
            continue;
        }
        match key.split_once('.') {
            None => {
                if key == "seed" {
                    // A train recipe's `seed` field seeds nothing: say what does.
                    return Err("`--set seed=N`: training is seeded by `dlc run --seed N`, not by a recipe field".into());
                }
                if !SETTABLE.iter().any(|(n, _)| n == key) {
                    return Err(unknown_field(key, raw));
                }
                let v = parse(info.field(key))?;
                if let Some(v) = v.as_int() {
                    if v < 1 {
                        return Err(format!("`{key}` must be at least 1, found {v}"));
                    }
                }
                // Epochs and steps exclude each other: setting one drops the other.
                info.fields
                    .retain(|(n, _)| n != key && !(matches!(key.as_str(), "epochs" | "steps") && matches!(n.as_str(), "epochs" | "steps")));
                info.fields.push((key.clone(), v));
            }
            Some((field, sub)) => {
                if !SETTABLE.iter().any(|(n, _)| n.split_once('.').is_some_and(|(f, _)| f == field)) {
                    return Err(unknown_field(key, raw));
                }
                if info.field(field).is_none() {
                    // `--set parallel.bucket_mb=10` on a recipe without `parallel`: the stdlib's
                    // `data_parallel()` (as the checker evaluated it), then the override.
                    if let Some(default) = info.defaults.iter().find(|(n, _)| n == field).cloned() {
                        info.fields.push(default);
                    }
                }
                let Some(Value::Record(items)) = info.field(field).cloned() else {
                    return Err(format!("`{field}` is not a record field of this recipe"));
                };
                if !items.iter().any(|(n, _)| n == sub) {
                    let names: Vec<&str> = items.iter().map(|(n, _)| n.as_str()).collect();
                    let hint =
                        did_you_mean(sub, names.iter().copied()).map(|m| format!("did you mean `{field}.{m}`? ")).unwrap_or_default();
                    return Err(format!("`{field}` has no field `{sub}`; {hint}it has {}", names.join(", ")));
                }
                let new: Vec<(String, Value)> = items
                    .iter()
                    .map(|(n, v)| if n == sub { parse(Some(v)).map(|nv| (n.clone(), nv)) } else { Ok((n.clone(), v.clone())) })
                    .collect::<Result<_, _>>()?;
                for f in info.fields.iter_mut() {
                    if f.0 == *field {
                        f.1 = Value::Record(Rc::new(new.clone()));
                    }
                }
            }
        }
    }
    Ok(())
}
