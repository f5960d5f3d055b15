//! Property test of the fusion pass and the fused kernels: random shapes (odd sizes included),
//! random broadcast patterns, chains with values read on both sides of a reduction or a matrix
//! product (so regions get extra outputs, recomputed masks and broadcasts), in f32, bf16 and f16.
//! Fused and eager runs must print the same values, bit for bit. The same for row kernels
//! (last-axis reductions fused with their neighbours: softmax, log_softmax, layer norm,
//! logsumexp) on 2-d and 3-d shapes, with NaN, infinities and ties in the rows.

use dlc::{ExecMode, Program};
use proptest::prelude::*;

fn program(a: usize, b: usize, bias_rows: bool, dtype: &str, seed: u64) -> String {
    let bias = if bias_rows { format!("f32[{a}, 1]") } else { format!("f32[1, {b}]") };
    format!(
        "let x = cast(randn(f32[{a}, {b}], seed: {seed}), {dtype})\n\
         let w = cast(randn({bias}, seed: {s2}), {dtype})\n\
         let m = x + w > 0.25\n\
         let h = where(m, exp(x * 0.5) - w, tanh(x))\n\
         let s = sum(h, axis: 1, keepdim: true)\n\
         let y = where(m, h / (1.0 + abs(s)), 0.0) + w\n\
         let z = y @ transpose(x, 0, 1)\n\
         print(y)\n\
         print(where(z > 0.0, z, z * 0.01) + sum(y))\n",
        s2 = seed + 1
    )
}

fn printed_bits(src: &str, mode: ExecMode) -> Vec<Vec<u64>> {
    let p = Program::run_with("prop.dl", src, None, false, 0, mode);
    assert!(p.ok, "{src}\n{:?}", p.diagnostics());
    p.output().printed_bits()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn fused_equals_eager_on_random_shapes(
        a in prop::sample::select(vec![1usize, 3, 7, 50, 129]),
        b in prop::sample::select(vec![1usize, 3, 50, 783, 4097]),
        bias_rows in any::<bool>(),
        dtype in prop::sample::select(vec!["f32", "bf16", "f16"]),
        seed in 0u64..1000,
    ) {
        let src = program(a, b, bias_rows, dtype, seed);
        let fused = printed_bits(&src, ExecMode::Fused);
        let eager = printed_bits(&src, ExecMode::Eager);
        prop_assert_eq!(fused.len(), 2);
        prop_assert!(fused == eager, "fused and eager differ for\n{}", src);
    }
}

fn row_program(lead: &[usize], len: usize, seed: u64) -> String {
    let dims: Vec<String> = lead.iter().chain([&len]).map(|d| d.to_string()).collect();
    let shape = dims.join(", ");
    let per_row: Vec<String> = lead.iter().map(|d| d.to_string()).chain(["1".to_string()]).collect();
    format!(
        "let x = randn(f32[{shape}], seed: {seed}) * 3.0\n\
         let t = where(x > 4.0, x / 0.0, where(x < -4.0, 0.0 / (x - x), x))\n\
         let w = randn(f32[{len}], seed: {s2})\n\
         let b = randn(f32[{per}], seed: {s3})\n\
         print(softmax(x * w + b, axis: -1))\n\
         print(log_softmax(x, axis: -1) - b)\n\
         print(layer_norm(x, w, w * 0.5))\n\
         print(logsumexp(x + b, axis: -1))\n\
         print(softmax(t, axis: -1), max(t, axis: -1), sum(t * 0.0, axis: -1))\n",
        per = per_row.join(", "),
        s2 = seed + 1,
        s3 = seed + 2,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn row_kernels_equal_eager(
        lead in prop::sample::select(vec![vec![1usize], vec![3], vec![50], vec![2, 7], vec![129]]),
        len in prop::sample::select(vec![2usize, 3, 50, 783, 4097]),
        seed in 0u64..1000,
    ) {
        let src = row_program(&lead, len, seed);
        let fused = printed_bits(&src, ExecMode::Fused);
        let eager = printed_bits(&src, ExecMode::Eager);
        prop_assert_eq!(fused.len(), 5);
        prop_assert!(fused == eager, "fused and eager differ for\n{}", src);
    }
}

/// Short rows run a block of rows a call (exec/rows.rs): many blocks, a partial last block, and
/// several tasks each with a partial block of its own, interpreted and compiled, equal eager.
#[test]
fn short_rows_in_blocks_equal_eager() {
    for (rows, len, seed) in [(20_000, 3, 7), (1_000, 10, 8), (129, 50, 9), (7, 600, 10)] {
        let src = row_program(&[rows], len, seed);
        let eager = printed_bits(&src, ExecMode::Eager);
        for mode in [ExecMode::Fused, ExecMode::FusedJit] {
            assert!(printed_bits(&src, mode) == eager, "{mode:?} and eager differ for {rows} rows of {len}");
        }
    }
}

/// Sums over other axes than the last, with the elementwise work that computes their input fused
/// into them (batch-norm statistics, a bias gradient's masked sum, sums over mixed axes and over
/// everything, and sibling sums the CPU executor runs in one pass), on 4-d shapes large enough to
/// be split between threads.
fn prologue_program(shape: &[usize; 4], seed: u64) -> String {
    let [a, c, h, w] = shape;
    format!(
        "let x = randn(f32[{a}, {c}, {h}, {w}], seed: {seed}) * 2.0 + 0.5\n\
         let m = mean(x, axis: (0, 2, 3), keepdim: true)\n\
         let d = x - m\n\
         let v = mean(d ** 2, axis: (0, 2, 3), keepdim: true)\n\
         print(v, d / sqrt(v + 1e-5))\n\
         print(sum(where(x > 0.0, x * 3.0, 0.0), axis: 0))\n\
         print(sum(exp(x * 0.1), axis: (1, 3)), sum(x * x), sum(tanh(x), axis: 2))\n\
         print(sum(d, axis: (0, 2, 3)), sum(d * x, axis: (0, 2, 3)), sum(tanh(d), axis: (0, 2, 3)), sum(d / (v + 1.0), axis: (0, 2, 3)))\n"
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn prologue_reductions_equal_eager(
        a in prop::sample::select(vec![1usize, 3, 50]),
        c in prop::sample::select(vec![1usize, 7, 64]),
        h in prop::sample::select(vec![1usize, 3, 29]),
        w in prop::sample::select(vec![1usize, 9, 29]),
        seed in 0u64..1000,
    ) {
        let src = prologue_program(&[a, c, h, w], seed);
        let fused = printed_bits(&src, ExecMode::Fused);
        let eager = printed_bits(&src, ExecMode::Eager);
        prop_assert_eq!(fused.len(), 4);
        prop_assert!(fused == eager, "fused and eager differ for\n{}", src);
    }
}

/// Products with a bias and a relu after them (`passes::epilogue` makes them one kernel, the
/// bias and relu applied to the product's rows in place), 2-d and batched, with a transposed
/// operand, and with the sum read elsewhere too (the relu then stays in its region).
fn epilogue_program(a: usize, k: usize, n: usize, seed: u64) -> String {
    format!(
        "let x = randn(f32[{a}, {k}], seed: {seed})\n\
         let w = randn(f32[{n}, {k}], seed: {s2})\n\
         let b = randn(f32[{n}], seed: {s3})\n\
         print(relu(x @ transpose(w, 0, 1) + b))\n\
         let h = x @ transpose(w, 0, 1) + b * 2.0\n\
         print(relu(h), h * 0.5)\n\
         let x3 = randn(f32[2, {a}, {k}], seed: {s4})\n\
         print(relu(x3 @ transpose(w, 0, 1) + b), x3 @ transpose(w, 0, 1) + b)\n",
        s2 = seed + 1,
        s3 = seed + 2,
        s4 = seed + 3,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn product_epilogues_equal_eager(
        a in prop::sample::select(vec![1usize, 7, 129]),
        k in prop::sample::select(vec![1usize, 16, 300]),
        n in prop::sample::select(vec![1usize, 5, 513]),
        seed in 0u64..1000,
    ) {
        let src = epilogue_program(a, k, n, seed);
        let fused = printed_bits(&src, ExecMode::Fused);
        let eager = printed_bits(&src, ExecMode::Eager);
        prop_assert_eq!(fused.len(), 3);
        prop_assert!(fused == eager, "fused and eager differ for\n{}", src);
    }
}
