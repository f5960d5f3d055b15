//! `dlc explain --dump=PASS`: the IR after any pass of the driver's order, as the compiler holds
//! it (every one checked by the IR verifier on the way).

use crate::common;
use common::{dlc, text};

/// `dlc explain --dump=PASS` prints the IR after each pass, as the compiler holds it (every one
/// checked by the IR verifier on the way): the evaluation after batch-norm folding convolves
/// with a scaled weight, and each batch then runs two kernels; the training step after autodiff
/// holds the gradients, and its memory plan ends with the planned peak.
#[test]
fn explain_dumps_the_ir_after_each_pass() {
    let out = |pass: &str, file: &str| {
        let o = dlc(&["explain", file, &format!("--dump={pass}")]);
        assert!(o.status.success(), "--dump={pass}: {}", text(&o.stderr));
        text(&o.stdout)
    };
    let folded = out("bn-fold", "bench/conv_bn_relu_eval.dl");
    let eval = folded.split("evaluation on `rows`").nth(1).expect("an evaluation section");
    let conv = eval.lines().find(|l| l.contains("conv2d(")).expect("a convolution");
    // `%y = conv2d(attributes) %x, %w : type`: the operand after the last comma.
    let weight = conv.rsplit(" : ").nth(1).and_then(|c| c.rsplit(", ").next()).expect("its weight operand");
    assert!(eval.lines().any(|l| l.starts_with(&format!("{weight} = mul "))), "the weight is scaled:\n{eval}");
    let traced = out("trace", "bench/conv_bn_relu_eval.dl");
    let eval = traced.split("evaluation on `rows`").nth(1).expect("an evaluation section");
    let weight = eval.lines().find(|l| l.ends_with("# conv.weight")).and_then(|l| l.split(' ').next()).expect("the weight parameter");
    assert!(
        eval.lines().any(|l| l.contains("conv2d(") && l.contains(&format!(", {weight} :"))),
        "as traced, the parameter itself:\n{eval}"
    );
    let per_batch = out("invariant", "bench/conv_bn_relu_eval.dl");
    assert!(per_batch.contains("evaluation on `rows`") && per_batch.contains("\n2 kernels; results [%"), "{per_batch}");
    let step = out("autodiff", "examples/iris.dl");
    // Two layers: two products forward, three backward (both weights, the hidden input).
    assert_eq!(step.lines().filter(|l| l.contains(" = matmul ")).count(), 5, "forward and backward products:\n{step}");
    // The hidden layer's bias and relu are its product's epilogue, in the step and in the
    // evaluation; the output layer's bias too in the evaluation (in the step it stays in the
    // loss's row kernel, which reads the logits row by row).
    let epilogues = out("epilogue", "examples/iris.dl");
    let with = |tail: &str| epilogues.lines().filter(|l| l.contains(" = matmul with epilogue {") && l.ends_with(tail)).count();
    assert_eq!(with(" = where }"), 2, "{epilogues}");
    assert_eq!(with(" = add }"), 1, "{epilogues}");
    let memory = out("memory", "examples/iris.dl");
    assert!(memory.contains("then frees [") && memory.contains("planned peak"), "{memory}");
    let fused = out("fusion", "examples/gelu.dl");
    assert!(fused.contains("# print #1") && fused.contains("= erf"), "{fused}");
    let o = dlc(&["explain", "examples/iris.dl", "--dump=nonsense"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains(
        "possible values: trace, conv-bias, bn-fold, autocast, layout, autodiff, remat, fusion, rows, prologue, epilogue, invariant, memory, data-parallel"
    ));
    // The layout pass (channels-last, forced here; the CPU's own choice where oneDNN runs the
    // convolutions): the convolutions and what lies between them NHWC, pooling included.
    let layout_dump = |layout: &str| {
        let o = common::command(std::path::Path::new(common::ROOT))
            .args(["explain", "bench/conv_bn_step.dl", "--dump=layout"])
            .env("DLC_CONV_LAYOUT", layout)
            .output()
            .expect("run dlc");
        text(&o.stdout)
    };
    let dump = layout_dump("channels_last");
    assert!(dump.lines().any(|l| l.contains("conv2d(") && l.contains("channels_last)")), "{dump}");
    assert!(dump.lines().any(|l| l.contains("max_pool2d(") && l.contains("channels_last)")), "{dump}");
    let plain = layout_dump("nchw");
    assert!(plain.contains("conv2d(") && !plain.contains("channels_last"), "NCHW when asked for:\n{plain}");
}

/// `--dump=data-parallel` shows a data-parallel step's two halves and its gradient buckets.
#[test]
fn explain_dumps_the_data_parallel_split() {
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let src = std::fs::read_to_string(format!("{repo}/examples/iris.dl"))
        .expect("iris")
        .replace("\"data/", &format!("\"{repo}/examples/data/"))
        .replace("  epochs    = 60", "  parallel = data_parallel()\n  epochs = 60");
    let dir = crate::common::scratch("dp-dump");
    let file = dir.join("iris_dp.dl");
    std::fs::write(&file, src).expect("written");
    let o = dlc(&["explain", file.to_str().expect("path"), "--dump=data-parallel"]);
    let out = text(&o.stdout);
    assert!(
        o.status.success() && out.contains("after `data-parallel`") && out.contains("bucket 0:") && out.contains("fc1.weight"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
