//! exp, erf, tanh and log for f32 tensors: branch-free and without library calls, so the slice
//! loops over them vectorise (AVX2 and FMA where the CPU has them, see `elementwise::unary_slice`).
//! The polynomial and rational coefficients are minimax fits made by `scripts/fit_math.py`.
//! Each function's maximum error is measured by the tests below and listed in docs/precision.md.
//!
//! The JIT (jit/src/cranelift/math.rs) mirrors each of these operation for operation, with a fused
//! multiply-add exactly where these call `mul_add`, so compiled and interpreted kernels agree bit
//! for bit. Change one, change the other: `interpreter/tests/it/jit.rs` and the corpus compare them. Both read
//! their coefficients from `dlc_jit::coeffs`.

use dlc_jit::coeffs::*;

/// e^x: Cody-Waite reduction x = n ln2 + r (|r| <= ln2/2), a degree-6 Taylor polynomial for e^r,
/// and 2^n built from the exponent bits. Inputs are clamped to [-87.3, 88.7], and the result is 0
/// below and infinity above (PyTorch's denormals between -103.3 and -87.3 become 0). Relative
/// error below 3e-7 inside.
#[inline(always)]
pub(crate) fn exp32(x0: f32) -> f32 {
    let x = x0.clamp(-87.3, 88.7);
    // Round to nearest by adding and subtracting 1.5 * 2^23 (no libm call, so it vectorises).
    let n = (x * std::f32::consts::LOG2_E + 12_582_912.0) - 12_582_912.0;
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    // SAFETY: n is an integer in [-126, 128] after the clamp, so the conversion is exact (and,
    // unlike a saturating `as`, vectorises).
    let e = unsafe { n.to_int_unchecked::<i32>() };
    let y = p * f32::from_bits(((e + 127) as u32) << 23);
    // Outside the clamp: 0 below (a masked attention score of -1e9 must weigh nothing, not the
    // clamp's 1.2e-38), infinity above, as PyTorch. Selects, so the loop still vectorises.
    let y = if x0 < -87.3 { 0.0 } else { y };
    if x0 > 88.7 {
        f32::INFINITY
    } else {
        y
    }
}

/// `x P(x^2) / Q(x^2)` by Horner's rule with fused multiply-adds, clamped to [-1, 1]: the
/// form of erf and tanh, odd functions that saturate at ±1.
#[inline(always)]
fn odd_rational<const NP: usize, const NQ: usize>(x: f32, p: &[f32; NP], q: &[f32; NQ]) -> f32 {
    let z = x * x;
    let mut pz = p[NP - 1];
    for c in p[..NP - 1].iter().rev() {
        pz = pz.mul_add(z, *c);
    }
    let mut qz = q[NQ - 1];
    for c in q[..NQ - 1].iter().rev() {
        qz = qz.mul_add(z, *c);
    }
    (x * pz / qz).clamp(-1.0, 1.0)
}

/// erf (GELU's inner loop): a rational fit on [-3.9, 3.9], no `exp`, one division.
#[inline(always)]
pub(crate) fn erf32(x: f32) -> f32 {
    odd_rational(x.clamp(-ERF_CLAMP, ERF_CLAMP), &ERF_P, &ERF_Q)
}

/// tanh: a rational fit on [-9.1, 9.1].
#[inline(always)]
pub(crate) fn tanh32(x: f32) -> f32 {
    odd_rational(x.clamp(-TANH_CLAMP, TANH_CLAMP), &TANH_P, &TANH_Q)
}

/// Natural log: x = 2^e m with m in [sqrt(1/2), sqrt(2)), log x = e ln2 + log(1 + (m - 1)).
/// Subnormals are scaled by 2^23 first; 0 gives -inf, negatives and NaN give NaN, +inf gives +inf.
#[inline(always)]
pub(crate) fn log32(x: f32) -> f32 {
    let tiny = x < f32::MIN_POSITIVE;
    let xs = if tiny { x * 8_388_608.0 } else { x };
    let bits = xs.to_bits() as i32;
    // The mantissa as a number in [1, 2), halved when above sqrt(2).
    let m = f32::from_bits(((bits & 0x007f_ffff) | 0x3f80_0000) as u32);
    let big = m > std::f32::consts::SQRT_2;
    let m = if big { m * 0.5 } else { m };
    let e = ((bits >> 23) & 0xff) - 127 + big as i32 - if tiny { 23 } else { 0 };
    let f = m - 1.0;
    let mut r = LOG_R[6];
    for c in LOG_R[..6].iter().rev() {
        r = r.mul_add(f, *c);
    }
    let f2 = f * f;
    let y = (f2 * f).mul_add(r, (-0.5f32).mul_add(f2, f));
    let ef = e as f32;
    let v = ef.mul_add(LN2_HI, ef.mul_add(LN2_LO, y));
    if x == 0.0 {
        f32::NEG_INFINITY
    } else if x.is_nan() || x < 0.0 {
        f32::NAN
    } else if x == f32::INFINITY {
        x
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::super::elementwise::{as_uninit, erf64, unary_slice, Arg};
    use dlc_language::ir::UnaryOp;

    /// Worst absolute and relative error of `f` against `want` over `xs`; and the vectorised
    /// slice kernel of `op` must give the scalar function's bits.
    fn worst(op: UnaryOp, xs: &[f32], f: fn(f32) -> f32, want: fn(f64) -> f64) -> (f64, f64) {
        let (mut abs, mut rel) = (0.0f64, 0.0f64);
        for &x in xs {
            let (got, want) = (f(x) as f64, want(x as f64));
            abs = abs.max((got - want).abs());
            if want != 0.0 && want.is_finite() {
                rel = rel.max(((got - want) / want).abs());
            }
        }
        let mut sliced = vec![0f32; xs.len()];
        unary_slice(op, Arg::Slice(xs), as_uninit(&mut sliced));
        for (x, s) in xs.iter().zip(&sliced) {
            assert_eq!(s.to_bits(), f(*x).to_bits(), "{op:?}({x}) sliced");
        }
        // (docs/precision.md quotes these: cargo test -p dlc --lib math32 -- --nocapture)
        eprintln!("{op:?}: max absolute error {abs:.2e}, max relative error {rel:.2e} over {} points", xs.len());
        (abs, rel)
    }

    /// A dense grid over [-a, a] and tiny arguments of both signs (where a `1 - ...` form would
    /// lose every digit).
    fn grid(a: f32) -> Vec<f32> {
        let mut xs: Vec<f32> = (-60000..=60000).map(|i| i as f32 * a / 60000.0).collect();
        xs.extend((0..300).flat_map(|k| {
            let x = 10f32.powf(-(k as f32) / 10.0);
            [x, -x]
        }));
        xs
    }

    #[test]
    fn erf32_error_is_bounded() {
        let xs = grid(6.0);
        let (abs, rel) = worst(UnaryOp::Erf, &xs, super::erf32, erf64);
        assert!(abs < 3.0e-7 && rel < 3.0e-7, "max |erf32 - erf| = {abs:e}, max relative {rel:e}");
        assert!(xs.iter().all(|x| super::erf32(*x).abs() <= 1.0));
        assert!(super::erf32(f32::NAN).is_nan());
        assert_eq!((super::erf32(f32::INFINITY), super::erf32(f32::NEG_INFINITY)), (1.0, -1.0));
    }

    #[test]
    fn tanh32_error_is_bounded() {
        let xs = grid(12.0);
        let (abs, rel) = worst(UnaryOp::Tanh, &xs, super::tanh32, f64::tanh);
        assert!(abs < 3.0e-7 && rel < 3.0e-7, "max |tanh32 - tanh| = {abs:e}, max relative {rel:e}");
        assert!(super::tanh32(f32::NAN).is_nan());
        assert_eq!((super::tanh32(f32::INFINITY), super::tanh32(f32::NEG_INFINITY)), (1.0, -1.0));
    }

    #[test]
    fn log32_error_is_bounded() {
        // Every binade from the smallest subnormal to the largest finite, 4096 points in each,
        // and the neighbourhood of 1 (where log is near 0 and relative error is hardest).
        let mut xs: Vec<f32> = (-149..128).flat_map(|e| (0..4096).map(move |i| 2f32.powi(e) * (1.0 + i as f32 / 4096.0))).collect();
        xs.extend((1..20000).flat_map(|i| [1.0 + i as f32 * 1e-6, 1.0 - i as f32 * 1e-6]));
        xs.retain(|x| x.is_finite() && *x > 0.0);
        let (_, rel) = worst(UnaryOp::Log, &xs, super::log32, f64::ln);
        assert!(rel < 2.5e-7, "max relative error of log32 = {rel:e}");
        assert_eq!(super::log32(1.0), 0.0);
        assert_eq!(super::log32(0.0), f32::NEG_INFINITY);
        assert_eq!(super::log32(f32::INFINITY), f32::INFINITY);
        assert!(super::log32(-1.0).is_nan() && super::log32(f32::NAN).is_nan());
    }

    #[test]
    fn exp32_error_is_bounded() {
        let xs: Vec<f32> = (-8700..=8800).map(|i| i as f32 / 100.0).collect();
        let (_, rel) = worst(UnaryOp::Exp, &xs, super::exp32, f64::exp);
        assert!(rel < 3.0e-7, "max relative error of exp32 = {rel:e}");
    }
}
