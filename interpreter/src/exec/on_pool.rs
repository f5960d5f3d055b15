//! A planned step's kernels run on one of rayon's worker threads, not on the thread that asked
//! for the step. A parallel kernel started from outside the pool injects its tasks and puts the
//! calling thread to sleep until the workers finish, then has to wake it: on the 2-core VM an
//! empty two-task `par_iter` cost 21-37 µs that way against 0.1-13 µs from a worker (median,
//! after 0-100 µs of the caller's own work), and a step runs 30 or so parallel kernels. From a
//! worker the kernel's first half runs on the caller itself and only the other worker is woken
//! (if it slept). So the whole step moves to a worker once, for one wake-up a step.
//!
//! Not under an MPI launcher: the data-parallel step's all-reduces are started from inside the
//! step (`run_planned_with`'s `after`), and MPI is initialised for its main thread only. Not with
//! one thread either (nothing runs in parallel), nor from a worker already. `DLC_STEP_ON_POOL=0`
//! keeps the step on the calling thread (to measure the difference).

use std::sync::OnceLock;

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
// while the calling thread is blocked in `rayon::scope` until that worker is done, so the state
// is used by one thread at a time, and rayon's latch orders the worker's accesses between the
// caller's before and after.
unsafe impl<T> Send for Handed<T> {}

/// `f()` on a worker of rayon's global pool; the calling thread waits for it. A panic in `f`
/// resumes on the calling thread. The other workers are kept awake while it runs
/// (`hot_workers`): the wake-up this module saves the caller, they are spared between kernels.
pub(super) fn run<R>(f: impl FnOnce() -> R) -> R {
    let job = Handed(f);
    let out = rayon::scope(move |_| {
        let job = job;
        super::hot_workers::Spinners::global().wake();
        Handed((job.0)())
    });
    out.0
}
