//! Every generated kernel of a program, in the kernel IR (`dlc_jit::kir`): the training steps'
//! kernels, their evaluations', each `infer` block's and each printed value's, as the plans the
//! CPU runs cut them. `dlc kernels FILE` lists them, writes their CUDA C or C, and checks them:
//! with NVRTC and ptxas for the GPU architectures (cuda_check.rs), and, compiled as C by the
//! system compiler, against the interpreter on the same inputs (c_check.rs).

pub mod c_check;
pub mod cuda_check;
pub mod emu_check;
pub mod gpu_check;
pub mod reference;

use crate::Program;
use dlc_jit::kir;
use dlc_language::ir::Graph;
use dlc_language::passes::fusion::{Kernel, Plan};
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
    /// The nodes its parameters bind: inputs then outputs, per member, in parameter order.
    pub io: crate::runner::device_executor::Binding,
}

/// The generated kernels of a plan; a kernel the IR cannot express yet is reported in `skipped`.
fn of_plan(origin: &str, tag: &str, graph: &Arc<Graph>, plan: &Plan, out: &mut Vec<Generated>, skipped: &mut Vec<String>) {
    for (i, k) in plan.kernels.iter().enumerate() {
        match crate::runner::device_kernel(graph, k) {
            Ok(Some((kernel, io))) => out.push(Generated {
                origin: format!("{origin} #{i}"),
                name: format!("{tag}_{i}_{}", kernel.kind()),
                graph: graph.clone(),
                plan_kernel: k.clone(),
                kernel,
                io,
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

/// Every generated kernel of a checked program (run quietly, as `explain` does), as the
/// compiled program (`crate::compile`) plans them, and what could not be lowered.
pub fn collect(p: &mut Program, root: &Path) -> (Vec<Generated>, Vec<String>) {
    let c = crate::compile::program(p, &crate::compile::Options::new(root.to_path_buf()));
    let g = &c.graph;
    let mut out = vec![];
    let mut skipped = vec![];
    for pr in &c.prints {
        let origin = format!("print #{}", pr.index);
        match &pr.planned {
            Ok(planned) => of_plan(&origin, &format!("print{}", pr.index), g, &planned.plan, &mut out, &mut skipped),
            Err(e) => skipped.push(format!("{origin}: {e}")),
        }
    }
    for inf in &c.infers {
        let origin = format!("infer \"{}\"", inf.name);
        match &inf.compiled {
            Ok(ic) => of_plan(&origin, &format!("infer_{}", ident(&inf.name)), g, &ic.planned.plan, &mut out, &mut skipped),
            Err(e) => skipped.push(format!("{origin}: {e}")),
        }
    }
    for t in &c.trains {
        let name = &t.name;
        let step = match &t.step {
            Ok(s) => s,
            Err(e) => {
                skipped.push(format!("train \"{name}\": {e}"));
                continue;
            }
        };
        let tag = ident(name);
        of_plan(&format!("train \"{name}\" step"), &format!("{tag}_step"), g, &step.plan, &mut out, &mut skipped);
        for (data, r) in &step.evaluations {
            match r {
                Ok((_, eg)) => of_plan(
                    &format!("train \"{name}\" evaluate {data}"),
                    &format!("{tag}_eval_{}", ident(data)),
                    g,
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
