//! The Cranelift kernels (fused regions compiled to native code) against the eager interpreter:
//! bit for bit, on sizes that exercise the 4-lane loop, its scalar tail, and the chunking across
//! threads (1, 3, 50, 783, 4097 and a multi-chunk 40,000), with every op the JIT compiles.

use dlc::{ExecMode, Program};

fn printed(src: &str, mode: ExecMode) -> Vec<Vec<u64>> {
    let p = Program::run_with("jit_test.dl", src, None, false, 0, mode);
    assert!(p.ok, "{:?}", p.diagnostics());
    p.output().printed.iter().map(|x| x.tensors.iter().flat_map(|t| t.to_f64()).map(f64::to_bits).collect()).collect()
}

#[test]
fn compiled_kernels_equal_the_interpreter_bit_for_bit() {
    for n in [1usize, 3, 50, 783, 4097, 40_000] {
        let src = format!(
            "let x = randn(f32[{n}], seed: 1) * 4.0\n\
             let y = randn(f32[{n}], seed: 2)\n\
             print(gelu(x) * sigmoid(y) + maximum(x, y) - minimum(x, 0.5 * y))\n\
             print(where(x > y, exp(-abs(x)), sqrt(abs(y))) / (1.0 + abs(x)) + erf(y) * cast(x != y, f32))\n\
             print(cast((x > 0.0) and (y <= 0.0), f32) + cast((x < -1.0) or (y == 0.0), f32) - x * 1e30 * exp(x * 30.0))\n\
             print(exp(x * 40.0), exp(-x * 40.0), erf(x * 3.0), -x, 1.0 / (x + 0.25))\n\
             print(tanh(x * 3.0), tanh(y), log(abs(x)), log(x), log(abs(y) * 1e-40), log(exp(x * 30.0)), log(x * 0.0))\n"
        );
        let fused = printed(&src, ExecMode::FusedJit);
        let eager = printed(&src, ExecMode::Eager);
        assert_eq!(fused.len(), eager.len());
        for (i, (f, e)) in fused.iter().zip(&eager).enumerate() {
            if let Some(j) = f.iter().zip(e).position(|(a, b)| a != b) {
                panic!("n = {n}, print #{}: element {j} is {} compiled, {} interpreted", i + 1, f64::from_bits(f[j]), f64::from_bits(e[j]));
            }
        }
    }
}
