//! The Cranelift back end on hand-written kernels: what it compiles, the calling convention
//! (parameters at the chunk, splats at element 0, broadcast buffers after the parameters) and
//! the exact ops against their Rust definitions, on lengths that exercise the `f32x4` pairs and
//! the scalar tail. (tests/jit.rs of the interpreter compares every op bit for bit.)

use super::{compile, input_count, key, supports};
use crate::kir::{Buf, Elementwise, Index, Inst, Param, Ty};
use dlc_language::ir::{BinaryOp, UnaryOp};

fn param() -> Param {
    Param { ty: Ty::F32, len: 0 }
}

/// out0 = where(a > b, a * s + 2, max(b, c)); out1 = bool(a - b); out2 = a (a load as output).
/// `a` is read at the output's index, `s` as a splat, `b` and `c` through broadcast buffers.
pub(crate) fn kernel(shape: Vec<usize>) -> Elementwise {
    Elementwise {
        shape,
        inputs: vec![param(), param(), param(), param()],
        body: vec![
            Inst::Load { from: Buf::Param(0), index: Index::Linear },
            Inst::Load { from: Buf::Param(1), index: Index::Strided(vec![1, 0]) },
            Inst::Load { from: Buf::Param(2), index: Index::Splat },
            Inst::Const(2.0),
            Inst::Binary(BinaryOp::CmpLt, 1, 0),
            Inst::Binary(BinaryOp::Mul, 0, 2),
            Inst::Binary(BinaryOp::Add, 5, 3),
            Inst::Load { from: Buf::Param(3), index: Index::Strided(vec![0, 1]) },
            Inst::Binary(BinaryOp::Max, 1, 7),
            Inst::Where(4, 6, 8),
            Inst::Binary(BinaryOp::Sub, 0, 1),
            Inst::ToBool(10),
        ],
        outputs: vec![(9, Ty::F32), (11, Ty::Bool), (0, Ty::F32)],
    }
}

#[test]
fn compiled_kernels_follow_the_calling_convention() {
    let e = kernel(vec![4, 5]);
    assert!(supports(&e));
    assert_eq!(input_count(&e), 6, "four parameters and two broadcast buffers");
    let c = compile(&e).expect("compiles");
    for len in [1usize, 3, 4, 8, 13, 40] {
        let a: Vec<f32> = (0..len).map(|i| (i as f32 - 6.0) * 0.75).collect();
        let b: Vec<f32> = (0..len).map(|i| ((i * 7) % 5) as f32 - 2.0).collect();
        let cc: Vec<f32> = (0..len).map(|i| if i % 3 == 0 { f32::NAN } else { i as f32 * -0.5 }).collect();
        let s = [1.5f32, 99.0];
        // The parameters `b` and `c` are only read through their buffers: passed at element 0.
        let unused = [0f32];
        let ins = [a.as_ptr(), unused.as_ptr(), s.as_ptr(), unused.as_ptr(), b.as_ptr(), cc.as_ptr()];
        let mut outs = vec![vec![f32::NAN; len]; 3];
        let ptrs: Vec<*mut f32> = outs.iter_mut().map(|o| o.as_mut_ptr()).collect();
        // SAFETY: every buffer holds `len` values (the splat one at least one).
        unsafe { c.call(&ins, &ptrs, len) };
        for i in 0..len {
            let max = if b[i].is_nan() || b[i] > cc[i] { b[i] } else { cc[i] };
            let want = if b[i] < a[i] { a[i] * 1.5 + 2.0 } else { max };
            assert_eq!(outs[0][i].to_bits(), want.to_bits(), "len {len}, element {i}");
            assert_eq!(outs[1][i], ((a[i] - b[i]) != 0.0) as i32 as f32);
            assert_eq!(outs[2][i], a[i]);
        }
    }
}

#[test]
fn ops_without_a_bit_exact_twin_are_not_compiled() {
    let with = |inst: Inst| {
        let mut e = kernel(vec![8]);
        e.body.push(inst);
        e
    };
    assert!(supports(&with(Inst::Unary(UnaryOp::Exp, 0))));
    assert!(supports(&with(Inst::Unary(UnaryOp::Log, 0))));
    for bad in [
        Inst::Unary(UnaryOp::Sin, 0),
        Inst::Unary(UnaryOp::Cos, 0),
        Inst::Binary(BinaryOp::Pow, 0, 1),
        Inst::Binary(BinaryOp::Mod, 0, 1),
        Inst::Round(Ty::BF16, 0),
        Inst::Load { from: Buf::Slot(0), index: Index::Linear },
    ] {
        let e = with(bad.clone());
        assert!(!supports(&e), "{bad:?}");
        assert!(compile(&e).is_err(), "{bad:?}");
    }
}

#[test]
fn the_key_names_the_native_code_and_nothing_else() {
    let (a, b) = (kernel(vec![4, 5]), kernel(vec![7, 3]));
    assert_eq!(key(&a), key(&b), "shapes and strides are the caller's");
    let mut c = kernel(vec![4, 5]);
    c.body[3] = Inst::Const(3.0);
    assert_ne!(key(&a), key(&c));
    let mut d = kernel(vec![4, 5]);
    d.body[1] = Inst::Load { from: Buf::Param(1), index: Index::Linear };
    assert_ne!(key(&a), key(&d), "a load read at the chunk is not a buffered one");
}
