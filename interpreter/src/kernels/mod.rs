//! Every generated kernel of a program, in the kernel IR (`dlc_jit::kir`): the training steps'
//! kernels, their evaluations', each `infer` block's and each printed value's, as the plans the
//! CPU runs cut them. `dlc kernels FILE` lists them, writes their CUDA C or C, and checks them:
//! with NVRTC and ptxas for the GPU architectures (cuda_check.rs), and, compiled as C by the
//! system compiler, against the interpreter on the same inputs (c_check.rs).

pub mod c_check;
pub mod cuda_check;
pub mod emu_check;
pub mod emulation;
pub mod gpu_check;
pub mod host_lib;
pub mod reference;

use crate::train::{TrainOptions, Trainer};
use crate::Program;
use dlc_jit::kir;
use dlc_language::eval::Value;
use dlc_language::ir::{Graph, NodeId};
use dlc_language::passes::fusion::{Kernel, Plan};
use dlc_language::syntax::ast::RecipeKind;
use std::path::Path;
use std::sync::Arc;

/// One generated kernel: where it comes from, its plan kernel (on `graph`) and its kernel IR.
pub struct Generated {
    /// e.g. `train "mlp" step #3`, `evaluate test_set #1`, `infer "probs" #0`, `print #1 #0`.
    pub origin: String,
    /// A C identifier for it, unique in the program.
    pub name: String,
    pub graph: Arc<Graph>,
    pub plan_kernel: Kernel,
    pub kernel: kir::Kernel,
}

/// The generated kernels of a plan; a kernel the IR cannot express yet is reported in `skipped`.
fn of_plan(origin: &str, tag: &str, graph: &Arc<Graph>, plan: &Plan, out: &mut Vec<Generated>, skipped: &mut Vec<String>) {
    for (i, k) in plan.kernels.iter().enumerate() {
        match kir::lower_kernel(graph, k) {
            Ok(Some(kernel)) => out.push(Generated {
                origin: format!("{origin} #{i}"),
                name: format!("{tag}_{i}_{}", kernel.kind()),
                graph: graph.clone(),
                plan_kernel: k.clone(),
                kernel,
            }),
            Ok(None) => {}
            Err(e) => skipped.push(format!("{origin} #{i}: {e}")),
        }
    }
}

/// A tag made of a name's letters and digits.
fn ident(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

/// Every generated kernel of a checked program (run quietly, as `explain` does), and what could
/// not be lowered.
pub fn collect(p: &mut Program, root: &Path) -> (Vec<Generated>, Vec<String>) {
    let mut out = vec![];
    let mut skipped = vec![];
    let printed: Vec<Vec<NodeId>> = p.output().printed.iter().map(|x| x.nodes.clone()).collect();
    if printed.iter().any(|n| !n.is_empty()) {
        let g = Arc::new(p.session.graph().clone());
        for (i, nodes) in printed.iter().enumerate().filter(|(_, n)| !n.is_empty()) {
            let plan = match dlc_language::passes::pipeline::plan(&g, nodes, true) {
                Ok(p) => p.plan,
                Err(e) => {
                    skipped.push(format!("print #{}: internal compiler error: {e:?}", i + 1));
                    continue;
                }
            };
            of_plan(&format!("print #{}", i + 1), &format!("print{}", i + 1), &g, &plan, &mut out, &mut skipped);
        }
    }
    let recipes = p.session.t.recipes.clone();
    for info in recipes.iter().filter(|r| r.kind == RecipeKind::Infer) {
        let name = info.name.clone().unwrap_or_else(|| "infer".into());
        let (Some(_), Some(Value::Tensor(_))) = (info.field("model"), info.field("input").cloned()) else { continue };
        match crate::train::infer::computation(&mut p.session, info) {
            Ok(c) => {
                let g = Arc::new(p.session.graph().clone());
                let plan = match dlc_language::passes::pipeline::plan(&g, &[c.out], true) {
                    Ok(p) => p.plan,
                    Err(e) => {
                        skipped.push(format!("infer \"{name}\": internal compiler error: {e:?}"));
                        continue;
                    }
                };
                of_plan(&format!("infer \"{name}\""), &format!("infer_{}", ident(&name)), &g, &plan, &mut out, &mut skipped);
            }
            Err(e) => skipped.push(format!("infer \"{name}\": {e}")),
        }
    }
    for info in recipes.into_iter().filter(|r| r.kind == RecipeKind::Train) {
        let name = info.name.clone().unwrap_or_else(|| "train".into());
        let mut trainer = match Trainer::new(&mut p.session, info, TrainOptions::new(root.to_path_buf(), 0)) {
            Ok(t) => t,
            Err(e) => {
                skipped.push(format!("train \"{name}\": {e}"));
                continue;
            }
        };
        let Some(shapes) = trainer.batch_shapes() else {
            skipped.push(format!("train \"{name}\": the batch shapes are only known at run time"));
            continue;
        };
        let plan = match trainer.compile_step(&shapes) {
            Ok((plan, _)) => plan,
            Err(e) => {
                skipped.push(format!("train \"{name}\": {e}"));
                continue;
            }
        };
        let evaluations = trainer.compile_evaluations();
        let g = Arc::new(trainer.graph().clone());
        let tag = ident(&name);
        of_plan(&format!("train \"{name}\" step"), &format!("{tag}_step"), &g, &plan, &mut out, &mut skipped);
        for (data, r) in evaluations {
            match r {
                Ok((_, eg)) => of_plan(
                    &format!("train \"{name}\" evaluate {data}"),
                    &format!("{tag}_eval_{}", ident(&data)),
                    &g,
                    &eg.plan,
                    &mut out,
                    &mut skipped,
                ),
                Err(e) => skipped.push(format!("train \"{name}\" evaluate {data}: {e}")),
            }
        }
    }
    (out, skipped)
}
