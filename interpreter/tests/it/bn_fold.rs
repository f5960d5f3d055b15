//! Batch-norm folding in evaluation (`passes::bn_fold`): the evaluation of a trained network with
//! conv → batch norm → relu and linear → batch norm → relu runs with each batch norm folded into
//! the product before it, and its metrics agree with the unfolded evaluation (`--no-fuse`, the
//! program as written) to rounding. Where a fold would change what else reads the values, none
//! is made.

use dlc::train::{TrainOptions, Trainer};
use dlc::Program;
use std::path::Path;

const NET: &str = r#"
use std.nn
use std.data
use std.optim
model Net() {
  conv = Conv2d(3, 6, 3, padding: 1)
  bn = BatchNorm2d(6)
  fc = Linear(96, 20)
  bn1 = BatchNorm1d(20)
  out = Linear(20, 4)
  forward(x: f32[B, 3, 4, 4]) -> f32[B, 4] {
    let h = x |> conv |> bn |> relu
    BODY
  }
}
let images = randn(f32[32, 3, 4, 4], seed: 1)
let targets = randn(f32[32, 4], seed: 2)
data rows = tensors(images, targets) |> batch(8)
train {
  model = Net()
  data = rows
  loss = mse(model(x), y)
  optimizer = sgd(lr: 0.05, momentum: 0.9)
  epochs = 3
  evaluate rows every epoch { (mse(model(x), y), mean(model(x))) }
}
"#;

/// The straight network: both batch norms follow a product.
const STRAIGHT: &str = "reshape(h, (B, 96)) |> fc |> bn1 |> relu |> out";
/// The batch norm's input is also read by the residual sum: folding it would need the product
/// twice, so it is left alone (the convolution's batch norm is still folded).
const SHARED: &str = "let z = reshape(h, (B, 96)) |> fc\n    (bn1(z) + z) |> relu |> out";

struct Run {
    evals: Vec<Vec<f64>>,
    folds: usize,
    library_kernels: usize,
    /// Per compiled training step: the sums over (N, H, W) of the convolution's full-size
    /// [8, 6, 4, 4] values (in whichever layout the plan chose).
    conv_bn_sums: Vec<usize>,
}

fn run(body: &str, fuse: bool) -> Run {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let src = NET.replace("BODY", body);
    let mut p = Program::run("bn_fold.dl", &src, Some(&root), false);
    assert!(p.ok, "{:?}", p.diagnostics());
    let info = p.session.t.recipes[0].clone();
    let mut opts = TrainOptions::new(root, 0);
    opts.fuse = fuse;
    let mut t = Trainer::new(&mut p.session, info, opts).expect("trainer");
    let report = t.run().expect("training runs");
    use dlc_language::ir::{Op, ReduceOp};
    let g = t.graph();
    let full_sum = |n: &dlc_language::ir::NodeId| {
        let node = g.node(*n);
        let size = |s: &[dlc_language::types::Dim]| s.iter().map(|d| d.as_known().unwrap_or(0)).product::<i64>();
        matches!(node.op, Op::Reduce(ReduceOp::Sum, _))
            && size(&g.node(node.src[0]).shape) == 8 * 6 * 16
            && g.node(node.src[0]).shape.len() == 4
            && size(&node.shape) == 6
    };
    let conv_bn_sums = t.step_nodes().iter().map(|nodes| nodes.iter().filter(|n| full_sum(n)).count()).collect();
    let compiled = t.compile_evaluations();
    let (_, eg) = compiled[0].1.as_ref().expect("the evaluation compiles");
    // (A product with its bias as its epilogue is one library call too.)
    use dlc_language::passes::fusion::Kernel;
    let library_kernels = eg.plan.kernels.iter().filter(|k| matches!(k, Kernel::Library(_) | Kernel::Gemm(_))).count();
    Run { evals: report.evals.into_iter().map(|e| e.values).collect(), folds: eg.folded.len(), library_kernels, conv_bn_sums }
}

fn assert_close(folded: &Run, eager: &Run, what: &str) {
    assert_eq!(folded.evals.len(), 3, "{what}: one evaluation an epoch");
    for (f, e) in folded.evals.iter().flatten().zip(eager.evals.iter().flatten()) {
        assert!((f - e).abs() <= 1e-5 * e.abs().max(1.0), "{what}: folded {f} against unfolded {e}");
    }
}

#[test]
fn batch_norms_after_products_are_folded_and_agree_with_the_unfolded_evaluation() {
    let folded = run(STRAIGHT, true);
    let eager = run(STRAIGHT, false);
    assert_eq!(folded.folds, 2, "conv → bn and linear → bn1");
    assert_eq!(eager.folds, 0, "--no-fuse computes the program as written");
    assert_close(&folded, &eager, "straight");
    // Training is untouched by the fold: the metrics are not all equal by accident.
    assert_ne!(folded.evals[0], folded.evals[2], "the evaluations follow training");
    // The convolution, the two matrix products and the metric's sum: folding adds no product.
    assert_eq!(folded.library_kernels, 4, "per batch: conv2d, two matmuls, a sum");
}

#[test]
fn a_batch_norm_whose_input_is_read_elsewhere_is_not_folded() {
    let folded = run(SHARED, true);
    let eager = run(SHARED, false);
    assert_eq!(folded.folds, 1, "only the convolution's batch norm");
    assert_close(&folded, &eager, "shared");
}

/// Batch norm's backward sums the full-size values twice a layer, sum(dy) and sum(dy * x̂) (the
/// closed form PyTorch's kernel computes), besides the forward's mean and variance: autodiff's
/// d/ds and d/dmu reuse them (`passes::sum_factors`, and the variance centred on the detached
/// mean), where they were two more sums.
#[test]
fn a_batch_norms_backward_sums_dy_and_dy_x_hat_only() {
    // Without fusion the convolution keeps its bias (no conv-bias pass): its gradient's sum is
    // a fifth.
    for (fuse, sums) in [(true, 4), (false, 5)] {
        let r = run(STRAIGHT, fuse);
        assert!(!r.conv_bn_sums.is_empty(), "a step was compiled");
        assert!(r.conv_bn_sums.iter().all(|n| *n == sums), "fuse {fuse}: {:?}", r.conv_bn_sums);
    }
}
