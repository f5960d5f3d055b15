//! Elementwise ops, split across cores with rayon when the tensor is large.

use super::math32::{erf32, exp32, log32, tanh32};
use crate::runtime::tensor::{round_f32, wrap_i64, Data, Tensor};
use crate::runtime::RuntimeError;
use dlc_language::ir::{BinaryOp, UnaryOp};
use dlc_language::types::DType;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::sync::Arc;

/// Below this many elements threads cost more than they save.
const PAR_MIN: usize = 1 << 15;

fn map<T: Copy + Send + Sync, U: Send>(v: &[T], f: impl Fn(T) -> U + Sync + Send) -> Vec<U> {
    if v.len() >= PAR_MIN {
        v.par_iter().map(|x| f(*x)).collect()
    } else {
        v.iter().map(|x| f(*x)).collect()
    }
}

fn zip<T: Copy + Send + Sync, U: Send>(a: &[T], b: &[T], f: impl Fn(T, T) -> U + Sync + Send) -> Vec<U> {
    if a.len() >= PAR_MIN {
        a.par_iter().zip(b.par_iter()).map(|(x, y)| f(*x, *y)).collect()
    } else {
        a.iter().zip(b.iter()).map(|(x, y)| f(*x, *y)).collect()
    }
}

pub fn erf64(x: f64) -> f64 {
    // W. J. Cody's rational approximations via libm-quality series: use the complementary form
    // for |x| > 0.5 for accuracy in the tails.
    libm_erf(x)
}

/// erf with ~1e-15 relative error (series for small |x|, continued fraction tail otherwise).
fn libm_erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let ax = x.abs();
    let r = if ax < 2.5 {
        // Maclaurin series: erf(x) = 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1))
        let mut sum = 0.0;
        let mut term = ax;
        let x2 = ax * ax;
        let mut n = 0.0;
        loop {
            let t = term / (2.0 * n + 1.0);
            sum += t;
            if t.abs() < 1e-17 * sum.abs() {
                break;
            }
            n += 1.0;
            term *= -x2 / n;
            if n > 200.0 {
                break;
            }
        }
        sum * std::f64::consts::FRAC_2_SQRT_PI
    } else if ax < 6.0 {
        // erfc continued fraction (Lentz).
        let x2 = ax * ax;
        let mut f = ax;
        let tiny = 1e-300;
        let mut c = f;
        let mut d = 0.0;
        for k in 1..300 {
            let a = k as f64 / 2.0;
            d = ax + a * d;
            d = if d.abs() < tiny { tiny } else { d };
            c = ax + a / c;
            c = if c.abs() < tiny { tiny } else { c };
            d = 1.0 / d;
            let delta = c * d;
            f *= delta;
            if (delta - 1.0).abs() < 1e-16 {
                break;
            }
        }
        let erfc = (-x2).exp() / (f * std::f64::consts::PI.sqrt());
        1.0 - erfc
    } else {
        1.0
    };
    if x < 0.0 {
        -r
    } else {
        r
    }
}

fn unary_f64(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Recip => 1.0 / x,
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Erf => erf64(x),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Not => (x == 0.0) as i64 as f64,
    }
}

pub(crate) fn unary_f32(op: UnaryOp, x: f32) -> f32 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Exp => exp32(x),
        UnaryOp::Log => log32(x),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Recip => 1.0 / x,
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tanh => tanh32(x),
        UnaryOp::Erf => erf32(x),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Not => (x == 0.0) as i32 as f32,
    }
}

pub fn unary(op: UnaryOp, x: &Tensor) -> Tensor {
    let d = x.dtype;
    let data = match &x.data {
        // f32 through the vectorised slice kernel (erf's fused multiply-adds are instructions
        // there, library calls in a scalar closure), a block per task.
        Data::F32(v) if d == DType::F32 => {
            let mut out = vec![0f32; v.len()];
            let block = PAR_MIN / 4;
            if v.len() >= PAR_MIN {
                out.par_chunks_mut(block).zip(v.par_chunks(block)).for_each(|(o, x)| unary_slice(op, Arg::Slice(x), as_uninit(o)));
            } else {
                unary_slice(op, Arg::Slice(v), as_uninit(&mut out));
            }
            Data::F32(Arc::new(out))
        }
        Data::F32(v) => Data::F32(Arc::new(map(v, |a| round_f32(d, unary_f32(op, a))))),
        Data::F64(v) => Data::F64(Arc::new(map(v, |a| unary_f64(op, a)))),
        // Bytes from a data set compute as the integers they stand for.
        Data::U8(_) => return unary(op, &x.clone().widened()),
        Data::I64(v) => Data::I64(Arc::new(map(v, |a| match op {
            UnaryOp::Neg => wrap_i64(d, a.wrapping_neg()),
            UnaryOp::Abs => wrap_i64(d, a.wrapping_abs()),
            UnaryOp::Not => (a == 0) as i64,
            // Float ops are never built on integers (the tracer casts first).
            _ => unary_f64(op, a as f64) as i64,
        }))),
    };
    Tensor { dtype: d, shape: x.shape.clone(), data }
}

macro_rules! float_binop {
    ($op:expr, $x:expr, $y:expr) => {
        match $op {
            BinaryOp::Add => $x + $y,
            BinaryOp::Sub => $x - $y,
            BinaryOp::Mul => $x * $y,
            BinaryOp::Div => $x / $y,
            // Python/PyTorch remainder: the sign of the divisor.
            BinaryOp::Mod => {
                let r = $x % $y;
                if r != 0.0 && ((r < 0.0) != ($y < 0.0)) {
                    r + $y
                } else {
                    r
                }
            }
            BinaryOp::Pow => $x.powf($y),
            BinaryOp::Max => {
                if $x.is_nan() || $x > $y {
                    $x
                } else {
                    $y
                }
            }
            BinaryOp::Min => {
                if $x.is_nan() || $x < $y {
                    $x
                } else {
                    $y
                }
            }
            BinaryOp::CmpLt => ($x < $y) as i32 as _,
            BinaryOp::CmpLe => ($x <= $y) as i32 as _,
            BinaryOp::CmpEq => ($x == $y) as i32 as _,
            BinaryOp::CmpNe => ($x != $y) as i32 as _,
            BinaryOp::And => (($x != 0.0) && ($y != 0.0)) as i32 as _,
            BinaryOp::Or => (($x != 0.0) || ($y != 0.0)) as i32 as _,
        }
    };
}

/// One f32 binary op, exactly as the eager kernels compute it (comparisons give 0 or 1).
pub(crate) fn binop_f32(op: BinaryOp, x: f32, y: f32) -> f32 {
    float_binop!(op, x, y)
}

/// `out` as memory a slice kernel may write without reading (always sound: every f32 is a valid
/// `MaybeUninit<f32>`, and the kernels only write initialised values).
pub(crate) fn as_uninit(out: &mut [f32]) -> &mut [MaybeUninit<f32>] {
    // SAFETY: same layout; writing an f32 through the result leaves `out` initialised.
    unsafe { &mut *(out as *mut [f32] as *mut [MaybeUninit<f32>]) }
}

/// Every element of `out` set to `v`.
pub(crate) fn fill(out: &mut [MaybeUninit<f32>], v: f32) {
    out.iter_mut().for_each(|o| {
        o.write(v);
    });
}

/// `out = src` (the first `out.len()` values).
pub(crate) fn write_all(out: &mut [MaybeUninit<f32>], src: &[f32]) {
    for (o, v) in out.iter_mut().zip(src) {
        o.write(*v);
    }
}

/// An operand of a slice kernel: one value per element, or one value for all of them (a
/// constant or a broadcast scalar, which then needs no buffer of its own).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg<'a> {
    Slice(&'a [f32]),
    Scalar(f32),
}

/// `out[i] = op(a[i], b[i])` (a scalar operand is the same at every i; `out` is written, never
/// read, so it may be uninitialised), with the op chosen once
/// outside the loop so the loop vectorises, compiled for AVX-512 and AVX2 as well, the widest
/// the CPU has chosen at run time. Results are the same either way (no floating-point
/// contraction), only faster.
pub(crate) fn binary_slice(op: BinaryOp, a: Arg, b: Arg, out: &mut [MaybeUninit<f32>]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: the CPU has AVX-512 F/VL, AVX2 and FMA.
        return unsafe { binary_slice_avx512(op, a, b, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { binary_slice_avx2(op, a, b, out) };
    }
    binary_slice_generic(op, a, b, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn binary_slice_avx2(op: BinaryOp, a: Arg, b: Arg, out: &mut [MaybeUninit<f32>]) {
    binary_slice_generic(op, a, b, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn binary_slice_avx512(op: BinaryOp, a: Arg, b: Arg, out: &mut [MaybeUninit<f32>]) {
    binary_slice_generic(op, a, b, out)
}

/// `out[i] = a[i] / y` for a divisor that is a constant of the program (never a value that
/// changes from step to step: each new divisor is checked once, exhaustively, in exact_div.rs),
/// multiplying by its reciprocal where that gives the division's bits, on the widest build the
/// CPU has.
pub(crate) fn div_by_const(a: &[f32], y: f32, out: &mut [MaybeUninit<f32>]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(r) = super::exact_div::reciprocal(y) {
        #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
        unsafe fn wide(a: &[f32], y: f32, r: f32, out: &mut [MaybeUninit<f32>]) {
            super::exact_div::divide(a, y, r, out)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(a: &[f32], y: f32, r: f32, out: &mut [MaybeUninit<f32>]) {
            super::exact_div::divide(a, y, r, out)
        }
        // SAFETY: `reciprocal` answers only where the CPU has FMA; AVX-512 and AVX2 as checked.
        unsafe {
            if has_avx512() {
                return wide(a, y, r, out);
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return avx2(a, y, r, out);
            }
        }
    }
    binary_slice(BinaryOp::Div, Arg::Slice(a), Arg::Scalar(y), out)
}

#[cfg(target_arch = "x86_64")]
pub(crate) use crate::runtime::cpu::has_avx512;

#[inline(always)]
fn binary_slice_generic(op: BinaryOp, a: Arg, b: Arg, out: &mut [MaybeUninit<f32>]) {
    // One loop per (operand kinds, op): `$f` is the op, the arms below the operand kinds.
    macro_rules! by_op {
        ($each:ident) => {
            match op {
                BinaryOp::Add => $each!(|x: f32, y: f32| x + y),
                BinaryOp::Sub => $each!(|x: f32, y: f32| x - y),
                BinaryOp::Mul => $each!(|x: f32, y: f32| x * y),
                BinaryOp::Div => $each!(|x: f32, y: f32| x / y),
                _ => $each!(|x, y| binop_f32(op, x, y)),
            }
        };
    }
    match (a, b) {
        (Arg::Slice(a), Arg::Slice(b)) => {
            macro_rules! each {
                ($f:expr) => {
                    for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
                        o.write($f(*x, *y));
                    }
                };
            }
            by_op!(each)
        }
        (Arg::Slice(a), Arg::Scalar(y)) => {
            macro_rules! each {
                ($f:expr) => {
                    for (o, x) in out.iter_mut().zip(a) {
                        o.write($f(*x, y));
                    }
                };
            }
            by_op!(each)
        }
        (Arg::Scalar(x), Arg::Slice(b)) => {
            macro_rules! each {
                ($f:expr) => {
                    for (o, y) in out.iter_mut().zip(b) {
                        o.write($f(x, *y));
                    }
                };
            }
            by_op!(each)
        }
        (Arg::Scalar(x), Arg::Scalar(y)) => fill(out, binop_f32(op, x, y)),
    }
}

/// `out[i] = op(x[i])`, with the op chosen once outside the loop; AVX2 and FMA when the CPU has
/// them (erf's `mul_add` must be one instruction, not a libm call).
pub(crate) fn unary_slice(op: UnaryOp, x: Arg, out: &mut [MaybeUninit<f32>]) {
    let x = match x {
        Arg::Slice(x) => x,
        Arg::Scalar(v) => return fill(out, unary_f32(op, v)),
    };
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: the CPU has AVX-512 F/VL, AVX2 and FMA.
        return unsafe { unary_slice_avx512(op, x, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe { unary_slice_avx2(op, x, out) };
    }
    unary_slice_generic(op, x, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn unary_slice_avx2(op: UnaryOp, x: &[f32], out: &mut [MaybeUninit<f32>]) {
    unary_slice_generic(op, x, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn unary_slice_avx512(op: UnaryOp, x: &[f32], out: &mut [MaybeUninit<f32>]) {
    unary_slice_generic(op, x, out)
}

#[inline(always)]
fn unary_slice_generic(op: UnaryOp, x: &[f32], out: &mut [MaybeUninit<f32>]) {
    macro_rules! each {
        ($f:expr) => {
            for (o, a) in out.iter_mut().zip(x) {
                o.write($f(*a));
            }
        };
    }
    match op {
        UnaryOp::Neg => each!(|a: f32| -a),
        UnaryOp::Exp => each!(exp32),
        UnaryOp::Tanh => each!(tanh32),
        UnaryOp::Log => each!(log32),
        UnaryOp::Erf => each!(erf32),
        UnaryOp::Abs => each!(|a: f32| a.abs()),
        UnaryOp::Sqrt => each!(|a: f32| a.sqrt()),
        UnaryOp::Recip => each!(|a: f32| 1.0 / a),
        _ => each!(|a| unary_f32(op, a)),
    }
}

/// One integer op on one pair of values: the definition `int_binary`'s loops follow (and are
/// tested against), and what it runs for the ops that can fail.
fn int_binop(op: BinaryOp, x: i64, y: i64) -> Result<i64, RuntimeError> {
    Ok(match op {
        BinaryOp::Add => x.wrapping_add(y),
        BinaryOp::Sub => x.wrapping_sub(y),
        BinaryOp::Mul => x.wrapping_mul(y),
        BinaryOp::Div => {
            if y == 0 {
                return Err(RuntimeError::Unsupported("integer division by zero".into()));
            }
            x.wrapping_div(y)
        }
        BinaryOp::Mod => {
            if y == 0 {
                return Err(RuntimeError::Unsupported("integer modulo by zero".into()));
            }
            let r = x.wrapping_rem(y);
            if r != 0 && ((r < 0) != (y < 0)) {
                r + y
            } else {
                r
            }
        }
        BinaryOp::Pow => {
            if y < 0 {
                return Err(RuntimeError::Unsupported("integers cannot be raised to a negative power".into()));
            }
            x.wrapping_pow(y.min(u32::MAX as i64) as u32)
        }
        BinaryOp::Max => x.max(y),
        BinaryOp::Min => x.min(y),
        BinaryOp::CmpLt => (x < y) as i64,
        BinaryOp::CmpLe => (x <= y) as i64,
        BinaryOp::CmpEq => (x == y) as i64,
        BinaryOp::CmpNe => (x != y) as i64,
        BinaryOp::And => (x != 0 && y != 0) as i64,
        BinaryOp::Or => (x != 0 || y != 0) as i64,
    })
}

fn is_cmp(op: BinaryOp) -> bool {
    matches!(op, BinaryOp::CmpLt | BinaryOp::CmpLe | BinaryOp::CmpEq | BinaryOp::CmpNe)
}

/// `a op b` for equal shapes (the tracer inserted the broadcasts). Comparisons give bool.
pub fn binary(op: BinaryOp, a: &Tensor, b: &Tensor, out: DType) -> Result<Tensor, RuntimeError> {
    let d = a.dtype;
    let data = match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => {
            if is_cmp(op) {
                Data::I64(Arc::new(zip(x, y, |p, q| {
                    let r: f32 = float_binop!(op, p, q);
                    r as i64
                })))
            } else {
                Data::F32(Arc::new(zip(x, y, |p, q| round_f32(d, float_binop!(op, p, q)))))
            }
        }
        (Data::F64(x), Data::F64(y)) => {
            if is_cmp(op) {
                Data::I64(Arc::new(zip(x, y, |p, q| {
                    let r: f64 = float_binop!(op, p, q);
                    r as i64
                })))
            } else {
                Data::F64(Arc::new(zip(x, y, |p, q| float_binop!(op, p, q))))
            }
        }
        (Data::I64(x), Data::I64(y)) => Data::I64(Arc::new(int_binary(op, x, y, out)?)),
        _ => return Err(RuntimeError::Unsupported(format!("binary op on mixed storage ({} and {})", a.dtype, b.dtype))),
    };
    Ok(Tensor { dtype: out, shape: a.shape.clone(), data })
}

/// Integer `x op y` stored as `out`: a loop of its own for each op that cannot fail (a match
/// an element kept the loop scalar: the cross-entropy one-hot's `[1024, 10]` comparison took
/// 42 µs of the bf16 MLP step, stop 49); division, modulo and powers value by value, as they
/// can fail.
fn int_binary(op: BinaryOp, x: &[i64], y: &[i64], out: DType) -> Result<Vec<i64>, RuntimeError> {
    use BinaryOp::*;
    let raw = match op {
        Add => zip(x, y, i64::wrapping_add),
        Sub => zip(x, y, i64::wrapping_sub),
        Mul => zip(x, y, i64::wrapping_mul),
        Max => zip(x, y, i64::max),
        Min => zip(x, y, i64::min),
        CmpLt => zip(x, y, |p, q| (p < q) as i64),
        CmpLe => zip(x, y, |p, q| (p <= q) as i64),
        CmpEq => zip(x, y, |p, q| (p == q) as i64),
        CmpNe => zip(x, y, |p, q| (p != q) as i64),
        And => zip(x, y, |p, q| (p != 0 && q != 0) as i64),
        Or => zip(x, y, |p, q| (p != 0 || q != 0) as i64),
        Div | Mod | Pow => return x.iter().zip(y).map(|(p, q)| int_binop(op, *p, *q).map(|v| wrap_i64(out, v))).collect(),
    };
    // 0 and 1 (comparisons, and, or) and i64 values are stored as they are.
    Ok(if out == DType::I64 || is_cmp(op) || matches!(op, And | Or) { raw } else { raw.into_iter().map(|v| wrap_i64(out, v)).collect() })
}

pub fn where_(c: &Tensor, a: &Tensor, b: &Tensor) -> Tensor {
    let cond: Vec<bool> = c.to_f64().iter().map(|v| *v != 0.0).collect();
    let data = match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => Data::F32(Arc::new(cond.iter().enumerate().map(|(i, c)| if *c { x[i] } else { y[i] }).collect())),
        (Data::F64(x), Data::F64(y)) => Data::F64(Arc::new(cond.iter().enumerate().map(|(i, c)| if *c { x[i] } else { y[i] }).collect())),
        (Data::I64(x), Data::I64(y)) => Data::I64(Arc::new(cond.iter().enumerate().map(|(i, c)| if *c { x[i] } else { y[i] }).collect())),
        _ => {
            let (x, y) = (a.to_f64(), b.to_f64());
            return Tensor::from_f64(a.dtype, a.shape.clone(), cond.iter().enumerate().map(|(i, c)| if *c { x[i] } else { y[i] }));
        }
    };
    Tensor { dtype: a.dtype, shape: a.shape.clone(), data }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every integer op's loop gives, value for value, what `int_binop` gives (wrapped to the
    /// stored type), over values past i32 and u8 and of both signs, long enough to run on
    /// rayon's threads; the ops that can fail still fail.
    #[test]
    fn integer_ops_equal_the_value_by_value_op() {
        use BinaryOp::*;
        let n = PAR_MIN + 37;
        let x: Vec<i64> = (0..n as i64).map(|i| (i * 7919) % 1001 - 500 + (i % 3) * (1 << 33)).collect();
        let y: Vec<i64> = (0..n as i64).map(|i| (i * 104_729) % 97 - 48).collect();
        // Divisors without zeros, exponents 0-4, for the ops that fail otherwise.
        let nonzero: Vec<i64> = y.iter().map(|q| if *q == 0 { 7 } else { *q }).collect();
        let small: Vec<i64> = y.iter().map(|q| q.rem_euclid(5)).collect();
        for op in [Add, Sub, Mul, Div, Mod, Pow, Max, Min, CmpLt, CmpLe, CmpEq, CmpNe, And, Or] {
            let y = match op {
                Div | Mod => &nonzero,
                Pow => &small,
                _ => &y,
            };
            for out in [DType::I64, DType::I32, DType::U8, DType::Bool] {
                let want: Vec<i64> = x.iter().zip(y).map(|(p, q)| wrap_i64(out, int_binop(op, *p, *q).expect("defined"))).collect();
                assert_eq!(int_binary(op, &x, y, out).expect("defined"), want, "{op:?} as {out:?}");
            }
        }
        // Division and modulo by zero (y holds zeros) and negative powers fail.
        assert!(int_binary(Div, &x, &y, DType::I64).is_err() && int_binary(Pow, &x, &y, DType::I64).is_err());
    }

    #[test]
    fn erf_matches_known_values() {
        // Reference values from Abramowitz & Stegun table 7.1.
        for (x, e) in
            [(0.0, 0.0), (0.5, 0.5204998778130465), (1.0, 0.8427007929497149), (2.0, 0.9953222650189527), (3.0, 0.9999779095030014)]
        {
            assert!((super::erf64(x) - e).abs() < 1e-14, "erf({x})");
            assert!((super::erf64(-x) + e).abs() < 1e-14, "erf(-{x})");
        }
    }
}
