//! `dlc explain FILE --dump=PASS`: the IR of every computation after one pass of the driver's
//! order (`dlc_language::passes::driver::Pass`), as the compiled program holds it: the graph
//! after a graph pass, the kernel plan after a plan pass, the plan with its releases and peak
//! after memory planning. Every one of these was checked by the IR verifier when it was built.

use dlc::compile::{Compiled, Shapes};
use dlc_language::ir::{print, Graph, NodeId};
use dlc_language::passes::driver::{Pass, Planned, Stages};
use dlc_language::passes::fusion::Plan;
use dlc_language::passes::memory::MemoryPlan;

/// A pass named on the command line (`--dump=fusion`), any of the driver's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DumpPass(pub Pass);

impl clap::ValueEnum for DumpPass {
    fn value_variants<'a>() -> &'a [Self] {
        const N: usize = Pass::ORDER.len();
        const ALL: [DumpPass; N] = {
            let mut all = [DumpPass(Pass::Trace); N];
            let mut i = 0;
            while i < N {
                all[i] = DumpPass(Pass::ORDER[i]);
                i += 1;
            }
            all
        };
        &ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0.name()))
    }
}

/// The roots a graph stage recorded for `pass`, if the computation ran it.
fn stage(stages: &Stages, pass: Pass) -> Option<&Vec<NodeId>> {
    stages.iter().find(|(p, _)| *p == pass).map(|s| &s.1)
}

/// What one computation shows after `pass`: its graph stage, or its plan (fusion, rows and
/// prologue and epilogue show the final kernels: the driver keeps the plan after the last of them).
fn text(g: &Graph, pass: Pass, stages: &Stages, plan: &Plan, full: Option<&Plan>, memory: &MemoryPlan) -> Option<String> {
    if pass.is_graph_pass() {
        return stage(stages, pass).map(|roots| print::dump(g, roots));
    }
    match pass {
        Pass::Fusion | Pass::Rows | Pass::Prologue | Pass::Epilogue => Some(print::plan(g, full.unwrap_or(plan), None)),
        Pass::Invariant => full.map(|_| print::plan(g, plan, None)),
        Pass::Memory => Some(print::plan(g, plan, Some(memory))),
        _ => None,
    }
}

fn show(title: &str, pass: Pass, body: Option<String>) {
    match body {
        Some(body) => {
            println!("# {title}, after `{pass}`");
            println!("{body}");
        }
        None => println!("# {title}: `{pass}` does not apply here\n"),
    }
}

fn planned_text(g: &Graph, pass: Pass, stages: &Stages, p: &Planned) -> Option<String> {
    text(g, pass, stages, &p.plan, p.full.as_ref(), &p.memory)
}

/// A data-parallel step's split: the two halves' kernel counts and each gradient bucket.
fn buckets(par: &dlc::compile::ParallelPlan) -> String {
    let mut out = format!("backward half: {} kernels; update half: {} kernels\n", par.backward_kernels, par.update_kernels);
    for (i, (b, params)) in par.buckets.iter().enumerate() {
        out += &format!("bucket {i}: {} bytes, ready after kernel k{}: {}\n", b.bytes, b.ready_after, params.join(", "));
    }
    out
}

/// Print the dump of every `print`, `infer` block and `train` recipe. Returns the exit status.
pub fn main(c: &Compiled, pass: Pass) -> i32 {
    let g = &c.graph;
    for pr in &c.prints {
        let stages = vec![(Pass::Trace, pr.roots.clone())];
        let body = pr.planned.as_ref().ok().and_then(|p| planned_text(g, pass, &stages, p));
        show(&format!("print #{}", pr.index), pass, body);
    }
    for inf in &c.infers {
        let body = inf.compiled.as_ref().ok().and_then(|ic| planned_text(g, pass, &ic.stages, &ic.planned));
        show(&format!("infer `{}`", inf.name), pass, body);
    }
    let mut status = 0;
    for t in &c.trains {
        let step = match &t.step {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: recipe `{}`: {e}", t.name);
                status = 1;
                continue;
            }
        };
        let title = format!("recipe `{}`, step for batch {}", t.name, dlc::compile::shapes_text(&step.shapes));
        let body = match (pass, &step.parallel) {
            (Pass::DataParallel, Some(par)) => Some(buckets(par)),
            _ => text(g, pass, &step.stages, &step.plan, None, &step.memory),
        };
        show(&title, pass, body);
        for (data, r) in &step.evaluations {
            let Ok((shapes, eg)) = r else { continue };
            let title = format!("recipe `{}`, evaluation on `{data}` for batch {}", t.name, dlc::compile::shapes_text(shapes as &Shapes));
            show(&title, pass, text(g, pass, &eg.passes, &eg.plan, Some(&eg.full_plan), &eg.memory));
        }
    }
    status
}
