//! `infer { model, checkpoint, input, output }`: run a trained model on new inputs. The output is
//! printed, or written as a `.npy` file when `output` names one (a PNG grid for `.png`).

use super::checkpoint;
use crate::exec::Executor;
use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use dlc_language::eval::model::collect_params;
use dlc_language::eval::recipe::RecipeInfo;
use dlc_language::eval::value::Ctx;
use dlc_language::eval::{Session, Value};
use dlc_language::ir::Op;
use dlc_language::types::DType;
use std::path::Path;

fn err(msg: impl Into<String>) -> RuntimeError {
    RuntimeError::Unsupported(msg.into())
}

/// Run the block; returns the output tensor.
pub fn run(session: &mut Session, info: &RecipeInfo, root: &Path) -> Result<Tensor, RuntimeError> {
    let model = info.field("model").cloned().ok_or_else(|| err("the infer block has no model"))?;
    let input = info.field("input").cloned().ok_or_else(|| err("the infer block has no input"))?;
    let t = &mut session.t;
    t.ctx = Ctx { module: info.module, instance: None, env: vec![] };
    let before = t.diags.len();
    let out = match t.call(&model, vec![(None, input, Default::default())], info.recipe.span, info.recipe.span) {
        Ok(Value::Tensor(n)) => n,
        Ok(other) => return Err(err(format!("the model returned {}, not a tensor", other.kind()))),
        Err(_) => {
            return Err(err(format!(
                "applying the model to the input failed: {:?}",
                t.diags[before..].iter().map(|d| d.message.clone()).collect::<Vec<_>>()
            )))
        }
    };
    let mut ex = Executor::new(0);
    if let Some(Value::Str(dir)) = info.field("checkpoint") {
        let dir = root.join(&**dir);
        let ck = checkpoint::load(&dir).map_err(RuntimeError::Io)?;
        let mut found = vec![];
        collect_params(&model, "", &mut found);
        for (path, v) in found {
            let Value::Tensor(node) = v else { continue };
            if let Op::Param(id) = t.graph.node(node).op {
                let w = ck
                    .params
                    .iter()
                    .find(|(n, _)| *n == path)
                    .map(|(_, w)| w.clone())
                    .ok_or_else(|| err(format!("the checkpoint in {} has no `{path}`", dir.display())))?;
                ex.set_param(id, w);
            }
        }
    }
    let y = ex.eval(&t.graph, out)?;
    if let Some(Value::Str(path)) = info.field("output") {
        let path = root.join(&**path);
        if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("png")) {
            super::png::write_grid(&path, &y)?;
        } else {
            write_npy(&path, &y)?;
        }
    }
    Ok(y)
}

/// NumPy's .npy format, version 1.0: magic, header dict padded to 64 bytes, little-endian data.
pub fn write_npy(path: &Path, t: &Tensor) -> Result<(), RuntimeError> {
    let (descr, bytes): (&str, Vec<u8>) = match t.dtype {
        DType::F64 => ("<f8", t.to_f64().iter().flat_map(|v| v.to_le_bytes()).collect()),
        DType::I64 | DType::I32 | DType::U8 | DType::Bool => ("<i8", t.to_f64().iter().flat_map(|v| (*v as i64).to_le_bytes()).collect()),
        _ => ("<f4", t.to_f64().iter().flat_map(|v| (*v as f32).to_le_bytes()).collect()),
    };
    let shape = match t.shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", t.shape[0]),
        _ => format!("({})", t.shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(bytes);
    std::fs::write(path, out).map_err(|e| RuntimeError::Io(format!("cannot write {}: {e}", path.display())))
}
