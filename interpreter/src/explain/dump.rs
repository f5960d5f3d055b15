//! `dlc explain FILE --dump=PASS`: the IR of each training step (and of its evaluations) after
//! one pass, as the compiler holds it: the graph after a graph pass, the kernel plan after
//! fusion or evaluation specialisation, the plan with its releases and peak after memory
//! planning. Every one of these was checked by the IR verifier when it was built.

use dlc::train::{TrainOptions, Trainer};
use dlc::Program;
use dlc_language::eval::Value;
use dlc_language::ir::print;
use dlc_language::syntax::ast::RecipeKind;
use std::path::Path;

/// The passes whose result can be printed, in the order they run.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Pass {
    /// The step's forward values as traced from the source.
    Trace,
    /// After conv-bias elimination (a convolution's bias before training-mode batch norm).
    ConvBias,
    /// After autocast (`precision = bf16 | f16`).
    Autocast,
    /// The whole step: gradients (with rematerialisation, when it was kept), clipping, updates.
    Autodiff,
    /// The step's kernels (fused regions, row kernels, library calls).
    Fusion,
    /// The kernels with what each releases, and the planned peak.
    Memory,
    /// Evaluations: the metrics' graph after batch-norm folding.
    BnFold,
    /// Evaluations: the kernels each batch runs after what runs once was taken out.
    Invariant,
}

impl Pass {
    fn name(self) -> &'static str {
        match self {
            Pass::Trace => "trace",
            Pass::ConvBias => "conv-bias",
            Pass::Autocast => "autocast",
            Pass::Autodiff => "autodiff",
            Pass::Fusion => "fusion",
            Pass::Memory => "memory",
            Pass::BnFold => "bn-fold",
            Pass::Invariant => "invariant",
        }
    }
}

/// A computation that is not a training step (a `print`, an `infer` block): its graph (`roots`
/// as the caller computed them for this pass) and its kernel plans.
fn other(g: &dlc_language::ir::Graph, title: &str, roots: &[dlc_language::ir::NodeId], pass: Pass) {
    let text = match pass {
        Pass::Trace | Pass::BnFold => print::dump(g, &roots),
        Pass::Fusion | Pass::Memory => match dlc_language::passes::pipeline::plan(g, roots, true) {
            Ok(p) => print::plan(g, &p.plan, (pass == Pass::Memory).then_some(&p.memory)),
            Err(e) => format!("internal compiler error: {e:?}\n"),
        },
        _ => "(a training-step pass: nothing to show here)\n".into(),
    };
    println!("# {title}, after `{}`", pass.name());
    print!("{text}\n");
}

/// Print the dump of every `print`, `infer` block and `train` recipe of the loaded program.
/// Returns the exit status.
pub fn main(p: &mut Program, root: &Path, pass: Pass) -> i32 {
    let printed: Vec<Vec<dlc_language::ir::NodeId>> = p.output().printed.iter().map(|x| x.nodes.clone()).collect();
    for (i, nodes) in printed.iter().enumerate().filter(|(_, n)| !n.is_empty()) {
        // Top-level code is not evaluation: no batch norm is folded there.
        other(&p.session.t.graph, &format!("print #{}", i + 1), nodes, pass);
    }
    for info in p.session.t.recipes.clone().iter().filter(|r| r.kind == RecipeKind::Infer) {
        let name = info.name.clone().unwrap_or_else(|| "infer".into());
        let (Some(model), Some(input @ Value::Tensor(_))) = (info.field("model").cloned(), info.field("input").cloned()) else { continue };
        // As traced, and for the passes after it what `infer` runs (batch norm folded, the
        // block's precision): the same function computes it.
        let out = match pass {
            Pass::Trace => dlc::train::infer::apply(&mut p.session, info, &model, input),
            _ => dlc::train::infer::computation(&mut p.session, info).map(|c| c.out),
        };
        if let Ok(out) = out {
            other(&p.session.t.graph, &format!("infer `{name}`"), &[out], pass);
        }
    }
    let recipes: Vec<_> = p.session.t.recipes.iter().filter(|r| r.kind == RecipeKind::Train).cloned().collect();
    let mut status = 0;
    for info in recipes {
        let name = info.name.clone().unwrap_or_else(|| "train".into());
        let mut trainer = match Trainer::new(&mut p.session, info, TrainOptions::new(root.to_path_buf(), 0)) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: recipe `{name}`: {e}");
                status = 1;
                continue;
            }
        };
        let Some(shapes) = trainer.batch_shapes() else {
            eprintln!("error: recipe `{name}`: the batch shapes are only known at run time");
            status = 1;
            continue;
        };
        let plan = match trainer.compile_step(&shapes) {
            Ok((plan, _)) => plan,
            Err(e) => {
                eprintln!("error: recipe `{name}`: {e}");
                status = 1;
                continue;
            }
        };
        let batch: Vec<String> = shapes.iter().map(|(d, s)| format!("{d}{s:?}")).collect();
        let evaluations = trainer.compile_evaluations();
        let g = trainer.graph();
        let (passes, memory) = trainer.step_passes(&shapes).expect("the step was just compiled");
        println!("# recipe `{name}`, step for batch {}, after `{}`", batch.join(", "), pass.name());
        match pass {
            Pass::Fusion => print!("{}", print::plan(g, &plan, None)),
            Pass::Memory => print!("{}", print::plan(g, &plan, Some(memory))),
            Pass::BnFold | Pass::Invariant => println!("(an evaluation pass: see the evaluations below)"),
            _ => {
                let roots = passes.iter().find(|(n, _)| *n == pass.name()).map(|p| p.1.clone()).unwrap_or_default();
                print!("{}", print::dump(g, &roots));
            }
        }
        for (data, r) in evaluations {
            let Ok((_, eg)) = r else { continue };
            let text = match pass {
                Pass::Trace | Pass::BnFold => {
                    let roots = eg.passes.iter().find(|(n, _)| *n == pass.name()).map(|p| p.1.clone()).unwrap_or_default();
                    print::dump(g, &roots)
                }
                Pass::Fusion => print::plan(g, &eg.full_plan, None),
                Pass::Invariant => print::plan(g, &eg.plan, None),
                Pass::Memory => print::plan(g, &eg.plan, Some(&eg.memory)),
                // The forward rewrites and autodiff apply to training steps only.
                Pass::ConvBias | Pass::Autocast | Pass::Autodiff => continue,
            };
            println!("\n# recipe `{name}`, evaluation on `{data}`, after `{}`", pass.name());
            print!("{text}");
        }
    }
    status
}
