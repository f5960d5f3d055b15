//! dlc as a library, the way the CLI uses it: load a program, check it (diagnostics are values),
//! run it, override recipe fields, train, and read the trained parameters back.
//!
//! Run with `cargo run -p dlc-embed-example` from the repository root.

use dlc::train::{apply_overrides, TrainOptions, Trainer};
use dlc::Program;
use std::path::Path;

fn main() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let path = examples.join("iris.dl");
    let text = std::fs::read_to_string(&path).expect("examples/iris.dl");

    // 1. Check: nothing runs; problems come back as values with spans.
    let checked = Program::check("iris.dl", &text, Some(&examples));
    assert!(checked.ok, "{:?}", checked.diagnostics());
    for m in checked.models() {
        println!("model {}: {} parameters", m.name, m.total);
    }

    // 2. A program with an error: the diagnostic says what and where.
    let bad = Program::check("bad.dl", "let x = [1.0, 2.0] @ [1.0, 2.0, 3.0]\n", None);
    let d = &bad.diagnostics()[0];
    let (line, col) = bad.sources().line_col(d.primary_span().file, d.primary_span().start);
    println!("bad.dl:{line}:{col}: error[{}]: {}", d.code, d.message);

    // 3. Run the top-level statements, then train the recipe with an override.
    let mut program = Program::run("iris.dl", &text, Some(&examples), false);
    assert!(program.ok, "{:?}", program.diagnostics());
    let mut recipe = program.session.t.recipes[0].clone();
    apply_overrides(&mut recipe, &[("epochs".into(), "20".into())]).expect("override");
    let mut trainer = Trainer::new(&mut program.session, recipe, TrainOptions::new(examples.clone(), 0)).expect("trainer");
    let report = trainer.run().expect("training");
    for (epoch, metrics) in report.evals.iter().filter(|(e, _)| e % 5 == 0) {
        println!("epoch {epoch}: accuracy {:.3}", metrics[0]);
    }

    // 4. The trained weights, by the names a PyTorch state dict would use.
    for (name, t) in trainer.parameters() {
        println!("{name}: {:?}", t.shape);
    }
    let accuracy = report.evals.last().map(|e| e.1[0]).unwrap_or(0.0);
    assert!(accuracy > 0.8, "accuracy {accuracy}");
}
