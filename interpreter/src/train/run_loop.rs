//! The training loop: epochs of optimiser steps (each `accumulate` micro-batches), with the
//! schedule's learning rates, logging, the progress line, evaluations, checkpoints, Ctrl-C and
//! the embedder's per-step callback. What is fixed before the first step is a [`Horizon`];
//! what changes as the run goes is a [`Progress`].

use super::evaluate::When;
use super::metrics::Metrics;
use super::observer::{Event, Observer};
use super::{checkpoint, err, schedule, Control, StepEvent, TrainReport, Trainer};
use crate::pipeline::{self, Batches, Element, Feed};
use crate::runtime::RuntimeError;
use dlc_language::eval::spec::{Every, Schedule};
use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// What the run knows before its first step.
struct Horizon {
    epochs: usize,
    max_steps: Option<usize>,
    log_every: Option<usize>,
    base_lrs: Vec<f64>,
    schedule: Option<Schedule>,
    /// Optimiser steps per epoch, micro-batches per step, and the schedule's total steps.
    per_epoch: usize,
    n_acc: usize,
    total: usize,
    checkpoint: Option<(PathBuf, Every)>,
    first_data_s: f64,
}

/// Where the run is.
struct Progress {
    step: usize,
    first_step: usize,
    samples: usize,
    started: Instant,
    report: TrainReport,
    /// What a step logs first (`loss`, or a custom step's first `log`): the epoch's mean is of it.
    loss_name: String,
    /// The last logged values read (a step whose read is put off shows these).
    last_logged: Vec<(String, f64)>,
    /// The steps' time blocked on the data feed, over the run.
    data_wait: Rc<Cell<Duration>>,
    /// The feed's worker threads for the next epoch (grown while the step waits for data).
    feed_workers: usize,
}

/// At most this many steps' logged values wait on the device for a read.
const PUT_OFF_MAX: usize = 1000;

impl Progress {
    fn samples_per_s(&self) -> f64 {
        self.samples as f64 / self.started.elapsed().as_secs_f64().max(1e-9)
    }
}

impl Horizon {
    /// The step the run stops after: `steps`, or the end of the last epoch if that comes first
    /// (steps are optimiser steps: with `accumulate = N`, N batches each).
    fn last_step(&self) -> usize {
        let by_epochs = self.per_epoch.saturating_mul(self.epochs.min(1 << 20));
        self.max_steps.map_or(by_epochs, |m| m.min(by_epochs))
    }
}

impl Trainer<'_> {
    pub(super) fn run_steps(&mut self) -> Result<TrainReport, RuntimeError> {
        // Nothing is read or written before it is clear this run may write where it would.
        self.claim_run_files()?;
        let (step, start_epoch) = self.resume()?;
        if self.opts.resume.is_some() && (self.spec.steps.is_some_and(|m| step >= m) || self.spec.epochs.is_some_and(|e| start_epoch >= e))
        {
            return Ok(TrainReport { steps: step, already_finished: true, ..Default::default() });
        }
        // Every rank starts from rank 0's parameters and state (its init, or what it resumed).
        self.broadcast_replicas()?;
        let data_started = Instant::now();
        let first = self.epoch_batches(0)?;
        let first_data_s = data_started.elapsed().as_secs_f64();
        let h = self.horizon(first.len(), first_data_s)?;
        // Opened once the data have loaded: a run that cannot start writes nothing.
        // Written once, by rank 0; a resumed run's lines follow a `resumed` line.
        self.metrics = Metrics::open(self.metrics_path().filter(|_| self.world.is_root()))?;
        if let Some(dir) = self.opts.resume.clone() {
            self.metrics.event(&Event::Resumed { dir: &dir, step });
        }
        let skip_in_epoch = if self.opts.resume.is_some() { step.saturating_sub(start_epoch * h.per_epoch) } else { 0 };
        // Epoch 0's batches were read to size the schedule; a resumed run starts elsewhere.
        let mut batches = if start_epoch == 0 { Some(first) } else { None };
        if h.max_steps.is_some_and(|m| step >= m) || start_epoch >= h.epochs {
            return Ok(TrainReport { steps: step, ..Default::default() });
        }
        let mut p = Progress {
            step,
            first_step: step,
            samples: 0,
            started: Instant::now(),
            report: TrainReport::default(),
            loss_name: String::new(),
            last_logged: vec![],
            data_wait: Rc::default(),
            feed_workers: pipeline::default_workers(),
        };
        for epoch in start_epoch..h.epochs {
            let skip = if epoch == start_epoch { skip_in_epoch } else { 0 };
            if self.epoch(&h, &mut p, epoch, skip, batches.take())? {
                break;
            }
        }
        p.report.steps = p.step;
        if self.opts.tuning_file {
            // Losing the choices costs a measurement next run, nothing more: say so, go on.
            if let Err(e) = self.kernels.save_tuning() {
                self.emit(&Event::Warning(&format!("autotuning's choices were not saved: {e}")));
            }
        }
        Ok(p.report)
    }

    /// With `--resume DIR`: the checkpoint restored; the step and epoch to go on from.
    fn resume(&mut self) -> Result<(usize, usize), RuntimeError> {
        let Some(dir) = self.opts.resume.clone() else { return Ok((0, 0)) };
        let ck = checkpoint::load(&dir).map_err(RuntimeError::Checkpoint)?;
        self.restore(&ck)?;
        self.emit(&Event::Resumed { dir: &dir, step: ck.step });
        Ok((ck.step, ck.epoch))
    }

    fn horizon(&self, first_batches: usize, first_data_s: f64) -> Result<Horizon, RuntimeError> {
        if first_batches == 0 {
            return Err(err("the training data pipeline yields no batches"));
        }
        let spec = &self.spec;
        let epochs = spec.epochs.unwrap_or(usize::MAX);
        let max_steps = spec.steps;
        // Optimiser steps per epoch: with `accumulate = N`, N batches make one step and a
        // last incomplete group of batches is dropped (like `batch(drop_last: true)`).
        let n_acc = spec.accumulate;
        let per_epoch = first_batches / n_acc;
        if per_epoch == 0 {
            return Err(err(format!("`accumulate = {n_acc}` needs at least {n_acc} batches per epoch; the data yields {first_batches}")));
        }
        // The schedule's horizon comes from the recipe as written, not from `--set`: a run split
        // with `--set epochs=1` and `--resume` follows the same learning rates as one whole run.
        let total = spec
            .declared_steps
            .or_else(|| spec.declared_epochs.map(|e| e * per_epoch))
            .unwrap_or_else(|| max_steps.unwrap_or(per_epoch.saturating_mul(epochs.min(1 << 20))));
        Ok(Horizon {
            epochs,
            max_steps,
            log_every: spec.log_every,
            base_lrs: self.groups.iter().map(|g| g.lr()).collect(),
            schedule: spec.schedule,
            per_epoch,
            n_acc,
            total,
            // Relative to the program's folder, whatever the working directory (crate::paths).
            checkpoint: self.checkpoint_dir().zip(spec.checkpoint.as_ref().map(|c| c.1)),
            first_data_s,
        })
    }

    /// One epoch, its first `skip` steps skipped (a resumed run); true when the run stops.
    fn epoch(&mut self, h: &Horizon, p: &mut Progress, epoch: usize, skip: usize, ready: Option<Batches>) -> Result<bool, RuntimeError> {
        // The epoch's data are prepared before its steps (on all cores); the time is reported
        // beside the epoch's, so a data-bound run shows itself.
        let data_started = Instant::now();
        // The run's first epoch reports what preparing its data left out, too.
        let first_of_run = ready.is_some();
        let (data, data_s) = match ready {
            Some(b) if epoch == 0 => (b, h.first_data_s),
            _ => (self.epoch_batches(epoch as u64)?, data_started.elapsed().as_secs_f64()),
        };
        let mut epoch_loss = (0.0, 0usize);
        let epoch_started = Instant::now();
        // The batches are made on worker threads ahead of the step (pipeline/feed.rs).
        let ahead = pipeline::prefetch_depth(&self.pipeline).unwrap_or(pipeline::DEFAULT_AHEAD);
        let waited_before = p.data_wait.get();
        let skipped_before = if first_of_run { 0 } else { self.skipped_elements().0 };
        let pin = self.runner.page_lock();
        let feed = Feed::start(data, skip * h.n_acc, p.feed_workers, ahead, p.data_wait.clone(), pin);
        let mut data = if self.opts.one_batch { feed.repeat_first() } else { feed }.peekable();
        for _ in skip..h.per_epoch {
            // (The losses of the steps read now: none when this step's read is put off.)
            let (losses, stop) = self.step(h, p, epoch, &mut data)?;
            for loss in losses {
                epoch_loss = (epoch_loss.0 + loss, epoch_loss.1 + 1);
            }
            if stop {
                return Ok(true);
            }
        }
        let wait_s = (p.data_wait.get() - waited_before).as_secs_f64();
        if let (skipped, Some(first)) = self.skipped_elements() {
            if skipped > skipped_before {
                let n = skipped - skipped_before;
                let message = format!(
                    "epoch {}: {n} element{} could not be read and were left out (`on_error: \"skip\"`); the first: {first}",
                    epoch + 1,
                    if n == 1 { "" } else { "s" }
                );
                self.emit(&Event::Warning(&message));
            }
        }
        let mean = epoch_loss.0 / epoch_loss.1.max(1) as f64;
        let secs = epoch_started.elapsed().as_secs_f64();
        p.feed_workers = pipeline::next_workers(p.feed_workers, wait_s / secs.max(1e-9));
        let loss_scale = self.loss_scale();
        let loss_name = &p.loss_name;
        self.emit(&Event::EpochDone {
            epoch: epoch + 1,
            step: p.step,
            steps: epoch_loss.1,
            loss_name,
            mean_loss: mean,
            secs,
            data_s,
            wait_s,
            loss_scale,
        });
        p.report.losses.push((p.step, mean));
        self.evaluate(epoch + 1, When::EpochEnd, p.step, &mut p.report)?;
        // Every N epochs, and after the last epoch whatever the interval.
        if let Some((dir, every)) = &h.checkpoint {
            if matches!(every, Every::Epochs(n) if (epoch + 1) % n == 0) || epoch + 1 == h.epochs {
                self.save(dir, p.step, epoch + 1)?;
            }
        }
        Ok(false)
    }

    /// Whether `step`'s logged values may stay on the device, read by a later step, so that the
    /// host queues the next step without waiting for this one (the tuning guide's "avoid
    /// unnecessary CPU-GPU synchronisation": a loss read every step is a `.item()` every step).
    /// Only on a GPU, and only where nothing needs them now: not a log, evaluation, checkpoint
    /// or last step, not the last of an epoch (its mean is printed), not under f16's loss
    /// scaling (its flag decides the step), data parallelism (the ranks average the values) or
    /// `bench` (it times each step to its end), not after a Ctrl-C.
    fn may_put_off(&self, h: &Horizon, p: &Progress, step: usize) -> bool {
        self.opts.device.is_gpu()
            && h.n_acc == 1
            && !self.parallel()
            && self.scaler.is_none()
            && self.opts.on_step.is_none()
            && step > p.first_step + 1
            && step % h.per_epoch != 0
            && h.max_steps != Some(step)
            && h.log_every.is_none_or(|n| step % n != 0)
            && !matches!(&h.checkpoint, Some((_, Every::Steps(n))) if step % n == 0)
            && !self.evaluation_due_at(step)
            && !self.asked_to_stop()
            && self.put_off.len() < PUT_OFF_MAX
    }

    /// Whether Ctrl-C has asked the run to stop.
    fn asked_to_stop(&self) -> bool {
        self.opts.interrupt.as_ref().is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// One optimiser step: its micro-batches, the values it logs (averaged across ranks), and
    /// what follows it. Returns the losses read at it (of steps whose reads were put off, then
    /// its own; none when its own read is put off) and whether the run stops after it.
    fn step(
        &mut self,
        h: &Horizon,
        p: &mut Progress,
        epoch: usize,
        data: &mut std::iter::Peekable<impl Iterator<Item = Result<Element, RuntimeError>>>,
    ) -> Result<(Vec<f64>, bool), RuntimeError> {
        p.step += 1;
        let step = p.step;
        let put_off = self.may_put_off(h, p, step);
        let before = self.runner.counters();
        let rates: Vec<f64> = h.base_lrs.iter().map(|lr| schedule::lr_at(h.schedule.as_ref(), *lr, step, h.total, h.per_epoch)).collect();
        // The logged values of a step are the means over its micro-batches.
        let mut logged: Vec<(String, f64)> = vec![];
        for micro in 0..h.n_acc {
            let batch = data.next().ok_or_else(|| err("the data pipeline yielded fewer batches than in epoch 1"))??;
            p.samples += batch.first().map(|t| t.shape.first().copied().unwrap_or(1)).unwrap_or(1);
            // Each rank draws its own random streams (dropout masks) for its examples.
            let draw = ((step - 1) * h.n_acc + micro) * self.world.size() + self.world.rank() + 1;
            // The next batch is made while this one's step runs (`Peekable` keeps it).
            let how = super::on_runner::BatchRun { step, draw, lrs: &rates, update: micro + 1 == h.n_acc, put_off };
            let vals = self.run_batch(batch, how, &mut || data.peek().and_then(|b| b.as_ref().ok()).cloned())?;
            let Some(vals) = vals else {
                // Put off (one micro-batch): the progress line shows the last values read.
                let last = p.last_logged.clone();
                self.progress(h, p, epoch, &last);
                self.count_steady(step - p.first_step, &before);
                return Ok((vec![], false));
            };
            if logged.is_empty() {
                logged = vals.into_iter().map(|(n, v)| (n, v / h.n_acc as f64)).collect();
            } else {
                logged.iter_mut().zip(vals).for_each(|(l, (_, v))| l.1 += v / h.n_acc as f64);
            }
        }
        // Across ranks: the logged values are the job's means, and a Ctrl-C on any rank stops
        // every rank after this same step.
        let interrupted = self.agree(&mut logged, self.asked_to_stop());
        self.count_steady(step - p.first_step, &before);
        let loss = logged[0].1;
        let mut losses = std::mem::take(&mut self.read_late);
        losses.push(loss);
        p.last_logged = logged.clone();
        if p.loss_name.is_empty() {
            p.loss_name = logged[0].0.clone();
        }
        if step == p.first_step + 1 {
            // Time to first step, data loading included (what a user waits for, and what
            // bench/compare.py sets beside PyTorch's).
            self.emit(&Event::FirstStep { step, data_s: h.first_data_s, since_start_s: crate::runtime::seconds_since_start() });
        }
        self.progress(h, p, epoch, &logged);
        let mut stop = h.max_steps == Some(step);
        if let Some(cb) = self.opts.on_step.as_mut() {
            let ev = StepEvent {
                step,
                epoch: epoch + 1,
                logged: logged.clone(),
                lr: rates.clone(),
                device: self.runner.counters(),
                data_wait_s: p.data_wait.get().as_secs_f64(),
            };
            stop |= cb(&ev) == Control::Stop;
        }
        if h.log_every.is_some_and(|n| step % n == 0) || stop {
            p.report.losses.push((step, loss));
            let samples_per_s = p.samples_per_s();
            self.emit(&Event::Logged { epoch: epoch + 1, step, logged: &logged, lr: rates[0], samples_per_s });
        }
        if !stop {
            self.evaluate(epoch + 1, When::Step(step), step, &mut p.report)?;
        }
        let done_epochs = if step % h.per_epoch == 0 { epoch + 1 } else { epoch };
        if interrupted {
            if let Some((dir, _)) = &h.checkpoint {
                self.save(dir, step, done_epochs)?;
            }
            self.emit(&Event::Interrupted { step });
            return Err(RuntimeError::Interrupted);
        }
        if let Some((dir, Every::Steps(n))) = &h.checkpoint {
            if step % n == 0 && !stop {
                self.save(dir, step, done_epochs)?;
            }
        }
        if stop {
            p.report.steps = step;
            self.evaluate(epoch + 1, When::Final, step, &mut p.report)?;
            if let Some((dir, _)) = &h.checkpoint {
                self.save(dir, step, done_epochs)?;
            }
        }
        Ok((losses, stop))
    }

    /// Where the run is, after every step (the console draws its progress bar from it).
    fn progress(&mut self, h: &Horizon, p: &Progress, epoch: usize, logged: &[(String, f64)]) {
        let secs_per_step = p.started.elapsed().as_secs_f64() / (p.step - p.first_step).max(1) as f64;
        let end = h.last_step();
        self.emit(&Event::Step {
            epoch: epoch + 1,
            step: p.step,
            total: end,
            done_in_epoch: p.step - epoch * h.per_epoch,
            per_epoch: h.per_epoch,
            logged,
            samples_per_s: p.samples_per_s(),
            eta_s: end.saturating_sub(p.step) as f64 * secs_per_step,
        });
    }
}
