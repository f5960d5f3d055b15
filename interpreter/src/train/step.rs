//! Compiling one training step for one batch shape into the graph: the forward pass, gradients
//! by autodiff, clipping, and every parameter's update rule. A classic recipe's step is
//! `loss = ...` differentiated with respect to all parameters; a custom `step(x) { ... }` block is
//! traced statement by statement, `update m by grad(loss, m)` applying `m`'s optimiser on the spot
//! so that what follows in the block sees the new parameters (as after `optimizer.step()`).

use super::{err, precision, Trainer};
use crate::pipeline::leaves;
use crate::runtime::RuntimeError;
use dlc_language::eval::model::{collect_params, substitute};
use dlc_language::eval::tracer::Tracer;
use dlc_language::eval::value::Ctx;
use dlc_language::eval::Value;
use dlc_language::ir::Graph;
use dlc_language::ir::{NodeId, Op};
use dlc_language::passes::driver::{self, StepGraph, StepRewrites, StepTracer};
use dlc_language::syntax::ast::{Expr, ExprKind, Param as AstParam, RecipeEntry, Stmt};
use dlc_language::types::{DType, Dim, TensorTy};
use std::collections::HashMap;
use std::rc::Rc;

/// What tracing a step yields.
struct Traced {
    logged: Vec<(String, NodeId)>,
    /// Per updated parameter: its index, its state inputs, its new value and states.
    updates: Vec<(usize, Vec<u32>, Vec<NodeId>)>,
    /// The gradient sums of `accumulate`.
    accum: Vec<(u32, NodeId)>,
    /// f16's "every gradient is finite" flag.
    finite: Option<NodeId>,
    /// Data parallelism: the gradients to average and the inputs their averages are bound to.
    reduce: Vec<(NodeId, u32)>,
}

/// One compiled training step for one batch shape.
pub struct Step {
    pub elem_inputs: Vec<u32>,
    /// The optimiser step count (Adam's bias correction) and the batch count (random draws).
    pub t_input: u32,
    pub draw_input: u32,
    /// The learning rate of each group, after the schedule.
    pub lr_inputs: Vec<u32>,
    /// What the step reports, by name; the first is "the loss" (progress bar, NaN check).
    pub logged: Vec<(String, NodeId)>,
    /// Per updated parameter (index into `Trainer::params`): its state inputs and the nodes of
    /// (new parameter, new states...).
    pub updates: Vec<(usize, Vec<u32>, Vec<NodeId>)>,
    /// With `accumulate = N`: per parameter, the running gradient sum's input and its new value.
    /// The updates then use the mean of the N gradients.
    pub accum: Vec<(u32, NodeId)>,
    /// New values of buffers (BatchNorm's running statistics), by parameter id.
    pub buffer_updates: Vec<(u32, NodeId)>,
    /// The kernels of the whole step (fused unless `--no-fuse`).
    pub plan: dlc_language::passes::fusion::Plan,
    /// Its memory plan: when each value is freed, and the peak.
    pub memory: dlc_language::passes::memory::MemoryPlan,
    /// Seconds spent tracing, differentiating and planning it.
    pub compile_s: f64,
    /// The ops autocast moved to bf16/f16 (empty in f32).
    pub autocast: Vec<dlc_language::passes::autocast::Decision>,
    /// Where a convolution's bias before batch norm was removed.
    pub removed_biases: Vec<dlc_language::span::Span>,
    /// f16's loss scaling: the scale's input and the flag "every gradient is finite".
    pub scale: Option<(u32, NodeId)>,
    /// The graph after each pass that built or rewrote it (`dlc explain --dump=PASS`): the
    /// traced forward values, the same after conv-bias elimination and after autocast, then
    /// the whole step after autodiff (with rematerialisation, when it was kept). Each was
    /// checked by the IR verifier.
    pub passes: driver::Stages,
    /// Under data parallelism: each gradient the optimiser reads (after `accumulate`'s mean)
    /// and the input its average across ranks is bound to. `plan` then computes the logged
    /// values, these gradients, the gradient sums and the buffer updates; `update` the new
    /// parameters and states from the averaged gradients.
    pub reduce: Vec<(NodeId, u32)>,
    pub update: Option<(dlc_language::passes::fusion::Plan, dlc_language::passes::memory::MemoryPlan)>,
    /// The gradients' all-reduce buckets, in the order `plan` writes them.
    pub buckets: Vec<dlc_language::passes::buckets::Bucket>,
}

impl Step {
    /// What the first plan computes under data parallelism: all but the updates, and the
    /// gradients to average.
    pub fn local_roots(&self) -> Vec<NodeId> {
        let mut r: Vec<NodeId> = self.logged.iter().map(|l| l.1).collect();
        r.extend(self.reduce.iter().map(|g| g.0));
        r.extend(self.accum.iter().map(|a| a.1));
        r.extend(self.buffer_updates.iter().map(|b| b.1));
        r.extend(self.scale.map(|s| s.1));
        r
    }

    /// Every node the step's results need.
    pub fn roots(&self) -> Vec<NodeId> {
        let mut r: Vec<NodeId> = self.logged.iter().map(|l| l.1).collect();
        r.extend(self.updates.iter().flat_map(|u| u.2.iter().copied()));
        r.extend(self.accum.iter().map(|a| a.1));
        r.extend(self.buffer_updates.iter().map(|b| b.1));
        r.extend(self.scale.map(|s| s.1));
        r
    }
}

fn scalar_input(t: &mut Tracer, name: &str) -> (u32, NodeId) {
    let id = t.graph.add_input(name, TensorTy::new(DType::F32, vec![]));
    (id, t.node(Op::Input(id), DType::F32, vec![], vec![], Default::default()))
}

fn input_like(t: &mut Tracer, name: &str, like: NodeId) -> (u32, NodeId) {
    let ty = t.ty(like);
    let id = t.graph.add_input(name, ty.clone());
    (id, t.node(Op::Input(id), ty.dtype, ty.shape, vec![], Default::default()))
}

/// The trainer tracing a step for the driver.
struct StepTrace<'t, 's, 'a> {
    trainer: &'t mut Trainer<'s>,
    shapes: &'a [(DType, Vec<usize>)],
    /// The random-draw counter before the first trace (the second starts from it too), and
    /// where the first left it.
    seeds: u64,
    after_first: Option<u64>,
}

impl StepTracer for StepTrace<'_, '_, '_> {
    type Traced = Step;
    type Error = RuntimeError;

    fn trace(&mut self, rw: &mut StepRewrites) -> Result<(StepGraph, Step), RuntimeError> {
        if rw.rematerialising() {
            self.after_first = Some(self.trainer.session.t.seed_counter);
            self.trainer.session.t.seed_counter = self.seeds;
        }
        self.trainer.trace_step(self.shapes, rw)
    }

    fn graph(&self) -> &Graph {
        &self.trainer.session.t.graph
    }
}

/// The scalar inputs every step has.
struct Scalars {
    t: (u32, NodeId),
    draw: (u32, NodeId),
    lrs: Vec<(u32, NodeId)>,
}

impl<'s> Trainer<'s> {
    /// A copy of the pipeline's element structure whose tensors are fresh inputs of these shapes.
    pub(super) fn element_inputs(&mut self, elem: &Value, shapes: &mut std::slice::Iter<(DType, Vec<usize>)>, ids: &mut Vec<u32>) -> Value {
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

    /// Set the tracer up for the recipe: its module, every group's model bound by name (and
    /// `model` for a single one), `training()` as given, random draws keyed by `draw`.
    fn enter(&mut self, training: bool, draw: Option<NodeId>) {
        let t = &mut self.session.t;
        t.ctx = Ctx { module: self.info.module, instance: None, env: vec![] };
        for g in &self.groups {
            t.bind(&g.name, g.model.clone());
        }
        t.training = training;
        t.step_input = draw;
    }

    fn leave(&mut self) {
        self.session.t.training = false;
        self.session.t.step_input = None;
    }

    fn traced_error(&self, before: usize, what: &str) -> RuntimeError {
        err(format!("tracing {what} failed: {:?}", self.session.t.diags[before..].iter().map(|d| d.message.clone()).collect::<Vec<_>>()))
    }

    /// Trace `expr` with the models and the element `elem` bound (`x`, `y`, record fields, `batch`),
    /// for a batch of these shapes, with no backward pass. Returns the value and the input ids.
    pub(super) fn trace(
        &mut self,
        expr: &Expr,
        elem: &Value,
        shapes: &[(DType, Vec<usize>)],
        training: bool,
    ) -> Result<(Value, Vec<u32>), RuntimeError> {
        let mut ids = vec![];
        let e = self.element_inputs(elem, &mut shapes.iter(), &mut ids);
        self.enter(training, None);
        self.session.t.bind_element(&e);
        let before = self.session.t.diags.len();
        let r = self.session.t.eval(expr);
        self.leave();
        r.map(|v| (v, ids)).map_err(|_| self.traced_error(before, "the recipe"))
    }

    fn custom_step(&self) -> Option<(Vec<AstParam>, Vec<Stmt>)> {
        self.info.recipe.entries.iter().find_map(|e| match e {
            RecipeEntry::Step { params, body, .. } => Some((params.clone(), body.clone())),
            _ => None,
        })
    }

    /// The compile driver's options for this recipe's steps.
    pub(super) fn driver_options(&self) -> driver::Options {
        driver::Options {
            fuse: self.opts.fuse,
            remat: self.opts.remat,
            precision: self.spec.precision.dtype(),
            bucket_cap: self.split_step().then(|| self.spec.parallel.map(|p| p.bucket_bytes)).flatten(),
            conv_layout: self.opts.conv_layout.unwrap_or_else(|| self.opts.device.conv_layout()),
            products_round: self.opts.device.products_round(),
        }
    }

    /// The step for this batch shape, compiled by the driver (which may trace it twice, the
    /// second time with rematerialisation; both traces draw the same random streams).
    pub(super) fn build_step(&mut self, shapes: &[(DType, Vec<usize>)]) -> Result<Step, RuntimeError> {
        let started = std::time::Instant::now();
        let opts = self.driver_options();
        let seeds = self.session.t.seed_counter;
        let mut tracer = StepTrace { trainer: self, shapes, seeds, after_first: None };
        let compiled = driver::compile_step(&mut tracer, &opts)?;
        if let Some(after) = tracer.after_first {
            self.session.t.seed_counter = after;
        }
        let driver::CompiledStep { graph, planned, rewrites, traced: mut step } = compiled;
        step.passes = graph.stages;
        step.autocast = rewrites.autocast_decisions().to_vec();
        step.removed_biases = rewrites.removed_biases();
        (step.plan, step.memory, step.update, step.buckets) = (planned.plan, planned.memory, planned.update, planned.buckets);
        step.compile_s = started.elapsed().as_secs_f64();
        Ok(step)
    }

    fn trace_step(&mut self, shapes: &[(DType, Vec<usize>)], rw: &mut StepRewrites) -> Result<(StepGraph, Step), RuntimeError> {
        let t = &mut self.session.t;
        let sc = Scalars {
            t: scalar_input(t, "step"),
            draw: scalar_input(t, "draw"),
            lrs: self.groups.iter().map(|g| scalar_input(t, &format!("lr {}", g.name))).collect(),
        };
        t.buffer_updates.clear();
        let elem = self.pipeline.elem.clone();
        let mut elem_inputs = vec![];
        let e = self.element_inputs(&elem, &mut shapes.iter(), &mut elem_inputs);
        let scale = self.scaler.is_some().then(|| scalar_input(&mut self.session.t, "loss scale"));
        if self.split_step() && scale.is_some() {
            return Err(err("data parallelism with `precision = f16` (dynamic loss scaling) is not supported yet; use `bf16`"));
        }
        if self.split_step() && self.custom_step().is_some() {
            return Err(err("data parallelism applies to recipes with a `loss`; a custom `step` block is not supported across ranks yet"));
        }
        self.enter(true, Some(sc.draw.1));
        let before = self.session.t.diags.len();
        let traced = match (self.custom_step(), scale) {
            (Some(_), Some(_)) => {
                Err(err("`precision = f16` (with loss scaling) applies to recipes with a `loss`; use `bf16` with a custom `step`"))
            }
            (Some((params, body)), None) => self.trace_custom(&params, &body, e, &sc, before, rw),
            (None, _) => self.trace_classic(e, &sc, scale.map(|s| s.1), before, rw),
        };
        self.leave();
        let Traced { mut logged, updates, accum, finite, reduce } = traced?;
        let mut buffer_updates = std::mem::take(&mut self.session.t.buffer_updates);
        // What the step reports and the running statistics come from the same (autocast)
        // forward pass as the gradients, not from a second f32 one.
        for n in logged.iter_mut().map(|l| &mut l.1).chain(buffer_updates.iter_mut().map(|b| &mut b.1)) {
            *n = rw.lower(&mut self.session.t.graph, *n);
        }
        if self.scaler.is_none() && rw.autocast_decisions().iter().any(|d| d.dtype == DType::F16) {
            return Err(err(
                "a `precision f16 { ... }` block needs `precision = f16` in the recipe: f16 gradients need its dynamic loss scaling (use `bf16` in the block otherwise)",
            ));
        }
        let step = Step {
            elem_inputs,
            t_input: sc.t.0,
            draw_input: sc.draw.0,
            lr_inputs: sc.lrs.iter().map(|l| l.0).collect(),
            logged,
            updates,
            accum,
            buffer_updates,
            plan: Default::default(),
            memory: Default::default(),
            compile_s: 0.0,
            autocast: vec![],
            removed_biases: vec![],
            scale: scale.map(|s| s.0).zip(finite),
            passes: vec![],
            reduce,
            update: None,
            buckets: vec![],
        };
        let g = &self.session.t.graph;
        let split = (!step.reduce.is_empty()).then(|| {
            let sizes: Vec<(NodeId, usize)> = step
                .reduce
                .iter()
                .map(|(n, _)| (*n, g.node(*n).shape.iter().map(|d| d.as_known().unwrap_or(0) as usize).product::<usize>() * 4))
                .collect();
            let new: Vec<NodeId> = step.updates.iter().flat_map(|u| u.2.iter().copied()).collect();
            driver::Split { local: step.local_roots(), grads: sizes, updates: new }
        });
        let graph = StepGraph { stages: rw.stages(step.roots()), roots: step.roots(), split };
        Ok((graph, step))
    }

    /// Gradients of `loss` (through the step's rewrites) for these parameters.
    fn grads(&mut self, loss: NodeId, wrt: &[NodeId], rw: &mut StepRewrites) -> Result<Vec<NodeId>, RuntimeError> {
        rw.grad(&mut self.session.t.graph, loss, wrt).map_err(|e| err(format!("cannot differentiate the loss: {e}")))
    }

    fn clip(&mut self, grads: Vec<NodeId>) -> Result<Vec<NodeId>, RuntimeError> {
        match self.spec.clip_grad_norm {
            Some(max_norm) => clip_by_global_norm(&mut self.session.t, &grads, max_norm),
            None => Ok(grads),
        }
    }

    /// Apply each parameter's group's update rule; returns (param index, state inputs, outputs).
    fn apply_updates(
        &mut self,
        idx: &[usize],
        nodes: &[NodeId],
        grads: &[NodeId],
        sc: &Scalars,
        states: &mut HashMap<usize, (Vec<u32>, Vec<NodeId>)>,
    ) -> Result<Vec<(usize, Vec<NodeId>)>, RuntimeError> {
        let mut out = vec![];
        for ((&k, &node), &g) in idx.iter().zip(nodes).zip(grads) {
            let group = self.params[k].group;
            let n_state = self.groups[group].n_state()?;
            let t = &mut self.session.t;
            let (_, cur) = states.entry(k).or_insert_with(|| {
                let made: Vec<(u32, NodeId)> = (0..n_state).map(|_| input_like(t, "state", node)).collect();
                (made.iter().map(|m| m.0).collect(), made.iter().map(|m| m.1).collect())
            });
            let cur_states = cur.clone();
            let new = self.groups[group].trace_update(t, node, g, &cur_states, sc.t.1, sc.lrs[group].1)?;
            states.get_mut(&k).expect("just inserted").1 = new[1..].to_vec();
            out.push((k, new));
        }
        Ok(out)
    }

    /// The classic step; with `scale` (f16), the loss is scaled, the gradients unscaled, and
    /// the updates skipped unless every gradient is finite (the flag is returned).
    fn trace_classic(
        &mut self,
        elem: Value,
        sc: &Scalars,
        scale: Option<NodeId>,
        before: usize,
        rw: &mut StepRewrites,
    ) -> Result<Traced, RuntimeError> {
        let loss_expr = self.expr_field("loss").ok_or_else(|| err("the recipe has no loss"))?;
        self.session.t.bind_element(&elem);
        let loss = match self.session.t.eval(&loss_expr) {
            Ok(Value::Tensor(n)) => n,
            Ok(other) => return Err(err(format!("the loss is {}, not a tensor", other.kind()))),
            Err(_) => return Err(self.traced_error(before, "the loss")),
        };
        let idx: Vec<usize> = (0..self.params.len()).collect();
        let nodes: Vec<NodeId> = self.params.iter().map(|p| p.node).collect();
        let loss = rw.lower(&mut self.session.t.graph, loss);
        let (mut grads, finite) = match scale {
            Some(s) => {
                let scaled = precision::scale_loss(&mut self.session.t, loss, s)?;
                let g = self.grads(scaled, &nodes, rw)?;
                let (g, finite) = precision::unscale(&mut self.session.t, &g, s)?;
                (g, Some(finite))
            }
            None => (self.grads(loss, &nodes, rw)?, None),
        };
        let mut accum = vec![];
        if self.spec.accumulate > 1 {
            // The update sees the mean gradient of the N micro-batches, like `(loss / N).backward()`
            // N times before `optimizer.step()`.
            let t = &mut self.session.t;
            let inv = t.constant(1.0 / self.spec.accumulate as f64, DType::F32, Default::default());
            for g in grads.iter_mut() {
                let (id, acc) = input_like(t, "grad sum", *g);
                let sum = t.tensor_binary(dlc_language::ir::BinaryOp::Add, acc, *g, Default::default()).map_err(|_| err("accumulate"))?;
                accum.push((id, sum));
                let k = t.cast(inv, t.ty(sum).dtype, Default::default());
                *g = t.tensor_binary(dlc_language::ir::BinaryOp::Mul, sum, k, Default::default()).map_err(|_| err("accumulate"))?;
            }
        }
        let mut reduce = vec![];
        if self.split_step() {
            // Data parallel: the optimiser reads each gradient averaged across ranks, bound to
            // an input between the two halves of the step (clipping sees the average, as after
            // DDP's all-reduce).
            let t = &mut self.session.t;
            for g in grads.iter_mut() {
                let (id, avg) = input_like(t, "averaged gradient", *g);
                reduce.push((*g, id));
                *g = avg;
            }
        }
        let grads = self.clip(grads)?;
        let mut states = HashMap::new();
        let new = self.apply_updates(&idx, &nodes, &grads, sc, &mut states)?;
        let mut updates: Vec<(usize, Vec<u32>, Vec<NodeId>)> = new.into_iter().map(|(k, outs)| (k, states[&k].0.clone(), outs)).collect();
        if let Some(f) = finite {
            // A skipped step keeps the parameter and its optimiser state.
            let t = &mut self.session.t;
            for (k, ids, outs) in updates.iter_mut() {
                let mut olds = vec![nodes[*k]];
                for id in ids.iter() {
                    let ty = t.graph.inputs[*id as usize].ty.clone();
                    olds.push(t.node(Op::Input(*id), ty.dtype, ty.shape, vec![], Default::default()));
                }
                for (o, old) in outs.iter_mut().zip(olds) {
                    *o = precision::gate(t, f, *o, old)?;
                }
            }
        }
        Ok(Traced { logged: vec![("loss".into(), loss)], updates, accum, finite, reduce })
    }

    fn trace_custom(
        &mut self,
        params: &[AstParam],
        body: &[Stmt],
        elem: Value,
        sc: &Scalars,
        before: usize,
        rw: &mut StepRewrites,
    ) -> Result<Traced, RuntimeError> {
        if self.spec.accumulate > 1 {
            return Err(err("`accumulate` applies to recipes with a `loss`; a custom `step` decides its own updates"));
        }
        // As in the checker: the element's parts by name (`x`, `y`, record fields), and the
        // whole element under the step's parameter name.
        self.session.t.bind_element(&elem);
        if let Some(p) = params.first() {
            self.session.t.bind(&p.name.name, elem);
        }
        let mut logged = vec![];
        // Per parameter index: its state inputs and current state nodes, and its latest value.
        let mut states: HashMap<usize, (Vec<u32>, Vec<NodeId>)> = HashMap::new();
        let mut latest: HashMap<usize, Vec<NodeId>> = HashMap::new();
        let fail = |s: &Self| s.traced_error(before, "the step");
        for s in body {
            match s {
                Stmt::Let(n, e) => {
                    let v = self.session.t.eval(e).map_err(|_| fail(self))?;
                    self.session.t.bind(&n.name, v);
                }
                Stmt::Expr(e) => {
                    self.session.t.eval(e).map_err(|_| fail(self))?;
                }
                Stmt::Log(e, _) => {
                    let v = self.session.t.eval(e).map_err(|_| fail(self))?;
                    let mut nodes = vec![];
                    leaves(&v, &mut nodes);
                    let names: Vec<String> = match &e.kind {
                        ExprKind::Tuple(items) => items.iter().enumerate().map(|(i, x)| log_name(x, i)).collect(),
                        _ => vec![log_name(e, 0)],
                    };
                    for (i, n) in nodes.into_iter().enumerate() {
                        let name = names.get(i).cloned().unwrap_or_else(|| format!("log{i}"));
                        logged.push((name, n));
                    }
                }
                Stmt::Update { target, grads, .. } => {
                    let Ok(Value::Grads(model, loss)) = self.session.t.eval(grads) else { return Err(fail(self)) };
                    let gi = self
                        .groups
                        .iter()
                        .position(|g| matches!(self.session.t.lookup(&g.name), Some(Value::Model(m)) if Rc::ptr_eq(&m, &model)))
                        .ok_or_else(|| err("`update` names a model that is not one of the recipe's `models`"))?;
                    let mut found = vec![];
                    collect_params(&Value::Model(model.clone()), "", &mut found);
                    let prefix = self.groups[gi].prefix.clone();
                    let mut idx = vec![];
                    let mut nodes = vec![];
                    for (path, v) in found {
                        let Value::Tensor(node) = v else { continue };
                        let full = format!("{prefix}{path}");
                        if let Some(k) = self.params.iter().position(|p| p.path == full) {
                            if !idx.contains(&k) {
                                idx.push(k);
                                nodes.push(node);
                            }
                        }
                    }
                    let g = self.grads(loss, &nodes, rw)?;
                    let g = self.clip(g)?;
                    let new = self.apply_updates(&idx, &nodes, &g, sc, &mut states)?;
                    let map: HashMap<NodeId, NodeId> = nodes.iter().zip(&new).map(|(old, (_, outs))| (*old, outs[0])).collect();
                    for (k, outs) in new {
                        latest.insert(k, outs);
                    }
                    let rebuilt = substitute(&Value::Model(model), &map);
                    let name = self.groups[gi].name.clone();
                    self.session.t.bind(&name, rebuilt.clone());
                    if let ExprKind::Name(n) = &target.kind {
                        if *n != name {
                            self.session.t.bind(n, rebuilt);
                        }
                    }
                }
            }
        }
        if logged.is_empty() {
            return Err(err("the `step` block logs nothing: add `log loss` (or `log (a, b)`) so that training can be followed"));
        }
        let mut updates: Vec<(usize, Vec<u32>, Vec<NodeId>)> =
            latest.into_iter().map(|(k, outs)| (k, states[&k].0.clone(), [vec![outs[0]], states[&k].1.clone()].concat())).collect();
        updates.sort_by_key(|u| u.0);
        Ok(Traced { logged, updates, accum: vec![], finite: None, reduce: vec![] })
    }
}

/// `log (d_loss, g_loss)` reports `d_loss` and `g_loss`; anything else is `log0`, `log1`, ...
fn log_name(e: &Expr, i: usize) -> String {
    match &e.kind {
        ExprKind::Name(n) => n.clone(),
        _ if i == 0 => "loss".into(),
        _ => format!("log{i}"),
    }
}

/// torch.nn.utils.clip_grad_norm_: scale every gradient by min(1, max_norm / (‖g‖₂ + 1e-6)),
/// with the norm taken over all parameters together.
fn clip_by_global_norm(t: &mut Tracer, grads: &[NodeId], max_norm: f64) -> Result<Vec<NodeId>, RuntimeError> {
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

impl super::Trainer<'_> {
    /// The nodes each compiled step (one per batch shape) computes, in `graph`: what the step's
    /// results need, not every node the passes made on the way (for tests).
    pub fn step_nodes(&self) -> Vec<Vec<NodeId>> {
        self.steps.values().map(|s| self.graph().topo(&s.roots())).collect()
    }
}
