//! The AVX-512 back end against the Cranelift one (itself checked against the interpreter's Rust
//! definitions): every op on values that include NaN, infinities, signed zeros, subnormals and
//! the math functions' clamps, over lengths that exercise full vectors, the masked remainder and
//! both; the calling convention's splats and buffers; more pointers than registers; and a body
//! too wide for the registers, which is declined. Skipped (passing) on CPUs without AVX-512F,
//! where the back end is never used.

use super::{available, compile};
use crate::kir::{Buf, Elementwise, Index, Inst, Param, Ty};
use dlc_language::ir::{BinaryOp, UnaryOp};

fn param() -> Param {
    Param { ty: Ty::F32, len: 0 }
}

/// Values that probe every edge: specials, clamps, tiny and huge, and a spread of ordinary ones.
fn probe(n: usize, salt: u32) -> Vec<f32> {
    let specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE,
        1e-40,
        -1e-40,
        3.9,
        -3.9,
        9.1,
        88.7,
        88.8,
        -87.3,
        -87.4,
        -103.0,
        1e30,
        -1e30,
        std::f32::consts::SQRT_2,
        0.5,
    ];
    (0..n)
        .map(|i| {
            let k = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(salt.wrapping_mul(40_503));
            if k % 5 == 0 {
                specials[(k as usize / 5) % specials.len()]
            } else {
                ((k >> 8) as f32 / (1u32 << 24) as f32 - 0.5) * [0.1f32, 4.0, 30.0, 200.0][(k % 4) as usize]
            }
        })
        .collect()
}

/// Run `e` through both back ends on the same inputs (one buffer per input pointer, `len`
/// values each) and compare every output's bits.
fn same_as_cranelift(e: &Elementwise, lens: &[usize]) {
    let x = compile(e).expect("the AVX-512 back end compiles it");
    let c = crate::cranelift::compile(e).expect("Cranelift compiles it");
    let n_in = crate::convention::input_count(e);
    for &len in lens {
        let ins: Vec<Vec<f32>> = (0..n_in).map(|k| probe(len.max(1), k as u32 * 7 + len as u32)).collect();
        let ptrs: Vec<*const f32> = ins.iter().map(|v| v.as_ptr()).collect();
        let run = |f: &dyn Fn(&[*const f32], &[*mut f32])| {
            // A guard value after each output: the masked remainder must not write past `len`.
            let mut outs = vec![vec![-7.25f32; len + 1]; e.outputs.len()];
            let o: Vec<*mut f32> = outs.iter_mut().map(|v| v.as_mut_ptr()).collect();
            f(&ptrs, &o);
            outs
        };
        // SAFETY: every buffer holds `len` values (at least one).
        let got = run(&|i, o| unsafe { x.call(i, o, len) });
        let want = run(&|i, o| unsafe { c.call(i, o, len) });
        for (j, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g[len], -7.25, "output {j} written past len {len}");
            for i in 0..len {
                assert_eq!(
                    g[i].to_bits(),
                    w[i].to_bits(),
                    "output {j}, len {len}, element {i}: {} vs {} (inputs {:?})",
                    g[i],
                    w[i],
                    ins.iter().map(|v| v[i]).collect::<Vec<_>>()
                );
            }
        }
    }
}

const LENS: [usize; 9] = [1, 7, 15, 16, 17, 33, 64, 100, 1031];

fn one_input(body: Vec<Inst>, out: usize) -> Elementwise {
    Elementwise { shape: vec![8], inputs: vec![param()], body, outputs: vec![(out, Ty::F32)] }
}

#[test]
fn every_unary_op_gives_cranelifts_bits() {
    if !available() {
        return;
    }
    for op in [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Sqrt, UnaryOp::Recip, UnaryOp::Exp, UnaryOp::Erf, UnaryOp::Tanh, UnaryOp::Log] {
        let e = one_input(vec![Inst::Load { from: Buf::Param(0), index: Index::Linear }, Inst::Unary(op, 0)], 1);
        same_as_cranelift(&e, &LENS);
    }
}

#[test]
fn every_binary_op_gives_cranelifts_bits_with_registers_and_constants() {
    if !available() {
        return;
    }
    use BinaryOp::*;
    for op in [Add, Sub, Mul, Div, Max, Min, CmpLt, CmpLe, CmpEq, CmpNe, And, Or] {
        let load = |k| Inst::Load { from: Buf::Param(k), index: Index::Linear };
        // Two inputs; a constant on either side.
        let e = Elementwise {
            shape: vec![8],
            inputs: vec![param(), param()],
            body: vec![load(0), load(1), Inst::Const(0.75), Inst::Binary(op, 0, 1), Inst::Binary(op, 2, 0), Inst::Binary(op, 1, 2)],
            outputs: vec![(3, Ty::F32), (4, Ty::F32), (5, Ty::F32)],
        };
        same_as_cranelift(&e, &LENS);
    }
}

#[test]
fn selects_splats_buffers_and_constant_outputs_follow_the_calling_convention() {
    if !available() {
        return;
    }
    // Cranelift's own calling-convention kernel (a select, a max with NaN, a splat, two
    // buffers, a load and a bool as outputs), and more: selects with constants, a constant's exp,
    // a constant and a value output twice.
    let mut e = crate::cranelift::tests::kernel(vec![4, 5]);
    e.body.extend([Inst::Where(0, 3, 2), Inst::Unary(UnaryOp::Exp, 3)]);
    e.outputs.extend([(3, Ty::F32), (12, Ty::F32), (9, Ty::F32), (13, Ty::F32)]);
    same_as_cranelift(&e, &LENS);
}

#[test]
fn more_pointers_than_registers_are_fetched_at_each_use() {
    if !available() {
        return;
    }
    // Eight inputs and six outputs: fourteen pointers for ten registers.
    let n = 8;
    let mut body: Vec<Inst> = (0..n).map(|k| Inst::Load { from: Buf::Param(k), index: Index::Linear }).collect();
    for k in 1..n {
        body.push(Inst::Binary(BinaryOp::Add, body.len() - 1, k));
    }
    let outputs = (0..6).map(|j| (body.len() - 1 - j, Ty::F32)).collect();
    let e = Elementwise { shape: vec![8], inputs: vec![param(); n], body, outputs };
    same_as_cranelift(&e, &LENS);
}

/// 40 loads all live until one sum at the end: more values than the 32 vector registers hold
/// (also `crate::native`'s test that Cranelift serves what this back end declines).
pub(crate) fn too_wide() -> Elementwise {
    let n = 40;
    let mut body: Vec<Inst> = (0..n).map(|_| Inst::Load { from: Buf::Param(0), index: Index::Linear }).collect();
    for k in 1..n {
        let last = if k == 1 { 0 } else { body.len() - 1 };
        body.push(Inst::Binary(BinaryOp::Add, last, k));
    }
    let out = body.len() - 1;
    one_input(body, out)
}

#[test]
fn a_body_wider_than_the_registers_is_declined() {
    if !available() {
        return;
    }
    assert!(compile(&too_wide()).is_err());
    // (`crate::native`'s tests check that Cranelift serves it instead.)
}

#[test]
fn the_guides_gelu_and_an_adamw_update_give_cranelifts_bits() {
    if !available() {
        return;
    }
    use BinaryOp::*;
    let load = |k| Inst::Load { from: Buf::Param(k), index: Index::Linear };
    let splat = |k| Inst::Load { from: Buf::Param(k), index: Index::Splat };
    // x * 0.5 * (1 + erf(x * 0.70710677))
    let gelu = one_input(
        vec![
            load(0),
            Inst::Const(0.5),
            Inst::Binary(Mul, 0, 1),
            Inst::Const(std::f32::consts::FRAC_1_SQRT_2),
            Inst::Binary(Mul, 0, 3),
            Inst::Unary(UnaryOp::Erf, 4),
            Inst::Const(1.0),
            Inst::Binary(Add, 6, 5),
            Inst::Binary(Mul, 2, 7),
        ],
        8,
    );
    same_as_cranelift(&gelu, &LENS);
    // p, g, m, v, then lr, beta1, beta2, eps, wd as splats: m' = b1 m + (1 - b1) g,
    // v' = b2 v + (1 - b2) g^2, p' = p - lr (m' / (sqrt(v') + eps) + wd p).
    let adamw = Elementwise {
        shape: vec![8],
        inputs: vec![param(); 9],
        body: vec![
            load(0),
            load(1),
            load(2),
            load(3),
            splat(4),
            splat(5),
            splat(6),
            splat(7),
            splat(8),
            Inst::Const(1.0),
            Inst::Binary(Mul, 5, 2),
            Inst::Binary(Sub, 9, 5),
            Inst::Binary(Mul, 11, 1),
            Inst::Binary(Add, 10, 12),
            Inst::Binary(Mul, 6, 3),
            Inst::Binary(Sub, 9, 6),
            Inst::Binary(Mul, 1, 1),
            Inst::Binary(Mul, 15, 16),
            Inst::Binary(Add, 14, 17),
            Inst::Unary(UnaryOp::Sqrt, 18),
            Inst::Binary(Add, 19, 7),
            Inst::Binary(Div, 13, 20),
            Inst::Binary(Mul, 8, 0),
            Inst::Binary(Add, 21, 22),
            Inst::Binary(Mul, 4, 23),
            Inst::Binary(Sub, 0, 24),
        ],
        outputs: vec![(25, Ty::F32), (13, Ty::F32), (18, Ty::F32)],
    };
    same_as_cranelift(&adamw, &LENS);
}

#[test]
fn rounding_to_bf16_gives_the_interpreters_bits() {
    if !available() {
        return;
    }
    // The interpreter's `round_bf16` (interpreter/src/runtime/tensor.rs).
    let want = |v: f32| {
        let b = v.to_bits();
        let quiet = (b | 0x0040_0000) & 0xFFFF_0000;
        let rounded = b.wrapping_add(0x7FFF + ((b >> 16) & 1)) & 0xFFFF_0000;
        f32::from_bits(if b & 0x7FFF_FFFF > 0x7F80_0000 { quiet } else { rounded })
    };
    // round(x * 3) as an output: a rounded value read by a later op, and a signalling NaN.
    let e = one_input(
        vec![
            Inst::Load { from: Buf::Param(0), index: Index::Linear },
            Inst::Const(3.0),
            Inst::Binary(BinaryOp::Mul, 0, 1),
            Inst::Round(Ty::BF16, 2),
        ],
        3,
    );
    assert!(!crate::convention::supports(&e) && crate::convention::supports_with_bf16_rounding(&e));
    let x = compile(&e).expect("compiles");
    let mut xs = probe(4099, 11);
    // Ties (to even both ways), the largest finite value (rounds to infinity), a signalling NaN.
    xs.extend([f32::from_bits(0x3F80_8000), f32::from_bits(0x3F81_8000), f32::MAX / 3.0, f32::from_bits(0x7F80_0001)]);
    let mut out = vec![0f32; xs.len()];
    // SAFETY: one input and one output of `xs.len()` values.
    unsafe { x.call(&[xs.as_ptr()], &[out.as_mut_ptr()], xs.len()) };
    for (v, o) in xs.iter().zip(&out) {
        assert_eq!(o.to_bits(), want(v * 3.0).to_bits(), "round_bf16({v} * 3)");
    }
}

#[test]
fn the_streaming_variant_stores_the_same_bits() {
    if !available() {
        return;
    }
    let e = one_input(
        vec![
            Inst::Load { from: Buf::Param(0), index: Index::Linear },
            Inst::Unary(UnaryOp::Exp, 0),
            Inst::Const(2.0),
            Inst::Binary(BinaryOp::Mul, 1, 2),
        ],
        3,
    );
    let x = compile(&e).expect("compiles");
    // An output 64-byte aligned: a buffer of 64-byte blocks (written through a raw pointer).
    #[repr(align(64))]
    #[derive(Clone, Copy)]
    struct Block(#[allow(dead_code)] [f32; 16]);
    for len in [5usize, 16, 48, 1000, 1024] {
        let xs = probe(len, 5);
        let mut plain = vec![0f32; len];
        let mut streamed = vec![Block([0.0; 16]); len.div_ceil(16)];
        let out = streamed.as_mut_ptr() as *mut f32;
        // SAFETY: one input and one output of `len` values, the output 64-byte aligned.
        unsafe {
            x.call(&[xs.as_ptr()], &[plain.as_mut_ptr()], len);
            x.call_streaming(&[xs.as_ptr()], &[out], len);
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        // SAFETY: `len` values were written.
        let got = unsafe { std::slice::from_raw_parts(out, len) };
        for i in 0..len {
            assert_eq!(got[i].to_bits(), plain[i].to_bits(), "len {len}, element {i}");
        }
    }
}

/// Random bodies (a fixed seed, 300 of them, up to 40 instructions over up to 5 inputs read at
/// the chunk, as splats or through buffers, with every op this back end compiles, bf16 rounding
/// aside) against Cranelift, bit for bit: the register allocator, the interleaved vectors and
/// the encoder's register numbers above 15 are all exercised by bodies no one wrote by hand.
#[test]
fn random_bodies_give_cranelifts_bits() {
    if !available() {
        return;
    }
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let unary = [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Sqrt, UnaryOp::Recip, UnaryOp::Exp, UnaryOp::Erf, UnaryOp::Tanh, UnaryOp::Log];
    use BinaryOp::*;
    let binary = [Add, Sub, Mul, Div, Max, Min, CmpLt, CmpLe, CmpEq, CmpNe, And, Or];
    let mut declined = 0;
    for _ in 0..300 {
        let inputs = 1 + next(5);
        let mut body = vec![];
        for k in 0..inputs {
            let index = match next(4) {
                0 => Index::Splat,
                1 => Index::Strided(vec![1, 0]),
                _ => Index::Linear,
            };
            body.push(Inst::Load { from: Buf::Param(k), index });
        }
        for _ in 0..(2 + next(36)) {
            let n = body.len();
            body.push(match next(10) {
                0 => Inst::Const([0.0, -1.5, 2.0, 1e-3, 7.25][next(5)]),
                1 | 2 => Inst::Unary(unary[next(unary.len())], next(n)),
                3 => Inst::Where(next(n), next(n), next(n)),
                4 => Inst::ToBool(next(n)),
                _ => Inst::Binary(binary[next(binary.len())], next(n), next(n)),
            });
        }
        let n = body.len();
        let outputs = (0..1 + next(3)).map(|_| (n - 1 - next(n.min(6)), Ty::F32)).collect();
        let e = Elementwise { shape: vec![4, 8], inputs: vec![param(); inputs], body, outputs };
        if compile(&e).is_err() {
            declined += 1;
            continue;
        }
        same_as_cranelift(&e, &[5, 16, 61, 200]);
    }
    assert!(declined < 30, "{declined} of 300 random bodies declined");
}
