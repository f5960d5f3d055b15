//! A planned step's kernels run on one of rayon's worker threads, not on the thread that asked
//! for the step. A parallel kernel started from outside the pool injects its tasks and puts the
//! calling thread to sleep until the workers finish, then has to wake it: on the 2-core VM an
//! empty two-task `par_iter` cost 21-37 µs that way against 0.1-13 µs from a worker (median,
//! after 0-100 µs of the caller's own work), and a step runs 30 or so parallel kernels. From a
//! worker the kernel's first half runs on the caller itself and only the other worker is woken
//! (if it slept). So the whole step moves to a worker once, and the caller waits for it
//! (`wait`): a short step asleep through most of it and spinning through its expected end, so
//! that the caller is not woken from sleep once the step is done (that wake-up made gelu on 1M
//! values 0.113-0.116 ms a step instead of 0.098-0.101 in one `dlc bench` run of two or three).
//!
//! Not under an MPI launcher: the data-parallel step's all-reduces are started from inside the
//! step (`run_planned_with`'s `after`), and MPI is initialised for its main thread only. Not with
//! one thread either (nothing runs in parallel), nor from a worker already. `DLC_STEP_ON_POOL=0`
//! keeps the step on the calling thread (to measure the difference).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Whether this step should move to a worker.
pub(super) fn worthwhile() -> bool {
    static ALLOWED: OnceLock<bool> = OnceLock::new();
    rayon::current_thread_index().is_none()
        && rayon::current_num_threads() > 1
        && *ALLOWED
            .get_or_init(|| !crate::parallel::world::launched_by_mpi() && std::env::var("DLC_STEP_ON_POOL").map_or(true, |v| v != "0"))
}

/// A value moved to the worker and back while its owner waits.
struct Handed<T>(T);

// SAFETY: `run` hands the step's state (the executor, with its `Rc`s and caches) to one worker
// and does not return until that worker has stored the result and set the flag (a release store
// its acquire load reads), so the state is used by one thread at a time, in order.
unsafe impl<T> Send for Handed<T> {}

/// The flag the worker sets when the step is done, and the thread to wake if it sleeps.
struct Done {
    flag: AtomicBool,
    caller: Thread,
}

/// How long the last step took, in nanoseconds: when the caller next starts sleeping and
/// spinning (`wait`).
static LAST_STEP_NS: AtomicU64 = AtomicU64::new(0);

/// How much before a step's expected end the caller stops sleeping and starts spinning: the
/// sleep's timer may fire up to the kernel's 50 µs of timer slack late.
const SPIN_AHEAD: Duration = Duration::from_micros(150);

/// Steps expected to take at least this long are waited for asleep.
const SHORT_STEP: Duration = Duration::from_micros(500);

/// `f()` on a worker of rayon's global pool; the calling thread waits for it. A panic in `f`
/// resumes on the calling thread. The other workers are kept awake while it runs
/// (`hot_workers`): the wake-up this module saves the caller, they are spared between kernels.
pub(super) fn run<R>(f: impl FnOnce() -> R) -> R {
    let started = Instant::now();
    let done = Arc::new(Done { flag: AtomicBool::new(false), caller: std::thread::current() });
    let mut out: Option<std::thread::Result<R>> = None;
    let (job, slot, signal) = (Handed(f), Handed(&mut out as *mut Option<std::thread::Result<R>>), done.clone());
    let task: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
        let (job, slot) = (job, slot);
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            super::hot_workers::Spinners::global().wake();
            (job.0)()
        }));
        // SAFETY: `out` outlives the task: the caller reads it only after the flag below.
        unsafe { *slot.0 = Some(result) };
        signal.flag.store(true, Ordering::Release);
        // `signal` is this task's own reference: the caller may return as soon as the flag is
        // set, and nothing of its stack is touched after it.
        signal.caller.unpark();
    });
    // SAFETY: the task borrows `f`'s captures and `out` from this frame, and this function does
    // not return (or unwind: `wait` does not panic) before the task has set the flag, after its
    // last use of them (see the task).
    let task: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(task) };
    rayon::spawn(task);
    wait(&done, Duration::from_nanos(LAST_STEP_NS.load(Ordering::Relaxed)), super::hot_workers::Spinners::global().linger());
    LAST_STEP_NS.store(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    match out.take().expect("the step's task stored its result") {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Waits for `done`. A short step (expected under `SHORT_STEP`, from the last step's time): asleep
/// until `SPIN_AHEAD` before its expected end, then spinning (yielding the core to the workers
/// at each turn) until `linger` past that end, then asleep again. A thread woken from sleep
/// costs its wake-up (16-24 µs on the 2-core VM, as a worker's, see `hot_workers`) after the
/// step is done; one that spins sees the flag at once. A step shorter than `SPIN_AHEAD` (gelu on
/// 1M values, ~0.1 ms) is spun through. A longer step is waited for asleep: its wake-up is a
/// small share of it, and spinning through the end of each 2.2 ms gelu on 16M values left about
/// one `dlc bench` run in three at 4.7-4.9 ms a step throughout (none of 17 without that spin).
fn wait(done: &Done, expected: Duration, linger: Duration) {
    let t0 = Instant::now();
    // (A long step's caller sleeps until it is woken: a timer that woke it near the end took a
    // core from a worker, bf16 MLP b128 0.794-0.802 ms a step against 0.759-0.765.)
    let short = expected < SHORT_STEP && !linger.is_zero();
    let spin_from = expected.saturating_sub(SPIN_AHEAD);
    while !done.flag.load(Ordering::Acquire) {
        let now = t0.elapsed();
        if short && now < spin_from {
            std::thread::park_timeout(spin_from - now);
        } else if short && now < expected + linger {
            std::thread::yield_now();
        } else {
            std::thread::park();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The step's value comes back, its borrows of the caller's frame work, and its panic
    /// resumes on the caller.
    #[test]
    fn the_steps_value_and_panic_come_back_to_the_caller() {
        let mut log = vec![1];
        let got = run(|| {
            log.push(rayon::current_thread_index().is_some() as i32);
            log.iter().sum::<i32>()
        });
        assert_eq!((got, log), (2, vec![1, 1]), "the step ran on a worker, on the caller's state");
        let panicked = std::panic::catch_unwind(|| run(|| -> i32 { panic!("in the step") }));
        let message = panicked.expect_err("the panic came back");
        assert_eq!(message.downcast_ref::<&str>(), Some(&"in the step"));
    }

    /// Whether the flag is set while the caller sleeps (a long step, or no spin), spins, or
    /// sleeps again after its spin, `wait` returns within a few milliseconds of it.
    #[test]
    fn wait_returns_when_the_step_is_done_in_each_phase() {
        let cases = [
            (Duration::from_secs(60), Duration::from_micros(1000)), // a long step: asleep
            (Duration::ZERO, Duration::from_secs(60)),              // spinning
            (Duration::ZERO, Duration::ZERO),                       // no spin: asleep at once
            (Duration::ZERO, Duration::from_micros(1)),             // asleep after the spin
        ];
        for (expected, linger) in cases {
            let done = Arc::new(Done { flag: AtomicBool::new(false), caller: std::thread::current() });
            let signal = done.clone();
            let setter = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                signal.flag.store(true, Ordering::Release);
                signal.caller.unpark();
            });
            let t0 = Instant::now();
            wait(&done, expected, linger);
            let waited = t0.elapsed();
            assert!(done.flag.load(Ordering::Acquire), "returned before the flag ({expected:?}, {linger:?})");
            assert!(waited < Duration::from_secs(5), "waited {waited:?} ({expected:?}, {linger:?})");
            setter.join().unwrap();
        }
    }
}
