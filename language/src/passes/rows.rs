//! Row fusion: reductions over the last axis together with the elementwise regions before and
//! after them, run as one kernel row by row. softmax is max → exp(x - max) → sum → divide: four
//! kernels and three full-size intermediates as the fusion pass leaves it, one pass over the rows
//! here, each row's intermediates staying in a buffer the size of a row. log_softmax (and so
//! cross-entropy), logsumexp and layer norm's statistics and their gradients take the same form.
//!
//! A group's members all live on one row space: shapes `[lead.., L]` (rows) or `[lead.., 1]` (a
//! value per row), and a member reads another member's value only at its own row: elementwise
//! at the same shape, or a per-row value broadcast along the row. So rows are independent and
//! run in parallel, and every op computes exactly what it computes alone (a reduction sums its
//! row in the order the eager kernel does): fused and eager results stay equal bit for bit.

use super::fusion::Kernel;
use crate::ir::{Graph, NodeId, Op, ReduceOp};
use crate::types::DType;
use std::collections::{HashMap, HashSet};

pub use crate::ir::plan::{RowGroup, RowItem};

fn known(g: &Graph, n: NodeId) -> Option<Vec<usize>> {
    g.node(n).shape.iter().map(|d| d.as_known().map(|v| v as usize)).collect()
}

/// A reduction the row kernel can run: sum or max of an f32 tensor over its last axis only,
/// rows longer than 1. Gives (lead, len).
fn row_reduction(g: &Graph, n: NodeId) -> Option<(Vec<usize>, usize)> {
    let node = g.node(n);
    let Op::Reduce(ReduceOp::Sum | ReduceOp::Max, axes) = &node.op else { return None };
    let src = known(g, node.src[0])?;
    let last = src.len().checked_sub(1)?;
    (axes.as_slice() == [last] && node.dtype == DType::F32 && g.node(node.src[0]).dtype == DType::F32 && src[last] > 1)
        .then(|| (src[..last].to_vec(), src[last]))
}

/// Group builder: the kernels taken so far, in order, and what they produce.
struct Open {
    lead: Vec<usize>,
    len: usize,
    items: Vec<RowItem>,
    /// Everything taken, in order, to give back unchanged if the group is not worth it, and
    /// the kernels' indices in the plan.
    taken: Vec<Kernel>,
    taken_at: HashSet<usize>,
    /// Free kernels independent of the group, to run before it.
    hoisted: Vec<Kernel>,
    /// Detach kernels of group values, to run after it.
    after: Vec<Kernel>,
    produced: HashSet<NodeId>,
    aliases: HashMap<NodeId, NodeId>,
}

impl Open {
    /// Shape `[lead.., L]` or `[lead.., 1]`.
    fn on_rows(&self, g: &Graph, n: NodeId) -> bool {
        known(g, n).is_some_and(|s| {
            s.len() == self.lead.len() + 1
                && s[..self.lead.len()] == self.lead[..]
                && (s[self.lead.len()] == self.len || s[self.lead.len()] == 1)
        })
    }
    fn per_row(&self, g: &Graph, n: NodeId) -> bool {
        self.on_rows(g, n) && known(g, n).is_some_and(|s| s[self.lead.len()] == 1)
    }
    fn inside(&self, n: NodeId) -> bool {
        self.produced.contains(&n) || self.aliases.contains_key(&n)
    }

    /// Take `k` into the group if it keeps every read row-local; false leaves it out.
    fn take(&mut self, g: &Graph, at: usize, k: &Kernel) -> bool {
        match k {
            Kernel::Fused(r) => {
                if !r.nodes.iter().all(|m| self.on_rows(g, *m)) {
                    return false;
                }
                // A group value is read at the member's own shape, or broadcast from one value
                // per row.
                for &m in &r.nodes {
                    let node = g.node(m);
                    for &s in &node.src {
                        if self.inside(s) && !(g.node(s).shape == node.shape || (matches!(node.op, Op::Expand) && self.per_row(g, s))) {
                            return false;
                        }
                    }
                }
                self.produced.extend(r.nodes.iter().copied());
                self.items.push(RowItem::Region(r.clone()));
            }
            Kernel::Library(n) => match row_reduction(g, *n) {
                Some((lead, len)) if lead == self.lead && len == self.len => {
                    self.produced.insert(*n);
                    self.items.push(RowItem::Reduce(*n));
                }
                _ => return false,
            },
            Kernel::Free(n) => {
                let node = g.node(*n);
                // A recompute view shows a value from before the group; its ordering source
                // (src[1]) only has to come before the recomputation, which follows the group.
                let shown = if matches!(node.op, Op::Recompute) { &node.src[..1] } else { &node.src[..] };
                if !shown.iter().any(|s| self.inside(*s)) {
                    self.hoisted.push(k.clone());
                } else if matches!(node.op, Op::Detach) {
                    let src = node.src[0];
                    self.aliases.insert(*n, *self.aliases.get(&src).unwrap_or(&src));
                    self.after.push(k.clone());
                } else {
                    return false;
                }
            }
            _ => return false,
        }
        self.taken.push(k.clone());
        self.taken_at.insert(at);
        true
    }

    /// The group as kernels: hoisted frees, the group, then the detaches; or, without a
    /// reduction and something to fuse it with, the kernels as they were.
    fn close(self, g: &Graph, readers: &HashMap<NodeId, Vec<usize>>, roots: &[NodeId], out: &mut Vec<Kernel>) {
        let reductions = self.items.iter().filter(|i| matches!(i, RowItem::Reduce(_))).count();
        if reductions == 0 || self.items.len() < 2 {
            out.extend(self.taken);
            return;
        }
        let mut inputs = vec![];
        for item in &self.items {
            let reads: Vec<NodeId> = match item {
                RowItem::Region(r) => r.inputs.clone(),
                RowItem::Reduce(n) => g.node(*n).src.clone(),
            };
            for s in reads {
                if !self.inside(s) && !inputs.contains(&s) {
                    inputs.push(s);
                }
            }
        }
        // Needed after the group: roots, and values a kernel outside the group reads (directly,
        // or through a detach that is itself needed). Kernels, not users: a broadcast inlined
        // into a later region makes that region read the broadcast's source.
        let needed = |n: NodeId| roots.contains(&n) || readers.get(&n).is_some_and(|ks| ks.iter().any(|k| !self.taken_at.contains(k)));
        let read_outside = |n: NodeId| needed(n) || self.aliases.iter().any(|(d, s)| *s == n && needed(*d));
        let mut outputs = vec![];
        for item in &self.items {
            let candidates: Vec<NodeId> = match item {
                RowItem::Region(r) => r.outputs.clone(),
                RowItem::Reduce(n) => vec![*n],
            };
            outputs.extend(candidates.into_iter().filter(|n| read_outside(*n)));
        }
        // A detach only members read needs no kernel after the group (its value is not kept).
        let after: Vec<Kernel> = self.after.into_iter().filter(|k| matches!(k, Kernel::Free(n) if needed(*n))).collect();
        out.extend(self.hoisted);
        out.push(Kernel::Rows(RowGroup { items: self.items, lead: self.lead, len: self.len, inputs, outputs, aliases: self.aliases }));
        out.extend(after);
    }
}

/// Where a group can start: a row reduction, or a region over rows longer than 1.
fn open(g: &Graph, at: usize, k: &Kernel) -> Option<Open> {
    let (lead, len) = match k {
        Kernel::Library(n) => row_reduction(g, *n)?,
        Kernel::Fused(r) => {
            let s = known(g, r.output())?;
            let last = s.len().checked_sub(1)?;
            (s[last] > 1).then(|| (s[..last].to_vec(), s[last]))?
        }
        _ => return None,
    };
    let mut o = Open {
        lead,
        len,
        items: vec![],
        taken: vec![],
        taken_at: HashSet::new(),
        hoisted: vec![],
        after: vec![],
        produced: HashSet::new(),
        aliases: HashMap::new(),
    };
    o.take(g, at, k).then_some(o)
}

/// Merge runs of kernels on one row space that contain a last-axis reduction into row groups.
pub fn fuse_rows(g: &Graph, kernels: Vec<Kernel>, roots: &[NodeId]) -> Vec<Kernel> {
    // Which kernels read each value.
    let mut readers: HashMap<NodeId, Vec<usize>> = HashMap::new();
    for (i, k) in kernels.iter().enumerate() {
        for s in k.reads(g) {
            readers.entry(s).or_default().push(i);
        }
    }
    let mut out = vec![];
    let mut current: Option<Open> = None;
    for (i, k) in kernels.into_iter().enumerate() {
        if let Some(o) = current.as_mut() {
            if o.take(g, i, &k) {
                continue;
            }
            current.take().expect("open").close(g, &readers, roots, &mut out);
        }
        match open(g, i, &k) {
            Some(o) => current = Some(o),
            None => out.push(k),
        }
    }
    if let Some(o) = current {
        o.close(g, &readers, roots, &mut out);
    }
    out
}
