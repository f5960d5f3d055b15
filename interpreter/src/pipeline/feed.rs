//! The feed: an epoch's batches made on worker threads ahead of the step, through bounded
//! queues (PyTorch's DataLoader workers and `prefetch_factor`). A streaming epoch
//! (`Batches::Stream`) is split between the workers batch by batch (worker w makes batches
//! w, w + W, ...; the step reads them in order); any other epoch is stacked by one worker. The
//! step's time blocked on the feed is the epoch's data wait (`waited`), which the run reports.
//!
//! Dropping the feed stops its workers: each finds its queue closed at its next batch.

use super::{BatchIter, Batches, Element};
use crate::runner::pinned_batches::PageLock;
use crate::runtime::RuntimeError;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How far ahead, in batches, when the pipeline has no `prefetch(n)`: two, as DataLoader's
/// default `prefetch_factor`.
pub const DEFAULT_AHEAD: usize = 2;

/// Worker threads for a streaming epoch on this machine: a quarter of its cores (the step's
/// kernels use them all), at least one, at most eight.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get() / 4).clamp(1, 8)
}

/// The workers for the next epoch, given this one's: one more while the step waited for data
/// more than 5% of the epoch (`wait_fraction`), up to the machine's cores (at most eight), as
/// tf.data's AUTOTUNE grows a stage's parallelism while its consumer starves; never fewer. A
/// decode-bound pipeline (JPEG files) so gets the cores the step does not use, and a cheap one
/// keeps a single worker.
pub fn next_workers(workers: usize, wait_fraction: f64) -> usize {
    let most = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    if wait_fraction > 0.05 {
        (workers + 1).min(most.max(workers))
    } else {
        workers
    }
}

type Made = Result<Element, RuntimeError>;

/// `made`, its tensors first copied into `pin`'s page-locked memory.
fn pinned(made: Made, pin: &Option<Arc<dyn PageLock>>) -> Made {
    if let (Ok(e), Some(p)) = (&made, pin) {
        e.iter().for_each(|t| p.pin(t));
    }
    made
}

/// An epoch's batches from its workers, in order.
pub struct Feed {
    queues: Vec<Receiver<Made>>,
    next: usize,
    end: usize,
    /// Time the reader spent waiting for batches that were not ready, added to what the clock
    /// held when the feed started (a run's clock goes on across its epochs).
    waited: Rc<Cell<Duration>>,
    /// `repeat_first`: the first batch, handed back for every later step.
    first: Option<Element>,
    repeat: bool,
}

impl Feed {
    /// Start making `batches` from batch `skip` on, at most `ahead` batches ahead of the reader,
    /// adding the reader's waits to `waited`.
    /// `pin`: a device's page-locked pool, which each batch is copied into by the worker that
    /// made it (as DataLoader's `pin_memory` thread does), so that the step's thread uploads it
    /// without a copy of its own.
    pub fn start(
        batches: Batches,
        skip: usize,
        workers: usize,
        ahead: usize,
        waited: Rc<Cell<Duration>>,
        pin: Option<Arc<dyn PageLock>>,
    ) -> Feed {
        let end = batches.len();
        let ahead = ahead.max(1);
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            // A failed spawn leaves the queue closed: the reader then finds no batch and says so.
            let _ = std::thread::Builder::new().name(name).spawn(f);
        };
        let queues = match batches {
            Batches::Stream(plan) => {
                let w = workers.clamp(1, end.saturating_sub(skip).max(1));
                let per = ahead.div_ceil(w);
                (0..w)
                    .map(|k| {
                        let (tx, rx) = sync_channel::<Made>(per);
                        let plan = Arc::clone(&plan);
                        let pin = pin.clone();
                        spawn(
                            format!("dlc-data-{k}"),
                            Box::new(move || {
                                for b in (skip..end).filter(|b| b % w == k) {
                                    if tx.send(pinned(plan.batch(b), &pin)).is_err() {
                                        return;
                                    }
                                }
                            }),
                        );
                        rx
                    })
                    .collect()
            }
            other => {
                let (tx, rx) = sync_channel::<Made>(ahead);
                let it: BatchIter = other.into_iter();
                spawn(
                    "dlc-data".into(),
                    Box::new(move || {
                        for b in it.skip(skip) {
                            if tx.send(pinned(b, &pin)).is_err() {
                                return;
                            }
                        }
                    }),
                );
                vec![rx]
            }
        };
        Feed { queues, next: skip, end, waited, first: None, repeat: false }
    }

    /// This feed, handing back its first batch for every step after it (the same tensors), and
    /// its workers stopped once they have made it: `dlc bench --one-batch`, which times the
    /// step alone as a peer script stepping on one fixed batch does (the feed's work and a
    /// fresh batch's cache misses left out; docs/benchmarks.md measures what they cost).
    pub fn repeat_first(mut self) -> Feed {
        self.repeat = true;
        self
    }
}

impl Iterator for Feed {
    type Item = Made;
    fn next(&mut self) -> Option<Made> {
        if self.next >= self.end {
            return None;
        }
        if let Some(first) = &self.first {
            self.next += 1;
            return Some(Ok(first.clone()));
        }
        let q = &self.queues[self.next % self.queues.len()];
        let started = Instant::now();
        let got = match q.try_recv() {
            Ok(b) => Ok(b),
            Err(_) => q.recv(),
        };
        self.waited.set(self.waited.get() + started.elapsed());
        self.next += 1;
        let got = got.unwrap_or_else(|_| Err(RuntimeError::Unsupported("a data worker stopped before making its batch".into())));
        if let (true, Ok(batch)) = (self.repeat, &got) {
            self.first = Some(batch.clone());
            // Closed queues stop the workers at their next batch.
            self.queues.clear();
        }
        Some(got)
    }
}

#[cfg(test)]
mod tests {
    use super::{next_workers, Batches, Feed};
    use crate::runtime::tensor::Tensor;

    #[test]
    fn a_feed_repeating_its_first_batch_hands_it_back_for_every_step() {
        let batch = |i: usize| vec![Tensor::f32(vec![2], vec![i as f32, -(i as f32)])];
        let batches = Batches::Ready((1..=4).map(batch).collect());
        let seen: Vec<Vec<f64>> =
            Feed::start(batches, 0, 1, 2, Default::default(), None).repeat_first().map(|b| b.expect("a batch")[0].to_f64()).collect();
        assert_eq!(seen, vec![vec![1.0, -1.0]; 4], "four steps, each on the first batch");
        // Without it, the batches in order.
        let batches = Batches::Ready((1..=3).map(batch).collect());
        let firsts: Vec<f64> =
            Feed::start(batches, 0, 1, 2, Default::default(), None).map(|b| b.expect("a batch")[0].to_f64()[0]).collect();
        assert_eq!(firsts, vec![1.0, 2.0, 3.0]);
    }

    #[test]
    fn a_starved_step_grows_the_feed_up_to_the_cores_and_a_fed_one_does_not() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
        assert_eq!(next_workers(1, 0.04), 1);
        assert_eq!(next_workers(1, 0.2), 2.min(cores));
        let mut w = 1;
        for _ in 0..20 {
            w = next_workers(w, 1.0);
        }
        assert_eq!(w, cores);
        // Never fewer, even above the cap (a `prefetch` or embedder's choice is kept).
        assert_eq!(next_workers(12, 1.0), 12);
    }
}
