//! The native kernels (fused regions compiled by this machine's back end, AVX-512 or Cranelift:
//! `dlc_jit::native`) against the eager interpreter: bit for bit, on sizes that exercise the
//! vector loops, their remainders, and the chunking across
//! threads (1, 3, 50, 783, 4097 and a multi-chunk 40,000), with every op the JIT compiles.

use dlc::{ExecMode, Program};

fn printed(src: &str, mode: ExecMode) -> Vec<Vec<u64>> {
    let p = Program::run_with("jit_test.dl", src, None, false, 0, mode);
    assert!(p.ok, "{:?}", p.diagnostics());
    p.output().printed_bits()
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
             print(tanh(x * 3.0), tanh(y), log(abs(x)), log(x), log(abs(y) * 1e-40), log(exp(x * 30.0)), log(x * 0.0))\n\
             let xb = cast(x, bf16)\n\
             print(cast(xb * cast(y, bf16) + exp(xb) / (xb + 0.5), f32))\n"
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

/// Train the first recipe of `src` (`--jit` or not, fused or eager): the logged losses' and the
/// final parameters' bits, and what autotuning chose.
fn train_bits(src: &str, jit: bool, fuse: bool) -> (Vec<u64>, Vec<Vec<u64>>, Vec<Option<bool>>) {
    let mut p = dlc::Program::run("train_bits.dl", src, None, false);
    assert!(p.ok, "{:?}", p.diagnostics());
    let info = p.session.t.recipes[0].clone();
    let mut opts = dlc::train::TrainOptions::new(std::env::temp_dir(), 0);
    (opts.jit, opts.fuse) = (jit, fuse);
    let mut t = dlc::train::Trainer::new(&mut p.session, info, opts).expect("trainer");
    let r = t.run().expect("training");
    let tuned = t.kernels().tuned();
    let params: Vec<Vec<u64>> = t.parameters().into_iter().map(|(_, v)| v.to_f64().into_iter().map(f64::to_bits).collect()).collect();
    let losses: Vec<u64> = r.losses.iter().map(|l| l.1.to_bits()).collect();
    (losses, params, tuned)
}

/// Without `--jit`, regions of 64K elements or more are compiled to native code too, timed
/// both ways over their first launches, and the faster kept (`exec::fused::Tune`). Whatever is
/// chosen, training gives the same bits as the interpreter alone (`--jit` forced) and as the
/// eager interpreter: the losses and every parameter after 12 AdamW steps.
#[test]
fn autotuned_kernels_train_bit_for_bit_as_the_interpreter() {
    let src = "use std.nn\nuse std.data\nuse std.optim\n\
        model M() {\n  a = Linear(512, 256)\n  b = Linear(256, 10)\n  forward(x: f32[B, 512]) -> f32[B, 10] = x |> a |> gelu |> b\n}\n\
        let xs = randn(f32[192, 512], seed: 1)\nlet ys = cast(abs(randn(f32[192], seed: 2)) * 3.0, i64)\n\
        data d = tensors(xs, ys) |> batch(16, drop_last: true)\n\
        train {\n  model = M()\n  data = d\n  loss = cross_entropy(model(x), y)\n  optimizer = adamw(lr: 1e-3)\n  epochs = 1\n  log every 1 steps\n}\n";
    let run = |jit: bool, fuse: bool| train_bits(src, jit, fuse);
    let (auto_losses, auto_params, tuned) = run(false, true);
    assert!(!tuned.is_empty(), "the AdamW update of the 131k-weight layer is measured");
    assert!(tuned.iter().all(Option::is_some), "every measured program has chosen after 12 steps: {tuned:?}");
    let (jit_losses, jit_params, _) = run(true, true);
    let (eager_losses, eager_params, _) = run(false, false);
    assert_eq!(auto_losses, jit_losses);
    assert_eq!(auto_losses, eager_losses);
    assert!(auto_params == jit_params && auto_params == eager_params, "parameters differ after training");
}

/// Row kernels (softmax, log-softmax, layer norm and their neighbours) with their regions as
/// native code, one row per call, give the interpreter's bits: rows shorter and longer than the
/// 4-lane loop, a single row, and enough rows to split across threads.
#[test]
fn row_kernels_compiled_equal_the_interpreter_bit_for_bit() {
    for (rows, len) in [(1usize, 3usize), (5, 7), (50, 65), (1100, 64)] {
        let src = format!(
            "let x = randn(f32[{rows}, {len}], seed: 3) * 3.0\n\
             let w = randn(f32[{len}], seed: 4)\n\
             let b = randn(f32[{len}], seed: 5)\n\
             print(softmax(x) * 2.0 + 1.0)\n\
             print(log_softmax(x * 0.5))\n\
             print(layer_norm(x, w, b))\n\
             print(exp(x - logsumexp(x, keepdim: true)) * x)\n"
        );
        let fused = printed(&src, ExecMode::FusedJit);
        let eager = printed(&src, ExecMode::Eager);
        assert_eq!(fused.len(), eager.len());
        for (i, (f, e)) in fused.iter().zip(&eager).enumerate() {
            if let Some(j) = f.iter().zip(e).position(|(a, b)| a != b) {
                panic!(
                    "{rows}x{len}, print #{}: element {j} is {} compiled, {} interpreted",
                    i + 1,
                    f64::from_bits(f[j]),
                    f64::from_bits(e[j])
                );
            }
        }
    }
}

/// Sums over axes with their prologue (batch-norm statistics and their gradients, here over
/// 8 x 16 x 32 x 32 = 131K values) are measured with native prologues too; whatever is chosen,
/// training gives the bits of `--jit` forced and of the eager interpreter.
#[test]
fn autotuned_prologue_sums_train_bit_for_bit_as_the_interpreter() {
    let src = "use std.nn\nuse std.data\nuse std.optim\n\
        model M() {\n  conv = Conv2d(3, 16, 3, padding: 1, bias: false)\n  bn = BatchNorm2d(16)\n  fc = Linear(16384, 10)\n  \
        forward(x: f32[B, 3, 32, 32]) -> f32[B, 10] = x |> conv |> bn |> relu |> flatten(start: 1) |> fc\n}\n\
        let xs = randn(f32[96, 3, 32, 32], seed: 1)\nlet ys = cast(abs(randn(f32[96], seed: 2)) * 3.0, i64)\n\
        data d = tensors(xs, ys) |> batch(8, drop_last: true)\n\
        train {\n  model = M()\n  data = d\n  loss = cross_entropy(model(x), y)\n  optimizer = sgd(lr: 0.01, momentum: 0.9)\n  epochs = 1\n  log every 1 steps\n}\n";
    let run = |jit: bool, fuse: bool| train_bits(src, jit, fuse);
    let (auto_losses, auto_params, tuned) = run(false, true);
    assert!(tuned.iter().all(Option::is_some), "every measured kernel has chosen after 12 steps: {tuned:?}");
    let (jit_losses, jit_params, _) = run(true, true);
    let (eager_losses, eager_params, _) = run(false, false);
    assert_eq!(auto_losses, jit_losses);
    assert_eq!(auto_losses, eager_losses);
    assert!(auto_params == jit_params && auto_params == eager_params, "parameters differ after training");
}

/// An output larger than the caches (4M elements and a remainder) is streamed to memory: by the
/// native code itself with non-temporal stores where it can (AVX-512), else through L1 staging
/// buffers; either way the interpreter's bits.
#[test]
fn streamed_outputs_equal_the_interpreter_bit_for_bit() {
    let n = (1 << 22) + 37;
    let src = format!("let x = randn(f32[{n}], seed: 3)\nprint(gelu(x) * 2.0 + exp(-x))\n");
    let fused = printed(&src, ExecMode::FusedJit);
    let eager = printed(&src, ExecMode::Eager);
    assert!(fused == eager, "streamed output differs from the interpreter's");
}
