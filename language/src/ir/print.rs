//! Text dump of a graph (`dlc run --dump=ir`).

use super::graph::{Graph, NodeId};
use super::op::Op;
use std::fmt::Write;

pub fn dump(g: &Graph, roots: &[NodeId]) -> String {
    let mut out = String::new();
    for id in g.topo(roots) {
        let n = g.node(id);
        let src: Vec<String> = n.src.iter().map(|s| format!("%{}", s.0)).collect();
        let extra = match &n.op {
            Op::Param(p) => format!("  # {}", g.params[*p as usize].path),
            Op::Input(i) => format!("  # {}", g.inputs[*i as usize].name),
            _ => String::new(),
        };
        let args = if src.is_empty() { String::new() } else { format!(" {}", src.join(", ")) };
        let _ = writeln!(out, "%{} = {}{} : {}{}", id.0, n.op.name(), args, n.ty(), extra);
    }
    out
}

/// Text dump of a kernel plan (`dlc explain --dump=fusion|invariant|memory`): one line a kernel
/// that does work, with the nodes it computes, what it reads and what it writes; with a memory
/// plan, also the values released after it and the planned peak.
pub fn plan(g: &Graph, plan: &crate::ir::plan::Plan, memory: Option<&crate::ir::plan::MemoryPlan>) -> String {
    use crate::ir::plan::Kernel;
    let ids = |v: &[NodeId]| v.iter().map(|n| format!("%{}", n.0)).collect::<Vec<_>>().join(" ");
    let ops = |v: &[NodeId]| v.iter().map(|n| format!("%{} = {}", n.0, g.node(*n).op.name())).collect::<Vec<_>>().join("; ");
    // Each kernel that does work, with what it and the free kernels after it release.
    let mut lines: Vec<(String, Vec<NodeId>)> = vec![];
    let mut before: Vec<NodeId> = vec![];
    for (i, kernel) in plan.kernels.iter().enumerate() {
        let what = match kernel {
            Kernel::Free(_) | Kernel::View(_) => None,
            Kernel::Fused(r) => Some(format!("fused {{ {} }}", ops(&r.nodes))),
            Kernel::Group(rs) => {
                Some(format!("group of {} {{ {} }}", rs.len(), rs.iter().map(|r| ops(&r.nodes)).collect::<Vec<_>>().join(" | ")))
            }
            Kernel::Rows(rg) => Some(format!(
                "rows {{ {} }}",
                rg.regions().map(|r| ops(&r.nodes)).chain(rg.reductions().map(|n| ops(&[n]))).collect::<Vec<_>>().join(" | ")
            )),
            Kernel::Reduce(rk) => Some(format!("{} of prologue {{ {} }}", ops(&[rk.node]), ops(&rk.prologue.nodes))),
            Kernel::Library(n) => Some(format!("library {}", ops(&[*n]))),
            Kernel::Gemm(gk) => Some(format!("library {} with epilogue {{ {} }}", ops(&[gk.product]), ops(&gk.epilogue))),
        };
        if let Some(what) = what {
            lines.push((format!("{what}\n     reads [{}] writes [{}]", ids(&kernel.reads(g)), ids(&kernel.writes())), vec![]));
        }
        let freed = memory.map(|m| m.release[i].clone()).unwrap_or_default();
        match lines.last_mut() {
            Some(l) => l.1.extend(freed),
            None => before.extend(freed),
        }
    }
    let mut out = String::new();
    if !before.is_empty() {
        let _ = writeln!(out, "before k0, frees [{}]", ids(&before));
    }
    for (k, (line, freed)) in lines.iter().enumerate() {
        let _ = writeln!(out, "k{k}: {line}");
        if !freed.is_empty() {
            let _ = writeln!(out, "     then frees [{}]", ids(freed));
        }
    }
    let k = lines.len();
    let _ = writeln!(out, "{k} kernels; results [{}]", ids(&plan.roots));
    if let Some(m) = memory {
        let mib = |b: usize| b as f64 / (1 << 20) as f64;
        let _ = writeln!(
            out,
            "planned peak {:.2} MiB = parameters {:.2} + inputs {:.2} + intermediates {:.2} (without reuse: {:.2})",
            mib(m.peak()),
            mib(m.parameters),
            mib(m.inputs),
            mib(m.peak_intermediates),
            mib(m.without_reuse)
        );
    }
    out
}
