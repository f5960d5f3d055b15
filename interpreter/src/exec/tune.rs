//! Choosing between a fused kernel's native code (AVX-512 or Cranelift, `dlc_jit::native`) and the chunk interpreter by
//! measuring both on its first launches (`Tune`), for elementwise regions, row kernels and sum
//! prologues alike; the choices persist in the tuning file (tune_store.rs).

/// The measured choice between a program's native code and the chunk interpreter: the first
/// `WARMUP` launches are not counted, the next `TRIALS` alternate between the two, and the one
/// with the faster best launch runs from then on. The best, not the total: on the shared VM a
/// launch now and then takes 10-15 ms longer (the step's own maximum shows it), and one such
/// launch in a total of three made the 2-core Zen 5 keep a `[1024, 512]` kernel interpreted
/// (native 15.8 ms in three launches against 1.75; native alone is about 0.1 ms a launch), which
/// cost the bf16 MLP step at batch 1024 0.4-0.5 ms in every later run of that build (stop 49).
/// Either computes the same bits (the JIT mirrors the interpreter op for op), so the choice
/// changes only the speed. On the AMD Zen 4 this was written on, Cranelift's 128-bit code ran
/// the MLP step's AdamW update in 0.71-1.35 ms against the interpreter's 1.10-1.59 ms (all 17
/// ops in registers), but the guide's gelu at 16M in 12.3 ms against 8.1 ms (its `erf` at 4
/// lanes against the interpreter's 16). The AVX-512 back end (16 lanes, every value in a
/// register) runs that gelu in 4.0-4.5 ms, and is what native means on CPUs with AVX-512F; the
/// measurement still decides per kernel.
pub struct Tune {
    /// Launches seen.
    runs: std::sync::atomic::AtomicU32,
    /// Each side's fastest measured launch (`u64::MAX` before its first).
    interp_ns: std::sync::atomic::AtomicU64,
    native_ns: std::sync::atomic::AtomicU64,
    /// 0 while measuring, 1 interpreter, 2 native.
    choice: std::sync::atomic::AtomicU8,
    /// The choice came from the tuning file (nothing was measured).
    stored: bool,
}

impl Default for Tune {
    fn default() -> Tune {
        Tune { runs: Default::default(), interp_ns: u64::MAX.into(), native_ns: u64::MAX.into(), choice: Default::default(), stored: false }
    }
}

impl Tune {
    /// A choice made by an earlier run.
    pub(crate) fn decided(native: bool) -> Tune {
        let t = Tune { stored: true, ..Tune::default() };
        t.choice.store(if native { 2 } else { 1 }, std::sync::atomic::Ordering::Relaxed);
        t
    }

    /// The choice: `Some(true)` native, `Some(false)` the interpreter, `None` while measuring.
    pub(crate) fn chosen(&self) -> Option<bool> {
        match self.choice.load(std::sync::atomic::Ordering::Relaxed) {
            1 => Some(false),
            2 => Some(true),
            _ => None,
        }
    }

    /// Whether the next launch runs native code: the choice, or while measuring every other
    /// launch after the warm-up.
    pub(crate) fn native_now(&self) -> bool {
        self.chosen().unwrap_or_else(|| self.runs.load(std::sync::atomic::Ordering::Relaxed) % 2 == 1)
    }

    /// A choice this run measured (not one read from the tuning file), to be saved.
    pub(crate) fn measured(&self) -> Option<super::tune_store::Choice> {
        use std::sync::atomic::Ordering::Relaxed;
        let native = self.chosen()?;
        (!self.stored).then(|| super::tune_store::Choice {
            native,
            interp_ns: self.interp_ns.load(Relaxed),
            native_ns: self.native_ns.load(Relaxed),
        })
    }

    /// Count a launch that took `ns` (its tasks' times summed) with `native` or not; after
    /// the trials, choose.
    pub(crate) fn record(&self, native: bool, ns: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.choice.load(Relaxed) != 0 {
            return;
        }
        let run = self.runs.fetch_add(1, Relaxed);
        if run < WARMUP {
            return;
        }
        if native { &self.native_ns } else { &self.interp_ns }.fetch_min(ns, Relaxed);
        if run + 1 == WARMUP + TRIALS {
            let faster_native = self.native_ns.load(Relaxed) < self.interp_ns.load(Relaxed);
            self.choice.store(if faster_native { 2 } else { 1 }, Relaxed);
        }
    }
}

const WARMUP: u32 = 2;
const TRIALS: u32 = 6;

/// Launches before a measured region's choice is made.
pub const TUNE_LAUNCHES: usize = (WARMUP + TRIALS) as usize;

/// Regions with at least this many elements are measured both ways (smaller ones stay
/// interpreted: a Cranelift compile costs 5-15 ms, more than they would ever save; the AVX-512
/// emitter's takes well under 1 ms, but the trials' alternation has its own cost).
pub const AUTOTUNE_MIN: usize = 1 << 16;

#[cfg(test)]
mod tests {
    use super::*;

    /// The launches of a measurement: warm-ups, then the trials alternating (interpreter first).
    fn measure(interp: &[u64], native: &[u64]) -> Tune {
        let t = Tune::default();
        for _ in 0..WARMUP {
            t.record(false, 1);
        }
        for i in 0..TRIALS as usize / 2 {
            t.record(false, interp[i]);
            t.record(true, native[i]);
        }
        t
    }

    /// One slow launch (a VM's preemption) does not decide: the faster best launch wins, and
    /// the choice keeps each side's best.
    #[test]
    fn one_outlier_launch_does_not_decide() {
        let t = measure(&[580_000, 590_000, 600_000], &[100_000, 15_000_000, 110_000]);
        assert_eq!(t.chosen(), Some(true));
        let c = t.measured().expect("measured");
        assert_eq!((c.interp_ns, c.native_ns), (580_000, 100_000));
        let t = measure(&[90_000, 95_000, 14_000_000], &[100_000, 101_000, 120_000]);
        assert_eq!(t.chosen(), Some(false));
        // Before the last trial there is no choice.
        let early = Tune::default();
        for _ in 0..WARMUP + TRIALS - 1 {
            early.record(true, 5);
        }
        assert_eq!(early.chosen(), None);
    }
}
