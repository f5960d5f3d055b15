//! Autocast and f16 loss scaling, through real training runs on the digits data set.

use dlc::train::{TrainOptions, Trainer};
use dlc::Program;
use std::path::Path;

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

const DIGITS: &str = r#"
use std.nn
use std.data
use std.optim
model Net() {
  fc1 = Linear(64, 64)
  fc2 = Linear(64, 10)
  forward(x: f32[B, 64]) = FORWARD
}
data train_set = csv("data/sklearn/digits.csv.gz", features: 64, label: 64) |> map(r => (r.features / 16.0, r.label)) |> split(0.8) |> shuffle(seed: 1) |> batch(32, drop_last: true)
data val_set = csv("data/sklearn/digits.csv.gz", features: 64, label: 64) |> map(r => (r.features / 16.0, r.label)) |> split(0.8, part: "rest") |> batch(360)
train {
  model = Net()
  data = train_set
  loss = LOSS
  optimizer = adam(lr: 0.005)
  steps = STEPS
  evaluate val_set every epoch { accuracy(model(x), y) }
}
"#;

struct Run {
    report: dlc::train::TrainReport,
    params: Vec<(String, Vec<f64>)>,
    loss_scale: Option<(f64, usize)>,
    /// Products lowered to bf16/f16, and products a `precision f32` block kept in f32.
    lowered: usize,
    kept: usize,
}

const PLAIN: &str = "fc2(relu(fc1(x)))";

fn run(loss: &str, steps: usize, precision: &str) -> Run {
    run_with(PLAIN, loss, steps, precision).expect("training runs")
}

/// Train with this forward body; the trainer's error when the step cannot be built.
fn run_with(forward: &str, loss: &str, steps: usize, precision: &str) -> Result<Run, String> {
    let src = DIGITS.replace("FORWARD", forward).replace("LOSS", loss).replace("STEPS", &steps.to_string());
    let mut p = Program::run("precision_test.dl", &src, Some(&examples()), false);
    assert!(p.ok, "{:?}", p.diagnostics());
    let mut info = p.session.t.recipes[0].clone();
    dlc::train::apply_overrides(&mut info, &[("precision".into(), precision.into())]).expect("precision override");
    let mut t = Trainer::new(&mut p.session, info, TrainOptions::new(examples(), 0)).expect("trainer");
    let report = t.run().map_err(|e| e.to_string())?;
    let shapes = t.batch_shapes().expect("known batch shapes");
    let decisions = t.autocast(&shapes).map(|(_, d)| d).unwrap_or_default();
    let lowered = decisions.iter().filter(|d| d.dtype != dlc_language::types::DType::F32).count();
    let kept = decisions.len() - lowered;
    let params = t.parameters().into_iter().map(|(n, v)| (n, v.to_f64())).collect();
    Ok(Run { report, params, loss_scale: t.loss_scale(), lowered, kept })
}

fn max_diff(a: &[(String, Vec<f64>)], b: &[(String, Vec<f64>)]) -> f64 {
    a.iter().zip(b).flat_map(|((_, x), (_, y))| x.iter().zip(y).map(|(p, q)| (p - q).abs())).fold(0.0, f64::max)
}

/// The issue's bar, at the scale of a test: training under autocast reaches the accuracy of f32
/// training within a point, while its parameters really differ (the products were rounded).
#[test]
fn bf16_and_f16_autocast_train_as_well_as_f32() {
    let ce = "cross_entropy(model(x), y)";
    let f32_run = run(ce, 800, "f32");
    let acc32 = f32_run.report.evals.last().unwrap().values[0];
    assert!(acc32 > 0.9, "f32 accuracy {acc32}");
    assert_eq!(f32_run.lowered, 0);
    for low in ["bf16", "f16"] {
        let r = run(ce, 800, low);
        let acc = r.report.evals.last().unwrap().values[0];
        assert!((acc - acc32).abs() <= 0.01, "{low}: accuracy {acc} against f32's {acc32}");
        assert_eq!(r.lowered, 2, "{low}: both linear layers' products are lowered");
        let d = max_diff(&r.params, &f32_run.params);
        assert!(d > 1e-4, "{low}: the parameters equal f32's (max difference {d}): nothing was lowered");
    }
}

/// A loss whose gradient is 1 per output element: at GradScaler's initial scale 65536 the
/// scaled gradient overflows f16 (max 65504), so the first step is skipped and the scale halves;
/// once it is small enough the steps go through. A skipped step leaves every parameter as it was.
#[test]
fn f16_loss_scaling_skips_an_overflowing_step_and_backs_off() {
    let loss = "sum(model(x))";
    let one = run(loss, 1, "f16");
    assert_eq!(one.loss_scale, Some((32768.0, 1)), "the first step overflows and is skipped");
    let init = run(loss, 1, "f32");
    // f32 moved the parameters in its step; the skipped f16 step did not.
    let untouched = {
        let src = DIGITS.replace("FORWARD", PLAIN).replace("LOSS", loss).replace("STEPS", "1");
        let mut p = Program::run("precision_test.dl", &src, Some(&examples()), false);
        let info = p.session.t.recipes[0].clone();
        let t = Trainer::new(&mut p.session, info, TrainOptions::new(examples(), 0)).expect("trainer");
        t.parameters().into_iter().map(|(n, v)| (n, v.to_f64())).collect::<Vec<_>>()
    };
    assert_eq!(max_diff(&one.params, &untouched), 0.0, "a skipped step changes nothing");
    assert!(max_diff(&init.params, &untouched) > 0.0);
    // Over 12 steps the scale halves until the products fit in f16, then the steps go through.
    let more = run(loss, 12, "f16");
    let (scale, k) = more.loss_scale.expect("f16 scales the loss");
    assert!((1..12).contains(&k), "{k} of 12 steps skipped");
    assert_eq!(scale, 65536.0 / 2f64.powi(k as i32));
    assert!(max_diff(&more.params, &untouched) > 0.0);
}

/// `precision DTYPE { ... }` overrides the recipe for the products inside it (a nested
/// `torch.autocast`): the whole forward in a `bf16` block of an f32 recipe trains bit for bit as
/// a bf16 recipe does; an `f32` block keeps its layer in f32 in a bf16 recipe, which then trains
/// differently from both; an `f16` block needs the recipe's loss scaling.
#[test]
fn precision_blocks_override_the_recipe() {
    let ce = "cross_entropy(model(x), y)";
    let bf16 = run(ce, 30, "bf16");
    let f32_run = run(ce, 30, "f32");
    let all_in_block = run_with("precision bf16 { fc2(relu(fc1(x))) }", ce, 30, "f32").unwrap();
    assert_eq!((all_in_block.lowered, all_in_block.kept), (2, 0));
    assert_eq!(max_diff(&all_in_block.params, &bf16.params), 0.0, "the block is the recipe's bf16, bit for bit");
    let head_f32 = run_with("precision f32 { fc2(relu(fc1(x))) }", ce, 30, "bf16").unwrap();
    assert_eq!((head_f32.lowered, head_f32.kept), (0, 2), "the whole forward in an f32 block");
    assert_eq!(max_diff(&head_f32.params, &f32_run.params), 0.0, "an f32 block in a bf16 recipe is f32, bit for bit");
    let mixed = run_with("precision f32 { fc2(relu(precision bf16 { fc1(x) })) }", ce, 30, "bf16").unwrap();
    assert_eq!((mixed.lowered, mixed.kept), (1, 1), "the innermost block decides");
    assert!(max_diff(&mixed.params, &bf16.params) > 0.0 && max_diff(&mixed.params, &f32_run.params) > 0.0);
    // f16 without the recipe's loss scaling is refused, with the reason.
    let e = run_with("precision f16 { fc2(relu(fc1(x))) }", ce, 30, "f32").err().expect("refused");
    assert!(e.contains("needs `precision = f16` in the recipe"), "{e}");
    assert_eq!(run_with("precision f16 { fc2(relu(fc1(x))) }", ce, 30, "f16").unwrap().lowered, 2);
}

/// A precision that is not one gets E0403 at the word, before anything runs.
#[test]
fn a_precision_block_names_a_training_precision() {
    let src = DIGITS
        .replace("FORWARD", "precision f64 { fc2(relu(fc1(x))) }")
        .replace("LOSS", "cross_entropy(model(x), y)")
        .replace("STEPS", "1");
    let p = Program::check("precision_test.dl", &src, Some(&examples()));
    let d = p.diagnostics();
    assert!(d.iter().any(|d| d.code == "E0403" && d.message.contains("`precision` should be one of")), "{d:?}");
}

/// Train `src`'s first recipe, fused or as written (`--no-fuse`: every cast computed): the
/// parameters' bits, how many casts the fused step's plan left to its products, and how many
/// bf16 products took their widening, bias and relu as their epilogue, and how many their
/// widening and a relu's backward mask (passes/epilogue.rs).
fn bf16_train(src: &str, fuse: bool) -> (Vec<Vec<u64>>, usize, [usize; 2]) {
    let mut p = Program::run("fold_test.dl", src, None, false);
    assert!(p.ok, "{:?}", p.diagnostics());
    let info = p.session.t.recipes[0].clone();
    let mut opts = TrainOptions::new(std::env::temp_dir(), 0);
    opts.fuse = fuse;
    let mut t = Trainer::new(&mut p.session, info, opts).expect("trainer");
    t.run().expect("training");
    let shapes = t.batch_shapes().expect("known batch shapes");
    let (plan, _) = t.compile_step(&shapes).expect("the step compiles");
    let folded = dlc_language::passes::fusion::folded_casts(t.graph(), &plan);
    let gemms: Vec<_> =
        plan.kernels.iter().filter_map(|k| if let dlc_language::ir::plan::Kernel::Gemm(gk) = k { Some(gk) } else { None }).collect();
    let widening =
        [gemms.iter().filter(|gk| gk.widens && gk.relu()).count(), gemms.iter().filter(|gk| gk.widens && gk.mask.is_some()).count()];
    let params = t.parameters().into_iter().map(|(_, v)| v.to_f64().into_iter().map(f64::to_bits).collect()).collect();
    (params, folded, widening)
}

/// On the CPU, autocast's casts read only by bf16 products are left to the products, whose
/// kernels round each operand as they convert it (fusion.rs `fold_casts`): the fused step's plan
/// has them as views, and training gives the bits of the run as written (`--no-fuse`, every cast
/// computed). The small model's products run on the f32 kernels over rounded copies; the large
/// one's are measured on every bf16 kernel this machine has and run on the fastest. The first
/// two layers' products also take their bias and relu (after the widening to f32, which does
/// nothing on the CPU) as their epilogue, the products of their gradients the relus' backward
/// masks, and the bits stay those of the program as written.
#[test]
fn products_that_round_their_operands_train_bit_for_bit() {
    for (inputs, hidden, batch) in [(64, 32, 32), (512, 256, 128)] {
        let src = format!(
            "use std.nn\nuse std.data\nuse std.optim\n\
             model M() {{\n  a = Linear({inputs}, {hidden})\n  b = Linear({hidden}, {hidden})\n  c = Linear({hidden}, 10)\n  \
             forward(x: f32[B, {inputs}]) -> f32[B, 10] = x |> a |> relu |> b |> relu |> c\n}}\n\
             let xs = randn(f32[{n}, {inputs}], seed: 1)\nlet ys = cast(abs(randn(f32[{n}], seed: 2)) * 3.0, i64)\n\
             data d = tensors(xs, ys) |> batch({batch}, drop_last: true)\n\
             train {{\n  model = M()\n  data = d\n  loss = cross_entropy(model(x), y)\n  optimizer = adamw(lr: 1e-3)\n  epochs = 1\n  precision = bf16\n}}\n",
            n = 6 * batch
        );
        let (fused, folded, epilogues) = bf16_train(&src, true);
        let (eager, none, _) = bf16_train(&src, false);
        assert_eq!(epilogues, [2, 2], "{inputs}x{hidden}: the hidden layers' bias and relu, and their gradients' masks, as epilogues");
        // x, the first two weights, the first hidden activation, and the output gradients of
        // the first two layers; the classifier's products (10 wide: thin) keep theirs.
        assert_eq!(folded, 6, "{inputs}x{hidden}: casts folded");
        assert_eq!(none, 0, "the program as written computes every cast");
        assert!(fused == eager, "{inputs}x{hidden}: parameters differ after training");
    }
}
