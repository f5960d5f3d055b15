//! Division by a constant without a divide instruction, bit for bit the IEEE quotient.
//!
//! A vector division (`vdivps`) costs about 0.2 ns an element a core on the Xeon of issue 24
//! against 0.04 for a multiply-add: the guide's gelu, `x * 0.5 * (1 + erf(x / 1.41421))`, spent
//! much of its time in its two divisions (multiplying instead for `/ 1.41421`: 16M values in
//! 6.8-6.9 ms against 7.6-7.8 on the chunk interpreter, 1M in 0.43 against 0.47). For a divisor `y` with reciprocal `r = RN(1/y)`,
//! Markstein's correction `q = x*r; e = fma(-q, y, x); q' = fma(e, r, q)` gives the correctly
//! rounded `x / y` for most divisors, but not provably for all: so each divisor is checked
//! exhaustively, on every significand of x in [1, 2) (2^23 values), before it is used. Where
//! no value is subnormal and nothing overflows, scaling x by a power of two scales every step
//! exactly, so one binade covers every x with |x| in [2^-40, 2^40] (and |y| in the same range);
//! a slice with any other value (zero aside, which the multiply gets right, and infinities and
//! NaN) is divided as before. The results are therefore the same bits as the division's, on
//! every back end, whichever runs.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

const LO: f32 = 9.094_947e-13; // 2^-40
const HI: f32 = 1.099_511_6e12; // 2^40

/// The reciprocal to multiply by instead of dividing by `y`, when that gives the quotient's
/// bits for every x in range (checked once per divisor, then remembered).
pub(crate) fn reciprocal(y: f32) -> Option<f32> {
    static CHECKED: OnceLock<Mutex<HashMap<u32, Option<f32>>>> = OnceLock::new();
    // Each thread remembers the last divisor it asked about: a kernel asks once a chunk, and a
    // lock taken that often was contended (7% of the gelu's time).
    thread_local! {
        static LAST: std::cell::Cell<(u32, Option<f32>)> = const { std::cell::Cell::new((u32::MAX, None)) };
    }
    if !(LO..=HI).contains(&y.abs()) || !fma_available() {
        return None;
    }
    let (bits, last) = LAST.with(|l| l.get());
    if bits == y.to_bits() {
        return last;
    }
    let checked = CHECKED.get_or_init(Default::default);
    let known = checked.lock().expect("exact division").get(&y.to_bits()).copied();
    // Checked without the lock held (two threads may both check a new divisor; both agree).
    let r = known.unwrap_or_else(|| {
        let r = 1.0 / y;
        // SAFETY: the CPU has FMA (checked above).
        let exact = unsafe { every_significand_exact(y, r) };
        let r = exact.then_some(r);
        checked.lock().expect("exact division").insert(y.to_bits(), r);
        r
    });
    LAST.with(|l| l.set((y.to_bits(), r)));
    r
}

fn fma_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return crate::runtime::cpu::has_fma();
    #[cfg(not(target_arch = "x86_64"))]
    true
}

#[inline(always)]
fn corrected(x: f32, y: f32, r: f32) -> f32 {
    let q = x * r;
    let e = (-q).mul_add(y, x);
    e.mul_add(r, q)
}

/// Whether Markstein's correction gives `x / y` for every x in [1, 2): 2^23 quotients counted
/// without an early exit, so that the loop vectorises (about 10 ms a divisor; a divisor is
/// checked once a process).
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
unsafe fn every_significand_exact(y: f32, r: f32) -> bool {
    (0u32..1 << 23).step_by(1 << 12).all(|base| {
        let wrong: u32 = (base..base + (1 << 12))
            .map(|m| {
                let x = f32::from_bits(0x3F80_0000 | m);
                (corrected(x, y, r).to_bits() != (x / y).to_bits()) as u32
            })
            .sum();
        wrong == 0
    })
}

/// out[i] = a[i] / y through the reciprocal `r` (from `reciprocal(y)`) when every a[i] is in
/// range, else by division. Call it from a function built with FMA (the slice kernels are), or
/// `mul_add` becomes a library call.
#[inline(always)]
pub(crate) fn divide(a: &[f32], y: f32, r: f32, out: &mut [std::mem::MaybeUninit<f32>]) {
    let in_range = a.iter().fold(true, |ok, x| ok & ((LO..=HI).contains(&x.abs()) | (*x == 0.0)));
    if in_range {
        for (o, x) in out.iter_mut().zip(a) {
            // A zero's quotient is the (signed) product itself; the correction would lose its sign.
            let q = corrected(*x, y, r);
            o.write(if *x == 0.0 { *x * r } else { q });
        }
    } else {
        for (o, x) in out.iter_mut().zip(a) {
            o.write(*x / y);
        }
    }
}

#[cfg(test)]
mod tests {
    // 1.41421 is the guide's literal (bench/gelu_16m.dl), not √2.
    #[allow(clippy::approx_constant)]
    #[test]
    fn the_guide_divisor_is_exact_and_the_quotients_are_the_divisions_bits() {
        // 1.41421's reciprocal is exact on every significand (a C check of the same loop agrees:
        // no mismatch in 2^23), so on a CPU with FMA the fast path must be taken.
        let Some(r) = super::reciprocal(1.41421) else {
            assert!(!super::fma_available(), "1.41421 was not found exact");
            return;
        };
        let xs: Vec<f32> = (0..200_000u32)
            .map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761) & 0x7FFF_FFFF) * if i % 2 == 0 { 1.0 } else { -1.0 })
            .chain([0.0, -0.0, f32::INFINITY, f32::NAN, 1e-30, 3e38, f32::MIN_POSITIVE / 4.0])
            .collect();
        for chunk in xs.chunks(64) {
            let mut out = vec![std::mem::MaybeUninit::new(0f32); chunk.len()];
            super::divide(chunk, 1.41421, r, &mut out);
            for (x, o) in chunk.iter().zip(&out) {
                // SAFETY: `divide` wrote every element.
                let (got, want) = (unsafe { o.assume_init() }, x / 1.41421);
                assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{x:e}: {got:e} against {want:e}");
            }
        }
        // A divisor outside the checked range is never multiplied.
        assert!(super::reciprocal(1e20).is_none() && super::reciprocal(0.0).is_none() && super::reciprocal(f32::NAN).is_none());
    }
}
