//! The trainer: a `train` recipe compiled to a step (forward, loss, gradients by autodiff, and the
//! stdlib's update rule for every parameter, all in one graph) and a loop over the data pipeline.
//! A step is traced once per batch shape and reused. Evaluation traces the metrics with no
//! backward pass and `training()` false (the guide's `no_grad` + `eval()`).

pub mod checkpoint;
pub mod infer;
mod metrics;
mod overrides;
pub mod schedule;

use metrics::Metrics;
pub use overrides::apply_overrides;

use crate::exec::Executor;
use crate::runtime::pipeline::{self, leaves, Element};
use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use dlc_language::eval::model::collect_params;
use dlc_language::eval::recipe::RecipeInfo;
use dlc_language::eval::value::{Ctx, Pipeline};
use dlc_language::eval::{Session, Value};
use dlc_language::ir::{NodeId, Op};
use dlc_language::passes::autodiff;
use dlc_language::syntax::ast::{Expr, RecipeEntry};
use dlc_language::types::{DType, Dim, TensorTy};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

pub struct TrainOptions {
    pub root: PathBuf,
    pub seed: u64,
    /// Print progress lines.
    pub echo: bool,
    /// Continue from this checkpoint directory (`dlc run --resume DIR`).
    pub resume: Option<PathBuf>,
    /// Where to append metrics as JSON lines; by default `metrics.jsonl` in the checkpoint directory.
    pub metrics: Option<PathBuf>,
    /// Set (by a Ctrl-C handler) to stop after the current step, saving a checkpoint first.
    pub interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Draw a live progress line on stderr (a terminal); plain log lines either way.
    pub progress: bool,
}

impl TrainOptions {
    pub fn new(root: PathBuf, seed: u64) -> TrainOptions {
        TrainOptions { root, seed, echo: false, resume: None, metrics: None, interrupt: None, progress: false }
    }
}

/// What a run did, for callers and tests.
#[derive(Debug, Default)]
pub struct TrainReport {
    pub steps: usize,
    /// (step, loss) at every logged step and the last one.
    pub losses: Vec<(usize, f64)>,
    /// (epoch, metric values) of each evaluation.
    pub evals: Vec<(usize, Vec<f64>)>,
}

struct Param {
    id: u32,
    node: NodeId,
    /// `fc1.weight`: the name in checkpoints.
    path: String,
}

/// One compiled training step for one batch shape.
struct Step {
    elem_inputs: Vec<u32>,
    loss: NodeId,
    t_input: u32,
    lr_input: u32,
    /// Per parameter: its state inputs and the nodes of (new param, new states...).
    updates: Vec<(Vec<u32>, Vec<NodeId>)>,
    /// New values of buffers (BatchNorm's running statistics), by parameter id.
    buffer_updates: Vec<(u32, NodeId)>,
}

/// Training stopped by Ctrl-C (after saving a checkpoint when the recipe has a directory).
pub const INTERRUPTED: &str = "interrupted";

fn err(msg: impl Into<String>) -> RuntimeError {
    RuntimeError::Unsupported(msg.into())
}

fn shapes_of(e: &Element) -> Vec<(DType, Vec<usize>)> {
    e.iter().map(|t| (t.dtype, t.shape.clone())).collect()
}

pub struct Trainer<'s> {
    session: &'s mut Session,
    info: RecipeInfo,
    model: Value,
    pipeline: Rc<Pipeline>,
    params: Vec<Param>,
    /// Non-trainable state of the model (running statistics): checkpointed, updated by `assign`.
    buffers: Vec<Param>,
    store: HashMap<u32, Tensor>,
    states: Vec<Vec<Tensor>>,
    steps: HashMap<Vec<(DType, Vec<usize>)>, Step>,
    opts: TrainOptions,
    /// The step-number input while a training step is traced (random ops draw per step).
    step_node: Option<NodeId>,
}

impl<'s> Trainer<'s> {
    pub fn new(session: &'s mut Session, info: RecipeInfo, opts: TrainOptions) -> Result<Trainer<'s>, RuntimeError> {
        if info.recipe.entries.iter().any(|e| matches!(e, RecipeEntry::Step { .. })) {
            return Err(err("custom `step` blocks are checked but not executed yet"));
        }
        let model = info.field("model").cloned().ok_or_else(|| err("the recipe has no model"))?;
        let Some(Value::Pipeline(pipeline)) = info.field("data").cloned() else { return Err(err("the recipe has no data pipeline")) };
        let mut found = vec![];
        collect_params(&model, "", &mut found);
        let mut params = vec![];
        let mut buffers = vec![];
        let mut init = Executor::new(opts.seed);
        let mut store = HashMap::new();
        for (path, v) in found {
            let Value::Tensor(node) = v else { continue };
            if let Op::Param(id) = session.t.graph.node(node).op {
                if params.iter().chain(buffers.iter()).any(|p: &Param| p.id == id) {
                    continue;
                }
                store.insert(id, init.param(&session.t.graph, id)?);
                if session.t.graph.params[id as usize].trainable {
                    params.push(Param { id, node, path });
                } else {
                    buffers.push(Param { id, node, path });
                }
            }
        }
        let n_state = match optimizer_kind(&info).as_str() {
            "sgd" | "lars" => 1,
            "adam" | "adamw" | "lamb" => 2,
            other => {
                return Err(err(format!("the `{other}` optimiser is checked but not executed yet (sgd, adam, adamw, lamb and lars run)")))
            }
        };
        let states = params
            .iter()
            .map(|p| {
                let t = &store[&p.id];
                (0..n_state).map(|_| Tensor::from_f64(t.dtype, t.shape.clone(), std::iter::repeat(0.0).take(t.numel()))).collect()
            })
            .collect();
        Ok(Trainer { session, info, model, pipeline, params, buffers, store, states, steps: HashMap::new(), opts, step_node: None })
    }

    fn expr_field(&self, name: &str) -> Option<Expr> {
        self.info.recipe.entries.iter().find_map(|e| match e {
            RecipeEntry::Field(f) if f.name.name == name => Some(f.value.clone()),
            _ => None,
        })
    }

    /// A copy of the pipeline's element structure whose tensors are fresh inputs of these shapes.
    fn element_inputs(&mut self, elem: &Value, shapes: &mut std::slice::Iter<(DType, Vec<usize>)>, ids: &mut Vec<u32>) -> Value {
        match elem {
            Value::Tensor(_) => {
                let (dt, shape) = shapes.next().cloned().unwrap_or((DType::F32, vec![]));
                let dims: Vec<Dim> = shape.iter().map(|d| Dim::known(*d as i64)).collect();
                let t = &mut self.session.t;
                let id = t.graph.add_input("batch", TensorTy::new(dt, dims.clone()));
                ids.push(id);
                Value::Tensor(t.node(Op::Input(id), dt, dims, vec![], Default::default()))
            }
            Value::Tuple(items) => Value::Tuple(Rc::new(items.iter().map(|x| self.element_inputs(x, shapes, ids)).collect())),
            Value::Record(items) => {
                Value::Record(Rc::new(items.iter().map(|(k, x)| (k.clone(), self.element_inputs(x, shapes, ids))).collect()))
            }
            other => other.clone(),
        }
    }

    /// Trace `expr` with `model` and the element bound, for a batch of these shapes.
    fn trace(&mut self, expr: &Expr, shapes: &[(DType, Vec<usize>)], training: bool) -> Result<(Value, Vec<u32>), RuntimeError> {
        let elem = self.pipeline.elem.clone();
        let mut ids = vec![];
        let e = self.element_inputs(&elem, &mut shapes.iter(), &mut ids);
        let t = &mut self.session.t;
        t.ctx = Ctx { module: self.info.module, instance: None, env: vec![] };
        t.bind("model", self.model.clone());
        t.bind_element(&e);
        t.training = training;
        t.step_input = self.step_node;
        let before = t.diags.len();
        let r = t.eval(expr);
        t.training = false;
        t.step_input = None;
        match r {
            Ok(v) => Ok((v, ids)),
            Err(_) => Err(err(format!(
                "tracing the recipe failed: {:?}",
                t.diags[before..].iter().map(|d| d.message.clone()).collect::<Vec<_>>()
            ))),
        }
    }

    fn build_step(&mut self, shapes: &[(DType, Vec<usize>)]) -> Result<Step, RuntimeError> {
        let loss_expr = self.expr_field("loss").ok_or_else(|| err("the recipe has no loss"))?;
        let scalar = |t: &mut dlc_language::eval::tracer::Tracer, name: &str| {
            let id = t.graph.add_input(name, TensorTy::new(DType::F32, vec![]));
            (id, t.node(Op::Input(id), DType::F32, vec![], vec![], Default::default()))
        };
        let (t_input, t_node) = scalar(&mut self.session.t, "step");
        let (lr_input, lr_node) = scalar(&mut self.session.t, "lr");
        self.step_node = Some(t_node);
        self.session.t.buffer_updates.clear();
        let traced = self.trace(&loss_expr, shapes, true);
        self.step_node = None;
        let buffer_updates = std::mem::take(&mut self.session.t.buffer_updates);
        let (loss, elem_inputs) = traced?;
        let Value::Tensor(loss) = loss else { return Err(err("the loss is not a tensor")) };
        let wrt: Vec<NodeId> = self.params.iter().map(|p| p.node).collect();
        let mut grads =
            autodiff::grad(&mut self.session.t.graph, loss, &wrt).map_err(|e| err(format!("cannot differentiate the loss: {e:?}")))?;
        if let Some(max_norm) = self.info.field("clip_grad_norm").and_then(|v| v.as_float()) {
            grads = clip_by_global_norm(&mut self.session.t, &grads, max_norm)?;
        }
        let kind = optimizer_kind(&self.info);
        let opt = self.info.field("optimizer").cloned().unwrap_or(Value::unit());
        let t = &mut self.session.t;
        let optim = t.modules.iter().position(|m| m.name == "std.optim").ok_or_else(|| err("`use std.optim` is needed to train"))?;
        let rule = t.lookup_global(optim, &format!("{kind}_update")).ok_or_else(|| err(format!("no update rule for `{kind}`")))?;
        let mut named: Vec<(String, Value)> = vec![];
        let num = |k: &str| opt.field(k).filter(|v| v.as_float().is_some());
        match kind.as_str() {
            "sgd" | "lars" => {
                for k in ["momentum", "nesterov", "weight_decay", "trust"] {
                    if let Some(v) = opt.field(k) {
                        named.push((k.into(), v));
                    }
                }
            }
            _ => {
                if let Some(Value::Tuple(b)) = opt.field("betas") {
                    named.push(("b1".into(), b[0].clone()));
                    named.push(("b2".into(), b[1].clone()));
                }
                for k in ["eps", "weight_decay"] {
                    if let Some(v) = num(k) {
                        named.push((k.into(), v));
                    }
                }
            }
        }
        let mut updates = vec![];
        for (p, g) in self.params.iter().zip(grads) {
            let ty = t.ty(p.node);
            let n_state = self.states[0].len();
            let mut state_ids = vec![];
            let mut args = vec![(None, Value::Tensor(p.node), Default::default()), (None, Value::Tensor(g), Default::default())];
            for _ in 0..n_state {
                let id = t.graph.add_input("state", ty.clone());
                state_ids.push(id);
                args.push((
                    None,
                    Value::Tensor(t.node(Op::Input(id), ty.dtype, ty.shape.clone(), vec![], Default::default())),
                    Default::default(),
                ));
            }
            args.push((None, Value::Tensor(t_node), Default::default()));
            args.push((None, Value::Tensor(lr_node), Default::default()));
            for (k, v) in &named {
                args.push((
                    Some(dlc_language::syntax::ast::Ident { name: k.clone(), span: Default::default() }),
                    v.clone(),
                    Default::default(),
                ));
            }
            let out = t
                .call(&rule, args, Default::default(), Default::default())
                .map_err(|_| err(format!("the {kind} update failed to trace: {:?}", t.diags.last())))?;
            let mut nodes = vec![];
            leaves(&out, &mut nodes);
            // Keep each new value in its parameter's dtype.
            let nodes = nodes.into_iter().map(|n| t.cast(n, ty.dtype, Default::default())).collect();
            updates.push((state_ids, nodes));
        }
        Ok(Step { elem_inputs, loss, t_input, lr_input, updates, buffer_updates })
    }

    /// Optimiser state names as torch.optim calls them.
    fn state_names(&self) -> &'static [&'static str] {
        match self.states.first().map(|s| s.len()).unwrap_or(0) {
            1 => &["momentum_buffer"],
            _ => &["exp_avg", "exp_avg_sq"],
        }
    }

    fn checkpoint(&self, step: usize, epoch: usize) -> checkpoint::Checkpoint {
        let names = self.state_names();
        checkpoint::Checkpoint {
            params: self.params.iter().chain(&self.buffers).map(|p| (p.path.clone(), self.store[&p.id].clone())).collect(),
            optimizer: self
                .params
                .iter()
                .zip(&self.states)
                .flat_map(|(p, st)| st.iter().zip(names).map(move |(t, n)| (format!("{}.{n}", p.path), t.clone())))
                .collect(),
            step,
            epoch,
            seed: self.opts.seed,
        }
    }

    /// Load parameters and optimiser state; every tensor must be there with its shape.
    fn restore(&mut self, ck: &checkpoint::Checkpoint) -> Result<(), RuntimeError> {
        let find = |list: &[(String, Tensor)], name: &str| list.iter().find(|(n, _)| n == name).map(|(_, t)| t.clone());
        let names = self.state_names();
        for (k, p) in self.params.iter().enumerate() {
            let t = find(&ck.params, &p.path).ok_or_else(|| err(format!("the checkpoint has no parameter `{}`", p.path)))?;
            let cur = &self.store[&p.id];
            if t.shape != cur.shape || t.dtype != cur.dtype {
                return Err(err(format!(
                    "checkpoint parameter `{}` is {}{:?}, the model's is {}{:?}",
                    p.path, t.dtype, t.shape, cur.dtype, cur.shape
                )));
            }
            self.store.insert(p.id, t);
            for (j, n) in names.iter().enumerate() {
                let name = format!("{}.{n}", p.path);
                self.states[k][j] =
                    find(&ck.optimizer, &name).ok_or_else(|| err(format!("the checkpoint has no optimiser state `{name}`")))?;
            }
        }
        for b in &self.buffers {
            let t = find(&ck.params, &b.path).ok_or_else(|| err(format!("the checkpoint has no buffer `{}`", b.path)))?;
            self.store.insert(b.id, t);
        }
        Ok(())
    }

    /// `checkpoint "dir" every ...`: the directory and (unit, count).
    fn checkpoint_clause(&self) -> Option<(PathBuf, String, usize)> {
        self.info.recipe.entries.iter().find_map(|e| match e {
            RecipeEntry::Checkpoint { dir, every, .. } => {
                let d = match &dir.kind {
                    dlc_language::syntax::ast::ExprKind::Str(s) => PathBuf::from(s),
                    _ => return None,
                };
                let n = every.count.as_ref().and_then(int_literal);
                Some((d, every.unit.name.clone(), n.unwrap_or(1).max(1)))
            }
            _ => None,
        })
    }

    fn save(&self, dir: &std::path::Path, step: usize, epoch: usize) -> Result<(), RuntimeError> {
        checkpoint::save(dir, &self.checkpoint(step, epoch)).map_err(RuntimeError::Io)?;
        if self.opts.echo {
            println!("checkpoint: {} (step {step})", dir.display());
        }
        Ok(())
    }

    fn clear_progress(&self) {
        if self.opts.progress {
            eprint!("\r\x1b[2K");
        }
    }

    fn executor(&self) -> Executor {
        let mut ex = Executor::new(self.opts.seed);
        for p in self.params.iter().chain(&self.buffers) {
            ex.set_param(p.id, self.store[&p.id].clone());
        }
        ex
    }

    /// Run the recipe to the end. Returns the losses and evaluations.
    pub fn run(&mut self) -> Result<TrainReport, RuntimeError> {
        let epochs_field = self.info.field("epochs").and_then(|v| v.as_int());
        let max_steps = self.info.field("steps").and_then(|v| v.as_int()).map(|s| s as usize);
        let log_every = self.info.recipe.entries.iter().find_map(|e| match e {
            RecipeEntry::Log { every, .. } => every.count.as_ref().and_then(int_literal),
            _ => None,
        });
        let lr = self.info.field("optimizer").and_then(|o| o.field("lr")).and_then(|v| v.as_float()).unwrap_or(1e-3);
        let schedule = self.info.field("schedule").cloned();
        let mut report = TrainReport::default();
        let mut step = 0usize;
        let mut start_epoch = 0usize;
        let mut skip_in_epoch = 0usize;
        if let Some(dir) = self.opts.resume.clone() {
            let ck = checkpoint::load(&dir).map_err(RuntimeError::Io)?;
            self.restore(&ck)?;
            step = ck.step;
            start_epoch = ck.epoch;
            if self.opts.echo {
                println!("resumed from {} at step {step}", dir.display());
            }
        }
        let ck_clause = self.checkpoint_clause();
        let metrics_path = self.opts.metrics.clone().or_else(|| ck_clause.as_ref().map(|c| c.0.join("metrics.jsonl")));
        let mut metrics = Metrics::open(metrics_path)?;
        let epochs = epochs_field.map(|e| e as usize).unwrap_or(usize::MAX);
        let first = pipeline::run(&self.pipeline, &self.opts.root, &self.session.t.graph, 0)?;
        if first.is_empty() {
            return Err(err("the training data pipeline yields no batches"));
        }
        let per_epoch = first.len();
        if self.opts.resume.is_some() {
            skip_in_epoch = step.saturating_sub(start_epoch * per_epoch);
        }
        // The schedule's horizon comes from the recipe as written, not from `--set`: a run split
        // with `--set epochs=1` and `--resume` follows the same learning rates as one whole run.
        let declared = |name: &str| self.expr_field(name).as_ref().and_then(int_literal);
        let total = declared("steps")
            .or_else(|| declared("epochs").map(|e| e * per_epoch))
            .unwrap_or_else(|| max_steps.unwrap_or(per_epoch.saturating_mul(epochs.min(1 << 20))));
        // Epoch 0's batches were read to size the schedule; a resumed run starts elsewhere.
        let mut batches = if start_epoch == 0 { Some(first) } else { None };
        let started = Instant::now();
        let mut last_draw = Instant::now();
        let first_step = step;
        let mut samples = 0usize;
        if max_steps.map(|m| step >= m).unwrap_or(false) || start_epoch >= epochs {
            report.steps = step;
            return Ok(report);
        }
        'outer: for epoch in start_epoch..epochs {
            let data = match batches.take() {
                Some(b) if epoch == 0 => b,
                _ => pipeline::run(&self.pipeline, &self.opts.root, &self.session.t.graph, epoch as u64)?,
            };
            let mut epoch_loss = (0.0, 0usize);
            let skip = if epoch == start_epoch { skip_in_epoch } else { 0 };
            for batch in data.into_iter().skip(skip) {
                step += 1;
                let key = shapes_of(&batch);
                if !self.steps.contains_key(&key) {
                    let s = self.build_step(&key)?;
                    self.steps.insert(key.clone(), s);
                }
                let st = &self.steps[&key];
                let mut ex = self.executor();
                samples += batch.first().map(|t| t.shape.first().copied().unwrap_or(1)).unwrap_or(1);
                for (id, t) in st.elem_inputs.iter().zip(batch) {
                    ex.inputs.insert(*id, t);
                }
                ex.inputs.insert(st.t_input, Tensor::from_f64(DType::F32, vec![], [step as f64]));
                let rate = schedule::lr_at(schedule.as_ref(), lr, step, total, per_epoch);
                ex.inputs.insert(st.lr_input, Tensor::from_f64(DType::F32, vec![], [rate]));
                for (k, (ids, _)) in st.updates.iter().enumerate() {
                    for (id, s) in ids.iter().zip(&self.states[k]) {
                        ex.inputs.insert(*id, s.clone());
                    }
                }
                let graph = &self.session.t.graph;
                let loss = ex.eval(graph, st.loss)?.to_f64()[0];
                if !loss.is_finite() {
                    return Err(err(format!("the loss became {loss} at step {step}")));
                }
                let mut new_values = vec![];
                for (_, outs) in &st.updates {
                    new_values.push(outs.iter().map(|n| ex.eval(graph, *n)).collect::<Result<Vec<_>, _>>()?);
                }
                let new_buffers: Vec<(u32, Tensor)> =
                    st.buffer_updates.iter().map(|(id, n)| ex.eval(graph, *n).map(|t| (*id, t))).collect::<Result<_, _>>()?;
                self.store.extend(new_buffers);
                for (k, mut vals) in new_values.into_iter().enumerate() {
                    let p = vals.remove(0);
                    self.store.insert(self.params[k].id, p);
                    self.states[k] = vals;
                }
                epoch_loss = (epoch_loss.0 + loss, epoch_loss.1 + 1);
                if self.opts.progress && last_draw.elapsed().as_millis() >= 100 {
                    last_draw = Instant::now();
                    let done = step - epoch * per_epoch;
                    let rate_s = samples as f64 / started.elapsed().as_secs_f64().max(1e-9);
                    let secs_per_step = started.elapsed().as_secs_f64() / (step - first_step).max(1) as f64;
                    let end = max_steps.unwrap_or(per_epoch.saturating_mul(epochs.min(1 << 20)));
                    let left = end.saturating_sub(step) as f64 * secs_per_step;
                    let width = 24;
                    let filled = (done * width / per_epoch.max(1)).min(width);
                    eprint!(
                        "\r\x1b[2Kepoch {} [{}{}] {done}/{per_epoch} loss {loss:.4} {rate_s:.0} samples/s ETA {}",
                        epoch + 1,
                        "#".repeat(filled),
                        " ".repeat(width - filled),
                        eta(left)
                    );
                }
                let last = max_steps == Some(step);
                if log_every.map(|n| step % n == 0).unwrap_or(false) || last {
                    report.losses.push((step, loss));
                    let rate_s = samples as f64 / started.elapsed().as_secs_f64().max(1e-9);
                    metrics.write(serde_json::json!({"step": step, "epoch": epoch + 1, "loss": loss, "lr": rate, "samples_per_s": rate_s}));
                    if self.opts.echo {
                        self.clear_progress();
                        println!("epoch {} step {step}: loss {loss:.4}, lr {rate:.3e}, {rate_s:.0} samples/s", epoch + 1);
                    }
                }
                if self.opts.interrupt.as_ref().map(|f| f.load(std::sync::atomic::Ordering::SeqCst)).unwrap_or(false) {
                    let done = if step % per_epoch == 0 { epoch + 1 } else { epoch };
                    if let Some((dir, _, _)) = &ck_clause {
                        self.save(dir, step, done)?;
                    }
                    metrics.write(serde_json::json!({"step": step, "event": "interrupted"}));
                    return Err(err(INTERRUPTED));
                }
                if let Some((dir, unit, n)) = &ck_clause {
                    if unit.starts_with("step") && step % n == 0 && !last {
                        let done = if step % per_epoch == 0 { epoch + 1 } else { epoch };
                        self.save(dir, step, done)?;
                    }
                }
                if last {
                    report.steps = step;
                    self.evaluate(epoch + 1, &mut report)?;
                    if let Some((dir, _, _)) = &ck_clause {
                        let done = if step % per_epoch == 0 { epoch + 1 } else { epoch };
                        self.save(dir, step, done)?;
                    }
                    break 'outer;
                }
            }
            if self.opts.echo {
                self.clear_progress();
                println!(
                    "epoch {} done: mean loss {:.4} over {} steps",
                    epoch + 1,
                    epoch_loss.0 / epoch_loss.1.max(1) as f64,
                    epoch_loss.1
                );
            }
            report.losses.push((step, epoch_loss.0 / epoch_loss.1.max(1) as f64));
            metrics.write(serde_json::json!({"step": step, "epoch": epoch + 1, "mean_loss": epoch_loss.0 / epoch_loss.1.max(1) as f64}));
            let before = report.evals.len();
            self.evaluate(epoch + 1, &mut report)?;
            for (e, vals) in &report.evals[before..] {
                metrics.write(serde_json::json!({"step": step, "epoch": e, "evaluate": vals}));
            }
            if let Some((dir, unit, n)) = &ck_clause {
                if (unit.starts_with("epoch") && (epoch + 1) % n == 0) || epoch + 1 == epochs {
                    self.save(dir, step, epoch + 1)?;
                }
            }
        }
        report.steps = step;
        Ok(report)
    }

    /// Recipe fields this trainer accepts but does not act on yet, to be said out loud.
    pub fn ignored_fields(&self) -> Vec<String> {
        let mut out = vec![];
        for (k, v) in &self.info.fields {
            let ignored = match (k.as_str(), v) {
                ("precision", Value::DType(DType::F32)) => false,
                ("precision", _) => true,
                ("device", Value::Auto) => false,
                ("device", Value::Str(s)) => &**s != "cpu",
                ("parallel", _) => true,
                ("accumulate", v) => v.as_int() != Some(1),
                _ => false,
            };
            if ignored {
                out.push(k.clone());
            }
        }
        out
    }

    /// The current value of every trained parameter, by path (for tests and embedders).
    pub fn parameters(&self) -> Vec<(String, Tensor)> {
        self.params.iter().map(|p| (p.path.clone(), self.store[&p.id].clone())).collect()
    }

    /// Every `evaluate DATA every epoch { metrics }` clause: metrics averaged over the data,
    /// weighted by batch size, traced without backward and with `training()` false.
    fn evaluate(&mut self, epoch: usize, report: &mut TrainReport) -> Result<(), RuntimeError> {
        let clauses: Vec<(Expr, Expr)> = self
            .info
            .recipe
            .entries
            .iter()
            .filter_map(|e| match e {
                RecipeEntry::Evaluate { data, body, .. } => Some((data.clone(), body.clone())),
                _ => None,
            })
            .collect();
        for (data, body) in clauses {
            let t = &mut self.session.t;
            t.ctx = Ctx { module: self.info.module, instance: None, env: vec![] };
            let Ok(Value::Pipeline(p)) = t.eval(&data) else { return Err(err("the evaluate clause's data is not a pipeline")) };
            let (means, count) = self.evaluate_pipeline(p, &body)?;
            if self.opts.echo {
                let shown: Vec<String> = means.iter().map(|m| format!("{m:.4}")).collect();
                println!("epoch {epoch} evaluate: {} (over {count} examples)", shown.join(", "));
            }
            report.evals.push((epoch, means));
        }
        Ok(())
    }

    /// The metrics of `body` averaged over the pipeline's data, weighted by batch size, traced
    /// without backward and with `training()` false. Returns the means and the example count.
    fn evaluate_pipeline(&mut self, p: Rc<Pipeline>, body: &Expr) -> Result<(Vec<f64>, usize), RuntimeError> {
        {
            let batches = pipeline::run(&p, &self.opts.root, &self.session.t.graph, 0)?;
            let saved = std::mem::replace(&mut self.pipeline, p);
            let mut sums: Vec<f64> = vec![];
            let mut count = 0usize;
            let mut graphs: HashMap<Vec<(DType, Vec<usize>)>, (Vec<NodeId>, Vec<u32>)> = HashMap::new();
            for batch in batches {
                let key = shapes_of(&batch);
                if !graphs.contains_key(&key) {
                    let (v, ids) = self.trace(body, &key, false)?;
                    let mut nodes = vec![];
                    leaves(&v, &mut nodes);
                    graphs.insert(key.clone(), (nodes, ids));
                }
                let (nodes, ids) = &graphs[&key];
                let n = batch.first().map(|t| t.shape.first().copied().unwrap_or(1)).unwrap_or(1);
                let mut ex = self.executor();
                for (id, t) in ids.iter().zip(batch) {
                    ex.inputs.insert(*id, t);
                }
                let vals: Vec<f64> =
                    nodes.iter().map(|m| ex.eval(&self.session.t.graph, *m).map(|t| t.to_f64()[0])).collect::<Result<_, _>>()?;
                if sums.is_empty() {
                    sums = vec![0.0; vals.len()];
                }
                for (s, v) in sums.iter_mut().zip(vals) {
                    *s += v * n as f64;
                }
                count += n;
            }
            self.pipeline = saved;
            let means: Vec<f64> = sums.iter().map(|s| s / count.max(1) as f64).collect();
            Ok((means, count))
        }
    }

    /// A standalone `evaluate { model, data, checkpoint, metrics }` block: load the checkpoint's
    /// parameters and buffers (when given), then average the metrics over the data.
    pub fn evaluate_recipe(&mut self) -> Result<Vec<f64>, RuntimeError> {
        if let Some(Value::Str(dir)) = self.info.field("checkpoint").cloned() {
            self.load_weights(&self.opts.root.join(&*dir).clone())?;
        }
        let body = self.expr_field("metrics").ok_or_else(|| err("the evaluate block has no `metrics`"))?;
        let p = self.pipeline.clone();
        let (means, count) = self.evaluate_pipeline(p, &body)?;
        if self.opts.echo {
            let shown: Vec<String> = means.iter().map(|m| format!("{m:.4}")).collect();
            println!("evaluate: {} (over {count} examples)", shown.join(", "));
        }
        Ok(means)
    }

    /// Parameters and buffers from a checkpoint (no optimiser state), matched by path and shape.
    pub fn load_weights(&mut self, dir: &std::path::Path) -> Result<(), RuntimeError> {
        let ck = checkpoint::load(dir).map_err(RuntimeError::Io)?;
        for p in self.params.iter().chain(&self.buffers) {
            let t = ck
                .params
                .iter()
                .find(|(n, _)| *n == p.path)
                .map(|(_, t)| t.clone())
                .ok_or_else(|| err(format!("the checkpoint in {} has no `{}`", dir.display(), p.path)))?;
            let cur = &self.store[&p.id];
            if t.shape != cur.shape {
                return Err(err(format!("checkpoint `{}` is {:?}, the model's is {:?}", p.path, t.shape, cur.shape)));
            }
            self.store.insert(p.id, t);
        }
        Ok(())
    }
}

/// A count written as an integer literal in the recipe (`every 50 steps`, `epochs = 3`), at least 1.
fn int_literal(e: &Expr) -> Option<usize> {
    match e.kind {
        dlc_language::syntax::ast::ExprKind::Int(n) => Some(n.max(1) as usize),
        _ => None,
    }
}

/// `1h02m`, `3m05s`, `42s`.
fn eta(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// torch.nn.utils.clip_grad_norm_: scale every gradient by min(1, max_norm / (‖g‖₂ + 1e-6)),
/// with the norm taken over all parameters together.
fn clip_by_global_norm(t: &mut dlc_language::eval::tracer::Tracer, grads: &[NodeId], max_norm: f64) -> Result<Vec<NodeId>, RuntimeError> {
    use dlc_language::ir::{BinaryOp, ReduceOp, UnaryOp};
    let sp = Default::default();
    let fail = |_| err("could not build the gradient clipping");
    let mut total: Option<NodeId> = None;
    for &g in grads {
        let g32 = t.cast(g, DType::F32, sp);
        let sq = t.tensor_binary(BinaryOp::Mul, g32, g32, sp).map_err(fail)?;
        let s = t.reduce(ReduceOp::Sum, sq, None, false, sp).map_err(fail)?;
        total = Some(match total {
            Some(acc) => t.tensor_binary(BinaryOp::Add, acc, s, sp).map_err(fail)?,
            None => s,
        });
    }
    let Some(total) = total else { return Ok(vec![]) };
    let norm = t.unary(UnaryOp::Sqrt, total, sp);
    let eps = t.constant(1e-6, DType::F32, sp);
    let denom = t.tensor_binary(BinaryOp::Add, norm, eps, sp).map_err(fail)?;
    let max = t.constant(max_norm, DType::F32, sp);
    let coef = t.tensor_binary(BinaryOp::Div, max, denom, sp).map_err(fail)?;
    let one = t.constant(1.0, DType::F32, sp);
    let coef = t.tensor_binary(BinaryOp::Min, coef, one, sp).map_err(fail)?;
    grads
        .iter()
        .map(|&g| {
            let dt = t.ty(g).dtype;
            let c = t.cast(coef, dt, sp);
            t.tensor_binary(BinaryOp::Mul, g, c, sp).map_err(fail)
        })
        .collect()
}

fn optimizer_kind(info: &RecipeInfo) -> String {
    match info.field("optimizer").and_then(|o| o.field("optimizer")) {
        Some(Value::Str(k)) => k.to_string(),
        _ => "sgd".into(),
    }
}
