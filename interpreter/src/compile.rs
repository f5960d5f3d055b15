//! A whole program compiled, once: every `print`, every `infer` block, every training step and
//! its evaluations, each through the compile driver (`dlc_language::passes::driver`). This is
//! the one place the way from a checked program to its plans is walked; `dlc check` (the
//! steps' planned memory), `explain` and `--dump`, `kernels`, `bench` and `tune` read its result.
//! `dlc run` compiles the same things through the same functions as it executes them (the
//! trainer's `compile_step`, `train::infer::compile`).

use crate::train::{infer, TrainOptions, Trainer};
use crate::Program;
use dlc_language::eval::recipe::RecipeInfo;
use dlc_language::eval::Value;
use dlc_language::ir::{Graph, NodeId};
use dlc_language::passes::autocast::Decision;
use dlc_language::passes::driver::{self, Planned, Stages};
use dlc_language::passes::fusion::Plan;
use dlc_language::passes::memory::MemoryPlan;
use dlc_language::span::Span;
use dlc_language::syntax::ast::RecipeKind;
use dlc_language::types::DType;
use std::path::PathBuf;
use std::sync::Arc;

/// How to compile.
#[derive(Clone, Debug)]
pub struct Options {
    /// The program's folder (data paths are relative to it).
    pub root: PathBuf,
    pub fuse: bool,
    pub remat: bool,
    /// Compile steps as a data-parallel rank would (the buckets) even in one process.
    pub plan_parallel: bool,
}

impl Options {
    pub fn new(root: PathBuf) -> Options {
        Options { root, fuse: true, remat: true, plan_parallel: false }
    }
}

pub use crate::train::{ParallelPlan, Shapes};

/// An `evaluate` clause compiled, or why it could not be.
pub type Evaluation = crate::train::CompiledEvaluation<String>;

pub fn shapes_text(shapes: &Shapes) -> String {
    shapes.iter().map(|(d, s)| format!("{d}{s:?}")).collect::<Vec<_>>().join(", ")
}

/// A `print`'s values, planned.
pub struct Print {
    /// 1-based, as `dlc explain` numbers them.
    pub index: usize,
    pub roots: Vec<NodeId>,
    pub planned: Result<Planned, String>,
}

/// An `infer` block, compiled as `dlc run` runs it.
pub struct Infer {
    pub name: String,
    pub compiled: Result<infer::Compiled, String>,
}

/// A `train` recipe's step and evaluations, compiled for the batch shapes its data yield.
pub struct Step {
    pub shapes: Shapes,
    pub plan: Plan,
    pub memory: MemoryPlan,
    pub stages: Stages,
    pub compile_s: f64,
    /// The graph's size after compiling the step.
    pub graph_nodes: usize,
    /// The recipe's precision, what autocast did, and whether f16's loss scaling is on.
    pub autocast: Option<(DType, Vec<Decision>, bool)>,
    pub removed_biases: Vec<Span>,
    pub parallel: Option<ParallelPlan>,
    /// Each `evaluate` clause: its data's name and its compiled form (or why not).
    pub evaluations: Vec<Evaluation>,
}

pub struct Train {
    pub name: String,
    pub info: RecipeInfo,
    pub step: Result<Step, String>,
}

/// Everything a program computes, planned, over one graph.
pub struct Compiled {
    pub prints: Vec<Print>,
    pub infers: Vec<Infer>,
    pub trains: Vec<Train>,
    /// The session's graph after compiling all of it (append-only: it holds every plan's nodes).
    pub graph: Arc<Graph>,
}

/// Compile every computation of a program that ran its top-level statements (quietly).
pub fn program(p: &mut Program, opts: &Options) -> Compiled {
    let prints = prints(p, opts.fuse);
    let recipes = p.session.t.recipes.clone();
    let mut infers = vec![];
    for info in recipes.iter().filter(|r| r.kind == RecipeKind::Infer) {
        let name = info.name.clone().unwrap_or_else(|| "infer".into());
        // A `generate` block's input is a prompt: it is compiled per window length as it runs.
        let (Some(_), Some(Value::Tensor(_))) = (info.field("model"), info.field("input")) else { continue };
        let compiled = infer::compile(&mut p.session, info, opts.fuse).map_err(|e| e.to_string());
        infers.push(Infer { name, compiled });
    }
    let trains = recipes.into_iter().filter(|r| r.kind == RecipeKind::Train).map(|info| train(p, info, opts)).collect();
    Compiled { prints, infers, trains, graph: Arc::new(p.session.graph().clone()) }
}

fn prints(p: &Program, fuse: bool) -> Vec<Print> {
    let g = p.session.graph();
    let printed: Vec<Vec<NodeId>> = p.output().printed.iter().map(|x| x.nodes.clone()).collect();
    printed
        .into_iter()
        .enumerate()
        .filter(|(_, n)| !n.is_empty())
        .map(|(i, roots)| {
            let planned = driver::plan(g, &roots, fuse).map_err(|e| format!("internal compiler error: {e:?}"));
            Print { index: i + 1, roots, planned }
        })
        .collect()
}

/// A `train` recipe's step and evaluations.
pub fn train(p: &mut Program, info: RecipeInfo, opts: &Options) -> Train {
    let name = info.name.clone().unwrap_or_else(|| "train".into());
    let mut topts = TrainOptions::new(opts.root.clone(), 0);
    topts.fuse = opts.fuse;
    topts.remat = opts.remat;
    topts.plan_parallel = opts.plan_parallel;
    let step = (|| {
        let mut trainer = Trainer::new(&mut p.session, info.clone(), topts).map_err(|e| e.to_string())?;
        let shapes = trainer.batch_shapes().ok_or("the batch shapes are only known at run time")?;
        step(&mut trainer, shapes).map_err(|e| e.to_string())
    })();
    Train { name, info, step }
}

fn step(trainer: &mut Trainer, shapes: Shapes) -> Result<Step, crate::runtime::RuntimeError> {
    let (plan, compile_s) = trainer.compile_step(&shapes)?;
    let graph_nodes = trainer.graph().len();
    let autocast = trainer.autocast(&shapes).map(|(d, ds)| (d, ds, trainer.loss_scale().is_some()));
    let removed_biases = trainer.removed_biases(&shapes);
    let parallel = trainer.parallel_plan(&shapes);
    let (stages, memory) = trainer.step_passes(&shapes).map(|(s, m)| (s, m.clone())).unwrap_or_default();
    let evaluations = trainer.compile_evaluations().into_iter().map(|(data, r)| (data, r.map_err(|e| e.to_string()))).collect();
    Ok(Step { shapes, plan, memory, stages, compile_s, graph_nodes, autocast, removed_biases, parallel, evaluations })
}
