//! Evaluation: `evaluate DATA every epoch { metrics }` clauses and standalone `evaluate` recipes.
//! The metrics are traced with no backward pass and `training()` false (the guide's `no_grad` +
//! `eval()`), and averaged over the data weighted by batch size.

use super::metric_names::metric_names;
use super::observer::Event;
use super::state_dict::{self, Slot};
use super::{err, shapes_of, Evaluation, TrainReport, Trainer};
use crate::pipeline::{self, leaves};
use crate::runtime::RuntimeError;
use dlc_language::eval::spec::Every;
use dlc_language::eval::value::{Ctx, Pipeline};
use dlc_language::eval::Value;
use dlc_language::ir::NodeId;
use dlc_language::syntax::ast::{Expr, RecipeEntry};
use dlc_language::types::DType;
use std::rc::Rc;

/// An evaluation compiled for one batch shape.
pub struct EvalGraph {
    /// The metrics' nodes.
    pub nodes: Vec<NodeId>,
    /// The batch's input ids.
    pub ids: Vec<u32>,
    /// Values that depend on the parameters alone, computed once per evaluation (by
    /// `frontier_plan`) and kept for every batch.
    pub frontier: Vec<NodeId>,
    pub frontier_plan: dlc_language::passes::driver::Planned,
    /// How many kernels those took (run once, not per batch).
    pub once: usize,
    /// The kernels each batch runs.
    pub plan: dlc_language::passes::fusion::Plan,
    /// Their memory plan.
    pub memory: dlc_language::passes::memory::MemoryPlan,
    /// Batch norms (and other per-channel affine chains) folded into the product before them.
    pub folded: Vec<dlc_language::passes::bn_fold::Fold>,
    /// The metrics' graph as traced and after batch-norm folding (`dlc explain --dump`).
    pub passes: dlc_language::passes::driver::Stages,
    /// The kernels before evaluation specialisation took out what runs once.
    pub full_plan: dlc_language::passes::fusion::Plan,
}

/// When evaluation is asked for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum When {
    EpochEnd,
    Step(usize),
    Final,
}

impl<'s> Trainer<'s> {
    /// Every `evaluate DATA every epoch { metrics }` clause: metrics averaged over the data,
    /// weighted by batch size, traced without backward and with `training()` false.
    /// `when` says which clauses are due: `every N epochs` ones at the end of an epoch,
    /// `every N steps` ones after a step, and all of them when training stops. Each evaluation
    /// goes into `report` and, as a line, into `metrics`.
    pub(super) fn evaluate(&mut self, epoch: usize, when: When, step: usize, report: &mut TrainReport) -> Result<(), RuntimeError> {
        let due = |every: &dlc_language::syntax::ast::Every| match (when, Every::of(every)) {
            (When::EpochEnd, Every::Epochs(n)) => epoch % n == 0,
            (When::Step(s), Every::Steps(n)) => s % n == 0,
            (When::Final, _) => true,
            _ => false,
        };
        let clauses: Vec<(Expr, Expr)> = self.evaluate_clauses().into_iter().filter(|c| due(&c.2)).map(|c| (c.0, c.1)).collect();
        for (data, body) in clauses {
            let p = self.clause_pipeline(&data)?;
            let (values, examples) = self.evaluate_pipeline(p, &body)?;
            let names = metric_names(&body, values.len());
            let data = data_name(&data);
            let evaluation = Evaluation { epoch, data, names, values, examples };
            self.emit(&Event::Evaluated { step, evaluation: &evaluation });
            report.evals.push(evaluation);
        }
        Ok(())
    }

    /// The metrics of `body` averaged over the pipeline's data, weighted by batch size, traced
    /// without backward and with `training()` false. Returns the means and the example count.
    fn evaluate_pipeline(&mut self, p: Rc<Pipeline>, body: &Expr) -> Result<(Vec<f64>, usize), RuntimeError> {
        {
            // An evaluation's data are the same every time: prepared once per run.
            let batches = match self.eval_batches.iter().find(|(q, _)| Rc::ptr_eq(q, &p)) {
                Some((_, b)) => b.clone(),
                None => {
                    // Each rank evaluates its share; the sums are added up below.
                    let (b, (skipped, first)) = pipeline::run_counting(&p, &self.opts.root, &self.session.t.graph, 0)?;
                    if let Some(first) = first {
                        let message = format!(
                            "evaluation data: {skipped} element{} could not be read and {} left out of every evaluation (`on_error: \"skip\"`); the first: {first}",
                            if skipped == 1 { "" } else { "s" },
                            if skipped == 1 { "is" } else { "are" }
                        );
                        self.emit(&Event::Warning(&message));
                    }
                    let b = super::replicas::eval_share(b, self.world.rank(), self.world.size());
                    self.eval_batches.push((p.clone(), b.clone()));
                    b
                }
            };
            let mut sums: Vec<f64> = vec![];
            let mut count = 0usize;
            // Each batch's metrics stay on the device until every batch has been queued, then
            // are read in batch order: one wait for the host per evaluation, not one a batch.
            let mut queued: Vec<(usize, usize)> = vec![];
            // The batches run where the steps do, on the parameters resident there.
            self.put_resident()?;
            let mut frontier_done = std::collections::HashSet::new();
            let result = (|| {
                for batch in batches {
                    let key = (Rc::as_ptr(&p) as usize, body.span, shapes_of(&batch));
                    // Compiled once per run (a new trace would make new input nodes, and so new
                    // plans for the device to compile).
                    if !self.eval_graphs.contains_key(&key) {
                        let eg = self.compile_evaluation(body, &p.elem, &key.2)?;
                        self.eval_graphs.insert(key.clone(), eg);
                    }
                    let eg = &self.eval_graphs[&key];
                    let graph = &self.session.t.graph;
                    // What depends on the parameters alone: computed once per evaluation, kept
                    // for every batch.
                    if frontier_done.insert(key.clone()) && !eg.frontier.is_empty() {
                        self.runner.run(graph, &eg.frontier_plan.plan, &eg.frontier_plan.memory)?;
                        for n in &eg.frontier {
                            self.runner.pin(graph, *n)?;
                        }
                    }
                    let n = batch.first().map(|t| t.shape.first().copied().unwrap_or(1)).unwrap_or(1);
                    for (id, t) in eg.ids.iter().zip(batch) {
                        self.runner.put(crate::runner::Slot::Input(*id), &t)?;
                    }
                    self.runner.run(graph, &eg.plan, &eg.memory)?;
                    for (j, r) in eg.nodes.iter().enumerate() {
                        self.runner.keep(graph, *r, crate::runner::Slot::Metric(queued.len(), j))?;
                    }
                    queued.push((n, eg.nodes.len()));
                }
                for (b, (n, metrics)) in queued.into_iter().enumerate() {
                    let vals: Vec<f64> = (0..metrics)
                        .map(|j| self.runner.take(crate::runner::Slot::Metric(b, j)).map(|t| t.to_f64()[0]))
                        .collect::<Result<_, _>>()?;
                    if sums.is_empty() {
                        sums = vec![0.0; vals.len()];
                    }
                    for (s, v) in sums.iter_mut().zip(vals) {
                        *s += v * n as f64;
                    }
                    count += n;
                }
                Ok::<(), RuntimeError>(())
            })();
            self.runner.unpin_all();
            result?;
            if self.world.size() > 1 {
                // Sums of (metric x examples) and the examples, over every rank's share: the
                // means over the whole data set, not means of the ranks' means.
                // (A rank whose share is empty learns how many metrics there are from the rest.)
                let mut shape = [sums.len() as f64, !sums.is_empty() as u8 as f64];
                self.world.sum_f64(&mut shape);
                let metrics = (shape[0] / shape[1].max(1.0)) as usize;
                let mut v = sums.clone();
                v.resize(metrics, 0.0);
                v.push(count as f64);
                self.world.sum_f64(&mut v);
                count = v.pop().unwrap_or(0.0) as usize;
                sums = v;
            }
            let means: Vec<f64> = sums.iter().map(|s| s / count.max(1) as f64).collect();
            Ok((means, count))
        }
    }

    /// The metrics of `body` for batches of these shapes, specialised for evaluation: no
    /// backward pass, `training()` false, and what depends on the parameters alone computed now,
    /// once (the parameters do not change during an evaluation).
    pub(super) fn compile_evaluation(
        &mut self,
        body: &Expr,
        elem: &Value,
        shapes: &[(DType, Vec<usize>)],
    ) -> Result<EvalGraph, RuntimeError> {
        let (v, ids) = self.trace(body, elem, shapes, false)?;
        let mut nodes = vec![];
        leaves(&v, &mut nodes);
        // Batch norm folded into the convolution or linear layer before it (not under
        // --no-fuse: the eager interpreter computes the program as written), then the recipe's
        // precision, as the training step's forward computes (torch.autocast around evaluation).
        let mut opts = self.driver_options();
        opts.conv_layout = self.opts.conv_layout.unwrap_or_else(|| self.opts.device.eval_conv_layout());
        let compiled = dlc_language::passes::driver::compile_evaluation(&mut self.session.t.graph, &nodes, &opts)?;
        let (nodes, folded, passes) = (compiled.forward.roots, compiled.forward.folds, compiled.forward.stages);
        let (plan, memory, frontier) = (compiled.planned.plan, compiled.planned.memory, compiled.planned.frontier);
        let full = compiled.planned.full.expect("an evaluation keeps its whole plan");
        let frontier_plan = compiled.frontier;
        Ok(EvalGraph {
            nodes,
            ids,
            frontier,
            frontier_plan,
            once: full.kernel_count() - plan.kernel_count(),
            memory,
            plan,
            folded,
            passes,
            full_plan: full,
        })
    }

    /// Whether an `evaluate ... every N steps` clause runs after `step`.
    pub(super) fn evaluation_due_at(&self, step: usize) -> bool {
        self.evaluate_clauses().iter().any(|c| matches!(Every::of(&c.2), Every::Steps(n) if step % n == 0))
    }

    /// The recipe's `evaluate DATA every ... { metrics }` clauses: (data, metrics, every).
    pub(super) fn evaluate_clauses(&self) -> Vec<(Expr, Expr, dlc_language::syntax::ast::Every)> {
        self.info
            .recipe
            .entries
            .iter()
            .filter_map(|e| match e {
                RecipeEntry::Evaluate { data, body, every, .. } => Some((data.clone(), body.clone(), every.clone())),
                _ => None,
            })
            .collect()
    }

    /// The pipeline a clause's data expression names.
    pub(super) fn clause_pipeline(&mut self, data: &Expr) -> Result<Rc<Pipeline>, RuntimeError> {
        let t = &mut self.session.t;
        t.ctx = Ctx { module: self.info.module, instance: None, env: vec![] };
        match t.eval(data) {
            Ok(Value::Pipeline(p)) => Ok(p),
            _ => Err(err("the evaluate clause's data is not a pipeline")),
        }
    }

    /// The evaluation clauses' compiled forms for the report: (data name, batch shapes, graph).
    pub fn compile_evaluations(&mut self) -> Vec<super::CompiledEvaluation<RuntimeError>> {
        let mut out = vec![];
        for (data, body, _) in self.evaluate_clauses() {
            let name = data_name(&data);
            let p = match self.clause_pipeline(&data) {
                Ok(p) => p,
                Err(e) => {
                    out.push((name, Err(e)));
                    continue;
                }
            };
            let r = match self.batch_shapes_of(&p) {
                Some(shapes) => self.compile_evaluation(&body, &p.elem, &shapes).map(|g| (shapes, g)),
                None => Err(err("the batch shapes are only known at run time")),
            };
            out.push((name, r));
        }
        out
    }

    /// A standalone `evaluate { model, data, checkpoint, metrics }` block: load the checkpoint's
    /// parameters and buffers (when given), then average the metrics over the data.
    pub fn evaluate_recipe(&mut self) -> Result<Vec<f64>, RuntimeError> {
        if let Some(Value::Str(dir)) = self.info.field("checkpoint").cloned() {
            self.load_weights(&crate::paths::in_program(&self.opts.root, &dir))?;
        }
        let body = self.expr_field("metrics").ok_or_else(|| err("the evaluate block has no `metrics`"))?;
        let p = self.pipeline.clone();
        let (means, count) = self.evaluate_pipeline(p, &body)?;
        let names = metric_names(&body, means.len());
        self.emit(&Event::EvaluatedRecipe { names: &names, values: &means, examples: count });
        Ok(means)
    }

    /// A `train` recipe's `init = "FILE"`: start from a state dict (fine-tuning), a safetensors
    /// file such as PyTorch's `safetensors.torch.save_file(model.state_dict(), FILE)` writes, or a
    /// dlc checkpoint directory; the program's folder is the base of a relative path. `--resume`
    /// then overrides it with the run's own checkpoint.
    pub(super) fn load_init(&mut self) -> Result<(), RuntimeError> {
        let Some(Value::Str(file)) = self.info.field("init").cloned() else { return Ok(()) };
        let path = crate::paths::in_program(&self.opts.root, &file);
        let tensors = state_dict::load_state(&path).map_err(|e| err(format!("`init`: {e}")))?;
        self.set_parameters(&tensors, &format!("`init` ({})", path.display()))
    }

    /// Parameters and buffers from a checkpoint directory (no optimiser state) or a safetensors
    /// file, matched by path and shape.
    pub fn load_weights(&mut self, path: &std::path::Path) -> Result<(), RuntimeError> {
        let tensors = state_dict::load_state(path).map_err(RuntimeError::Checkpoint)?;
        self.set_parameters(&tensors, &format!("the checkpoint {}", path.display()))
    }

    /// Set every parameter and buffer from `(path, tensor)` pairs (e.g. weights exported from
    /// PyTorch), as `load_state_dict(strict=True)`: each must be there with the model's shape,
    /// nothing else may be, and every difference is reported at once (state_dict.rs); values are
    /// converted to the model's dtype. `source` names where they come from, for messages.
    pub fn set_parameters(&mut self, tensors: &[(String, crate::runtime::tensor::Tensor)], source: &str) -> Result<(), RuntimeError> {
        let all: Vec<(u32, String)> = self.params.iter().chain(&self.buffers).map(|p| (p.id, p.path.clone())).collect();
        let slots: Vec<Slot> = all
            .iter()
            .map(|(id, path)| Slot { path: path.clone(), shape: self.store[id].shape.clone(), dtype: self.store[id].dtype })
            .collect();
        let what = state_dict::models_named(self.groups.iter().map(|g| &g.model));
        let loaded = state_dict::match_state(&slots, tensors, &what, source).map_err(err)?;
        for ((id, _), t) in all.into_iter().zip(loaded) {
            self.store.insert(id, t);
        }
        self.resident = false;
        Ok(())
    }
}

/// What the log and the metrics file call a clause's data: its `data` name, or `evaluate`.
fn data_name(data: &Expr) -> String {
    match &data.kind {
        dlc_language::syntax::ast::ExprKind::Name(n) => n.clone(),
        _ => "evaluate".into(),
    }
}
