//! `checkpoint { ... }`: a block's values are recomputed in backward instead of kept from the
//! forward pass. Training must be bit-identical to the same program without the hint (the
//! recomputation runs the same ops on the same inputs, dropout included), and the step's memory
//! plan must hold less at its peak.

use dlc::train::{TrainOptions, Trainer};
use dlc::Program;
use dlc_language::ir::Op;
use dlc_language::passes::fusion::Kernel;
use std::path::Path;

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Three residual blocks (linear, gelu, dropout, linear, layer norm), each body written as BODY.
fn source(body: &str) -> String {
    r#"
use std.nn
use std.data
use std.optim
model Block(d: int) {
  fc1 = Linear(d, 4 * d)
  fc2 = Linear(4 * d, d)
  drop = Dropout(0.1)
  norm = LayerNorm(d)
  forward(x) = norm(x + (x |> fc1 |> gelu |> drop |> fc2))
}
model Net() {
  inp = Linear(24, 16)
  b1 = Block(16)
  b2 = Block(16)
  b3 = Block(16)
  out = Linear(16, 5)
  forward(x: f32[B, 24]) -> f32[B, 5] {
    let h = inp(x)
    let h = BODY1
    let h = BODY2
    let h = BODY3
    out(h)
  }
}
data rows = tensors(randn(f32[256, 24], seed: 1), randn(f32[256, 5], seed: 2)) |> batch(128)
train {
  model = Net()
  data = rows
  loss = mse(model(x), y)
  optimizer = adamw(lr: 0.01)
  epochs = 6
  log every 1 steps
}
"#
    .replace("BODY1", &body.replace("BLOCK", "b1"))
    .replace("BODY2", &body.replace("BLOCK", "b2"))
    .replace("BODY3", &body.replace("BLOCK", "b3"))
}

struct Run {
    losses: Vec<f64>,
    params: Vec<(String, Vec<f64>)>,
    peak: usize,
    recompute_views: usize,
    products: usize,
}

fn run(src: &str, fuse: bool) -> Run {
    run_with(src, fuse, false)
}

/// With `remat`, the compiler may also recompute cheap values on its own (automatic
/// rematerialisation); the hint's tests leave it off to compare the hint alone.
fn run_with(src: &str, fuse: bool, remat: bool) -> Run {
    let mut p = Program::run("checkpoint_test.dl", src, Some(&examples()), false);
    assert!(p.ok, "{:?}", p.diagnostics());
    let info = p.session.t.recipes[0].clone();
    let mut opts = TrainOptions::new(examples(), 0);
    opts.fuse = fuse;
    opts.remat = remat;
    let mut t = Trainer::new(&mut p.session, info, opts).expect("trainer");
    let shapes = t.batch_shapes().expect("static batch shapes");
    let (plan, _) = t.compile_step(&shapes).expect("step compiles");
    let g = t.graph();
    let peak = dlc_language::passes::memory::plan_memory(g, &plan).peak_intermediates;
    let count = |f: &dyn Fn(&Op) -> bool| {
        plan.kernels.iter().filter(|k| matches!(k, Kernel::Free(n) | Kernel::Library(n) if f(&g.node(*n).op))).count()
    };
    let recompute_views = count(&|op| matches!(op, Op::Recompute));
    // (A product with its bias as its epilogue counts too.)
    let products = count(&|op| matches!(op, Op::MatMul)) + plan.kernels.iter().filter(|k| matches!(k, Kernel::Gemm(_))).count();
    let r = t.run().expect("training runs");
    let params = t.parameters().into_iter().map(|(n, v)| (n, v.to_f64())).collect();
    Run { losses: r.losses.iter().map(|l| l.1).collect(), params, peak, recompute_views, products }
}

#[test]
fn checkpointed_blocks_train_bit_identically_with_a_lower_peak() {
    for fuse in [true, false] {
        let plain = run(&source("BLOCK(h)"), fuse);
        let ck = run(&source("checkpoint { BLOCK(h) }"), fuse);
        assert!(plain.losses.len() >= 12, "2 batches an epoch, 6 epochs, a loss logged each step: {:?}", plain.losses);
        assert!(plain.losses.last() < plain.losses.first(), "{:?}", plain.losses);
        assert_eq!(ck.losses, plain.losses, "fuse {fuse}: losses");
        assert_eq!(ck.params, plain.params, "fuse {fuse}: parameters after training");
        assert_eq!(plain.recompute_views, 0);
        assert!(ck.recompute_views > 0, "fuse {fuse}: nothing recomputed");
        // Each block's two forward products run again in backward.
        assert_eq!(ck.products, plain.products + 6, "fuse {fuse}: products");
        assert!(ck.peak * 10 < plain.peak * 9, "fuse {fuse}: peak {} with checkpoints, {} without", ck.peak, plain.peak);
    }
}

/// Automatic rematerialisation: without any hint the compiler recomputes cheap values (gelu's
/// output from its input, which gelu's gradient keeps anyway; the dropout's output from that and
/// its mask) when the step's planned peak is lower, and training is bit for bit the same.
#[test]
fn cheap_values_are_recomputed_automatically_when_the_peak_is_lower() {
    let src = source("BLOCK(h)");
    let kept = run_with(&src, true, false);
    let auto = run_with(&src, true, true);
    assert_eq!(kept.recompute_views, 0);
    assert!(auto.recompute_views > 0, "nothing recomputed");
    assert_eq!(auto.products, kept.products, "only elementwise work is recomputed");
    assert!(auto.peak < kept.peak, "peak {} with rematerialisation, {} without", auto.peak, kept.peak);
    assert_eq!(auto.losses, kept.losses);
    assert_eq!(auto.params, kept.params);
}

/// Autocast rewrites the forward graph before autodiff: the rewritten block (its casts
/// included) is still recomputed, and bf16 training is bit-identical with and without the hint.
#[test]
fn checkpointed_blocks_survive_the_autocast_rewrite() {
    let bf16 = |src: String| src.replace("  epochs = 6\n", "  epochs = 6\n  precision = bf16\n");
    let plain = run(&bf16(source("BLOCK(h)")), true);
    let ck = run(&bf16(source("checkpoint { BLOCK(h) }")), true);
    assert!(ck.recompute_views > 0, "nothing recomputed under bf16");
    assert_eq!(ck.products, plain.products + 6);
    assert_eq!(ck.losses, plain.losses);
    assert_eq!(ck.params, plain.params);
}

#[test]
fn a_checkpoint_around_everything_equals_none_and_nesting_is_the_outer_block() {
    let plain = run(&source("BLOCK(h)"), true);
    let outer = run(
        &source("BLOCK(h)").replace(
            "let h = inp(x)\n    let h = b1(h)\n    let h = b2(h)\n    let h = b3(h)\n    out(h)",
            "checkpoint { out(checkpoint { b3(b2(checkpoint { b1(inp(x)) })) }) }",
        ),
        true,
    );
    assert!(outer.recompute_views > 0);
    assert_eq!(outer.losses, plain.losses);
    assert_eq!(outer.params, plain.params);
}
