//! The trainer: a `train` recipe compiled to a step (forward, loss, gradients by autodiff, and the
//! stdlib's update rule for every parameter, all in one graph; see step.rs) and a loop over the
//! data pipeline. A step is traced once per batch shape and reused. Evaluation (evaluate.rs)
//! traces the metrics with no backward pass and `training()` false (the guide's `no_grad` + `eval()`).

pub mod checkpoint;
mod evaluate;
mod groups;
pub mod infer;
mod metric_names;
mod metrics;
mod on_runner;
mod overrides;
pub mod png;
pub mod precision;
mod replicas;
pub mod schedule;
mod step;

pub use evaluate::EvalGraph;
use evaluate::When;
use groups::{Group, Param};
use metrics::Metrics;
pub use overrides::apply_overrides;
use step::Step;

use crate::exec::Executor;
use crate::runner::Runner;
use crate::runtime::pipeline::{self, Batches, Element};
use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use dlc_language::eval::recipe::RecipeInfo;
use dlc_language::eval::value::Pipeline;
use dlc_language::eval::{Session, Value};
use dlc_language::syntax::ast::{Expr, RecipeEntry};
use dlc_language::types::DType;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

/// What a per-step callback sees after each optimiser step.
#[derive(Debug, Clone)]
pub struct StepEvent {
    pub step: usize,
    pub epoch: usize,
    /// Everything the step logs, by name (`loss`, or the names in a custom step's `log`).
    pub logged: Vec<(String, f64)>,
    /// The learning rate of each optimiser group, after the schedule.
    pub lr: Vec<f64>,
}

/// What the callback asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Continue,
    /// Stop after this step: the run ends as if `steps` had been reached (final evaluation and
    /// checkpoint included).
    Stop,
}

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
    /// Called after every optimiser step (embedders: live metrics, early stopping).
    pub on_step: Option<Box<dyn FnMut(&StepEvent) -> Control>>,
    /// Training batches from Rust instead of the recipe's pipeline (see [`BatchSource`]).
    pub batches: Option<BatchSource>,
    /// Fuse elementwise chains into one kernel each (default); false runs one kernel per op.
    pub fuse: bool,
    /// With `fuse`: recompute cheap forward values in backward instead of keeping them, when
    /// that lowers the step's planned peak (default; passes::remat).
    pub remat: bool,
    /// Compile fused regions to native code (Cranelift); off (the default) runs them on the
    /// vectorised chunk interpreter, which is faster on AVX2 machines today (docs/benchmarks.md).
    pub jit: bool,
    /// Time every kernel of every step, by kind (see `Executor::profile`).
    pub profile: Option<std::sync::Arc<std::sync::Mutex<HashMap<String, (usize, f64)>>>>,
    /// Read autotuning's earlier choices from the tuning file and add this run's to it at the
    /// end (`exec::tune_store`; the command line turns it on, embedders and tests leave it off).
    pub tuning_file: bool,
    /// Where the steps run (the CPU unless the device chosen was `cuda`); see `crate::runner`.
    pub target: crate::runner::Target,
    /// The data-parallel job this process is a rank of (`None`: one process).
    pub world: Option<Rc<crate::parallel::World>>,
    /// Compile the steps as a data-parallel rank would even in one process (`dlc explain` shows
    /// the buckets).
    pub plan_parallel: bool,
}

/// A Rust data source for training: called once per epoch with the epoch number (from 0), it
/// returns that epoch's batches, each a list of tensors in the order of the recipe's pipeline
/// element's leaves (`(x, y)`: x then y). Each batch is checked against the element's dtypes
/// and ranks, and its shapes against the model when the step is compiled.
pub type BatchSource = Box<dyn FnMut(u64) -> Result<Vec<Element>, String>>;

impl TrainOptions {
    pub fn new(root: PathBuf, seed: u64) -> TrainOptions {
        TrainOptions {
            root,
            seed,
            echo: false,
            resume: None,
            metrics: None,
            interrupt: None,
            progress: false,
            on_step: None,
            batches: None,
            fuse: true,
            remat: true,
            jit: false,
            profile: None,
            tuning_file: false,
            target: crate::runner::Target::Cpu,
            world: None,
            plan_parallel: false,
        }
    }
}

/// What a run did, for callers and tests.
#[derive(Debug, Default)]
pub struct TrainReport {
    pub steps: usize,
    /// (step, loss) at every logged step and the last one.
    pub losses: Vec<(usize, f64)>,
    /// Each evaluation, in order.
    pub evals: Vec<Evaluation>,
}

/// The metrics of one evaluation over a data set.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub epoch: usize,
    /// The pipeline evaluated (its `data` name).
    pub data: String,
    /// The metrics' names (a record's labels, else the metric functions' names).
    pub names: Vec<String>,
    /// Their means over the data, weighted by batch size.
    pub values: Vec<f64>,
    /// How many examples the means are over.
    pub examples: usize,
}

impl Evaluation {
    /// Its metrics-file line: `{"step": .., "epoch": .., "evaluate": "test_set", "accuracy": .., "examples": ..}`.
    fn json(&self, step: usize) -> serde_json::Value {
        let mut line = serde_json::json!({"step": step, "epoch": self.epoch, "evaluate": self.data, "examples": self.examples});
        for (n, v) in self.names.iter().zip(&self.values) {
            line[n.as_str()] = serde_json::json!(v);
        }
        line
    }
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
    pipeline: Rc<Pipeline>,
    /// The trained models with their optimisers (one for a classic recipe).
    groups: Vec<Group>,
    params: Vec<Param>,
    /// Non-trainable state of the models (running statistics): checkpointed, updated by `assign`.
    buffers: Vec<Param>,
    store: HashMap<u32, Tensor>,
    /// Optimiser state per parameter (momentum, Adam's moments).
    states: Vec<Vec<Tensor>>,
    /// `accumulate = N`: micro-batches per optimiser step, and the running gradient sums.
    accumulate: usize,
    grad_sums: Vec<Tensor>,
    steps: HashMap<Vec<(DType, Vec<usize>)>, Step>,
    opts: TrainOptions,
    /// Fused programs and native kernels, compiled once for the whole run.
    kernels: std::sync::Arc<crate::exec::fused::KernelCache>,
    /// `precision = bf16 | f16`: autocast's low precision.
    precision: Option<DType>,
    /// f16's dynamic loss scaling.
    scaler: Option<precision::LossScaler>,
    /// The autocast rewrite while a step is being compiled.
    autocast: Option<dlc_language::passes::autocast::Autocast>,
    /// The conv-bias elimination while a step is being compiled.
    conv_bias: Option<dlc_language::passes::conv_bias::ConvBias>,
    /// While a step is compiled the second time, with automatic rematerialisation.
    remat: bool,
    /// While a step is compiled without it: the values it would recompute (passes::remat).
    remat_candidates: std::collections::HashSet<dlc_language::ir::NodeId>,
    /// Each value the step's forward rewrites lowered: as traced, after conv-bias elimination,
    /// after autocast (what `--dump` shows and the verifier checks after each).
    lowered: Vec<[dlc_language::ir::NodeId; 3]>,
    /// The training data before its first epoch-dependent stage, prepared once.
    prepared: Option<pipeline::Prepared>,
    /// Each evaluation pipeline's batches (they do not change between evaluations), by pipeline.
    eval_batches: Vec<(Rc<dlc_language::eval::value::Pipeline>, Vec<Element>)>,
    /// Each evaluation's compiled metrics, by (pipeline, metrics expression, batch shapes).
    eval_graphs: HashMap<(usize, dlc_language::span::Span, Vec<(DType, Vec<usize>)>), EvalGraph>,
    /// Where the steps run: the interpreter, or a GPU's device executor. Parameters, buffers,
    /// optimiser state and gradient sums live there between steps.
    runner: Box<dyn Runner>,
    /// Whether the runner holds `store`, `states` and `grad_sums` (false until the first step
    /// and after they are set on the host, e.g. by `--resume`).
    resident: bool,
    /// Whether the runner's values are newer than the host's (after a step, until `sync_host`).
    host_stale: bool,
    /// The ranks of a data-parallel job (one, without a launcher).
    world: Rc<crate::parallel::World>,
    /// While a step is traced: the gradients to average across ranks (see `Step::reduce`).
    reduce: Vec<(dlc_language::ir::NodeId, u32)>,
    /// Gradient buckets' size cap (`data_parallel(bucket_mb: ...)`).
    bucket_cap: usize,
}

fn zeros_like(t: &Tensor) -> Tensor {
    Tensor::from_f64(t.dtype, t.shape.clone(), std::iter::repeat(0.0).take(t.numel()))
}

impl<'s> Trainer<'s> {
    pub fn new(session: &'s mut Session, info: RecipeInfo, mut opts: TrainOptions) -> Result<Trainer<'s>, RuntimeError> {
        let world = opts.world.clone().unwrap_or_else(|| Rc::new(crate::parallel::World::single()));
        let parallel = info.field("parallel");
        if let Some(want) = parallel.and_then(|p| p.field("ranks")).and_then(|r| r.as_int()) {
            if want as usize != world.size() {
                return Err(err(format!(
                    "the recipe asks for `data_parallel(ranks: {want})`, but this job has {} rank(s); launch it with `mpirun -n {want} dlc run ...` or write `ranks: auto`",
                    world.size()
                )));
            }
        }
        let bucket_cap = parallel
            .and_then(|p| p.field("bucket_mb"))
            .and_then(|b| b.as_float())
            .map(|mb| (mb * 1024.0 * 1024.0) as usize)
            .unwrap_or(crate::parallel::buckets::DEFAULT_CAP_BYTES)
            .max(4);
        // Rank 0 alone prints, draws progress and writes metrics and checkpoints.
        if !world.is_root() {
            opts.echo = false;
            opts.progress = false;
        }
        let Some(Value::Pipeline(pipeline)) = info.field("data").cloned() else { return Err(err("the recipe has no data pipeline")) };
        let groups = groups::groups_of(&info)?;
        let (params, buffers) = groups::params_of(&session.t, &groups);
        let mut init = Executor::new(opts.seed);
        let mut store = HashMap::new();
        for p in params.iter().chain(&buffers) {
            store.insert(p.id, init.param(&session.t.graph, p.id)?);
        }
        let training = info.kind == dlc_language::syntax::ast::RecipeKind::Train;
        let mut states = vec![];
        for p in &params {
            let n = if training { groups[p.group].n_state()? } else { 0 };
            states.push((0..n).map(|_| zeros_like(&store[&p.id])).collect());
        }
        let accumulate = info.field("accumulate").and_then(|v| v.as_int()).unwrap_or(1).max(1) as usize;
        let grad_sums = if accumulate > 1 { params.iter().map(|p| zeros_like(&store[&p.id])).collect() } else { vec![] };
        let kernels = std::sync::Arc::new(if opts.tuning_file {
            crate::exec::fused::KernelCache::new(opts.jit).with_tuning_file()
        } else {
            crate::exec::fused::KernelCache::new(opts.jit)
        });
        let runner: Box<dyn Runner> = if opts.target == crate::runner::Target::Cpu {
            let mut ex = Executor::new(opts.seed);
            ex.fuse = opts.fuse;
            ex.kernels = kernels.clone();
            ex.profile = opts.profile.clone();
            Box::new(crate::runner::host::HostRunner::new(ex))
        } else {
            crate::runner::open(opts.target).map_err(|e| err(format!("the GPU could not be used: {e}")))?
        };
        let precision = precision::low_precision(info.field("precision"));
        let scaler = (precision == Some(DType::F16)).then(precision::LossScaler::default);
        Ok(Trainer {
            session,
            info,
            pipeline,
            groups,
            params,
            buffers,
            store,
            states,
            accumulate,
            precision,
            scaler,
            autocast: None,
            conv_bias: None,
            remat: false,
            remat_candidates: Default::default(),
            lowered: vec![],
            prepared: None,
            eval_batches: vec![],
            grad_sums,
            steps: HashMap::new(),
            eval_graphs: HashMap::new(),
            world,
            reduce: vec![],
            bucket_cap,
            runner,
            resident: false,
            host_stale: false,
            kernels,
            opts,
        })
    }

    fn expr_field(&self, name: &str) -> Option<Expr> {
        self.info.recipe.entries.iter().find_map(|e| match e {
            RecipeEntry::Field(f) if f.name.name == name => Some(f.value.clone()),
            _ => None,
        })
    }

    fn checkpoint(&self, step: usize, epoch: usize) -> checkpoint::Checkpoint {
        checkpoint::Checkpoint {
            params: self.params.iter().chain(&self.buffers).map(|p| (p.path.clone(), self.store[&p.id].clone())).collect(),
            optimizer: self
                .params
                .iter()
                .zip(&self.states)
                .flat_map(|(p, st)| {
                    let names = self.groups[p.group].state_names();
                    st.iter().zip(names).map(move |(t, n)| (format!("{}.{n}", p.path), t.clone()))
                })
                .collect(),
            step,
            epoch,
            seed: self.opts.seed,
        }
    }

    /// Load parameters and optimiser state; every tensor must be there with its shape.
    fn restore(&mut self, ck: &checkpoint::Checkpoint) -> Result<(), RuntimeError> {
        let find = |list: &[(String, Tensor)], name: &str| list.iter().find(|(n, _)| n == name).map(|(_, t)| t.clone());
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
            for (j, n) in self.groups[p.group].state_names().iter().enumerate().take(self.states[k].len()) {
                let name = format!("{}.{n}", p.path);
                self.states[k][j] =
                    find(&ck.optimizer, &name).ok_or_else(|| err(format!("the checkpoint has no optimiser state `{name}`")))?;
            }
        }
        for b in &self.buffers {
            let t = find(&ck.params, &b.path).ok_or_else(|| err(format!("the checkpoint has no buffer `{}`", b.path)))?;
            self.store.insert(b.id, t);
        }
        self.resident = false;
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

    /// Write a checkpoint (parameters, buffers, optimiser state, and a manifest with `step` and
    /// `epoch`) to `dir`, atomically; `--resume dir` and `load_weights` read it.
    pub fn save(&mut self, dir: &std::path::Path, step: usize, epoch: usize) -> Result<(), RuntimeError> {
        self.sync_host()?;
        if !self.world.is_root() {
            return Ok(());
        }
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

    /// Compile the step for batches of these shapes unless it is compiled already.
    fn ensure_step(&mut self, shapes: &[(DType, Vec<usize>)]) -> Result<(), RuntimeError> {
        if !self.steps.contains_key(shapes) {
            let s = self.build_step(shapes)?;
            self.steps.insert(shapes.to_vec(), s);
        }
        Ok(())
    }

    /// One epoch of training batches: from the Rust source when one is bound, else the pipeline.
    fn epoch_batches(&mut self, epoch: u64) -> Result<Batches, RuntimeError> {
        let (rank, size) = (self.world.rank(), self.world.size());
        let Some(source) = self.opts.batches.as_mut() else {
            let all = pipeline::run_cached(&self.pipeline, &self.opts.root, &self.session.t.graph, epoch, &mut self.prepared)?;
            return Ok(replicas::shard(all, rank, size));
        };
        let batches = source(epoch).map_err(|e| err(format!("the Rust data source failed: {e}")))?;
        let mut leaves = vec![];
        pipeline::leaves(&self.pipeline.elem, &mut leaves);
        let want: Vec<(DType, usize)> = leaves
            .iter()
            .map(|n| {
                let ty = self.session.t.ty(*n);
                (ty.dtype, ty.rank())
            })
            .collect();
        for (i, b) in batches.iter().enumerate() {
            let got: Vec<(DType, usize)> = b.iter().map(|t| (t.dtype, t.shape.len())).collect();
            if got != want {
                let show = |v: &[(DType, usize)]| v.iter().map(|(d, r)| format!("{d} rank {r}")).collect::<Vec<_>>().join(", ");
                return Err(err(format!(
                    "batch {i} of epoch {epoch} from the Rust data source has ({}), the recipe's data element needs ({})",
                    show(&got),
                    show(&want)
                )));
            }
        }
        Ok(replicas::shard(Batches::Ready(batches), rank, size))
    }

    /// Run the recipe to the end. Returns the losses and evaluations; the parameters are on the
    /// host afterwards (`parameters`).
    pub fn run(&mut self) -> Result<TrainReport, RuntimeError> {
        let report = self.run_steps();
        // (A failed run reports its own error, not a later one from bringing state back.)
        let synced = self.sync_host();
        let report = report?;
        synced?;
        self.check_replicas()?;
        Ok(report)
    }

    fn run_steps(&mut self) -> Result<TrainReport, RuntimeError> {
        let epochs_field = self.info.field("epochs").and_then(|v| v.as_int());
        let max_steps = self.info.field("steps").and_then(|v| v.as_int()).map(|s| s as usize);
        let log_every = self.info.recipe.entries.iter().find_map(|e| match e {
            RecipeEntry::Log { every, .. } => every.count.as_ref().and_then(int_literal),
            _ => None,
        });
        let base_lrs: Vec<f64> = self.groups.iter().map(|g| g.lr()).collect();
        let schedule = self.info.field("schedule").cloned();
        let mut report = TrainReport::default();
        let mut step = 0usize;
        let mut start_epoch = 0usize;
        if let Some(dir) = self.opts.resume.clone() {
            let ck = checkpoint::load(&dir).map_err(RuntimeError::Io)?;
            self.restore(&ck)?;
            step = ck.step;
            start_epoch = ck.epoch;
            if self.opts.echo {
                println!("resumed from {} at step {step}", dir.display());
            }
        }
        // Every rank starts from rank 0's parameters and state (its init, or what it resumed).
        self.broadcast_replicas()?;
        let ck_clause = self.checkpoint_clause();
        let epochs = epochs_field.map(|e| e as usize).unwrap_or(usize::MAX);
        let data_started = Instant::now();
        let first = self.epoch_batches(0)?;
        let first_data_s = data_started.elapsed().as_secs_f64();
        if first.is_empty() {
            return Err(err("the training data pipeline yields no batches"));
        }
        // Opened once the data have loaded: a run that cannot start writes nothing.
        let metrics_path = self.opts.metrics.clone().or_else(|| ck_clause.as_ref().map(|c| c.0.join("metrics.jsonl")));
        // Written once, by rank 0.
        let mut metrics = Metrics::open(metrics_path.filter(|_| self.world.is_root()))?;
        // Optimiser steps per epoch: with `accumulate = N`, N batches make one step and a
        // last incomplete group of batches is dropped (like `batch(drop_last: true)`).
        let n_acc = self.accumulate;
        let per_epoch = first.len() / n_acc;
        if per_epoch == 0 {
            return Err(err(format!("`accumulate = {n_acc}` needs at least {n_acc} batches per epoch; the data yields {}", first.len())));
        }
        let skip_in_epoch = if self.opts.resume.is_some() { step.saturating_sub(start_epoch * per_epoch) } else { 0 };
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
            // The epoch's data are prepared before its steps (on all cores); the time is reported
            // beside the epoch's, so a data-bound run shows itself.
            let data_started = Instant::now();
            let (data, data_s) = match batches.take() {
                Some(b) if epoch == 0 => (b, first_data_s),
                _ => (self.epoch_batches(epoch as u64)?, data_started.elapsed().as_secs_f64()),
            };
            let mut epoch_loss = (0.0, 0usize);
            let epoch_started = Instant::now();
            let skip = if epoch == start_epoch { skip_in_epoch } else { 0 };
            let mut data = data.into_iter().skip(skip * n_acc);
            for _ in skip..per_epoch {
                step += 1;
                let rates: Vec<f64> = base_lrs.iter().map(|lr| schedule::lr_at(schedule.as_ref(), *lr, step, total, per_epoch)).collect();
                // The logged values of a step are the means over its micro-batches.
                let mut logged: Vec<(String, f64)> = vec![];
                for micro in 0..n_acc {
                    let batch = data.next().ok_or_else(|| err("the data pipeline yielded fewer batches than in epoch 1"))?;
                    samples += batch.first().map(|t| t.shape.first().copied().unwrap_or(1)).unwrap_or(1);
                    // Each rank draws its own random streams (dropout masks) for its examples.
                    let draw = ((step - 1) * n_acc + micro) * self.world.size() + self.world.rank() + 1;
                    let vals = self.run_batch(batch, step, draw, &rates, micro + 1 == n_acc)?;
                    if logged.is_empty() {
                        logged = vals.into_iter().map(|(n, v)| (n, v / n_acc as f64)).collect();
                    } else {
                        logged.iter_mut().zip(vals).for_each(|(l, (_, v))| l.1 += v / n_acc as f64);
                    }
                }
                // Across ranks: the logged values are the job's means, and a Ctrl-C on any rank
                // stops every rank after this same step.
                let asked_to_stop = self.opts.interrupt.as_ref().map(|f| f.load(std::sync::atomic::Ordering::SeqCst)).unwrap_or(false);
                let interrupted = self.agree(&mut logged, asked_to_stop);
                let loss = logged[0].1;
                epoch_loss = (epoch_loss.0 + loss, epoch_loss.1 + 1);
                if step == first_step + 1 {
                    // Time to first step, data loading included (what a user waits for, and what
                    // bench/compare.py sets beside PyTorch's).
                    let mut line = serde_json::json!({"step": step, "event": "first_step", "data_s": first_data_s});
                    if let Some(s) = crate::runtime::seconds_since_start() {
                        line["since_start_s"] = serde_json::json!(s);
                    }
                    metrics.write(line);
                }
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
                        "\r\x1b[2Kepoch {} [{}{}] {done}/{per_epoch} {} {loss:.4} {rate_s:.0} samples/s ETA {}",
                        epoch + 1,
                        "#".repeat(filled),
                        " ".repeat(width - filled),
                        logged[0].0,
                        eta(left)
                    );
                }
                let mut stop = max_steps == Some(step);
                if let Some(cb) = self.opts.on_step.as_mut() {
                    let ev = StepEvent { step, epoch: epoch + 1, logged: logged.clone(), lr: rates.clone() };
                    stop |= cb(&ev) == Control::Stop;
                }
                if log_every.map(|n| step % n == 0).unwrap_or(false) || stop {
                    report.losses.push((step, loss));
                    let rate_s = samples as f64 / started.elapsed().as_secs_f64().max(1e-9);
                    let mut line = serde_json::json!({"step": step, "epoch": epoch + 1, "lr": rates[0], "samples_per_s": rate_s});
                    for (n, v) in &logged {
                        line[n.as_str()] = serde_json::json!(v);
                    }
                    metrics.write(line);
                    if self.opts.echo {
                        self.clear_progress();
                        let shown: Vec<String> = logged.iter().map(|(n, v)| format!("{n} {v:.4}")).collect();
                        println!("epoch {} step {step}: {}, lr {:.3e}, {rate_s:.0} samples/s", epoch + 1, shown.join(", "), rates[0]);
                    }
                }
                if !stop {
                    self.evaluate(epoch + 1, When::Step(step), step, &mut report, &mut metrics)?;
                }
                let done_epochs = if step % per_epoch == 0 { epoch + 1 } else { epoch };
                if interrupted {
                    if let Some((dir, _, _)) = &ck_clause {
                        self.save(dir, step, done_epochs)?;
                    }
                    metrics.write(serde_json::json!({"step": step, "event": "interrupted"}));
                    return Err(err(INTERRUPTED));
                }
                if let Some((dir, unit, n)) = &ck_clause {
                    if unit.starts_with("step") && step % n == 0 && !stop {
                        self.save(dir, step, done_epochs)?;
                    }
                }
                if stop {
                    report.steps = step;
                    self.evaluate(epoch + 1, When::Final, step, &mut report, &mut metrics)?;
                    if let Some((dir, _, _)) = &ck_clause {
                        self.save(dir, step, done_epochs)?;
                    }
                    break 'outer;
                }
            }
            let mean = epoch_loss.0 / epoch_loss.1.max(1) as f64;
            if self.opts.echo {
                self.clear_progress();
                println!(
                    "epoch {} done: mean loss {mean:.4} over {} steps in {:.1} s (data prepared in {data_s:.2} s before){}",
                    epoch + 1,
                    epoch_loss.1,
                    epoch_started.elapsed().as_secs_f64(),
                    self.loss_scale().map(|(s, k)| format!("; f16 loss scale {s}, {k} steps skipped so far")).unwrap_or_default()
                );
            }
            report.losses.push((step, mean));
            let secs = epoch_started.elapsed().as_secs_f64();
            metrics.write(serde_json::json!({"step": step, "epoch": epoch + 1, "mean_loss": mean, "epoch_s": secs, "data_s": data_s}));
            self.evaluate(epoch + 1, When::EpochEnd, step, &mut report, &mut metrics)?;
            if let Some((dir, unit, n)) = &ck_clause {
                if (unit.starts_with("epoch") && (epoch + 1) % n == 0) || epoch + 1 == epochs {
                    self.save(dir, step, epoch + 1)?;
                }
            }
        }
        report.steps = step;
        if self.opts.tuning_file {
            // Losing the choices costs a measurement next run, nothing more: say so, go on.
            if let Err(e) = self.kernels.save_tuning() {
                eprintln!("warning: autotuning's choices were not saved: {e}");
            }
        }
        Ok(report)
    }

    /// Recipe fields this trainer accepts but does not act on yet, to be said out loud.
    pub fn ignored_fields(&self) -> Vec<String> {
        ignored_fields(&self.info)
    }

    /// The batch shapes the recipe's data yield, when the element type fixes them: known sizes,
    /// and the `batch(size)` stage's size for the symbolic batch dimension.
    pub fn batch_shapes(&self) -> Option<Vec<(DType, Vec<usize>)>> {
        let size = self.pipeline.stages.iter().rev().find(|s| s.kind == "batch").and_then(|s| s.arg("size")).and_then(|v| v.as_int());
        let mut leaves = vec![];
        pipeline::leaves(&self.pipeline.elem, &mut leaves);
        leaves
            .iter()
            .map(|n| {
                let ty = self.session.t.ty(*n);
                let dims: Option<Vec<usize>> = ty
                    .shape
                    .iter()
                    .enumerate()
                    .map(|(i, d)| d.as_known().or(if i == 0 { size } else { None }).map(|k| k as usize))
                    .collect();
                dims.map(|d| (ty.dtype, d))
            })
            .collect()
    }

    /// Compile the training step for batches of these shapes, as the first such batch would;
    /// returns its kernel plan, the graph's size, and the seconds it took (trace, autodiff, plan).
    /// The step's graph after each pass, and its memory plan (`dlc explain --dump`).
    pub fn step_passes(
        &self,
        shapes: &[(DType, Vec<usize>)],
    ) -> Option<(Vec<(&'static str, Vec<dlc_language::ir::NodeId>)>, &dlc_language::passes::memory::MemoryPlan)> {
        self.steps.get(shapes).map(|s| (s.passes.clone(), &s.memory))
    }

    /// The data-parallel plan of the step for these shapes (compiled already, as a rank or with
    /// `plan_parallel`): its buckets with the parameters in each, the kernels of the backward
    /// half, and the kernels of the update half.
    pub fn parallel_plan(&self, shapes: &[(DType, Vec<usize>)]) -> Option<(Vec<(crate::parallel::Bucket, Vec<String>)>, usize, usize)> {
        let st = self.steps.get(shapes)?;
        let update = st.update.as_ref()?;
        let buckets = st.buckets.iter().map(|b| (b.clone(), b.grads.iter().map(|i| self.params[*i].path.clone()).collect())).collect();
        Some((buckets, st.plan.kernels.len(), update.0.kernels.len()))
    }

    pub fn compile_step(&mut self, shapes: &[(DType, Vec<usize>)]) -> Result<(dlc_language::passes::fusion::Plan, f64), RuntimeError> {
        self.ensure_step(shapes)?;
        let st = &self.steps[shapes];
        Ok((st.plan.clone(), st.compile_s))
    }

    /// What autocast did to the step for these shapes (compiled already): the recipe's
    /// precision and each product lowered (or kept in f32 by a `precision` block); `None` when
    /// every product is f32.
    pub fn autocast(&self, shapes: &[(DType, Vec<usize>)]) -> Option<(DType, Vec<dlc_language::passes::autocast::Decision>)> {
        let st = self.steps.get(shapes)?;
        let recipe = self.precision.unwrap_or(DType::F32);
        (recipe != DType::F32 || !st.autocast.is_empty()).then(|| (recipe, st.autocast.clone()))
    }

    /// Where the step for these shapes had a convolution's bias before batch norm removed.
    pub fn removed_biases(&self, shapes: &[(DType, Vec<usize>)]) -> Vec<dlc_language::span::Span> {
        self.steps.get(shapes).map(|s| s.removed_biases.clone()).unwrap_or_default()
    }

    /// f16's loss scaling: the current scale and the steps skipped so far.
    pub fn loss_scale(&self) -> Option<(f64, usize)> {
        self.scaler.as_ref().map(|s| (s.scale, s.skipped))
    }

    /// Seconds spent compiling training steps so far (one per batch shape).
    /// The run's compiled kernels (what autotuning chose, for tests and reports).
    pub fn kernels(&self) -> &crate::exec::fused::KernelCache {
        &self.kernels
    }

    pub fn compile_seconds(&self) -> f64 {
        self.steps.values().map(|s| s.compile_s).sum()
    }

    /// The graph the steps are compiled into (for reports).
    pub fn graph(&self) -> &dlc_language::ir::Graph {
        &self.session.t.graph
    }

    /// The current value of every trained parameter, by path (for tests and embedders).
    pub fn parameters(&self) -> Vec<(String, Tensor)> {
        self.params.iter().map(|p| (p.path.clone(), self.store[&p.id].clone())).collect()
    }

    /// The current value of every buffer (batch norm's running statistics), by path.
    pub fn buffers(&self) -> Vec<(String, Tensor)> {
        self.buffers.iter().map(|p| (p.path.clone(), self.store[&p.id].clone())).collect()
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

/// Fields of a `train`, `evaluate` or `infer` recipe that are accepted but not acted on yet, to
/// be said out loud (`precision = tf32`: the CPU has no tf32 arithmetic).
pub fn ignored_fields(info: &RecipeInfo) -> Vec<String> {
    let mut out = vec![];
    for (k, v) in &info.fields {
        let ignored = match (k.as_str(), v) {
            ("precision", Value::DType(DType::F32 | DType::BF16 | DType::F16)) => false,
            ("precision", _) => true,
            _ => false,
        };
        if ignored {
            out.push(k.clone());
        }
    }
    out
}
