//! A model's parameters and buffers matched with a state dict by name, as PyTorch's
//! `load_state_dict(strict=True)` matches them: every name the model has must be there with its
//! shape, and the file may hold nothing else. Every difference is reported in one message
//! (missing names, unexpected names, shape mismatches), not only the first, so that loading
//! another model's checkpoint says what differs. Used by `--resume`, `init = "file"`, and the
//! `checkpoint` of `evaluate` and `infer`.

use super::checkpoint;
use crate::runtime::tensor::Tensor;
use dlc_language::eval::Value;
use dlc_language::types::DType;
use std::path::Path;

/// What the model holds under one name.
#[derive(Debug, Clone)]
pub struct Slot {
    pub path: String,
    pub shape: Vec<usize>,
    pub dtype: DType,
}

/// How many names of each kind a message lists before "and N more".
const SHOWN: usize = 8;

/// The tensor for each slot, in the slots' order, converted to the slot's dtype (a bf16 file
/// loads into f32 parameters; PyTorch's int64 `num_batches_tracked` into dlc's i64). `what`
/// names the model, `source` where the tensors came from, for the message.
pub fn match_state(slots: &[Slot], tensors: &[(String, Tensor)], what: &str, source: &str) -> Result<Vec<Tensor>, String> {
    let find = |name: &str| tensors.iter().find(|(n, _)| n == name).map(|(_, t)| t);
    let mut missing = vec![];
    let mut mismatched = vec![];
    let mut out = vec![];
    for s in slots {
        match find(&s.path) {
            None => missing.push(s.path.as_str()),
            Some(t) if t.shape != s.shape => {
                mismatched.push(format!("`{}`: {} in the file, {} in the model", s.path, ty(t.dtype, &t.shape), ty(s.dtype, &s.shape)))
            }
            Some(t) => out.push(if t.dtype == s.dtype { t.clone() } else { t.cast(s.dtype) }),
        }
    }
    let unexpected: Vec<&str> = tensors.iter().map(|(n, _)| n.as_str()).filter(|n| !slots.iter().any(|s| s.path == *n)).collect();
    if missing.is_empty() && unexpected.is_empty() && mismatched.is_empty() {
        return Ok(out);
    }
    let mut msg = format!("cannot load {source} into {what}: its names and shapes differ from the model's");
    if !missing.is_empty() {
        msg += &format!("\n  missing (the model has them, the file does not): {}", list(&missing));
    }
    if !unexpected.is_empty() {
        msg += &format!("\n  unexpected (the file has them, the model does not): {}", list(&unexpected));
    }
    if !mismatched.is_empty() {
        msg += &format!("\n  shape mismatches: {}", list(&mismatched.iter().map(|s| s.as_str()).collect::<Vec<_>>()));
    }
    if let Some(hint) = old_names_hint(&missing, &unexpected) {
        msg += &format!("\n  help: {hint}");
    }
    Err(msg)
}

/// The parameters and buffers at `path`: a dlc checkpoint directory (the step its manifest
/// names; no optimiser state), or one safetensors file, such as PyTorch's
/// `safetensors.torch.save_file(model.state_dict(), path)` writes.
pub fn load_state(path: &Path) -> Result<Vec<(String, Tensor)>, String> {
    if path.is_dir() {
        Ok(checkpoint::load(path)?.params)
    } else {
        checkpoint::read_safetensors(path)
    }
}

/// The models a message is about, by their declarations' names: "`Net`", "`Generator`, `Critic`".
pub fn models_named<'a>(models: impl Iterator<Item = &'a Value>) -> String {
    let names: Vec<String> = models
        .map(|m| match m {
            Value::Model(m) => format!("`{}`", m.decl.name.name),
            _ => "the model".to_string(),
        })
        .collect();
    if names.is_empty() {
        "the model".to_string()
    } else {
        names.join(", ")
    }
}

/// `f32[3, 4]`, as the checker writes types.
fn ty(dtype: DType, shape: &[usize]) -> String {
    format!("{dtype}[{}]", shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))
}

fn list(names: &[&str]) -> String {
    let shown: Vec<String> = names.iter().take(SHOWN).map(|n| if n.starts_with('`') { n.to_string() } else { format!("`{n}`") }).collect();
    let more = names.len().saturating_sub(SHOWN);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// Checkpoints written before dlc used PyTorch's names called biases `b` and put Sequential's
/// children under `layers.`: when renaming explains every missing name, say so.
fn old_names_hint(missing: &[&str], unexpected: &[&str]) -> Option<String> {
    let renamed = |old: &str| {
        let mut parts: Vec<&str> = old.split('.').filter(|p| *p != "layers").collect();
        if parts.last() == Some(&"b") {
            parts.pop();
            parts.push("bias");
        }
        parts.join(".")
    };
    let explained = !missing.is_empty() && missing.iter().all(|m| unexpected.iter().any(|u| renamed(u) == *m));
    explained.then(|| {
        "the file uses the names of dlc before checkpoints took PyTorch's (`fc1.b` for `fc1.bias`, `mlp.layers.0.weight` for `mlp.0.weight`); rename its tensors to load it".to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(path: &str, shape: &[usize]) -> Slot {
        Slot { path: path.into(), shape: shape.to_vec(), dtype: DType::F32 }
    }

    fn tensor(name: &str, dtype: DType, shape: &[usize]) -> (String, Tensor) {
        let n = shape.iter().product();
        (name.into(), Tensor::from_f64(dtype, shape.to_vec(), vec![1.0; n]))
    }

    #[test]
    fn every_difference_is_listed_at_once() {
        let slots = [slot("fc1.weight", &[4, 3]), slot("fc1.bias", &[4]), slot("fc2.weight", &[2, 4])];
        let file =
            [tensor("fc1.weight", DType::F32, &[4, 5]), tensor("conv.weight", DType::F32, &[1]), tensor("fc2.weight", DType::F32, &[2, 4])];
        let e = match_state(&slots, &file, "`Net`", "the checkpoint in runs/x").unwrap_err();
        assert_eq!(
            e,
            "cannot load the checkpoint in runs/x into `Net`: its names and shapes differ from the model's\n  missing (the model has them, the file does not): `fc1.bias`\n  unexpected (the file has them, the model does not): `conv.weight`\n  shape mismatches: `fc1.weight`: f32[4, 5] in the file, f32[4, 3] in the model"
        );
    }

    #[test]
    fn matching_names_load_in_the_models_order_and_dtype() {
        let slots = [slot("a", &[2]), Slot { path: "n".into(), shape: vec![], dtype: DType::I64 }];
        let file = [tensor("n", DType::I64, &[]), tensor("a", DType::BF16, &[2])];
        let got = match_state(&slots, &file, "the model", "f").unwrap();
        assert_eq!((got[0].dtype, got[1].dtype), (DType::F32, DType::I64));
        assert_eq!(got[0].shape, vec![2]);
    }

    #[test]
    fn old_dlc_names_get_a_rename_hint() {
        let slots = [slot("mlp.0.weight", &[1]), slot("mlp.0.bias", &[1])];
        let file = [tensor("mlp.layers.0.weight", DType::F32, &[1]), tensor("mlp.layers.0.b", DType::F32, &[1])];
        let e = match_state(&slots, &file, "the model", "f").unwrap_err();
        assert!(e.contains("help: the file uses the names of dlc before"), "{e}");
        let other = [tensor("x", DType::F32, &[1])];
        assert!(!match_state(&slots, &other, "the model", "f").unwrap_err().contains("help:"));
        let many: Vec<Slot> = (0..10).map(|i| slot(&format!("p{i}"), &[1])).collect();
        assert!(match_state(&many, &[], "m", "f").unwrap_err().contains("`p7` and 2 more"));
    }
}
