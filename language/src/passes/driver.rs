//! The compile driver: every pass after tracing, in one declared order ([`Pass::ORDER`]), each
//! output verified (`ir::verify`) before the next pass reads it. This is the only place the
//! order is written; the trainer, evaluation, `infer`, `print`s, pipeline `map` stages,
//! `explain`, `bench`, `kernels` and `tune` all compile through it (the interpreter's
//! `compile` module gathers a whole program's computations over these functions).
//!
//! What each kind of computation runs, as subsequences of the one order:
//!
//! | computation | passes |
//! | --- | --- |
//! | training step | trace, conv-bias, autocast, layout, autodiff (remat), fusion, rows, prologue, epilogue, memory, data-parallel |
//! | evaluation batch | trace, bn-fold, autocast, layout, fusion, rows, prologue, epilogue, invariant, memory |
//! | `infer` block | trace, bn-fold (not through its input), autocast, layout, fusion, rows, prologue, epilogue, memory |
//! | `print`, `map` stage | trace, fusion, rows, prologue, epilogue, memory |
//!
//! A training step's graph passes run while it is traced: a custom `step` block differentiates
//! and updates models one statement at a time, so tracing calls [`StepRewrites::lower`] on each
//! value it reports and [`StepRewrites::grad`] for each gradient, and the driver applies
//! conv-bias, autocast, layout, autodiff and rematerialisation there; [`compile_step`] then plans.

use super::bn_fold::{fold_all_over, Fold};
use super::buckets::{plan_buckets, Bucket};
use super::conv_bias::ConvBias;
use super::{autocast, autodiff, epilogue, fusion, invariant, layout, memory, prologue, remat, rows};
use crate::ir::plan::{Kernel, MemoryPlan, Plan};
use crate::ir::verify::{self, VerifyError};
use crate::ir::{Graph, NodeId};
use crate::types::DType;
pub use layout::ConvLayout;
use std::collections::HashSet;

/// A pass, by its place in the one order passes run in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pass {
    /// The values as traced from the source (not a rewrite: the start of every computation).
    Trace,
    /// Training: a convolution's bias before training-mode batch norm removed (the norm
    /// subtracts the batch mean, so the bias cancels).
    ConvBias,
    /// Evaluation and `infer`: batch norm (and per-channel affine chains of constants) folded
    /// into the product before it.
    BnFold,
    /// `precision = bf16 | f16`: products and convolutions lowered, with casts around them.
    /// After conv-bias and bn-fold, so folded weights are rounded once; before autodiff, so
    /// backward differentiates what forward computes.
    Autocast,
    /// On a GPU: bf16/f16 convolutions channels-last (cuDNN's tensor-core kernels are NHWC),
    /// and what lies between them; after autocast (it reads the convolutions' precision),
    /// before autodiff (backward inherits the layout).
    Layout,
    /// Training: the backward pass as more nodes of the same graph, then clipping and updates.
    Autodiff,
    /// Training: cheap forward values backward recomputes instead of keeping, when that lowers
    /// the planned peak (the step is compiled both ways and the lower peak kept).
    Remat,
    /// Elementwise chains become regions, independent regions one launch, transposes read by
    /// products views.
    Fusion,
    /// Last-axis reductions merged with their neighbours into row kernels.
    Rows,
    /// Sums over any axes merged with the region computing their input.
    Prologue,
    /// A product's bias add and relu done as it writes its rows (cuBLASLt's epilogues).
    Epilogue,
    /// Evaluation: what depends on the parameters alone split off, run once per evaluation.
    Invariant,
    /// When each value is freed, and the planned peak. After every plan rewrite, since it is
    /// a function of the final kernel order.
    Memory,
    /// Data parallelism: the step split where gradients are averaged, and the gradients'
    /// buckets in the order the plan writes them. Last: it reads the final kernel order.
    DataParallel,
}

impl Pass {
    /// Every pass, in the order they run.
    pub const ORDER: [Pass; 14] = [
        Pass::Trace,
        Pass::ConvBias,
        Pass::BnFold,
        Pass::Autocast,
        Pass::Layout,
        Pass::Autodiff,
        Pass::Remat,
        Pass::Fusion,
        Pass::Rows,
        Pass::Prologue,
        Pass::Epilogue,
        Pass::Invariant,
        Pass::Memory,
        Pass::DataParallel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Pass::Trace => "trace",
            Pass::ConvBias => "conv-bias",
            Pass::BnFold => "bn-fold",
            Pass::Autocast => "autocast",
            Pass::Layout => "layout",
            Pass::Autodiff => "autodiff",
            Pass::Remat => "remat",
            Pass::Fusion => "fusion",
            Pass::Rows => "rows",
            Pass::Prologue => "prologue",
            Pass::Epilogue => "epilogue",
            Pass::Invariant => "invariant",
            Pass::Memory => "memory",
            Pass::DataParallel => "data-parallel",
        }
    }

    pub fn from_name(s: &str) -> Option<Pass> {
        Pass::ORDER.into_iter().find(|p| p.name() == s)
    }

    /// Whether the pass rewrites the graph (its result is a list of roots) rather than a plan.
    pub fn is_graph_pass(self) -> bool {
        self <= Pass::Remat
    }
}

impl std::fmt::Display for Pass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a graph pass produced: the roots after it, for `--dump` and the verifier.
pub type Stages = Vec<(Pass, Vec<NodeId>)>;

/// How to compile.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Fuse (and apply every rewrite); false plans one kernel per op as written, the reference
    /// every rewrite is tested against (`--no-fuse`).
    pub fuse: bool,
    /// With `fuse`: try rematerialisation and keep it when it lowers the peak.
    pub remat: bool,
    /// The recipe's precision (`f32` unless it says `bf16` or `f16`).
    pub precision: DType,
    /// Data parallelism: the gradients' bucket cap in bytes (`data_parallel(bucket_mb: ...)`;
    /// ignored by a step traced for one process).
    pub bucket_cap: Option<usize>,
    /// Which convolutions run channels-last: the device's choice (none on the CPU).
    pub conv_layout: ConvLayout,
    /// Whether the device's bf16 matrix products round f32 operands themselves (the CPU's bf16
    /// kernels convert while they pack): with `fuse`, autocast's casts read only by products are
    /// left to them (fusion.rs, `fold_casts`), and a bf16 product's widening to f32 (exact: its
    /// values are rounded f32s) may start its epilogue (epilogue.rs). False for a device whose
    /// products read stored bf16 (cuBLAS).
    pub products_round: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { fuse: true, remat: true, precision: DType::F32, bucket_cap: None, conv_layout: ConvLayout::Nchw, products_round: false }
    }
}

/// A computation planned for execution.
#[derive(Clone, Debug, Default)]
pub struct Planned {
    /// The kernels to run, in order.
    pub plan: Plan,
    /// When each value is freed, and the peak.
    pub memory: MemoryPlan,
    /// Evaluation: the values that depend on the parameters alone, computed once before the
    /// batches (the plan's bound inputs); empty otherwise.
    pub frontier: Vec<NodeId>,
    /// Evaluation: the plan before specialisation (for reports).
    pub full: Option<Plan>,
}

/// Fusion, rows, prologue: the kernels of `roots`, each stage verified.
fn kernels(g: &Graph, roots: &[NodeId], fuse: bool, fold_casts: bool) -> Result<Plan, VerifyError> {
    let checked = |kernels: Vec<Kernel>, pass: Pass| -> Result<Plan, VerifyError> {
        let plan = Plan { kernels, roots: roots.to_vec() };
        verify::plan(g, &plan, &[], pass.name())?;
        Ok(plan)
    };
    let plan = checked(fusion::plan(g, roots, fuse, fold_casts), Pass::Fusion)?;
    if !fuse {
        return Ok(plan);
    }
    let plan = checked(rows::fuse_rows(g, plan.kernels, roots), Pass::Rows)?;
    let plan = checked(prologue::fuse_prologues(g, plan.kernels, roots), Pass::Prologue)?;
    // Independent regions are grouped last, so that the epilogue pass sees each region alone.
    checked(fusion::group_independent(g, epilogue::fuse_epilogues(g, plan.kernels, roots, fold_casts)), Pass::Epilogue)
}

fn memory_of(g: &Graph, plan: &Plan) -> Result<MemoryPlan, VerifyError> {
    let memory = memory::plan_memory(g, plan);
    verify::memory(g, plan, &memory)?;
    Ok(memory)
}

/// A `print` or a pipeline's `map` stage: kernels, then the memory plan.
pub fn plan(g: &Graph, roots: &[NodeId], fuse: bool) -> Result<Planned, VerifyError> {
    plan_with(g, roots, fuse, false)
}

/// `plan`, with autocast's casts left to the products that read them when `fold_casts`
/// (`Options::products_round`).
fn plan_with(g: &Graph, roots: &[NodeId], fuse: bool, fold_casts: bool) -> Result<Planned, VerifyError> {
    let plan = kernels(g, roots, fuse, fold_casts)?;
    let memory = memory_of(g, &plan)?;
    Ok(Planned { plan, memory, frontier: vec![], full: None })
}

/// The forward computation of an evaluation or `infer`, rewritten for inference: bn-fold
/// (unless `opts.fuse` is false), without folding through `data` (an `infer` block's input),
/// then autocast. Returns the new roots, each stage's roots and the folds.
pub struct Forward {
    pub roots: Vec<NodeId>,
    pub stages: Stages,
    pub folds: Vec<Fold>,
}

pub fn inference_forward(g: &mut Graph, roots: &[NodeId], data: &[NodeId], opts: &Options) -> Result<Forward, VerifyError> {
    let (folded, folds) = if opts.fuse { fold_all_over(g, roots, data) } else { (roots.to_vec(), vec![]) };
    let lowered = autocast::lower_all(g, &folded, opts.precision);
    let laid_out = layout::lower_all(g, &lowered, opts.conv_layout);
    let stages = vec![(Pass::Trace, roots.to_vec()), (Pass::BnFold, folded), (Pass::Autocast, lowered), (Pass::Layout, laid_out.clone())];
    verify_stages(g, &stages)?;
    Ok(Forward { roots: laid_out, stages, folds })
}

fn verify_stages(g: &Graph, stages: &Stages) -> Result<(), VerifyError> {
    for (pass, roots) in stages {
        verify::graph(g, roots, pass.name())?;
    }
    Ok(())
}

/// An evaluation batch compiled: its forward for inference, its plan (specialised: what
/// depends on the parameters alone split off as the frontier), and the frontier's own plan,
/// run once per evaluation.
pub struct Evaluation {
    pub forward: Forward,
    pub planned: Planned,
    pub frontier: Planned,
}

/// An evaluation batch: bn-fold and autocast, kernels, invariant, memory; each verified.
pub fn compile_evaluation(g: &mut Graph, roots: &[NodeId], opts: &Options) -> Result<Evaluation, VerifyError> {
    let forward = inference_forward(g, roots, &[], opts)?;
    let full = kernels(g, &forward.roots, opts.fuse, false)?;
    let (frontier, plan) = invariant::specialise(g, &full);
    verify::plan(g, &plan, &frontier, Pass::Invariant.name())?;
    let memory = memory_of(g, &plan)?;
    let frontier_plan = self::plan(g, &frontier, opts.fuse)?;
    Ok(Evaluation { forward, planned: Planned { plan, memory, frontier, full: Some(full) }, frontier: frontier_plan })
}

/// An `infer` block: its forward for inference (bn-fold not through `input`), then planned.
pub fn compile_infer(g: &mut Graph, out: NodeId, input: &[NodeId], opts: &Options) -> Result<(Forward, Planned), VerifyError> {
    let forward = inference_forward(g, &[out], input, opts)?;
    let planned = plan(g, &forward.roots, opts.fuse)?;
    Ok((forward, planned))
}

/// A training step's graph passes, applied while the step is traced.
pub struct StepRewrites {
    opts: Options,
    conv_bias: Option<ConvBias>,
    autocast: autocast::Autocast,
    layout: layout::Layout,
    /// Each value lowered: as traced, after conv-bias, after autocast, after layout.
    lowered: Vec<[NodeId; 4]>,
    /// Whether gradients are taken with rematerialisation (the second compile).
    remat: bool,
    /// Without it: the values a second compile could recompute.
    candidates: HashSet<NodeId>,
}

impl StepRewrites {
    /// `remat`: whether this trace is the second compile, with rematerialisation.
    pub fn new(opts: &Options, remat: bool) -> StepRewrites {
        StepRewrites {
            opts: *opts,
            // `--no-fuse` runs the step as written: the reference for the compiler's rewrites.
            conv_bias: opts.fuse.then(Default::default),
            // Always: `precision` blocks may lower parts of an f32 recipe (with none, and an f32
            // recipe, the rewrite returns every node as it is).
            autocast: autocast::Autocast::new(opts.precision),
            layout: layout::Layout::new(opts.conv_layout),
            lowered: vec![],
            remat,
            candidates: HashSet::new(),
        }
    }

    /// `n` after the step's forward rewrites: conv-bias, autocast, then layout.
    pub fn lower(&mut self, g: &mut Graph, traced: NodeId) -> NodeId {
        // A value lowered already (the loss, lowered for the report and again for autodiff).
        if self.lowered.iter().any(|l| l[3] == traced) {
            return traced;
        }
        let c = match self.conv_bias.as_mut() {
            Some(c) => c.map(g, traced),
            None => traced,
        };
        let a = self.autocast.map(g, c);
        let l = self.layout.map(g, a);
        self.lowered.push([traced, c, a, l]);
        l
    }

    /// Gradients of `loss` (lowered) with respect to `wrt`: autodiff, with rematerialisation
    /// on the second compile; on the first, the values it could recompute are noted.
    pub fn grad(&mut self, g: &mut Graph, loss: NodeId, wrt: &[NodeId]) -> Result<Vec<NodeId>, String> {
        let loss = self.lower(g, loss);
        let grads = if self.remat {
            autodiff::grad_rematerialised(g, loss, wrt)
        } else {
            let forward = g.len() as u32;
            let grads = autodiff::grad(g, loss, wrt);
            if let (Ok(gs), true) = (&grads, self.opts.fuse && self.opts.remat) {
                self.candidates.extend(remat::choose(g, forward, gs).values);
            }
            grads
        };
        grads.map_err(|e| format!("{e:?}"))
    }

    /// The products autocast moved to bf16/f16.
    pub fn autocast_decisions(&self) -> &[autocast::Decision] {
        &self.autocast.decisions
    }

    /// Where each convolution made channels-last is written.
    pub fn channels_last(&self) -> &[crate::span::Span] {
        &self.layout.converted
    }

    /// Where a convolution's bias before batch norm was removed.
    pub fn removed_biases(&self) -> Vec<crate::span::Span> {
        self.conv_bias.as_ref().map(|c| c.removed.iter().map(|r| r.1).collect()).unwrap_or_default()
    }

    /// The graph stages up to autodiff, whose result is `step_roots` (`--dump` and the verifier).
    pub fn stages(&self, step_roots: Vec<NodeId>) -> Stages {
        let stage = |i: usize| self.lowered.iter().map(|l| l[i]).collect::<Vec<_>>();
        let mut stages = vec![(Pass::Trace, stage(0)), (Pass::ConvBias, stage(1)), (Pass::Autocast, stage(2)), (Pass::Layout, stage(3))];
        // Rematerialisation happens inside autodiff: with it, both name the same graph.
        stages.push((Pass::Autodiff, step_roots.clone()));
        if self.remat {
            stages.push((Pass::Remat, step_roots));
        }
        stages
    }
}

/// A traced training step, as the driver plans it.
pub struct StepGraph {
    pub stages: Stages,
    /// Everything the step computes.
    pub roots: Vec<NodeId>,
    /// Data parallelism: the step in two halves around the gradients' averaging.
    pub split: Option<Split>,
}

/// A data-parallel step's halves.
pub struct Split {
    /// What the first half computes: all but the updates, and the gradients to average.
    pub local: Vec<NodeId>,
    /// The gradients to average, with their sizes in bytes.
    pub grads: Vec<(NodeId, usize)>,
    /// The second half's roots: the updates.
    pub updates: Vec<NodeId>,
}

/// A training step planned: its kernels and memory plan; under data parallelism, the second
/// half (the updates) and the gradients' buckets.
#[derive(Clone, Debug, Default)]
pub struct PlannedStep {
    pub plan: Plan,
    pub memory: MemoryPlan,
    pub update: Option<(Plan, MemoryPlan)>,
    pub buckets: Vec<Bucket>,
}

/// Plan a traced step: its graph stages verified, kernels, memory, and the data-parallel split.
pub fn plan_step(g: &Graph, step: &StepGraph, opts: &Options) -> Result<PlannedStep, VerifyError> {
    verify_stages(g, &step.stages)?;
    let Some(Split { local, grads, updates }) = &step.split else {
        let p = plan_with(g, &step.roots, opts.fuse, opts.products_round)?;
        return Ok(PlannedStep { plan: p.plan, memory: p.memory, update: None, buckets: vec![] });
    };
    let first = plan_with(g, local, opts.fuse, opts.products_round)?;
    let update = plan_with(g, updates, opts.fuse, opts.products_round)?;
    // The recipe's (or `data_parallel()`'s) cap; without one, every gradient in one bucket.
    let cap = opts.bucket_cap.unwrap_or(usize::MAX);
    let buckets = plan_buckets(&first.plan, grads, cap);
    Ok(PlannedStep { plan: first.plan, memory: first.memory, update: Some((update.plan, update.memory)), buckets })
}

/// What traces a training step for the driver (the trainer): `trace` may be called twice.
pub trait StepTracer {
    /// What the tracer keeps of a trace besides the graph (its inputs, updates, ...).
    type Traced;
    type Error: From<VerifyError>;
    /// Trace the step, taking its values through `rewrites` (see [`StepRewrites`]).
    fn trace(&mut self, rewrites: &mut StepRewrites) -> Result<(StepGraph, Self::Traced), Self::Error>;
    fn graph(&self) -> &Graph;
}

/// A compiled training step: the trace kept, its plans, and what the rewrites did.
pub struct CompiledStep<T> {
    pub graph: StepGraph,
    pub planned: PlannedStep,
    pub rewrites: StepRewrites,
    pub traced: T,
}

impl StepRewrites {
    /// Whether this is the second compile, with rematerialisation.
    pub fn rematerialising(&self) -> bool {
        self.remat
    }
}

/// Compile a training step: the tracer traces it through the graph passes; the driver plans
/// it. With fusion and rematerialisation on, when a value backward could recompute is live
/// where the planned peak is reached, the step is traced and planned a second time with those
/// values recomputed, and the one with the lower peak is kept.
pub fn compile_step<S: StepTracer>(tracer: &mut S, opts: &Options) -> Result<CompiledStep<S::Traced>, S::Error> {
    let mut rewrites = StepRewrites::new(opts, false);
    let (graph, traced) = tracer.trace(&mut rewrites)?;
    let planned = plan_step(tracer.graph(), &graph, opts)?;
    let first = CompiledStep { graph, planned, rewrites, traced };
    if !first.rewrites.candidates.iter().any(|c| first.planned.memory.live_at_peak.contains(c)) {
        return Ok(first);
    }
    let mut rewrites = StepRewrites::new(opts, true);
    let second = tracer.trace(&mut rewrites).and_then(|(graph, traced)| {
        let planned = plan_step(tracer.graph(), &graph, opts)?;
        Ok(CompiledStep { graph, planned, rewrites, traced })
    });
    match second {
        Ok(second) if second.planned.memory.peak() < first.planned.memory.peak() => Ok(second),
        _ => Ok(first),
    }
}
