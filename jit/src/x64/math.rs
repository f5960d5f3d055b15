//! exp, erf, tanh and log in AVX-512, operation for operation the interpreter's f32 definitions
//! (interpreter/src/exec/math32.rs) as the Cranelift back end writes them (cranelift/math.rs):
//! the same roundings in the same order, a fused multiply-add exactly where those call
//! `mul_add`/`fma`, selects as opmask blends. Each returns a new register; the input is kept.

use super::asm::*;
use super::codegen::{keep, Gen, Src, R};
use crate::coeffs::*;

impl Gen {
    /// `x.clamp(lo, hi)` as Rust defines it (`x < lo` then `x > hi`, so NaN passes through):
    /// `vmaxps d, lo, x` is `lo > x ? lo : x` and gives its second operand, `x`, when either is
    /// NaN, and `vminps` likewise; two float ops where compare-and-blend takes four (the bounds
    /// are broadcast into a register first, a load).
    fn clamp(&mut self, x: R, lo: f32, hi: f32) -> R {
        let (lo, hi) = (self.c(lo), self.c(hi));
        let bound = self.alloc();
        let d = self.alloc();
        self.broadcast(bound, lo, None);
        self.op3(VMAXPS, d, bound, Src::Z(x), None);
        self.broadcast(bound, hi, None);
        self.op3(VMINPS, d, bound, Src::Z(d), None);
        self.release(bound);
        d
    }

    /// `exp32`: clamp, Cody-Waite reduction, degree-6 polynomial, 2^n from the exponent bits; 0
    /// below the clamp and infinity above.
    pub(super) fn exp32(&mut self, x0: R) -> R {
        let x = self.clamp(x0, -87.3, 88.7);
        let (log2e, magic) = (self.c(std::f32::consts::LOG2_E), self.c(12_582_912.0));
        let n = self.op3_new(VMULPS, x, Src::M(log2e));
        self.op3(VADDPS, n, n, Src::M(magic), None);
        self.op3(VSUBPS, n, n, Src::M(magic), None);
        let (hi, lo) = (self.c(0.693_145_75), self.c(1.428_606_8e-6));
        let h = self.op3_new(VMULPS, n, Src::M(hi));
        let r = self.op3_new(VSUBPS, x, Src::Z(h));
        self.op3(VMULPS, h, n, Src::M(lo), None);
        self.op3(VSUBPS, r, r, Src::Z(h), None);
        self.release(h);
        self.release(x);
        // p = 1 + r (1 + r (1/2 + r (1/6 + r (1/24 + r (1/120 + r / 720)))))
        let k = self.c(1.0f32 / 720.0);
        let q = self.op3_new(VMULPS, r, Src::M(k));
        for k in [1.0f32 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0] {
            let k = self.c(k);
            self.op3(VADDPS, q, q, Src::M(k), None);
            self.op3(VMULPS, q, r, Src::Z(q), None);
        }
        let one = self.c(1.0);
        self.op3(VADDPS, q, q, Src::M(one), None);
        // 2^n: (n as i32 + 127) << 23, in `r`'s register (r is done with).
        let e = r;
        self.op2(VCVTTPS2DQ, e, Src::Z(n), None);
        let bias = self.ci(127);
        self.op3(VPADDD, e, e, Src::M(bias), None);
        self.shift(6, e, e, 23);
        self.op3(VMULPS, q, q, Src::Z(e), None);
        self.release(e);
        self.release(n);
        let (lo, hi, zero, inf) = (self.c(-87.3), self.c(88.7), self.c(0.0), self.c(f32::INFINITY));
        self.cmp(0, x0, Src::M(lo), CMP_LT_OS);
        self.op3(VBLENDMPS, q, q, Src::M(zero), keep(0));
        self.cmp(0, x0, Src::M(hi), CMP_GT_OS);
        self.op3(VBLENDMPS, q, q, Src::M(inf), keep(0));
        q
    }

    /// c[0] + z (c[1] + z (...)), each step one fused multiply-add (`vfmadd213ps`).
    fn horner(&mut self, z: R, c: &[f32]) -> R {
        let acc = self.alloc();
        let top = self.c(c[c.len() - 1]);
        self.broadcast(acc, top, None);
        for k in c[..c.len() - 1].iter().rev() {
            let k = self.c(*k);
            self.op3(VFMADD213PS, acc, z, Src::M(k), None);
        }
        acc
    }

    /// `x P(x^2) / Q(x^2)`, clamped to [-1, 1].
    fn odd_rational(&mut self, x: R, p: &[f32], q: &[f32]) -> R {
        let z = self.op3_new(VMULPS, x, Src::Z(x));
        let pz = self.horner(z, p);
        let qz = self.horner(z, q);
        self.release(z);
        self.op3(VMULPS, pz, x, Src::Z(pz), None);
        self.op3(VDIVPS, pz, pz, Src::Z(qz), None);
        self.release(qz);
        let r = self.clamp(pz, -1.0, 1.0);
        self.release(pz);
        r
    }

    pub(super) fn erf32(&mut self, x: R) -> R {
        let c = self.clamp(x, -ERF_CLAMP, ERF_CLAMP);
        let r = self.odd_rational(c, &ERF_P, &ERF_Q);
        self.release(c);
        r
    }

    pub(super) fn tanh32(&mut self, x: R) -> R {
        let c = self.clamp(x, -TANH_CLAMP, TANH_CLAMP);
        let r = self.odd_rational(c, &TANH_P, &TANH_Q);
        self.release(c);
        r
    }

    /// `log32`: exponent and mantissa from the bits (subnormals scaled by 2^23 first), the
    /// mantissa moved into [sqrt(1/2), sqrt(2)), log(1 + f) by a polynomial, e ln2 added in two
    /// parts; then +inf, negatives and NaN, and 0, in that order of precedence.
    pub(super) fn log32(&mut self, x: R) -> R {
        let min_pos = self.c(f32::MIN_POSITIVE);
        self.cmp(0, x, Src::M(min_pos), CMP_LT_OS); // k1: tiny
        let scale = self.c(8_388_608.0);
        let xs = self.alloc();
        self.op2(VMOVAPS, xs, Src::Z(x), None);
        self.op3(VMULPS, xs, x, Src::M(scale), keep(0));
        let (mant_mask, one_bits) = (self.ci(0x007f_ffff), self.ci(0x3f80_0000));
        let m = self.op3_new(VPANDD, xs, Src::M(mant_mask));
        self.op3(VPORD, m, m, Src::M(one_bits), None);
        let sqrt2 = self.c(std::f32::consts::SQRT_2);
        self.cmp(1, m, Src::M(sqrt2), CMP_GT_OS); // k2: big
        let half = self.c(0.5);
        self.op3(VMULPS, m, m, Src::M(half), keep(1));
        // e = ((bits >> 23) & 0xff) - 127 + big - (tiny ? 23 : 0)
        let e = self.alloc();
        self.shift(4, e, xs, 23);
        self.release(xs);
        let (byte, bias, one_i, minus23) = (self.ci(0xff), self.ci(-127), self.ci(1), self.ci(-23));
        self.op3(VPANDD, e, e, Src::M(byte), None);
        self.op3(VPADDD, e, e, Src::M(bias), None);
        self.op3(VPADDD, e, e, Src::M(one_i), keep(1));
        self.op3(VPADDD, e, e, Src::M(minus23), keep(0));
        let one = self.c(1.0);
        let f = m;
        self.op3(VSUBPS, f, m, Src::M(one), None);
        let r = self.horner(f, &LOG_R);
        let f2 = self.op3_new(VMULPS, f, Src::Z(f));
        let f3 = self.op3_new(VMULPS, f2, Src::Z(f));
        let v = self.alloc();
        self.op2(VMOVAPS, v, Src::Z(f), None);
        let mhalf = self.c(-0.5);
        self.op3(VFMADD231PS, v, f2, Src::M(mhalf), None);
        self.op3(VFMADD231PS, v, f3, Src::Z(r), None);
        let ef = f2;
        self.op2(VCVTDQ2PS, ef, Src::Z(e), None);
        let (hi, lo) = (self.c(LN2_HI), self.c(LN2_LO));
        self.op3(VFMADD231PS, v, ef, Src::M(lo), None);
        self.op3(VFMADD231PS, v, ef, Src::M(hi), None);
        for t in [f, r, f2, f3, e] {
            self.release(t);
        }
        let (inf, zero, nan, ninf) = (self.c(f32::INFINITY), self.c(0.0), self.c(f32::NAN), self.c(f32::NEG_INFINITY));
        self.cmp(0, x, Src::M(inf), CMP_EQ_OQ);
        self.op2(VMOVAPS, v, Src::Z(x), keep(0));
        self.cmp(0, x, Src::M(zero), CMP_LT_OS);
        self.cmp(1, x, Src::Z(x), CMP_UNORD_Q);
        self.join_masks(false);
        self.op3(VBLENDMPS, v, v, Src::M(nan), keep(0));
        self.cmp(0, x, Src::M(zero), CMP_EQ_OQ);
        self.op3(VBLENDMPS, v, v, Src::M(ninf), keep(0));
        v
    }
}
