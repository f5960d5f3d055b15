//! The device executor (`dlc::runner`) trains as the CPU does. Without a GPU it runs over the
//! emulated GPU: the CUDA C of every generated kernel compiled for the CPU, launched on
//! device-resident buffers, with parameters, optimiser state, buffers and gradient sums kept in
//! the device's slots between steps and what has no device kernel computed on the host. Only the
//! cudarc driver underneath (runner/cuda.rs) is left out. Sums run in another order than the
//! CPU's (a block's tree against the interpreter's chunks, f64 in axis sums), so results are
//! compared within tolerances, not bit for bit.

use dlc::runner::DeviceKind as Target;
use dlc::train::{TrainOptions, Trainer};

struct Run {
    losses: Vec<f64>,
    /// Every evaluation's metric values, in order.
    evals: Vec<Vec<f64>>,
    params: Vec<(String, Vec<f64>)>,
    report: dlc::runner::Report,
    /// The channels-last convolutions (and gradients) of each compiled step.
    channels_last: Vec<usize>,
}

fn train(src: &str, target: Target, setup: impl FnOnce(&mut TrainOptions)) -> Run {
    let mut p = dlc::Program::run("device_test.dl", src, None, false);
    assert!(p.ok, "{:?}", p.diagnostics());
    let info = p.session.t.recipes[0].clone();
    let mut opts = TrainOptions::new(std::env::temp_dir(), 0);
    opts.device = target;
    setup(&mut opts);
    let mut t = Trainer::new(&mut p.session, info, opts).expect("trainer");
    let r = t.run().expect("training");
    Run {
        losses: r.losses.iter().map(|l| l.1).collect(),
        evals: r.evals.iter().map(|e| e.values.clone()).collect(),
        params: t.parameters().into_iter().chain(t.buffers()).map(|(n, v)| (n, v.to_f64())).collect(),
        report: t.runner_report(),
        channels_last: channels_last(&t),
    }
}

/// The channels-last convolutions (and gradients) of each compiled step.
fn channels_last(t: &Trainer) -> Vec<usize> {
    use dlc_language::ir::Op;
    let g = t.graph();
    let conv = |n: &dlc_language::ir::NodeId| matches!(g.node(*n).op, Op::Conv2d(a) | Op::Conv2dGradInput(a) | Op::Conv2dGradWeight(a) if a.channels_last);
    t.step_nodes().iter().map(|nodes| nodes.iter().filter(|n| conv(n)).count()).collect()
}

/// How training `src` on `target` fails, if it does.
fn training_error(src: &str, target: Target) -> Option<String> {
    let mut p = dlc::Program::run("device_test.dl", src, None, false);
    assert!(p.ok, "{:?}", p.diagnostics());
    let info = p.session.t.recipes[0].clone();
    let mut opts = TrainOptions::new(std::env::temp_dir(), 0);
    opts.device = target;
    let mut t = Trainer::new(&mut p.session, info, opts).expect("trainer");
    t.run().err().map(|e| e.to_string())
}

/// The largest difference relative to the value's scale (at least `floor`).
fn worst(a: &[f64], b: &[f64], floor: f64) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs() / x.abs().max(floor)).fold(0.0, f64::max)
}

fn assert_close(cpu: &Run, gpu: &Run, tol: f64) {
    assert_eq!(cpu.losses.len(), gpu.losses.len());
    let l = worst(&cpu.losses, &gpu.losses, 1e-3);
    assert!(l <= tol, "losses differ by {l:e}: cpu {:?} gpu {:?}", cpu.losses, gpu.losses);
    for ((name, a), (_, b)) in cpu.params.iter().zip(&gpu.params) {
        let d = worst(a, b, 1e-2);
        assert!(d <= tol, "`{name}` differs by {d:e} after training");
    }
}

const MLP: &str = "use std.nn\nuse std.data\nuse std.optim\n\
    model M() {\n  a = Linear(24, 32)\n  n = LayerNorm(32)\n  b = Linear(32, 5)\n  \
    forward(x: f32[B, 24]) -> f32[B, 5] = x |> a |> gelu |> n |> b\n}\n\
    let xs = randn(f32[80, 24], seed: 1)\nlet ys = cast(abs(randn(f32[80], seed: 2)) * 2.0, i64)\n\
    data d = tensors(xs, ys) |> batch(16)\n\
    train {\n  model = M()\n  data = d\n  loss = cross_entropy(model(x), y)\n  optimizer = adamw(lr: 1e-2)\n  epochs = 2\n  PRECISION\n  \
    evaluate d every epoch { (acc: accuracy(model(x), y), ce: cross_entropy(model(x), y)) }\n  log every 1 steps\n}\n";

/// The MLP with each `(from, to)` edit made, in order; each must apply (a variant whose edit
/// stopped matching would silently test the MLP itself).
fn mlp_with(edits: &[(&str, &str)]) -> String {
    edits.iter().fold(MLP.to_string(), |src, (from, to)| {
        assert!(src.contains(from), "the MLP changed: `{from}` is gone; update the variant");
        src.replace(from, to)
    })
}

/// An MLP with GELU, layer norm and cross-entropy under AdamW: elementwise regions, row kernels
/// (layer norm, log-softmax and their gradients), the optimiser's group over every parameter,
/// sums over the batch for the biases' gradients, products through the device's gemm; 10 steps
/// of f32 on the device follow the CPU.
#[test]
fn an_mlp_trains_on_the_device_as_on_the_cpu() {
    let src = MLP.replace("PRECISION", "");
    let cpu = train(&src, Target::Cpu, |_| {});
    let gpu = train(&src, Target::EmulatedCuda, |_| {});
    assert_close(&cpu, &gpu, 1e-4);
    // The evaluations run on the device too: the accuracy exactly, the loss within 1e-4.
    assert_eq!(cpu.evals.len(), 2);
    for (c, g) in cpu.evals.iter().zip(&gpu.evals) {
        assert_eq!(c[0], g[0], "accuracy");
        assert!((c[1] - g[1]).abs() <= 1e-4 * c[1].abs(), "evaluation loss {} on the CPU, {} on the device", c[1], g[1]);
    }
    let kinds = &gpu.report.launches_by_kind;
    for kind in ["elementwise", "rows", "sum"] {
        assert!(kinds.get(kind).copied().unwrap_or(0) >= 10, "{kind} kernels launched every step: {kinds:?}");
    }
    assert!(kinds.contains_key("group"), "the optimiser's update is one launch: {kinds:?}");
    // The data feed's workers copied the batches into the device's pool (page-locked memory on
    // a GPU; the emulated GPU takes every batch), and the uploads ahead sent those copies: the
    // run above equals the CPU's with the values sent from them.
    let r = &gpu.report;
    assert!(r.uploads_pinned_by_workers > 0 && r.uploads_pinned_by_workers <= r.uploads_ahead, "{r:?}");
    assert_eq!(cpu.report.uploads_pinned_by_workers, 0);
    // Plans are compiled once: the second epoch's evaluation reuses the first one's module.
    let one_epoch = train(&src.replace("epochs = 2", "epochs = 1"), Target::EmulatedCuda, |_| {});
    assert_eq!(gpu.report.modules, one_epoch.report.modules, "{:?}", gpu.report);
    // The matrix products (forward, and both gradients through transposed views) run on the
    // device's gemm, none on the host. Per step: two forward, two weight gradients, one input
    // gradient (x needs none); per evaluated batch, two.
    // The first layer's bias add is its product's epilogue in the step (`matmul+bias`); in the
    // evaluation the add, GELU and layer norm are one row kernel, which keeps the add.
    assert_eq!(kinds.get("matmul").copied(), Some(10 * 4 + 2 * 5 * 2), "{kinds:?}");
    assert_eq!(kinds.get("matmul+bias").copied(), Some(10), "{kinds:?}");
    assert!(!gpu.report.host_ops.contains_key("matmul"), "{:?}", gpu.report.host_ops);
    assert!(gpu.report.not_lowered.is_empty(), "{:?}", gpu.report.not_lowered);
}

/// A relu MLP's hidden products carry their bias and relu as cuBLASLt epilogues
/// (`passes::epilogue`): on the emulated GPU the driver's product adds the bias and applies the
/// relu as it writes each element, and training follows the CPU, whose plan has the same
/// epilogue kernels. Without the epilogue pass (`--no-fuse`'s plan) nothing is launched so.
#[test]
fn a_relu_mlps_products_carry_bias_and_relu_on_the_device() {
    let src = mlp_with(&[("PRECISION", ""), ("|> gelu |> n |>", "|> relu |>")]);
    let cpu = train(&src, Target::Cpu, |_| {});
    let gpu = train(&src, Target::EmulatedCuda, |_| {});
    assert_close(&cpu, &gpu, 1e-4);
    let kinds = &gpu.report.launches_by_kind;
    // The hidden layer's product with bias and relu, per step and per evaluated batch; the
    // output layer's with its bias per evaluated batch (in the step the loss's row kernel reads
    // the logits and keeps the add).
    assert_eq!(kinds.get("matmul+bias+relu").copied(), Some(10 + 2 * 5), "{kinds:?}");
    assert_eq!(kinds.get("matmul+bias").copied(), Some(2 * 5), "{kinds:?}");
    assert!(gpu.report.host_ops.is_empty(), "{:?}", gpu.report.host_ops);
    let eager = train(&src, Target::EmulatedCuda, |o| o.fuse = false);
    assert!(eager.report.launches_by_kind.keys().all(|k| !k.starts_with("matmul+")), "{:?}", eager.report.launches_by_kind);
}

/// Nothing in a step goes through the host: dropout's draws (the CPU's counter-based stream,
/// element for element), the labels' one-hot comparison and broadcasts (copies and comparisons
/// of i64), the bias gradients' sums and the evaluation's argmax all run as device kernels.
/// What the host computes is computed once per plan (constants, the iota of class indices), so
/// ten steps take the host exactly as often as five; and the draws being the CPU's, the device
/// follows the CPU as closely as without dropout.
#[test]
fn a_step_with_dropout_never_goes_through_the_host() {
    let src =
        mlp_with(&[("PRECISION", ""), ("model M() {\n", "model M() {\n  drop = Dropout(0.2)\n"), ("|> gelu |>", "|> gelu |> drop |>")]);
    let cpu = train(&src, Target::Cpu, |_| {});
    let gpu = train(&src, Target::EmulatedCuda, |_| {});
    assert_close(&cpu, &gpu, 1e-4);
    let kinds = &gpu.report.launches_by_kind;
    assert_eq!(kinds.get("rand").copied(), Some(10), "one draw a step: {kinds:?}");
    for kind in ["int_binary", "copy", "argmax"] {
        assert!(kinds.contains_key(kind), "no {kind} kernel: {kinds:?}");
    }
    let one_epoch = train(&src.replace("epochs = 2", "epochs = 1"), Target::EmulatedCuda, |_| {});
    assert_eq!(gpu.report.host_ops, one_epoch.report.host_ops, "host work that grows with the steps");
    assert!(gpu.report.host_ops.is_empty(), "round trips through the host: {:?}", gpu.report.host_ops);
}

/// A transformer block (attention heads split by slices and joined by permutations, their
/// gradients through unslices, the embedding's lookup and its gradient gathered, the lookup's
/// indices checked) steps on the device as on the CPU, nothing of a step on the host.
#[test]
fn a_transformer_block_trains_on_the_device_as_on_the_cpu() {
    let src = "use std.nn\nuse std.data\nuse std.optim\n\
        model T() {\n  tok = Embedding(16, 8)\n  b = TransformerBlock(8, 2, 4)\n  head = Linear(8, 16)\n  \
        forward(idx: i64[B, 4]) -> f32[B, 4, 16] = head(b(tok(idx)))\n}\n\
        let xs = cast(abs(randn(f32[32, 4], seed: 1)) * 4.0, i64)\nlet ys = cast(abs(randn(f32[32, 4], seed: 2)) * 4.0, i64)\n\
        data d = tensors(xs, ys) |> batch(8)\n\
        train {\n  model = T()\n  data = d\n  loss = cross_entropy(reshape(model(x), (-1, 16)), flatten(y))\n  \
        optimizer = sgd(lr: 0.1)\n  epochs = 1\n  log every 1 steps\n}\n";
    // (SGD, not Adam: the key projection's bias has a zero gradient in exact arithmetic, which
    // sums in another order leave at 1e-17 on one device and 0 on the other, and Adam's
    // normalisation turns either into a full step of the learning rate.)
    let cpu = train(src, Target::Cpu, |_| {});
    let gpu = train(src, Target::EmulatedCuda, |_| {});
    assert_close(&cpu, &gpu, 1e-4);
    let kinds = &gpu.report.launches_by_kind;
    for kind in ["copy", "unslice", "take", "index_check", "take_grad"] {
        assert!(kinds.contains_key(kind), "no {kind} kernel: {kinds:?}");
    }
    assert!(gpu.report.host_ops.is_empty(), "round trips through the host: {:?}", gpu.report.host_ops);
}

/// An embedding index out of range stops training on the device with the CPU's error (the
/// lookup's index check, read when the step's loss is), not with a wrong loss.
#[test]
fn an_index_out_of_range_stops_the_device_as_it_stops_the_cpu() {
    let src = "use std.nn\nuse std.data\nuse std.optim\n\
        model T() {\n  tok = Embedding(4, 8)\n  head = Linear(8, 2)\n  \
        forward(idx: i64[B, 3]) -> f32[B, 3, 2] = head(tok(idx))\n}\n\
        let xs = cast(abs(randn(f32[8, 3], seed: 1)) * 3.0, i64)\nlet ys = cast(abs(randn(f32[8, 3], seed: 2)) * 1.5, i64)\n\
        data d = tensors(xs, ys) |> batch(4)\n\
        train {\n  model = T()\n  data = d\n  loss = cross_entropy(reshape(model(x), (-1, 2)), flatten(y))\n  \
        optimizer = sgd(lr: 0.1)\n  epochs = 1\n}\n";
    let error = |target: Target| training_error(src, target);
    // |randn| * 3 reaches 4 and beyond for some of the 24 draws: rows 0..4 hold the rest.
    let cpu = error(Target::Cpu).expect("the CPU stops at an index out of range");
    assert!(cpu.contains("out of range for 4 rows"), "{cpu}");
    assert_eq!(error(Target::EmulatedCuda), Some(cpu));
}

/// In bf16 (autocast: products and their neighbours in bf16, stored in two bytes on the
/// device) the device follows the CPU within bf16's rounding.
#[test]
fn a_bf16_mlp_trains_on_the_device_as_on_the_cpu() {
    let src = MLP.replace("PRECISION", "precision = bf16");
    let cpu = train(&src, Target::Cpu, |_| {});
    let gpu = train(&src, Target::EmulatedCuda, |_| {});
    assert_close(&cpu, &gpu, 2e-2);
}

/// `precision = tf32` is acted on on a GPU: f32 products round their operands to TF32 (10
/// mantissa bits, as tensor cores read them; the emulated driver does the same), so the run
/// leaves f32's results but stays within TF32's error of the CPU's f32 training.
#[test]
fn tf32_rounds_the_products_operands_on_the_device() {
    let f32_src = MLP.replace("PRECISION", "");
    let tf32_src = MLP.replace("PRECISION", "precision = tf32");
    let cpu = train(&f32_src, Target::Cpu, |_| {});
    let gpu_f32 = train(&f32_src, Target::EmulatedCuda, |_| {});
    let gpu_tf32 = train(&tf32_src, Target::EmulatedCuda, |_| {});
    assert_ne!(gpu_f32.losses, gpu_tf32.losses, "TF32 changed nothing");
    assert!(worst(&gpu_f32.losses, &gpu_tf32.losses, 1e-3) > 1e-6);
    assert_close(&cpu, &gpu_tf32, 1e-2);
}

/// Under `precision = bf16` the convolutions and their gradients run on the device in bf16
/// storage with f32 accumulation (cuDNN on a GPU, the CPU's convolution on the emulated one),
/// not through the host, and the run follows the CPU's bf16 run.
#[test]
fn a_bf16_conv_net_convolves_on_the_device() {
    let src = "use std.nn\nuse std.data\nuse std.optim\n\
        model M() {\n  conv = Conv2d(3, 8, 3, padding: 1, bias: false)\n  fc = Linear(512, 4)\n  \
        forward(x: f32[B, 3, 8, 8]) -> f32[B, 4] = x |> conv |> relu |> flatten(start: 1) |> fc\n}\n\
        let xs = randn(f32[48, 3, 8, 8], seed: 1)\nlet ys = cast(abs(randn(f32[48], seed: 2)) * 2.0, i64)\n\
        data d = tensors(xs, ys) |> batch(8, drop_last: true)\n\
        train {\n  model = M()\n  data = d\n  loss = cross_entropy(model(x), y)\n  optimizer = sgd(lr: 0.05)\n  precision = bf16\n  epochs = 1\n  log every 1 steps\n}\n";
    let cpu = train(src, Target::Cpu, |_| {});
    let gpu = train(src, Target::EmulatedCuda, |_| {});
    // A bf16 output's last bit (0.4%) can differ with the order of the f32 sums before it is
    // rounded: the losses agree within 1.2e-3, and a weight near 0 may move a few percent of
    // the 1e-2 floor (measured: -0.00846 on the CPU, -0.00814 here after six steps).
    assert!(worst(&cpu.losses, &gpu.losses, 1e-3) <= 3e-3, "losses: cpu {:?} gpu {:?}", cpu.losses, gpu.losses);
    assert_close(&cpu, &gpu, 5e-2);
    assert!(gpu.report.host_ops.is_empty(), "through the host: {:?}", gpu.report.host_ops);
    assert!(gpu.report.launches_by_kind.get("conv").copied().unwrap_or(0) >= 6 * 2, "{:?}", gpu.report.launches_by_kind);
}

/// Convolution, batch norm, max pooling (sums over N, H, W with their prologues, running statistics kept as
/// device-resident buffers) and momentum SGD with `accumulate = 2` (gradient sums resident
/// between micro-batches).
#[test]
fn a_conv_bn_net_with_accumulation_trains_on_the_device_as_on_the_cpu() {
    let src = "use std.nn\nuse std.data\nuse std.optim\n\
        model M() {\n  conv = Conv2d(3, 8, 3, padding: 1, bias: false)\n  bn = BatchNorm2d(8)\n  pool = MaxPool2d(2)\n  fc = Linear(128, 4)\n  \
        forward(x: f32[B, 3, 8, 8]) -> f32[B, 4] = x |> conv |> bn |> relu |> pool |> flatten(start: 1) |> fc\n}\n\
        let xs = randn(f32[48, 3, 8, 8], seed: 1)\nlet ys = cast(abs(randn(f32[48], seed: 2)) * 2.0, i64)\n\
        data d = tensors(xs, ys) |> batch(8, drop_last: true)\n\
        train {\n  model = M()\n  data = d\n  loss = cross_entropy(model(x), y)\n  optimizer = sgd(lr: 0.05, momentum: 0.9)\n  accumulate = 2\n  epochs = 1\n  log every 1 steps\n}\n";
    let cpu = train(src, Target::Cpu, |_| {});
    let gpu = train(src, Target::EmulatedCuda, |_| {});
    assert_close(&cpu, &gpu, 1e-4);
    let bn_mean = |r: &Run| r.params.iter().find(|(n, _)| n.contains("running_mean")).map(|p| p.1.clone()).expect("running mean");
    assert!(bn_mean(&gpu).iter().any(|v| *v != 0.0), "batch norm's running mean was updated on the device");
    assert!(gpu.report.launches_by_kind.contains_key("sum"), "{:?}", gpu.report.launches_by_kind);
    // Max pooling and its gradient are device kernels; the convolution and its weight gradient
    // (the input needs none) go to the driver's convolution (cuDNN on a GPU; here the CPU's,
    // called with the executor's shapes, operands and attributes). Nothing of the step is left
    // on the host.
    for kind in ["pool", "pool_grad"] {
        assert_eq!(gpu.report.launches_by_kind.get(kind).copied(), Some(6), "one a step: {:?}", gpu.report.launches_by_kind);
    }
    assert_eq!(gpu.report.launches_by_kind.get("conv").copied(), Some(12), "{:?}", gpu.report.launches_by_kind);
    assert!(gpu.report.host_ops.is_empty(), "round trips through the host: {:?}", gpu.report.host_ops);
}

/// A checkpoint written by a run on the device is the CPU's format: resumed on the CPU, the run
/// goes on to what a run on the CPU alone reaches.
#[test]
fn a_checkpoint_from_the_device_resumes_on_the_cpu() {
    let dir = std::env::temp_dir().join(format!("dlc-device-ck-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let checkpoint = format!("log every 1 steps\n  checkpoint \"{}\" every 1 epochs", dir.display());
    let src = mlp_with(&[("PRECISION", ""), ("log every 1 steps", &checkpoint)]);
    let one_epoch = src.replace("epochs = 2", "epochs = 1");
    train(&one_epoch, Target::EmulatedCuda, |_| {});
    let resumed = train(&src, Target::Cpu, |o| o.resume = Some(dir.clone()));
    let cpu = train(&src.replace(&format!("checkpoint \"{}\" every 1 epochs", dir.display()), ""), Target::Cpu, |_| {});
    let _ = std::fs::remove_dir_all(&dir);
    for ((name, a), (_, b)) in cpu.params.iter().zip(&resumed.params) {
        let d = worst(a, b, 1e-2);
        assert!(d <= 1e-4, "`{name}` differs by {d:e} after resuming on the CPU");
    }
}

/// On a GPU a step's logged values stay on the device until a step that needs them (a log
/// step, the epoch's last) reads them, and an evaluation's metrics until its last batch is
/// queued: the host queues step after step without waiting, the losses reported are the
/// CPU's, and the host waits about once per log step and once per evaluation.
#[test]
fn logged_values_are_read_at_log_steps_only() {
    let src = mlp_with(&[
        ("PRECISION", ""),
        ("log every 1 steps", "log every 5 steps"),
        ("epochs = 2", "epochs = 1"),
        ("[80, 24]", "[160, 24]"),
        ("[80]", "[160]"),
    ]);
    let cpu = train(&src, Target::Cpu, |_| {});
    let gpu = train(&src, Target::EmulatedCuda, |_| {});
    // One epoch of 10 steps: the log steps 5 and 10 and the epoch's mean.
    assert_eq!(cpu.losses.len(), 3, "{:?}", cpu.losses);
    assert_close(&cpu, &gpu, 1e-4);
    let every_step = train(&src.replace("log every 5 steps", "log every 1 steps"), Target::EmulatedCuda, |_| {});
    assert!(every_step.report.waits >= 10, "a read every step waits every step: {}", every_step.report.waits);
    eprintln!("the host waited {} times (every-step reads: {})", gpu.report.waits, every_step.report.waits);
    // Steps 5 and 10 (the epoch's last), the evaluation once, the parameters brought back.
    assert!(gpu.report.waits <= 5, "the host waited {} times", gpu.report.waits);
    assert!(
        gpu.report.waits + 6 <= every_step.report.waits,
        "put-off reads wait {} times, every-step reads {}",
        gpu.report.waits,
        every_step.report.waits
    );
}

/// A loss that becomes NaN in a step whose read was put off stops the run naming that step,
/// as the CPU does.
#[test]
fn a_nan_in_a_put_off_step_names_its_step() {
    let src = mlp_with(&[
        ("PRECISION", ""),
        ("log every 1 steps", "log every 50 steps"),
        ("adamw(lr: 1e-2)", "sgd(lr: 1e9)"),
        ("[80, 24]", "[320, 24]"),
        ("[80]", "[320]"),
    ]);
    let error = |target: Target| training_error(&src, target).unwrap_or_default();
    let cpu = error(Target::Cpu);
    assert!(cpu.contains("became NaN at step") || cpu.contains("became inf at step"), "the CPU's run diverges: {cpu:?}");
    assert_eq!(error(Target::EmulatedCuda), cpu);
}

/// On a GPU, bf16 convolutions run channels-last (cuDNN's tensor-core kernels are NHWC), and so
/// does what lies between two of them (batch norm, relu): the step transposes at the region's
/// edges only, and trains as the same step NCHW does. Forced on the CPU in f32, the layout
/// changes the order of batch norm's sums and, where oneDNN is installed, the convolutions'
/// kernels (its NHWC ones, which add a product's terms in another order than the blocked ones):
/// f32 rounding apart, the same training.
#[test]
fn convolutions_run_channels_last_on_the_device_and_train_as_nchw() {
    use dlc_language::passes::driver::ConvLayout;
    let src = "use std.nn\nuse std.data\nuse std.optim\n\
        model M() {\n  c1 = Conv2d(3, 8, 3, padding: 1, bias: false)\n  bn = BatchNorm2d(8)\n  c2 = Conv2d(8, 8, 3, padding: 1)\n  pool = MaxPool2d(2)\n  fc = Linear(128, 4)\n  \
        forward(x: f32[B, 3, 8, 8]) -> f32[B, 4] = x |> c1 |> bn |> relu |> c2 |> relu |> pool |> flatten(start: 1) |> fc\n}\n\
        let xs = randn(f32[32, 3, 8, 8], seed: 1)\nlet ys = cast(abs(randn(f32[32], seed: 2)) * 2.0, i64)\n\
        data d = tensors(xs, ys) |> batch(8, drop_last: true)\n\
        train {\n  model = M()\n  data = d\n  loss = cross_entropy(model(x), y)\n  optimizer = sgd(lr: 0.05, momentum: 0.9)\n  precision = PRECISION\n  epochs = 1\n  log every 1 steps\n}\n";
    let bf16 = src.replace("PRECISION", "bf16");
    let channels_last = train(&bf16, Target::EmulatedCuda, |_| {});
    let nchw = train(&bf16, Target::EmulatedCuda, |o| o.conv_layout = Some(ConvLayout::Nchw));
    // Equal here (batch norm's sums run in f64); bf16 rounding of a sum taken in another order
    // could differ in the last place, so a tolerance, a tight one.
    assert_close(&nchw, &channels_last, 1e-6);
    let kinds = &channels_last.report.launches_by_kind;
    assert!(channels_last.report.host_ops.is_empty(), "round trips through the host: {:?}", channels_last.report.host_ops);
    // Two convolutions forward, two weight gradients and one data gradient a step, all four steps.
    assert_eq!(kinds.get("conv").copied(), Some(20), "{kinds:?}");
    // The two forward convolutions, their weight gradients and the second's data gradient, in
    // each compiled step (the first's data gradient is never computed: the input needs none).
    assert!(
        !channels_last.channels_last.is_empty() && channels_last.channels_last.iter().all(|n| *n == 5),
        "{:?}",
        channels_last.channels_last
    );
    assert!(!nchw.channels_last.is_empty() && nchw.channels_last.iter().all(|n| *n == 0), "{:?}", nchw.channels_last);
    let f32_src = src.replace("PRECISION", "f32");
    let cpu = train(&f32_src, Target::Cpu, |o| o.conv_layout = Some(ConvLayout::Nchw));
    let forced = train(&f32_src, Target::Cpu, |o| o.conv_layout = Some(ConvLayout::ChannelsLast));
    assert!(
        [&forced, &cpu].iter().all(|r| !r.channels_last.is_empty())
            && forced.channels_last.iter().all(|n| *n == 5)
            && cpu.channels_last.iter().all(|n| *n == 0),
        "{:?} {:?}",
        forced.channels_last,
        cpu.channels_last
    );
    assert_close(&cpu, &forced, 1e-5);
}
