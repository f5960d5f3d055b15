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
