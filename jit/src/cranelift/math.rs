//! Elementwise ops in Cranelift IR, for `f32` and `f32x4` alike. Each mirrors, operation for
//! operation, the interpreter's f32 definition (interpreter/src/exec/elementwise.rs: `binop_f32`,
//! `unary_f32`; interpreter/src/exec/math32.rs: `exp32`, `erf32`, `tanh32`, `log32`), so that
//! results are identical bit for bit.

use crate::coeffs::*;
use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{types, Block, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;
use dlc_language::ir::{BinaryOp, UnaryOp};
use std::collections::HashMap;

pub struct Emit<'a, 'b> {
    pub b: &'a mut FunctionBuilder<'b>,
    /// `F32` or `F32X4`.
    pub ty: Type,
    /// Constants already made, by (bits, vector), all defined at the top of `entry` so the loops
    /// do not rebuild them every iteration.
    pub consts: &'a mut HashMap<(u32, u8), Value>,
    pub entry: Block,
}

impl Emit<'_, '_> {
    fn vector(&self) -> bool {
        self.ty.is_vector()
    }
    fn int_ty(&self) -> Type {
        if self.vector() {
            types::I32X4
        } else {
            types::I32
        }
    }

    pub fn c(&mut self, v: f32) -> Value {
        self.constant(v.to_bits(), false)
    }
    fn ci(&mut self, v: i32) -> Value {
        self.constant(v as u32, true)
    }
    /// A float (or, with `int`, an i32) constant of this type, hoisted into the entry block.
    fn constant(&mut self, bits: u32, int: bool) -> Value {
        let vector = self.vector();
        let key = (bits, vector as u8 | (int as u8) << 1);
        if let Some(v) = self.consts.get(&key) {
            return *v;
        }
        let mut cur = FuncCursor::new(self.b.func).at_first_insertion_point(self.entry);
        let s = if int { cur.ins().iconst(types::I32, bits as i32 as i64) } else { cur.ins().f32const(f32::from_bits(bits)) };
        let v = if vector { cur.ins().splat(if int { types::I32X4 } else { types::F32X4 }, s) } else { s };
        self.consts.insert(key, v);
        v
    }
    fn add(&mut self, x: Value, y: Value) -> Value {
        self.b.ins().fadd(x, y)
    }
    fn sub(&mut self, x: Value, y: Value) -> Value {
        self.b.ins().fsub(x, y)
    }
    fn mul(&mut self, x: Value, y: Value) -> Value {
        self.b.ins().fmul(x, y)
    }
    fn div(&mut self, x: Value, y: Value) -> Value {
        self.b.ins().fdiv(x, y)
    }
    /// `k + x` with a constant `k` (the order the Rust source writes).
    fn kadd(&mut self, k: f32, x: Value) -> Value {
        let k = self.c(k);
        self.add(k, x)
    }
    fn kmul(&mut self, x: Value, k: f32) -> Value {
        let k = self.c(k);
        self.mul(x, k)
    }

    pub fn cmp(&mut self, cc: FloatCC, x: Value, y: Value) -> Value {
        self.b.ins().fcmp(cc, x, y)
    }
    /// `mask ? a : b`, lane by lane.
    pub fn select(&mut self, mask: Value, a: Value, b: Value) -> Value {
        if self.vector() {
            let m = self.bitcast(types::F32X4, mask);
            self.b.ins().bitselect(m, a, b)
        } else {
            self.b.ins().select(mask, a, b)
        }
    }
    pub fn bool01(&mut self, mask: Value) -> Value {
        let one = self.c(1.0);
        let zero = self.c(0.0);
        self.select(mask, one, zero)
    }
    /// The same bits as type `to` (lane for lane).
    fn bitcast(&mut self, to: Type, x: Value) -> Value {
        self.b.ins().bitcast(to, MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little), x)
    }
    fn int_bits(&mut self, x: Value) -> Value {
        let t = self.int_ty();
        self.bitcast(t, x)
    }
    fn float_of_bits(&mut self, x: Value) -> Value {
        let t = self.ty;
        self.bitcast(t, x)
    }

    pub fn unary(&mut self, op: UnaryOp, x: Value) -> Value {
        match op {
            UnaryOp::Neg => self.b.ins().fneg(x),
            UnaryOp::Abs => self.b.ins().fabs(x),
            UnaryOp::Sqrt => self.b.ins().sqrt(x),
            UnaryOp::Recip => {
                let one = self.c(1.0);
                self.div(one, x)
            }
            UnaryOp::Exp => self.exp32(x),
            UnaryOp::Erf => self.erf32(x),
            UnaryOp::Tanh => self.tanh32(x),
            UnaryOp::Log => self.log32(x),
            other => unreachable!("`supports` keeps {other:?} out of compiled kernels"),
        }
    }

    pub fn binary(&mut self, op: BinaryOp, x: Value, y: Value) -> Value {
        match op {
            BinaryOp::Add => self.add(x, y),
            BinaryOp::Sub => self.sub(x, y),
            BinaryOp::Mul => self.mul(x, y),
            BinaryOp::Div => self.div(x, y),
            // `if x.is_nan() || x > y { x } else { y }` (and `<` for min).
            BinaryOp::Max | BinaryOp::Min => {
                let nan = self.cmp(FloatCC::Unordered, x, x);
                let cc = if op == BinaryOp::Max { FloatCC::GreaterThan } else { FloatCC::LessThan };
                let better = self.cmp(cc, x, y);
                let m = self.b.ins().bor(nan, better);
                self.select(m, x, y)
            }
            BinaryOp::CmpLt => {
                let m = self.cmp(FloatCC::LessThan, x, y);
                self.bool01(m)
            }
            BinaryOp::CmpLe => {
                let m = self.cmp(FloatCC::LessThanOrEqual, x, y);
                self.bool01(m)
            }
            BinaryOp::CmpEq => {
                let m = self.cmp(FloatCC::Equal, x, y);
                self.bool01(m)
            }
            BinaryOp::CmpNe => {
                let m = self.cmp(FloatCC::NotEqual, x, y);
                self.bool01(m)
            }
            BinaryOp::And | BinaryOp::Or => {
                let zero = self.c(0.0);
                let a = self.cmp(FloatCC::NotEqual, x, zero);
                let b = self.cmp(FloatCC::NotEqual, y, zero);
                let m = if op == BinaryOp::And { self.b.ins().band(a, b) } else { self.b.ins().bor(a, b) };
                self.bool01(m)
            }
            other => unreachable!("`supports` keeps {other:?} out of compiled kernels"),
        }
    }

    /// `exp32` of the interpreter: clamp, Cody-Waite reduction, degree-6 polynomial, 2^n; 0 below
    /// the clamp and infinity above.
    pub fn exp32(&mut self, x0: Value) -> Value {
        let x = self.clamp(x0, -87.3, 88.7);
        // n = (x * LOG2_E + 1.5 * 2^23) - 1.5 * 2^23
        let t = self.kmul(x, std::f32::consts::LOG2_E);
        let magic = self.c(12_582_912.0);
        let t = self.add(t, magic);
        let n = self.sub(t, magic);
        // r = x - n * ln2_hi - n * ln2_lo
        let h = self.kmul(n, 0.693_145_75);
        let r = self.sub(x, h);
        let l = self.kmul(n, 1.428_606_8e-6);
        let r = self.sub(r, l);
        // p = 1 + r (1 + r (1/2 + r (1/6 + r (1/24 + r (1/120 + r / 720)))))
        let mut q = self.kmul(r, 1.0f32 / 720.0);
        for k in [1.0f32 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0] {
            q = self.kadd(k, q);
            q = self.mul(r, q);
        }
        let p = self.kadd(1.0, q);
        // 2^n from the exponent bits.
        let it = self.int_ty();
        let e = self.b.ins().fcvt_to_sint_sat(it, n);
        let bias = self.ci(127);
        let e = self.b.ins().iadd(e, bias);
        let e = self.b.ins().ishl_imm_s(e, 23);
        let scale = self.float_of_bits(e);
        let y = self.mul(p, scale);
        // Outside the clamp: 0 below (not the clamp's 1.2e-38), infinity above, as PyTorch.
        let lo = self.c(-87.3);
        let below = self.cmp(FloatCC::LessThan, x0, lo);
        let zero = self.c(0.0);
        let y = self.select(below, zero, y);
        let hi = self.c(88.7);
        let above = self.cmp(FloatCC::GreaterThan, x0, hi);
        let inf = self.c(f32::INFINITY);
        self.select(above, inf, y)
    }

    /// `x P(x^2) / Q(x^2)` by Horner's rule with fused multiply-adds (Cranelift's `fma` is one
    /// rounding, like `f32::mul_add`), clamped to [-1, 1]: `odd_rational` of the interpreter.
    fn odd_rational(&mut self, x: Value, p: &[f32], q: &[f32]) -> Value {
        let z = self.mul(x, x);
        let pz = self.horner(z, p);
        let qz = self.horner(z, q);
        let xp = self.mul(x, pz);
        let r = self.div(xp, qz);
        self.clamp(r, -1.0, 1.0)
    }

    /// c[0] + z (c[1] + z (...)), each step one fused multiply-add.
    fn horner(&mut self, z: Value, c: &[f32]) -> Value {
        let mut acc = self.c(c[c.len() - 1]);
        for k in c[..c.len() - 1].iter().rev() {
            let k = self.c(*k);
            acc = self.b.ins().fma(acc, z, k);
        }
        acc
    }

    /// `erf32` of the interpreter.
    pub fn erf32(&mut self, x: Value) -> Value {
        let x = self.clamp(x, -ERF_CLAMP, ERF_CLAMP);
        self.odd_rational(x, &ERF_P, &ERF_Q)
    }

    /// `tanh32` of the interpreter.
    pub fn tanh32(&mut self, x: Value) -> Value {
        let x = self.clamp(x, -TANH_CLAMP, TANH_CLAMP);
        self.odd_rational(x, &TANH_P, &TANH_Q)
    }

    /// `log32` of the interpreter: exponent and mantissa from the bits (subnormals scaled by
    /// 2^23 first), the mantissa moved into [sqrt(1/2), sqrt(2)), log(1 + f) by a polynomial,
    /// e ln2 added in two parts; then 0, negatives, NaN and +inf.
    pub fn log32(&mut self, x: Value) -> Value {
        let min_pos = self.c(f32::MIN_POSITIVE);
        let tiny = self.cmp(FloatCC::LessThan, x, min_pos);
        let scaled = self.kmul(x, 8_388_608.0);
        let xs = self.select(tiny, scaled, x);
        let bits = self.int_bits(xs);
        let mant_mask = self.ci(0x007f_ffff);
        let one_bits = self.ci(0x3f80_0000);
        let mant = self.b.ins().band(bits, mant_mask);
        let mant = self.b.ins().bor(mant, one_bits);
        let m = self.float_of_bits(mant);
        let sqrt2 = self.c(std::f32::consts::SQRT_2);
        let big = self.cmp(FloatCC::GreaterThan, m, sqrt2);
        let half = self.kmul(m, 0.5);
        let m = self.select(big, half, m);
        // e = ((bits >> 23) & 0xff) - 127 + big - (tiny ? 23 : 0), in exact integer arithmetic.
        let e = self.b.ins().sshr_imm_s(bits, 23);
        let byte = self.ci(0xff);
        let e = self.b.ins().band(e, byte);
        let bias = self.ci(-127);
        let e = self.b.ins().iadd(e, bias);
        let (one, zero, minus23) = (self.ci(1), self.ci(0), self.ci(-23));
        let up = self.select_int(big, one, zero);
        let e = self.b.ins().iadd(e, up);
        let down = self.select_int(tiny, minus23, zero);
        let e = self.b.ins().iadd(e, down);
        let one_f = self.c(1.0);
        let f = self.sub(m, one_f);
        let r = self.horner(f, &LOG_R);
        let f2 = self.mul(f, f);
        let f3 = self.mul(f2, f);
        let mhalf = self.c(-0.5);
        let lin = self.b.ins().fma(mhalf, f2, f);
        let y = self.b.ins().fma(f3, r, lin);
        let ty = self.ty;
        let ef = self.b.ins().fcvt_from_sint(ty, e);
        let (hi, lo) = (self.c(LN2_HI), self.c(LN2_LO));
        let y = self.b.ins().fma(ef, lo, y);
        let v = self.b.ins().fma(ef, hi, y);
        // The special values, in the interpreter's order of precedence (last select wins).
        let inf = self.c(f32::INFINITY);
        let is_inf = self.cmp(FloatCC::Equal, x, inf);
        let v = self.select(is_inf, x, v);
        let zero_f = self.c(0.0);
        let neg = self.cmp(FloatCC::LessThan, x, zero_f);
        let nan = self.cmp(FloatCC::Unordered, x, x);
        let invalid = self.b.ins().bor(neg, nan);
        let nan_c = self.c(f32::NAN);
        let v = self.select(invalid, nan_c, v);
        let is_zero = self.cmp(FloatCC::Equal, x, zero_f);
        let ninf = self.c(f32::NEG_INFINITY);
        self.select(is_zero, ninf, v)
    }

    /// `mask ? a : b` for integer lanes (a float comparison's mask).
    fn select_int(&mut self, mask: Value, a: Value, b: Value) -> Value {
        if self.vector() {
            self.b.ins().bitselect(mask, a, b)
        } else {
            self.b.ins().select(mask, a, b)
        }
    }

    /// `x.clamp(lo, hi)` as Rust defines it: `if x < lo { lo }`, then `if x > hi { hi }`, so NaN
    /// passes through.
    fn clamp(&mut self, x: Value, lo: f32, hi: f32) -> Value {
        let lo = self.c(lo);
        let hi = self.c(hi);
        let below = self.cmp(FloatCC::LessThan, x, lo);
        let x = self.select(below, lo, x);
        let above = self.cmp(FloatCC::GreaterThan, x, hi);
        self.select(above, hi, x)
    }
}
