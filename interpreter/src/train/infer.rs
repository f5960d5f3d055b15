//! `infer { model, checkpoint, input, output }`: run a trained model on new inputs. The output is
//! printed, or written as a `.npy` file when `output` names one (a PNG grid for `.png`).

use super::checkpoint;
use crate::exec::Executor;
use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use dlc_language::eval::model::collect_params;
use dlc_language::eval::recipe::RecipeInfo;
use dlc_language::eval::value::{Ctx, Func};
use dlc_language::eval::{Session, Value};
use dlc_language::ir::Op;
use dlc_language::types::{DType, Dim, TensorTy};
use std::path::Path;

fn err(msg: impl Into<String>) -> RuntimeError {
    RuntimeError::Unsupported(msg.into())
}

/// The model's parameters, loaded from the block's checkpoint when it names one (matched by
/// path; a model method such as `Vae().decode` loads its model's parameters).
fn load_checkpoint(
    t: &dlc_language::eval::tracer::Tracer,
    info: &RecipeInfo,
    model: &Value,
    root: &Path,
    ex: &mut Executor,
) -> Result<(), RuntimeError> {
    let Some(Value::Str(dir)) = info.field("checkpoint") else { return Ok(()) };
    let dir = root.join(&**dir);
    let ck = checkpoint::load(&dir).map_err(RuntimeError::Io)?;
    let owner = match model {
        Value::Func(f) => match &**f {
            Func::Method { model, .. } => Value::Model(model.clone()),
            _ => model.clone(),
        },
        other => other.clone(),
    };
    let mut found = vec![];
    collect_params(&owner, "", &mut found);
    for (path, v) in found {
        let Value::Tensor(node) = v else { continue };
        if let Op::Param(id) = t.graph.node(node).op {
            let ty = t.graph.params[id as usize].ty.clone();
            let shape: Vec<usize> = ty.shape.iter().map(|d| d.as_known().unwrap_or(0) as usize).collect();
            let source = format!("the checkpoint in {}", dir.display());
            let w = checkpoint::param_from(&ck.params, &path, &shape, ty.dtype, &source).map_err(err)?;
            ex.set_param(id, w);
        }
    }
    Ok(())
}

/// Apply the model to one input value; returns the output node.
pub fn apply(session: &mut Session, info: &RecipeInfo, model: &Value, input: Value) -> Result<dlc_language::ir::NodeId, RuntimeError> {
    let t = &mut session.t;
    t.ctx = Ctx { module: info.module, instance: None, env: vec![] };
    let before = t.diags.len();
    match t.call(model, vec![(None, input, Default::default())], info.recipe.span, info.recipe.span) {
        Ok(Value::Tensor(n)) => Ok(n),
        Ok(other) => Err(err(format!("the model returned {}, not a tensor", other.kind()))),
        Err(_) => Err(err(format!(
            "applying the model to the input failed: {:?}",
            t.diags[before..].iter().map(|d| d.message.clone()).collect::<Vec<_>>()
        ))),
    }
}

/// What the block computes, as `run` executes it and `dlc explain` reports it: the model
/// applied to the input, with batch norm folded into the product before it (as in evaluation),
/// then the block's `precision` (products in bf16 or f16 with f32 accumulation, as
/// `torch.autocast` around inference).
pub fn computation(session: &mut Session, info: &RecipeInfo) -> Result<Computation, RuntimeError> {
    let model = info.field("model").cloned().ok_or_else(|| err("the infer block has no model"))?;
    let input = info.field("input").cloned().ok_or_else(|| err("the infer block has no input"))?;
    let out = apply(session, info, &model, input.clone())?;
    // The input is the data: what depends on the parameters alone is folded, not the input.
    let data: Vec<dlc_language::ir::NodeId> = match input {
        Value::Tensor(n) => vec![n],
        _ => vec![],
    };
    let precision = super::precision::low_precision(info.field("precision")).unwrap_or(DType::F32);
    let forward = dlc_language::passes::pipeline::inference_forward(&mut session.t.graph, &[out], &data, true, precision)?;
    Ok(Computation { out: forward.roots[0], folds: forward.folds })
}

/// An `infer` block's output node, and the batch norms folded on the way.
pub struct Computation {
    pub out: dlc_language::ir::NodeId,
    pub folds: Vec<dlc_language::passes::bn_fold::Fold>,
}

/// `roots` under the block's `precision` field (f32 when it has none).
fn under_precision(session: &mut Session, info: &RecipeInfo, roots: &[dlc_language::ir::NodeId]) -> Vec<dlc_language::ir::NodeId> {
    let precision = super::precision::low_precision(info.field("precision")).unwrap_or(DType::F32);
    dlc_language::passes::autocast::lower_all(&mut session.t.graph, roots, precision)
}

/// Run the block; returns the output tensor.
pub fn run(session: &mut Session, info: &RecipeInfo, root: &Path) -> Result<Tensor, RuntimeError> {
    let out = computation(session, info)?.out;
    let model = info.field("model").cloned().ok_or_else(|| err("the infer block has no model"))?;
    let mut ex = Executor::new(0);
    load_checkpoint(&session.t, info, &model, root, &mut ex)?;
    let y = ex.eval(&session.t.graph, out)?;
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

/// `infer { generate = N, input = "prompt", vocab = FILE, context = T }`: sample N characters
/// from a character-level language model (logits [1, T, V]), one at a time, each from the
/// softmax of the last position's logits divided by `temperature` (default 1), the window being
/// the last `context` characters. Returns the prompt followed by the sample.
pub fn generate(session: &mut Session, info: &RecipeInfo, root: &Path) -> Result<String, RuntimeError> {
    let model = info.field("model").cloned().ok_or_else(|| err("the infer block has no model"))?;
    let Some(Value::Str(prompt)) = info.field("input").cloned() else { return Err(err("with `generate`, `input` is a text prompt")) };
    let Some(Value::Str(vocab_file)) = info.field("vocab").cloned() else { return Err(err("`generate` needs `vocab`")) };
    let n = info.field("generate").and_then(|v| v.as_int()).unwrap_or(0).max(0) as usize;
    let context = info.field("context").and_then(|v| v.as_int()).unwrap_or(1).max(1) as usize;
    let temperature = info.field("temperature").and_then(|v| v.as_float()).unwrap_or(1.0).max(1e-6);
    let seed = info.field("seed").and_then(|v| v.as_int()).unwrap_or(0) as u64;
    let vocab = crate::runtime::data::text::read(&root.join(&*vocab_file), false)
        .map_err(|e| RuntimeError::Data { message: e.to_string(), span: info.recipe.span })?
        .vocab;
    let mut ids: Vec<usize> = vec![];
    for c in prompt.chars() {
        ids.push(
            vocab
                .iter()
                .position(|v| *v == c)
                .ok_or_else(|| err(format!("the prompt's character {c:?} is not in the vocabulary of {vocab_file}")))?,
        );
    }
    if ids.is_empty() {
        return Err(err("the prompt is empty: give at least one character"));
    }
    let mut ex = Executor::new(0);
    load_checkpoint(&session.t, info, &model, root, &mut ex)?;
    let params = ex.params.clone();
    // One traced graph per window length (1..=context), each built on first use.
    let mut graphs: std::collections::HashMap<usize, (u32, dlc_language::ir::NodeId)> = Default::default();
    for i in 0..n {
        let window: Vec<usize> = ids[ids.len().saturating_sub(context)..].to_vec();
        let len = window.len();
        if !graphs.contains_key(&len) {
            let t = &mut session.t;
            let dims = vec![Dim::known(1), Dim::known(len as i64)];
            let id = t.graph.add_input("prompt", TensorTy::new(DType::I64, dims.clone()));
            let node = t.node(Op::Input(id), DType::I64, dims, vec![], Default::default());
            let out = apply(session, info, &model, Value::Tensor(node))?;
            graphs.insert(len, (id, under_precision(session, info, &[out])[0]));
        }
        let (id, out) = graphs[&len];
        let mut ex = Executor::new(0);
        ex.params = params.clone();
        ex.inputs.insert(id, Tensor::from_f64(DType::I64, vec![1, len], window.iter().map(|&w| w as f64)));
        let logits = ex.eval(&session.t.graph, out)?;
        let v = logits.to_f64();
        let classes = *logits.shape.last().unwrap_or(&1);
        if logits.numel() != len * classes {
            return Err(err(format!("`generate` needs logits [1, T, vocab], the model returned {:?}", logits.shape)));
        }
        let last = &v[(len - 1) * classes..];
        let max = last.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = last.iter().map(|l| ((l - max) / temperature).exp()).collect();
        let total: f64 = weights.iter().sum();
        let mut u = crate::runtime::rng::uniform(seed, i as u64) * total;
        let mut pick = classes - 1;
        for (k, w) in weights.iter().enumerate() {
            if u < *w {
                pick = k;
                break;
            }
            u -= w;
        }
        ids.push(pick.min(vocab.len().saturating_sub(1)));
    }
    Ok(ids.iter().map(|&i| vocab[i]).collect())
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
