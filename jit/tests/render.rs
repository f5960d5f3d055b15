//! The kernel IR's renderers: snapshots of the CUDA C emitted for one kernel of each kind (the
//! guide's GELU, a softmax row kernel, a two-parameter SGD-with-momentum group in bf16 storage,
//! a bias-gradient sum over axes), and the kernel IR's own helpers. `UPDATE_EXPECT=1` rewrites
//! the snapshots; review the diff.

use dlc_jit::kir::{self, Buf, Elementwise, Index, Inst, Kernel, Param, RowStep, Rows, SumAxes, Ty};
use dlc_jit::render::{render, Dialect};
use dlc_language::ir::{BinaryOp, UnaryOp};

fn load(k: usize) -> Inst {
    Inst::Load { from: Buf::Param(k), index: Index::Linear }
}

/// x * 0.5 * (1 + erf(x / sqrt 2)) over 16M f32.
fn gelu() -> Kernel {
    Kernel::Elementwise(Elementwise {
        shape: vec![1 << 24],
        inputs: vec![Param { ty: Ty::F32, len: 1 << 24 }],
        body: vec![
            load(0),
            Inst::Const(0.5),
            Inst::Binary(BinaryOp::Mul, 0, 1),
            Inst::Const(std::f32::consts::SQRT_2),
            Inst::Binary(BinaryOp::Div, 0, 3),
            Inst::Unary(UnaryOp::Erf, 4),
            Inst::Const(1.0),
            Inst::Binary(BinaryOp::Add, 6, 5),
            Inst::Binary(BinaryOp::Mul, 2, 7),
        ],
        outputs: vec![(8, Ty::F32)],
    })
}

/// x * w + b: two f32 inputs at the output's index and a scalar, no division: four elements a
/// thread through float4 loads and stores.
fn scale_shift() -> Kernel {
    Kernel::Elementwise(Elementwise {
        shape: vec![4096],
        inputs: vec![Param { ty: Ty::F32, len: 4096 }, Param { ty: Ty::F32, len: 4096 }, Param { ty: Ty::F32, len: 1 }],
        body: vec![
            load(0),
            load(1),
            Inst::Binary(BinaryOp::Mul, 0, 1),
            Inst::Load { from: Buf::Param(2), index: Index::Splat },
            Inst::Binary(BinaryOp::Add, 2, 3),
        ],
        outputs: vec![(4, Ty::F32)],
    })
}

/// softmax over rows of 65 (a character model's logits), 512 rows.
fn softmax() -> Kernel {
    let shift = vec![
        Inst::Load { from: Buf::Param(0), index: Index::Linear },
        Inst::Load { from: Buf::Slot(0), index: Index::Strided(vec![1, 0]) },
        Inst::Binary(BinaryOp::Sub, 0, 1),
        Inst::Unary(UnaryOp::Exp, 2),
    ];
    let divide = vec![
        Inst::Load { from: Buf::Slot(1), index: Index::Linear },
        Inst::Load { from: Buf::Slot(2), index: Index::Strided(vec![1, 0]) },
        Inst::Binary(BinaryOp::Div, 0, 1),
    ];
    Kernel::Rows(Rows {
        lead: vec![512],
        len: 65,
        inputs: vec![Param { ty: Ty::F32, len: 512 * 65 }],
        slots: vec![1, 65, 1, 65],
        steps: vec![
            RowStep::Reduce { max: true, from: Buf::Param(0), to: 0 },
            RowStep::Map { len: 65, body: shift, writes: vec![(3, 1)] },
            RowStep::Reduce { max: false, from: Buf::Slot(1), to: 2 },
            RowStep::Map { len: 65, body: divide, writes: vec![(2, 3)] },
        ],
        outputs: vec![(3, Ty::F32)],
    })
}

/// Two parameters' momentum updates in one launch: v' = 0.9 v + g, w' = w - 0.01 v', with the
/// weights stored in bf16 and a scalar learning rate input.
fn momentum_group() -> Kernel {
    let member = |n: usize| Elementwise {
        shape: vec![n],
        inputs: vec![
            Param { ty: Ty::BF16, len: n },
            Param { ty: Ty::F32, len: n },
            Param { ty: Ty::F32, len: n },
            Param { ty: Ty::F32, len: 1 },
        ],
        body: vec![
            load(0),
            load(1),
            load(2),
            Inst::Const(0.9),
            Inst::Binary(BinaryOp::Mul, 3, 2),
            Inst::Binary(BinaryOp::Add, 4, 1),
            Inst::Load { from: Buf::Param(3), index: Index::Splat },
            Inst::Binary(BinaryOp::Mul, 6, 5),
            Inst::Binary(BinaryOp::Sub, 0, 7),
            Inst::Round(Ty::BF16, 8),
        ],
        outputs: vec![(9, Ty::BF16), (5, Ty::F32)],
    };
    Kernel::Group(vec![member(784 * 512), member(512)])
}

/// A bias gradient: the sum over batch, height and width of an NCHW gradient times a ReLU mask.
fn bias_grad() -> Kernel {
    let shape = vec![64, 32, 12, 12];
    let n = shape.iter().product();
    Kernel::Sum(SumAxes {
        prologue: Elementwise {
            shape,
            inputs: vec![Param { ty: Ty::F32, len: n }, Param { ty: Ty::Bool, len: n }],
            body: vec![load(0), load(1), Inst::Const(0.0), Inst::Where(1, 0, 2)],
            outputs: vec![(3, Ty::F32)],
        },
        summed: 3,
        axes: vec![0, 2, 3],
    })
}

fn snapshot(name: &str, got: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(name);
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&path, got).expect("writable");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("no snapshot {}: run with UPDATE_EXPECT=1", path.display()));
    if want != got {
        let line = want.lines().zip(got.lines()).position(|(a, b)| a != b).unwrap_or(want.lines().count().min(got.lines().count()));
        panic!(
            "{name} differs from its snapshot at line {}:\n  want: {:?}\n  got:  {:?}\n(UPDATE_EXPECT=1 rewrites it)",
            line + 1,
            want.lines().nth(line),
            got.lines().nth(line)
        );
    }
}

/// The kernel's function only (the prelude is the same for every kernel and snapshotted once).
fn function(k: &Kernel, name: &str) -> String {
    let (text, launch) = dlc_jit::render::render_function(k, name, Dialect::Cuda).expect("renders");
    format!("// launch <<<{}, {}, {}>>>\n{text}", launch.grid, launch.block, launch.shared_bytes)
}

#[test]
fn cuda_source_of_each_kernel_kind() {
    snapshot("gelu.cu", &function(&gelu(), "gelu"));
    snapshot("scale_shift_vectorised.cu", &function(&scale_shift(), "scale_shift"));
    snapshot("softmax_rows.cu", &function(&softmax(), "softmax"));
    snapshot("momentum_group.cu", &function(&momentum_group(), "momentum"));
    snapshot("bias_grad_sum.cu", &function(&bias_grad(), "bias_grad"));
    snapshot("prelude.cu", &dlc_jit::render::math::prelude(Dialect::Cuda));
}

#[test]
fn both_dialects_share_the_body() {
    for k in [gelu(), softmax(), momentum_group(), bias_grad()] {
        let cuda = render(&k, "k", Dialect::Cuda).expect("renders").code;
        let c = render(&k, "k", Dialect::C).expect("renders").code;
        fn body(s: &str) -> Vec<&str> {
            s.lines().filter(|l| l.trim_start().starts_with("const float r")).map(str::trim).collect()
        }
        assert!(!body(&cuda).is_empty());
        assert_eq!(body(&cuda), body(&c), "{}", k.kind());
    }
}

#[test]
fn a_row_too_long_for_shared_memory_is_an_error_not_a_bad_kernel() {
    let Kernel::Rows(mut r) = softmax() else { unreachable!() };
    r.len = 1 << 20;
    r.slots = vec![1, 1 << 20, 1, 1 << 20];
    let e = render(&Kernel::Rows(r), "k", Dialect::Cuda).expect_err("too long");
    assert!(e.0.contains("shared memory"), "{e}");
}

#[test]
fn f16_conversions_round_as_half_does() {
    // Every f16 widens exactly, and narrows back to itself.
    for h in 0..=u16::MAX {
        let want = half::f16::from_bits(h).to_f32();
        let got = kir::f16_to_f32(h);
        assert!(want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()), "{h:#x}");
        if !got.is_nan() {
            assert_eq!(kir::f32_to_f16(got), h, "{h:#x}");
        }
    }
    // f32s across the range, ties and subnormals included, round to nearest even like `half`.
    let mut x = 0x1234_5678u32;
    for i in 0..200_000u32 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let v = if i % 2 == 0 { f32::from_bits(x) } else { f32::from_bits((x & 0x87ff_ffff) | 0x3000_0000) };
        if v.is_nan() {
            continue;
        }
        assert_eq!(kir::f32_to_f16(v), half::f16::from_f32(v).to_bits(), "{v:e}");
        assert_eq!(kir::round_to(Ty::BF16, v).to_bits(), half::bf16::from_f32(v).to_f32().to_bits(), "{v:e}");
    }
}
