//! The trainer: a `train` recipe compiled to a step (forward, loss, gradients by autodiff, and the
//! stdlib's update rule for every parameter, all in one graph; see step.rs) and a loop over the
//! data pipeline. A step is traced once per batch shape and reused. Evaluation (evaluate.rs)
//! traces the metrics with no backward pass and `training()` false (the guide's `no_grad` + `eval()`).

pub mod checkpoint;
mod evaluate;
pub mod generate;
mod groups;
pub mod infer;
pub mod manifest;
mod metric_names;
pub mod metrics;
pub mod observer;
mod on_runner;
mod overrides;
pub mod png;
pub mod precision;
mod replicas;
mod run_dir;
mod run_loop;
pub mod schedule;
pub mod state_dict;
mod step;
mod tensorboard;

pub use evaluate::EvalGraph;
use groups::{Group, Param};
pub use metric_names::shown;
pub use observer::{Event, Observer};
pub use overrides::{apply_overrides, SETTABLE};
pub use run_dir::{aside_path, holds_run, move_aside};
use step::Step;

use crate::exec::Executor;
use crate::pipeline::{self, Batches, Element};
use crate::runner::Runner;
use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use dlc_language::eval::recipe::RecipeInfo;
use dlc_language::eval::spec::{SpecError, TrainSpec};
use dlc_language::eval::value::Pipeline;
use dlc_language::eval::{Session, Value};
use dlc_language::syntax::ast::{Expr, RecipeEntry};
use dlc_language::types::DType;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;

/// What a per-step callback sees after each optimiser step.
#[derive(Debug, Clone)]
pub struct StepEvent {
    pub step: usize,
    pub epoch: usize,
    /// Everything the step logs, by name (`loss`, or the names in a custom step's `log`).
    pub logged: Vec<(String, f64)>,
    /// The learning rate of each optimiser group, after the schedule.
    pub lr: Vec<f64>,
    /// The runner's running totals after the step (bytes copied, calls, graphs, waits): zero
    /// on the CPU, where nothing is copied.
    pub device: crate::runner::Counters,
    /// The steps' time blocked on the data feed so far in the run (batches the workers had not
    /// made yet), in seconds.
    pub data_wait_s: f64,
}

/// An embedder's per-step callback (`TrainOptions::on_step`).
pub type OnStep = Box<dyn FnMut(&StepEvent) -> Control>;

/// The batch shapes of a step or an evaluation: (dtype, shape) per tensor of the data element.
pub type Shapes = Vec<(DType, Vec<usize>)>;

/// The bytes of a batch of these shapes, as the data give it.
pub fn shapes_bytes(shapes: &Shapes) -> usize {
    shapes.iter().map(|(dtype, shape)| shape.iter().product::<usize>() * dtype.size_bytes()).sum()
}

/// An `evaluate` clause compiled: its data's name, and its batch shapes and graph (or why not).
pub type CompiledEvaluation<E> = (String, Result<(Shapes, EvalGraph), E>);

/// A step's data-parallel plan: its buckets with the parameters in each, and the kernel counts
/// of the backward and update halves.
#[derive(Clone, Debug)]
pub struct ParallelPlan {
    pub buckets: Vec<(dlc_language::passes::buckets::Bucket, Vec<String>)>,
    pub backward_kernels: usize,
    pub update_kernels: usize,
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
    /// Continue from this checkpoint directory (`dlc run --resume DIR`).
    pub resume: Option<PathBuf>,
    /// Start over when the checkpoint directory or metrics file holds an earlier run, moving it
    /// aside to `NAME.old-N` (`dlc run --overwrite`); without it such a run is refused.
    pub overwrite: bool,
    /// How the run was started (program, `--set`), recorded in every checkpoint's manifest.
    pub record: manifest::RunRecord,
    /// Write the recipe's checkpoints (and the metrics file beside them). Timing runs (`dlc
    /// bench`, `dlc tune`) turn it off: they never touch a run's files.
    pub checkpoints: bool,
    /// Where to append metrics as JSON lines; by default `metrics.jsonl` in the checkpoint directory.
    pub metrics: Option<PathBuf>,
    /// Set (by a Ctrl-C handler) to stop after the current step, saving a checkpoint first.
    pub interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Where the run's events go (progress, log lines, evaluations, checkpoints): the command
    /// line's console, an embedder's observer, or nowhere. The metrics file is written either way.
    pub observer: Option<Box<dyn Observer>>,
    /// Called after every optimiser step (embedders: live metrics, early stopping).
    pub on_step: Option<OnStep>,
    /// Training batches from Rust instead of the recipe's pipeline (see [`BatchSource`]).
    pub batches: Option<BatchSource>,
    /// Fuse elementwise chains into one kernel each (default); false runs one kernel per op.
    pub fuse: bool,
    /// With `fuse`: recompute cheap forward values in backward instead of keeping them, when
    /// that lowers the step's planned peak (default; passes::remat).
    pub remat: bool,
    /// Compile fused regions to native code (AVX-512 or Cranelift); off (the default) runs them on the
    /// vectorised chunk interpreter, which is faster on AVX2 machines today (docs/benchmarks.md).
    pub jit: bool,
    /// Time every kernel of every step, by kind (see `Executor::profile`).
    pub profile: Option<crate::exec::KernelTimes>,
    /// Step on each epoch's first batch again and again (`dlc bench --one-batch`; see
    /// `Feed::repeat_first`).
    pub one_batch: bool,
    /// Read autotuning's earlier choices from the tuning file and add this run's to it at the
    /// end (`exec::tune_store`; the command line turns it on, embedders and tests leave it off).
    pub tuning_file: bool,
    /// Where the steps run (the CPU unless the device chosen was `cuda`): a runner on it is
    /// opened through the registry (`crate::runner::registry`).
    pub device: crate::runner::DeviceKind,
    /// Which convolutions run channels-last; `None`: the device's choice
    /// (`DeviceKind::conv_layout`).
    pub conv_layout: Option<dlc_language::passes::driver::ConvLayout>,
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
            resume: None,
            overwrite: false,
            record: manifest::RunRecord::default(),
            checkpoints: true,
            metrics: None,
            interrupt: None,
            observer: None,
            on_step: None,
            batches: None,
            fuse: true,
            remat: true,
            jit: false,
            profile: None,
            one_batch: false,
            tuning_file: false,
            device: crate::runner::DeviceKind::Cpu,
            conv_layout: None,
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
    /// The resumed checkpoint had reached the recipe's `steps` or `epochs` already: nothing ran.
    pub already_finished: bool,
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
    /// Its metrics-file line: `{"kind": "eval", "step": .., "epoch": .., "data": "test_set", "examples": .., "accuracy": ..}`.
    fn json(&self, step: usize) -> serde_json::Value {
        let mut line = serde_json::json!({"kind": "eval", "step": step, "epoch": self.epoch, "data": self.data, "examples": self.examples});
        for (n, v) in self.names.iter().zip(&self.values) {
            line[n.as_str()] = serde_json::json!(v);
        }
        line
    }
}

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
    /// `accumulate = N`: the running gradient sums.
    grad_sums: Vec<Tensor>,
    steps: HashMap<Vec<(DType, Vec<usize>)>, Step>,
    opts: TrainOptions,
    /// Fused programs and native kernels, compiled once for the whole run.
    kernels: std::sync::Arc<crate::exec::fused::KernelCache>,
    /// The recipe's settings, typed.
    spec: TrainSpec,
    /// f16's dynamic loss scaling.
    scaler: Option<precision::LossScaler>,
    /// The training data before its first epoch-dependent stage, prepared once.
    prepared: Option<pipeline::Prepared>,
    /// Each evaluation pipeline's batches (they do not change between evaluations), by pipeline.
    eval_batches: Vec<(Rc<dlc_language::eval::value::Pipeline>, Vec<Element>)>,
    /// Each evaluation's compiled metrics, by (pipeline, metrics expression, batch shapes).
    eval_graphs: HashMap<(usize, dlc_language::span::Span, Shapes), EvalGraph>,
    /// Where the steps run: the interpreter, or a GPU's device executor. Parameters, buffers,
    /// optimiser state and gradient sums live there between steps.
    runner: Box<dyn Runner>,
    /// Whether the runner holds `store`, `states` and `grad_sums` (false until the first step
    /// and after they are set on the host, e.g. by `--resume`).
    resident: bool,
    /// Whether the runner's values are newer than the host's (after a step, until `sync_host`).
    host_stale: bool,
    /// Steps whose logged values stay on the device until a step that needs them reads them
    /// (`run_loop.rs`): each step's number and its logged names, in `Slot::Logged(k, j)`.
    put_off: Vec<(usize, Vec<String>)>,
    /// Their losses (first logged values) once read, by the next step that reads its own, for
    /// the run loop's epoch mean.
    read_late: Vec<f64>,
    /// What the steps after the first `WARM_STEPS` copied, issued and waited for, summed, and
    /// how many: a steady-state step's traffic with the device (`steady_traffic`).
    steady: (crate::runner::PerStep, usize),
    /// The metrics file, while a run is going (rank 0).
    metrics: metrics::Metrics,
    /// The ranks of a data-parallel job (one, without a launcher).
    world: Rc<crate::parallel::World>,
}

fn zeros_like(t: &Tensor) -> Tensor {
    Tensor::from_f64(t.dtype, t.shape.clone(), std::iter::repeat_n(0.0, t.numel()))
}

impl<'s> Trainer<'s> {
    pub fn new(session: &'s mut Session, info: RecipeInfo, mut opts: TrainOptions) -> Result<Trainer<'s>, RuntimeError> {
        let world = opts.world.clone().unwrap_or_else(|| Rc::new(crate::parallel::World::single()));
        let spec = TrainSpec::of(&info).map_err(|e| match e {
            SpecError::NotExecutedYet(m) => RuntimeError::NotExecutedYet(m),
            SpecError::Invalid(m) => err(m),
        })?;
        if let Some(want) = spec.parallel.filter(|_| spec.parallel_asked).and_then(|p| p.ranks) {
            if want != world.size() {
                return Err(err(format!(
                    "the recipe asks for `data_parallel(ranks: {want})`, but this job has {} rank(s); launch it with `mpirun -n {want} dlc run ...` or write `ranks: auto`",
                    world.size()
                )));
            }
        }
        // Rank 0 alone reports (and writes metrics and checkpoints).
        if !world.is_root() {
            opts.observer = None;
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
        let grad_sums = if spec.accumulate > 1 { params.iter().map(|p| zeros_like(&store[&p.id])).collect() } else { vec![] };
        let kernels = std::sync::Arc::new(if opts.tuning_file {
            crate::exec::fused::KernelCache::new(opts.jit).with_tuning_file()
        } else {
            crate::exec::fused::KernelCache::new(opts.jit)
        });
        let runner_opts = crate::runner::RunnerOptions {
            seed: opts.seed,
            fuse: opts.fuse,
            kernels: kernels.clone(),
            profile: opts.profile.clone(),
            tf32: spec.precision == dlc_language::eval::spec::Precision::TF32,
        };
        let runner = crate::runner::open(opts.device, &runner_opts)
            .map_err(|e| RuntimeError::Device(format!("the {} device could not be used: {e}", opts.device.name())))?;
        let scaler = (spec.precision.low() == Some(DType::F16)).then(precision::LossScaler::default);
        let mut trainer = Trainer {
            session,
            info,
            pipeline,
            groups,
            params,
            buffers,
            store,
            states,
            spec,
            scaler,
            prepared: None,
            eval_batches: vec![],
            grad_sums,
            steps: HashMap::new(),
            eval_graphs: HashMap::new(),
            world,
            metrics: Default::default(),
            runner,
            resident: false,
            host_stale: false,
            put_off: vec![],
            read_late: vec![],
            steady: Default::default(),
            kernels,
            opts,
        };
        trainer.load_init()?;
        Ok(trainer)
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
        self.set_parameters(&ck.params, "the checkpoint")?;
        let find = |list: &[(String, Tensor)], name: &str| list.iter().find(|(n, _)| n == name).map(|(_, t)| t.clone());
        for (k, p) in self.params.iter().enumerate() {
            for (j, n) in self.groups[p.group].state_names().iter().enumerate().take(self.states[k].len()) {
                let name = format!("{}.{n}", p.path);
                self.states[k][j] =
                    find(&ck.optimizer, &name).ok_or_else(|| err(format!("the checkpoint has no optimiser state `{name}`")))?;
            }
        }
        Ok(())
    }

    /// Write a checkpoint (parameters, buffers, optimiser state, and a manifest with `step` and
    /// `epoch`) to `dir`, atomically; `--resume dir` and `load_weights` read it.
    pub fn save(&mut self, dir: &std::path::Path, step: usize, epoch: usize) -> Result<(), RuntimeError> {
        self.sync_host()?;
        if !self.world.is_root() {
            return Ok(());
        }
        checkpoint::save_run(dir, &self.checkpoint(step, epoch), &self.opts.record).map_err(RuntimeError::Checkpoint)?;
        self.emit(&Event::CheckpointSaved { dir, step });
        Ok(())
    }

    /// Tell the metrics file and the observer.
    fn emit(&mut self, e: &Event) {
        self.metrics.event(e);
        if let Some(o) = self.opts.observer.as_mut() {
            o.event(e);
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

    /// Elements of the training data left out so far because they could not be read, and the
    /// first one's error.
    fn skipped_elements(&self) -> (usize, Option<String>) {
        self.prepared.as_ref().map_or((0, None), |p| p.skipped())
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

    /// Recipe fields this trainer accepts but does not act on yet, to be said out loud.
    pub fn ignored_fields(&self) -> Vec<String> {
        ignored_fields(&self.info, self.opts.device.is_gpu())
    }

    /// The batch shapes the recipe's data yield, when the element type fixes them: known sizes,
    /// and the `batch(size)` stage's size for the symbolic batch dimension.
    pub fn batch_shapes(&self) -> Option<Vec<(DType, Vec<usize>)>> {
        self.batch_shapes_of(&self.pipeline)
    }

    /// `batch_shapes` of another pipeline (an evaluation's).
    fn batch_shapes_of(&self, p: &Pipeline) -> Option<Vec<(DType, Vec<usize>)>> {
        let size = pipeline::batch_size(p);
        let mut leaves = vec![];
        pipeline::leaves(&p.elem, &mut leaves);
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
    ) -> Option<(dlc_language::passes::driver::Stages, &dlc_language::passes::memory::MemoryPlan)> {
        self.steps.get(shapes).map(|s| (s.passes.clone(), &s.memory))
    }

    /// The data-parallel plan of the step for these shapes (compiled already, as a rank or with
    /// `plan_parallel`).
    pub fn parallel_plan(&self, shapes: &[(DType, Vec<usize>)]) -> Option<ParallelPlan> {
        let st = self.steps.get(shapes)?;
        let update = st.update.as_ref()?;
        let buckets = st.buckets.iter().map(|b| (b.clone(), b.grads.iter().map(|i| self.params[*i].path.clone()).collect())).collect();
        Some(ParallelPlan { buckets, backward_kernels: st.plan.kernels.len(), update_kernels: update.0.kernels.len() })
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
        let recipe = self.spec.precision.dtype();
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

/// Fields of a `train`, `evaluate` or `infer` recipe that are accepted but not acted on on this
/// device, to be said out loud (`precision = tf32` on the CPU, which has no tf32 arithmetic; a
/// GPU rounds f32 products' and convolutions' operands to TF32).
pub fn ignored_fields(info: &RecipeInfo, on_gpu: bool) -> Vec<String> {
    let mut out = vec![];
    for (k, v) in &info.fields {
        let ignored = match (k.as_str(), v) {
            ("precision", Value::DType(DType::F32 | DType::BF16 | DType::F16)) => false,
            ("precision", _) => !on_gpu,
            _ => false,
        };
        if ignored {
            out.push(k.clone());
        }
    }
    out
}
