//! A batch through the trainer's `Runner` (the interpreter, or a GPU's device executor) and the
//! state the runner holds between steps: parameters, buffers, optimiser state and gradient sums
//! uploaded once, moved into the runner's slots after each step, and brought back to the host
//! before anything there reads them.

use super::{err, precision, replicas, shapes_of, zeros_like, Trainer};
use crate::pipeline::Element;
use crate::runner::Slot;
use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use dlc_language::types::DType;

/// How one batch runs: its optimiser step, its random draw, the learning rates, whether it
/// updates (false for the first N-1 micro-batches of `accumulate = N`: only the gradient sums
/// advance), and whether its logged values may stay on the device (`run_loop.rs`).
pub(super) struct BatchRun<'a> {
    pub step: usize,
    pub draw: usize,
    pub lrs: &'a [f64],
    pub update: bool,
    pub put_off: bool,
}

/// A logged value as the host reads it: the mean of its elements.
fn mean(t: &Tensor) -> f64 {
    let v = t.to_f64();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Steps before a run's steady state: the first compiles and uploads, the second records the
/// calls, the third captures them as a graph.
const WARM_STEPS: usize = 3;

impl<'s> Trainer<'s> {
    /// Upload parameters, buffers, optimiser state and gradient sums to the runner unless it
    /// holds them already.
    pub(super) fn put_resident(&mut self) -> Result<(), RuntimeError> {
        if self.resident {
            return Ok(());
        }
        for p in self.params.iter().chain(&self.buffers) {
            self.runner.put(Slot::Param(p.id), &self.store[&p.id])?;
        }
        for (k, states) in self.states.iter().enumerate() {
            for (j, t) in states.iter().enumerate() {
                self.runner.put(Slot::State(k, j), t)?;
            }
        }
        for (i, t) in self.grad_sums.iter().enumerate() {
            self.runner.put(Slot::Sum(i), t)?;
        }
        self.resident = true;
        Ok(())
    }

    /// Bring the runner's parameters, buffers, optimiser state and gradient sums back to the
    /// host (before a checkpoint, an evaluation, or the end of the run).
    pub(super) fn sync_host(&mut self) -> Result<(), RuntimeError> {
        if !self.host_stale {
            return Ok(());
        }
        for p in self.params.iter().chain(&self.buffers) {
            let t = self.runner.take(Slot::Param(p.id))?;
            self.store.insert(p.id, t);
        }
        for (k, states) in self.states.iter_mut().enumerate() {
            for (j, t) in states.iter_mut().enumerate() {
                *t = self.runner.take(Slot::State(k, j))?;
            }
        }
        for (i, t) in self.grad_sums.iter_mut().enumerate() {
            *t = self.runner.take(Slot::Sum(i))?;
        }
        self.host_stale = false;
        Ok(())
    }

    /// What the runner did (its device, kernels compiled and launched, what ran on the host).
    pub fn runner_report(&self) -> crate::runner::Report {
        self.runner.report()
    }

    /// Add the `n`th step of this run (counted from 1) to the steady-state figures when the
    /// warm-up is behind it: its plans compiled, its arena allocated and its graphs captured.
    pub(super) fn count_steady(&mut self, n: usize, before: &crate::runner::Counters) {
        if n <= WARM_STEPS {
            return;
        }
        let d = self.runner.counters().per_step_since(before, 1);
        let (sum, count) = &mut self.steady;
        sum.bytes_up += d.bytes_up;
        sum.bytes_down += d.bytes_down;
        sum.calls_issued += d.calls_issued;
        sum.graph_launches += d.graph_launches;
        sum.waits += d.waits;
        *count += 1;
    }

    /// A steady-state step's traffic with the device, averaged over the steps after the first
    /// `WARM_STEPS` (none when there were none): its evaluations and checkpoints not included.
    pub fn steady_traffic(&self) -> Option<(crate::runner::PerStep, usize)> {
        let (sum, n) = self.steady;
        (n > 0).then(|| (sum.scaled(1.0 / n as f64), n))
    }

    /// Run one batch through its compiled step, as `how` says. `ahead` runs once the step is queued
    /// and before its logged values are read: on a GPU, whose launches do not wait, the host
    /// prepares the next batch there while the device computes this one, and uploads it on the
    /// copy stream (`Runner::put_ahead`). Returns the logged
    /// values, or with `put_off` keeps them on the device (`read_put_off` reads them) and
    /// returns `None`: the host then never waits for this step.
    pub(super) fn run_batch(
        &mut self,
        batch: Element,
        how: BatchRun,
        ahead: &mut dyn FnMut() -> Option<Element>,
    ) -> Result<Option<Vec<(String, f64)>>, RuntimeError> {
        let BatchRun { step, draw, lrs, update, put_off } = how;
        let key = shapes_of(&batch);
        self.ensure_step(&key)?;
        self.put_resident()?;
        self.bind_inputs(&key, batch, step, draw, lrs)?;
        // An update on one runner consumes the parameters, buffers and optimiser state it
        // replaces: the CPU's writes the update over them in place (`Runner::donate`).
        let donated = update && self.steps[&key].update.is_none();
        if donated {
            self.donate_replaced(&key);
        }
        let st = &self.steps[&key];
        let run = self.runner.as_mut();
        let graph = &self.session.t.graph;
        // The whole step runs even for the first N-1 micro-batches of `accumulate = N`, whose
        // updates are then dropped: one compiled plan, no second one without the optimiser.
        // Data parallel: its backward half, each bucket's all-reduce started as it is written.
        let averaged = if st.update.is_some() && update {
            Some(replicas::run_and_average(&self.world, run, graph, st)?)
        } else {
            run.run(graph, &st.plan, &st.memory)?;
            None
        };
        // The next batch, made now, goes to the device beside this step's work.
        if let Some(next) = ahead().filter(|b| shapes_of(b) == key) {
            let st = &self.steps[&key];
            for (id, t) in st.elem_inputs.iter().zip(&next) {
                self.runner.put_ahead(Slot::Input(*id), t)?;
            }
        }
        self.host_stale = true;
        // (Put off only where nothing below needs the values: no loss scaling, no averaging.)
        let put_off = put_off && st.scale.is_none() && averaged.is_none();
        let logged = self.logged_of(&key, step, put_off)?;
        let st = &self.steps[&key];
        let run = self.runner.as_mut();
        let graph = &self.session.t.graph;
        // Under f16's loss scaling an overflow skips the step (the scale backs off) instead of
        // ending the run.
        let finite = match (st.scale, update) {
            (Some((_, flag)), true) => run.fetch(graph, flag)?.to_f64()[0] != 0.0,
            _ => true,
        };
        let mut not_finite: Option<RuntimeError> = None;
        if let Some((name, v)) = logged.iter().find(|(_, v)| !v.is_finite()) {
            if st.scale.is_none() {
                not_finite = Some(err(format!("`{name}` became {v} at step {step}")));
            }
        }
        // (A step that consumed its state leaves its own results in the slots before failing,
        // as PyTorch's `optimizer.step()` has updated the parameters when the loss is read.)
        if !donated {
            if let Some(e) = not_finite {
                return Err(e);
            }
        }
        for (id, n) in &st.buffer_updates {
            run.keep(graph, *n, Slot::Param(*id))?;
        }
        if !update {
            for (i, (_, n)) in st.accum.iter().enumerate() {
                run.keep(graph, *n, Slot::Sum(i))?;
            }
            return Ok((!put_off).then_some(logged));
        }
        if st.update.is_some() {
            // Data parallel: the gradients averaged across ranks, then the update from them;
            // running statistics are rank 0's, as DDP broadcasts buffers.
            if let Some(Some(sums)) = averaged {
                self.bind_averages(&key, sums)?;
            }
            self.broadcast_buffers()?;
            let st = &self.steps[&key];
            let (plan, memory) = st.update.as_ref().expect("checked above");
            self.runner.run(&self.session.t.graph, plan, memory)?;
        }
        let st = &self.steps[&key];
        let run = self.runner.as_mut();
        let graph = &self.session.t.graph;
        for (k, _, outs) in &st.updates {
            run.keep(graph, outs[0], Slot::Param(self.params[*k].id))?;
            for (j, n) in outs[1..].iter().enumerate() {
                run.keep(graph, *n, Slot::State(*k, j))?;
            }
        }
        for (i, s) in self.grad_sums.iter().enumerate() {
            run.put(Slot::Sum(i), &zeros_like(s))?;
        }
        if let Some(e) = not_finite {
            return Err(e);
        }

        if let Some(s) = self.scaler.as_mut() {
            s.update(finite);
            if s.in_a_row >= precision::MAX_IN_A_ROW {
                return Err(err(format!(
                    "f16 loss scaling skipped {} steps in a row (scale now {:e}): the gradients are not finite at any scale; the loss was {}",
                    s.in_a_row,
                    s.scale,
                    logged.first().map(|l| l.1).unwrap_or(f64::NAN)
                )));
            }
        }
        Ok((!put_off).then_some(logged))
    }

    /// Give `key`'s step its batch, step count, random draw and learning rates, and point its
    /// optimiser-state and gradient-sum inputs at the slots they live in.
    fn bind_inputs(&mut self, key: &super::Shapes, batch: Element, step: usize, draw: usize, lrs: &[f64]) -> Result<(), RuntimeError> {
        let st = &self.steps[key];
        let run = self.runner.as_mut();
        for (id, t) in st.elem_inputs.iter().zip(batch) {
            run.put(Slot::Input(*id), &t)?;
        }
        // The optimiser's step count leaves out the steps f16's loss scaling skipped.
        let skipped = self.scaler.as_ref().map(|s| s.skipped).unwrap_or(0);
        let scalar = |v: f64| Tensor::from_f64(DType::F32, vec![], [v]);
        run.put(Slot::Input(st.t_input), &scalar(step.saturating_sub(skipped) as f64))?;
        if let (Some((id, _)), Some(s)) = (st.scale, &self.scaler) {
            run.put(Slot::Input(id), &scalar(s.scale))?;
        }
        run.put(Slot::Input(st.draw_input), &scalar(draw as f64))?;
        for (id, lr) in st.lr_inputs.iter().zip(lrs) {
            run.put(Slot::Input(*id), &scalar(*lr))?;
        }
        // Optimiser state and gradient sums are read where they live between steps.
        for (k, ids, _) in &st.updates {
            for (j, id) in ids.iter().enumerate() {
                run.read_input_from(*id, Slot::State(*k, j));
            }
        }
        for (i, (id, _)) in st.accum.iter().enumerate() {
            run.read_input_from(*id, Slot::Sum(i));
        }
        Ok(())
    }

    /// Let the runner consume, in the next run of `key`'s step, every slot that step replaces.
    fn donate_replaced(&mut self, key: &super::Shapes) {
        let st = &self.steps[key];
        let run = self.runner.as_mut();
        for (k, ids, _) in &st.updates {
            run.donate(Slot::Param(self.params[*k].id));
            (0..ids.len()).for_each(|j| run.donate(Slot::State(*k, j)));
        }
        st.buffer_updates.iter().for_each(|(id, _)| run.donate(Slot::Param(*id)));
    }

    /// The step just run's logged values, read; or with `put_off` kept on the device for a later
    /// read (and none returned). A step that reads its own first reads those put off before it
    /// (while it runs), so a value that is not finite names the first step it was.
    fn logged_of(&mut self, key: &super::Shapes, step: usize, put_off: bool) -> Result<Vec<(String, f64)>, RuntimeError> {
        if !put_off && !self.put_off.is_empty() {
            let losses = self.read_put_off()?;
            self.read_late.extend(losses);
        }
        let st = &self.steps[key];
        let run = self.runner.as_mut();
        let graph = &self.session.t.graph;
        if put_off {
            let k = self.put_off.len();
            for (j, (_, n)) in st.logged.iter().enumerate() {
                run.keep(graph, *n, Slot::Logged(k, j))?;
            }
            self.put_off.push((step, st.logged.iter().map(|(name, _)| name.clone()).collect()));
            return Ok(vec![]);
        }
        let mut logged = vec![];
        for (name, n) in &st.logged {
            logged.push((name.clone(), mean(&run.fetch(graph, *n)?)));
        }
        Ok(logged)
    }

    /// The losses (first logged values) of the steps whose reads were put off, oldest first;
    /// any logged value that is not finite stops the run naming its step, as it would have then.
    fn read_put_off(&mut self) -> Result<Vec<f64>, RuntimeError> {
        let mut losses = vec![];
        for (k, (step, names)) in std::mem::take(&mut self.put_off).into_iter().enumerate() {
            for (j, name) in names.into_iter().enumerate() {
                let v = mean(&self.runner.take(Slot::Logged(k, j))?);
                if !v.is_finite() {
                    return Err(err(format!("`{name}` became {v} at step {step}")));
                }
                if j == 0 {
                    losses.push(v);
                }
            }
        }
        Ok(losses)
    }
}
