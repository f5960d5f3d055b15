//! What leaves the training loop: every line a run reports, its progress, its metrics file and
//! its checkpoint announcements go out as [`Event`]s to observers. `train/` prints nothing
//! itself; the command line's console (progress bar, log lines) and the metrics file
//! (`metrics.rs`) are observers, and so is any embedder's.

use super::Evaluation;
use std::path::Path;

/// Something that happened in a run. Rank 0 of a data-parallel job alone emits them.
#[derive(Debug)]
pub enum Event<'a> {
    /// `--resume DIR` restored a checkpoint written at `step`.
    Resumed { dir: &'a Path, step: usize },
    /// The first step finished: the data's loading time, and the time since the process started
    /// when the binary recorded it (what a user waits for).
    FirstStep { step: usize, data_s: f64, since_start_s: Option<f64> },
    /// An optimiser step finished (every step: an observer that draws decides how often).
    /// `total` is the step the run will stop after (under `steps`, `epochs` and `accumulate`
    /// alike: optimiser steps, not batches), `eta_s` the time to it.
    Step {
        epoch: usize,
        step: usize,
        total: usize,
        done_in_epoch: usize,
        per_epoch: usize,
        logged: &'a [(String, f64)],
        samples_per_s: f64,
        eta_s: f64,
    },
    /// A step the recipe's `log every N steps` asks for (and the last one).
    Logged { epoch: usize, step: usize, logged: &'a [(String, f64)], lr: f64, samples_per_s: f64 },
    /// An epoch ended: the mean over its steps of the first value a step logs (`loss`, or a
    /// custom step's first `log`), named; f16's loss scale and the steps it skipped so far.
    EpochDone {
        epoch: usize,
        step: usize,
        steps: usize,
        loss_name: &'a str,
        mean_loss: f64,
        secs: f64,
        /// Preparing the epoch's data before its first step.
        data_s: f64,
        /// The steps' time blocked on the data feed (batches not yet made by the workers).
        wait_s: f64,
        loss_scale: Option<(f64, usize)>,
    },
    /// An `evaluate ... every ...` clause ran after `step`.
    Evaluated { step: usize, evaluation: &'a Evaluation },
    /// A standalone `evaluate` recipe's metrics.
    EvaluatedRecipe { names: &'a [String], values: &'a [f64], examples: usize },
    /// A checkpoint was written (and its manifest replaced).
    CheckpointSaved { dir: &'a Path, step: usize },
    /// Ctrl-C stopped the run after `step`.
    Interrupted { step: usize },
    /// Something the user should hear that does not stop the run.
    Warning(&'a str),
}

/// Receives a run's events.
pub trait Observer {
    fn event(&mut self, e: &Event);
}

/// `1h02m`, `3m05s`, `42s`.
pub fn eta(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}
