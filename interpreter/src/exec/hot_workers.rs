//! Rayon's idle workers kept awake through a step and a little after it, as OpenMP's spin-wait
//! keeps PyTorch's. A worker that finds no work yields about 32 times and then sleeps on a futex;
//! waking it for the next parallel kernel costs an inter-processor interrupt, which on the 2-core
//! VM took 16-24 µs (the other half of a `rayon::join` started that long after the call when the
//! caller had worked alone for 20-500 µs first, against 0.13-0.3 µs with the worker awake), and a
//! step runs 20-40 parallel kernels with single-threaded ones between them.
//!
//! So a step started on a worker (`on_pool::run`) first sends every other worker a spinner: a
//! loop that runs whatever work the pool has (`rayon::yield_now`) and otherwise yields the core
//! to the OS (so a feed thread or the caller still runs there), until it has found nothing to do
//! for `linger` (`DLC_SPIN_US` microseconds, default 1000; 0 for none). One spinner a worker.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The spinners of one pool: how long each goes on without work, and which workers have one.
pub(super) struct Spinners {
    linger: Duration,
    spinning: Vec<AtomicBool>,
}

impl Spinners {
    /// For the pool the calling thread belongs to (or the global one).
    fn new(linger: Duration) -> Spinners {
        Spinners { linger, spinning: (0..rayon::current_num_threads()).map(|_| AtomicBool::new(false)).collect() }
    }

    /// The global pool's.
    pub(super) fn global() -> &'static Spinners {
        static GLOBAL: OnceLock<Spinners> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let us = std::env::var("DLC_SPIN_US").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
            Spinners::new(Duration::from_micros(us))
        })
    }

    /// How long a thread keeps looking for work before it sleeps (`DLC_SPIN_US`).
    pub(super) fn linger(&self) -> Duration {
        self.linger
    }

    /// Sends a spinner to every worker of the current pool but the calling one that has none.
    pub(super) fn wake(&'static self) {
        if self.linger.is_zero() || self.spinning.len() < 2 {
            return;
        }
        let me = rayon::current_thread_index();
        if self.spinning.iter().enumerate().all(|(i, f)| Some(i) == me || f.load(Ordering::Acquire)) {
            return;
        }
        rayon::spawn_broadcast(move |ctx| {
            let i = ctx.index();
            // The caller's own copy would spin inside its step's first wait.
            if Some(i) == me || self.spinning[i].swap(true, Ordering::AcqRel) {
                return;
            }
            let mut last_work = Instant::now();
            loop {
                match rayon::yield_now() {
                    Some(rayon::Yield::Executed) => last_work = Instant::now(),
                    _ if last_work.elapsed() > self.linger => break,
                    _ => std::thread::yield_now(),
                }
            }
            self.spinning[i].store(false, Ordering::Release);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Spinners {
        fn any_spinning(&self) -> bool {
            self.spinning.iter().any(|f| f.load(Ordering::Acquire))
        }
    }

    fn wait_until(what: impl Fn() -> bool) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if what() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }

    /// Woken from a worker, the other worker spins, runs the pool's work while it does (a join
    /// from the caller completes, its other half run there or on the caller), and stops once it
    /// has found no work for its linger; the caller's own worker never spins.
    #[test]
    fn a_woken_worker_spins_runs_work_and_stops_when_idle() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let spinners: &'static Spinners = Box::leak(Box::new(pool.install(|| Spinners::new(Duration::from_millis(20)))));
        let caller = pool.install(|| {
            spinners.wake();
            rayon::current_thread_index().unwrap()
        });
        assert!(wait_until(|| spinners.spinning[1 - caller].load(Ordering::Acquire)), "the other worker spins");
        assert!(!spinners.spinning[caller].load(Ordering::Acquire), "the caller's worker does not");
        let (a, b) = pool.install(|| rayon::join(|| (0..1000u64).sum::<u64>(), || (0..2000u64).sum::<u64>()));
        assert_eq!((a, b), (499_500, 1_999_000));
        assert!(wait_until(|| !spinners.any_spinning()), "the spinner stops after its linger without work");
    }

    /// With no linger, or one thread, nothing spins.
    #[test]
    fn no_linger_or_one_thread_sends_no_spinner() {
        for (threads, linger) in [(2, Duration::ZERO), (1, Duration::from_millis(20))] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let spinners: &'static Spinners = Box::leak(Box::new(pool.install(|| Spinners::new(linger))));
            pool.install(|| spinners.wake());
            std::thread::sleep(Duration::from_millis(5));
            assert!(!spinners.any_spinning());
        }
    }
}
