//! `infer { model, checkpoint, input, output }`: run a trained model on new inputs. The output is
//! printed, or written as a `.npy` file when `output` names one (a PNG grid for `.png`). A block
//! is compiled by the driver (batch norm folded, autocast, fused, memory planned) and runs
//! through a runner on the chosen device, as training steps do.

use super::state_dict;
use crate::exec::Executor;
use crate::runner::{Runner, Slot};
use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use dlc_language::eval::model::collect_params;
use dlc_language::eval::recipe::RecipeInfo;
use dlc_language::eval::tracer::Tracer;
use dlc_language::eval::value::{Ctx, Func};
use dlc_language::eval::{Session, Value};
use dlc_language::ir::{NodeId, Op};
use dlc_language::passes::driver;
use dlc_language::types::{DType, TensorTy};
use std::path::Path;

fn err(msg: impl Into<String>) -> RuntimeError {
    RuntimeError::Unsupported(msg.into())
}

/// The model's parameters by id: loaded from the block's checkpoint when it names one (matched
/// by path; a model method such as `Vae().decode` loads its model's parameters), else
/// initialised from the seed as a program's parameters are.
fn parameters(t: &Tracer, info: &RecipeInfo, model: &Value, root: &Path) -> Result<Vec<(u32, Tensor)>, RuntimeError> {
    let ck = match info.field("checkpoint") {
        Some(Value::Str(dir)) => {
            let dir = crate::paths::in_program(root, dir);
            Some((state_dict::load_state(&dir).map_err(RuntimeError::Checkpoint)?, dir))
        }
        _ => None,
    };
    let owner = match model {
        Value::Func(f) => match &**f {
            Func::Method { model, .. } => Value::Model(model.clone()),
            _ => model.clone(),
        },
        other => other.clone(),
    };
    let mut found = vec![];
    collect_params(&owner, "", &mut found);
    let mut ids: Vec<u32> = vec![];
    let mut slots = vec![];
    for (path, v) in found {
        let Value::Tensor(node) = v else { continue };
        let Op::Param(id) = t.graph.node(node).op else { continue };
        if ids.contains(&id) {
            continue;
        }
        let ty = t.graph.params[id as usize].ty.clone();
        let shape: Vec<usize> = ty.shape.iter().map(|d| d.as_known().unwrap_or(0) as usize).collect();
        ids.push(id);
        slots.push(state_dict::Slot { path, shape, dtype: ty.dtype });
    }
    let values = match &ck {
        Some((ck, dir)) => {
            let what = state_dict::models_named(std::iter::once(&owner));
            state_dict::match_state(&slots, ck, &what, &format!("the checkpoint {}", dir.display())).map_err(err)?
        }
        None => {
            let mut init = Executor::new(0);
            ids.iter().map(|id| init.param(&t.graph, *id)).collect::<Result<_, _>>()?
        }
    };
    Ok(ids.into_iter().zip(values).collect())
}

/// Apply the model to one input value; returns the output node.
pub fn apply(session: &mut Session, info: &RecipeInfo, model: &Value, input: Value) -> Result<NodeId, RuntimeError> {
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

/// The compile driver's options for an `infer` block: its `precision` (products in bf16 or
/// f16 with f32 accumulation, as `torch.autocast` around inference), fused unless `fuse` is
/// false (`--no-fuse`: the program as written).
pub fn driver_options(info: &RecipeInfo, fuse: bool) -> driver::Options {
    let precision = dlc_language::eval::spec::Precision::of(info.field("precision")).dtype();
    // NCHW: `infer` blocks are compiled before their runner is chosen (not yet channels-last on a GPU).
    driver::Options { fuse, remat: false, precision, bucket_cap: None, conv_layout: Default::default(), products_round: false }
}

/// An `infer` block compiled: the model applied to an input bound from outside, rewritten for
/// inference (batch norm folded into the product before it, not through the input, then the
/// precision's autocast) and planned; and the block's `input` expression planned on its own
/// (its value is computed once and bound). What `dlc run` executes and `dlc bench` times.
pub struct Compiled {
    /// The input the model reads.
    pub input_id: u32,
    /// The block's `input` expression and its plan (`None` when the caller binds the input).
    pub input: Option<(NodeId, driver::Planned)>,
    /// The output node, as traced and as planned.
    pub traced: NodeId,
    pub out: NodeId,
    pub folds: Vec<dlc_language::passes::bn_fold::Fold>,
    pub stages: driver::Stages,
    pub planned: driver::Planned,
}

/// Compile the model applied to a fresh input of type `ty`.
fn compile_model(session: &mut Session, info: &RecipeInfo, model: &Value, ty: TensorTy, fuse: bool) -> Result<Compiled, RuntimeError> {
    let t = &mut session.t;
    let input_id = t.graph.add_input("infer input", ty.clone());
    let input = t.node(Op::Input(input_id), ty.dtype, ty.shape, vec![], Default::default());
    let traced = apply(session, info, model, Value::Tensor(input))?;
    // The input is the data: what depends on the parameters alone is folded, not the input.
    let (forward, planned) = driver::compile_infer(&mut session.t.graph, traced, &[input], &driver_options(info, fuse))?;
    Ok(Compiled { input_id, input: None, traced, out: forward.roots[0], folds: forward.folds, stages: forward.stages, planned })
}

/// Compile the block (its `input` a tensor).
pub fn compile(session: &mut Session, info: &RecipeInfo, fuse: bool) -> Result<Compiled, RuntimeError> {
    let model = info.field("model").cloned().ok_or_else(|| err("the infer block has no model"))?;
    let Some(Value::Tensor(input)) = info.field("input").cloned() else { return Err(err("the infer block's input is not a tensor")) };
    let ty = session.t.ty(input);
    let mut c = compile_model(session, info, &model, ty, fuse)?;
    c.input = Some((input, driver::plan(&session.t.graph, &[input], fuse)?));
    Ok(c)
}

/// Put the model's parameters on the runner.
pub fn load(session: &Session, info: &RecipeInfo, root: &Path, runner: &mut dyn Runner) -> Result<(), RuntimeError> {
    let model = info.field("model").cloned().ok_or_else(|| err("the infer block has no model"))?;
    for (id, w) in parameters(&session.t, info, &model, root)? {
        runner.put(Slot::Param(id), &w)?;
    }
    Ok(())
}

/// Compute the block's input on the runner and bind it for the model's runs.
pub fn bind_input(session: &Session, c: &Compiled, runner: &mut dyn Runner) -> Result<(), RuntimeError> {
    if let Some((node, p)) = &c.input {
        runner.run(&session.t.graph, &p.plan, &p.memory)?;
        runner.keep(&session.t.graph, *node, Slot::Input(c.input_id))?;
        runner.read_input_from(c.input_id, Slot::Input(c.input_id));
    }
    Ok(())
}

/// Run the model's plan on the runner (parameters loaded, input bound); returns the output.
pub fn execute(session: &Session, c: &Compiled, runner: &mut dyn Runner) -> Result<Tensor, RuntimeError> {
    runner.run(&session.t.graph, &c.planned.plan, &c.planned.memory)?;
    runner.fetch(&session.t.graph, c.out)
}

/// Run the block on the runner: compile, load its parameters, bind its input, execute, write
/// its output file.
pub fn run(session: &mut Session, info: &RecipeInfo, root: &Path, fuse: bool, runner: &mut dyn Runner) -> Result<Tensor, RuntimeError> {
    let c = compile(session, info, fuse)?;
    load(session, info, root, runner)?;
    bind_input(session, &c, runner)?;
    let y = execute(session, &c, runner)?;
    if let Some(Value::Str(path)) = info.field("output") {
        let path = crate::paths::in_program(root, path);
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
    let out = crate::runtime::data::npy::encode(descr, &t.shape, &bytes);
    std::fs::write(path, out).map_err(|e| RuntimeError::Io(format!("cannot write {}: {e}", path.display())))
}
