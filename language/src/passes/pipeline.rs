//! The compile driver: the order of the passes after tracing, written once. Tracing (and, for a
//! training step, autodiff and the optimiser's update rules) builds the graph; from there every
//! computation goes through one of these:
//!
//! - [`compile_step`]: a training step. Its graph stages (traced, conv-bias, autocast, autodiff)
//!   verified, then planned ([`plan`]).
//! - [`inference_forward`] then [`compile_eval`]: an evaluation batch. Batch norm folded into
//!   the product before it, the precision's autocast, each stage verified; planned, then
//!   specialised: what depends on the parameters alone is split off to run once.
//! - [`inference_forward`] then [`plan`]: an `infer` block (the input is data, not folded).
//! - [`plan`]: anything else (a `print`, a pipeline's `map` stage): fusion (with row kernels
//!   and prologue sums), the memory plan, each verified.
//!
//! Every output is verified (`ir::verify`) and a failure names the pass. Callers keep the
//! stages' roots for `dlc explain --dump`, and the decisions (folds, autocast) for `explain`.

use super::bn_fold::{fold_all_over, Fold};
use super::{autocast, fusion, invariant, memory};
use crate::ir::plan::{MemoryPlan, Plan};
use crate::ir::verify::{self, VerifyError};
use crate::ir::{Graph, NodeId};
use crate::types::DType;

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

/// Fusion, then the memory plan; each verified.
pub fn plan(g: &Graph, roots: &[NodeId], fuse: bool) -> Result<Planned, VerifyError> {
    let plan = fusion::plan(g, roots, fuse);
    verify::plan(g, &plan, &[], "fusion")?;
    let memory = memory::plan_memory(g, &plan);
    verify::memory(g, &plan, &memory)?;
    Ok(Planned { plan, memory, frontier: vec![], full: None })
}

/// A training step: each graph stage the trainer built verified, then planned.
pub fn compile_step(g: &Graph, stages: &[(&'static str, Vec<NodeId>)], roots: &[NodeId], fuse: bool) -> Result<Planned, VerifyError> {
    for (pass, stage_roots) in stages {
        verify::graph(g, stage_roots, pass)?;
    }
    plan(g, roots, fuse)
}

/// The forward computation of an evaluation or `infer`, rewritten for inference: batch norm
/// folded into the product before it (unless `fold` is false: `--no-fuse` runs the program as
/// written), without folding through `data` (an `infer` block's input), then `precision`'s
/// autocast, after folding so that folded weights are rounded once. Returns the new roots,
/// each stage's roots (`trace`, `bn-fold`, `autocast`) and the folds.
pub struct Forward {
    pub roots: Vec<NodeId>,
    pub stages: Vec<(&'static str, Vec<NodeId>)>,
    pub folds: Vec<Fold>,
}

pub fn inference_forward(g: &mut Graph, roots: &[NodeId], data: &[NodeId], fold: bool, precision: DType) -> Result<Forward, VerifyError> {
    let (folded, folds) = if fold { fold_all_over(g, roots, data) } else { (roots.to_vec(), vec![]) };
    let lowered = autocast::lower_all(g, &folded, precision);
    let stages = vec![("trace", roots.to_vec()), ("bn-fold", folded), ("autocast", lowered.clone())];
    for (pass, stage_roots) in &stages {
        verify::graph(g, stage_roots, pass)?;
    }
    Ok(Forward { roots: lowered, stages, folds })
}

/// An evaluation batch: planned, then specialised (what depends on the parameters alone split
/// off as the frontier, computed once per evaluation), each verified.
pub fn compile_eval(g: &Graph, roots: &[NodeId], fuse: bool) -> Result<Planned, VerifyError> {
    let full = fusion::plan(g, roots, fuse);
    verify::plan(g, &full, &[], "fusion")?;
    let (frontier, plan) = invariant::specialise(g, &full);
    verify::plan(g, &plan, &frontier, "invariant")?;
    let memory = memory::plan_memory(g, &plan);
    verify::memory(g, &plan, &memory)?;
    Ok(Planned { plan, memory, frontier, full: Some(full) })
}
