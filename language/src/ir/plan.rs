//! Kernel plans: what the passes after the graph IR produce and the back ends consume. A `Plan`
//! is the kernels of a computation in a dependency order (fused regions, optimiser groups, row
//! kernels, sums with a prologue, library calls, views), and a `MemoryPlan` says when each value
//! dies and the peak. The passes that make them are `passes::fusion`, `passes::rows`,
//! `passes::prologue` and `passes::memory`; they live here so that the IR's verifier and printer
//! depend on the IR alone.

use crate::ir::{Graph, NodeId, Op};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// A fused elementwise kernel.
#[derive(Clone, Debug)]
pub struct Region {
    /// Members in dependency order; the last is an output.
    pub nodes: Vec<NodeId>,
    /// Values read from outside the region (materialised before it runs), in first-use order.
    pub inputs: Vec<NodeId>,
    /// Members whose values are needed after the region (the last member, and roots computed
    /// on the way, like an optimiser's new moments next to the new parameter), in member order.
    pub outputs: Vec<NodeId>,
}

impl Region {
    /// The last member: where the region sits in the order.
    pub fn output(&self) -> NodeId {
        *self.nodes.last().expect("a region has at least one node")
    }
}

#[derive(Clone, Debug)]
pub enum Kernel {
    Fused(Region),
    /// One op run by its own kernel (a library call or a copy).
    Library(NodeId),
    /// No work: bound inputs, parameters, constants, literals, views.
    Free(NodeId),
    /// A transpose that only matrix products read: they read its source with swapped strides,
    /// so it is never materialised.
    View(NodeId),
    /// Independent fused regions run as one launch (e.g. the optimiser's update of every
    /// parameter: the guide's multi-tensor "foreach"/fused optimiser).
    Group(Vec<Region>),
    /// Last-axis reductions with their elementwise neighbours, run row by row as one kernel
    /// (softmax, log_softmax, layer norm; see rows.rs).
    Rows(RowGroup),
    /// A sum over any axes of values its prologue region computes as it sums them (batch-norm
    /// statistics, bias gradients; see prologue.rs).
    Reduce(ReduceKernel),
    /// A matrix product with its bias add (and a relu) as its epilogue (see epilogue.rs).
    Gemm(GemmKernel),
}

/// A matrix product whose rows get a bias added, and then maybe a relu, as they are written
/// (`passes::epilogue`): cuBLASLt's `BIAS` / `RELU_BIAS` epilogues on a GPU. Or, on the CPU, a
/// product zeroed where a relu's output is not positive (`mask`: the relu's backward). Only the
/// last epilogue node's value is written; the product's and the sum's are never materialised.
#[derive(Clone, Debug)]
pub struct GemmKernel {
    /// The `MatMul` node.
    pub product: NodeId,
    /// The value added to every row: shaped `[1, .., 1, n]`, one value per column (`None` for
    /// a mask).
    pub bias: Option<NodeId>,
    /// The `y` of `where(0 < y, x, 0)`, shaped as the product: its values kept where `y` is
    /// positive, else 0 (a relu's backward). Only with `widens`.
    pub mask: Option<NodeId>,
    /// The add, then (with a relu) its `0 < x` and `where`, in order; or the mask's `0 < y`
    /// and `where`; first the product's widening to f32 when `widens`.
    pub epilogue: Vec<NodeId>,
    /// Whether the product computes in a low precision (autocast's bf16 or f16) and the
    /// epilogue starts with its `Cast` to f32: only on a device whose products write their
    /// rounded values as f32 (the CPU, `Options::products_round`), where that cast is exact
    /// and does nothing.
    pub widens: bool,
}

impl GemmKernel {
    /// The value the kernel writes.
    pub fn output(&self) -> NodeId {
        *self.epilogue.last().expect("an epilogue has its add")
    }
    /// Whether a relu follows the add.
    pub fn relu(&self) -> bool {
        self.bias.is_some() && self.epilogue.len() > 1 + self.widens as usize
    }
}

impl Kernel {
    /// A generated kernel's inputs and outputs, per region, in the kernel IR's parameter order
    /// (empty for library calls, free nodes and views, which have no generated kernel).
    pub fn io(&self) -> Vec<(Vec<NodeId>, Vec<NodeId>)> {
        match self {
            Kernel::Fused(r) => vec![(r.inputs.clone(), r.outputs.clone())],
            Kernel::Group(rs) => rs.iter().map(|r| (r.inputs.clone(), r.outputs.clone())).collect(),
            Kernel::Rows(rg) => vec![(rg.inputs.clone(), rg.outputs.clone())],
            Kernel::Reduce(rk) => vec![(rk.prologue.inputs.clone(), rk.outputs())],
            Kernel::Library(_) | Kernel::Free(_) | Kernel::View(_) | Kernel::Gemm(_) => vec![],
        }
    }

    /// Every node the kernel computes (written out or not).
    pub fn members(&self) -> Vec<NodeId> {
        match self {
            Kernel::Fused(r) => r.nodes.clone(),
            Kernel::Group(rs) => rs.iter().flat_map(|r| r.nodes.clone()).collect(),
            Kernel::Rows(rg) => rg.members(),
            Kernel::Reduce(rk) => rk.prologue.nodes.iter().copied().chain([rk.node]).collect(),
            Kernel::Gemm(gk) => std::iter::once(gk.product).chain(gk.epilogue.iter().copied()).collect(),
            Kernel::Library(n) | Kernel::Free(n) | Kernel::View(n) => vec![*n],
        }
    }

    /// The values the kernel reads from before it (a matrix product's transposed operand is
    /// the transpose node, not its source).
    pub fn reads(&self, g: &Graph) -> Vec<NodeId> {
        match self {
            Kernel::Fused(r) => r.inputs.clone(),
            Kernel::Group(rs) => rs.iter().flat_map(|r| r.inputs.clone()).collect(),
            Kernel::Rows(rg) => rg.inputs.clone(),
            Kernel::Reduce(rk) => rk.prologue.inputs.clone(),
            Kernel::Gemm(gk) => g.node(gk.product).src.iter().copied().chain(gk.bias).chain(gk.mask).collect(),
            // A recompute view reads its first source; the second only orders it.
            Kernel::Free(n) if matches!(g.node(*n).op, Op::Recompute) => vec![g.node(*n).src[0]],
            Kernel::Library(n) | Kernel::Free(n) | Kernel::View(n) => g.node(*n).src.clone(),
        }
    }

    /// The values the kernel computes (a prologue reduction's summed input is not one of them).
    pub fn writes(&self) -> Vec<NodeId> {
        match self {
            Kernel::Fused(r) => r.outputs.clone(),
            Kernel::Group(rs) => rs.iter().flat_map(|r| r.outputs.clone()).collect(),
            Kernel::Rows(rg) => rg.outputs.clone(),
            Kernel::Reduce(rk) => rk.outputs(),
            Kernel::Gemm(gk) => vec![gk.output()],
            Kernel::Library(n) | Kernel::Free(n) | Kernel::View(n) => vec![*n],
        }
    }
}

/// The kernels of a computation, in an order that respects dependencies.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub kernels: Vec<Kernel>,
    pub roots: Vec<NodeId>,
}

impl Plan {
    /// Kernels that do work (fused regions and library kernels).
    pub fn kernel_count(&self) -> usize {
        self.kernels.iter().filter(|k| !matches!(k, Kernel::Free(_) | Kernel::View(_))).count()
    }
    /// What an eager interpreter launches: one kernel per node that does work (a broadcast
    /// recomputed in several regions counts once).
    pub fn eager_count(&self) -> usize {
        let fused: HashSet<NodeId> = self.regions().flat_map(|r| r.nodes.iter().copied()).collect();
        let reductions: usize = self.kernels.iter().map(|k| if let Kernel::Rows(g) = k { g.reductions().count() } else { 0 }).sum();
        fused.len()
            + reductions
            + self.kernels.iter().filter(|k| matches!(k, Kernel::Library(_) | Kernel::View(_) | Kernel::Reduce(_))).count()
            + self.kernels.iter().map(|k| if let Kernel::Gemm(gk) = k { 1 + gk.epilogue.len() } else { 0 }).sum::<usize>()
    }
    /// Every fused region, grouped or not.
    pub fn regions(&self) -> impl Iterator<Item = &Region> {
        self.kernels.iter().flat_map(|k| -> Box<dyn Iterator<Item = &Region> + '_> {
            match k {
                Kernel::Fused(r) => Box::new(std::iter::once(r)),
                Kernel::Group(rs) => Box::new(rs.iter()),
                Kernel::Rows(g) => Box::new(g.regions()),
                Kernel::Reduce(rk) => Box::new(std::iter::once(&rk.prologue)),
                _ => Box::new(std::iter::empty()),
            }
        })
    }
}

/// One step of a row group, in order.
#[derive(Clone, Debug)]
pub enum RowItem {
    /// A fused elementwise region over rows (`[lead.., L]`) or per-row values (`[lead.., 1]`).
    Region(Region),
    /// A sum or max over the last axis: `[lead.., L]` to `[lead.., 1]`.
    Reduce(NodeId),
}

#[derive(Clone, Debug)]
pub struct RowGroup {
    pub items: Vec<RowItem>,
    /// The leading dims (all but the last) and the row length.
    pub lead: Vec<usize>,
    pub len: usize,
    /// Values read from outside the group, in first-use order.
    pub inputs: Vec<NodeId>,
    /// Values computed in the group and needed after it (written out at full size); the rest
    /// live only in row buffers.
    pub outputs: Vec<NodeId>,
    /// `stop_grad` (detach) nodes of a group value that members read: the member reads the
    /// value itself.
    pub aliases: HashMap<NodeId, NodeId>,
}

/// Where a member of a row group reads a value: a buffer of the group (a value computed earlier
/// in the row), or input `k` of the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowRead {
    Slot(usize),
    Input(usize),
}

impl RowGroup {
    /// Where a member reads `n` (through a detach's alias), given the slot of each value the
    /// group computed so far; `None` when it is neither computed nor read by the group.
    pub fn read(&self, n: NodeId, slot_of: &HashMap<NodeId, usize>) -> Option<RowRead> {
        let n = self.aliases.get(&n).copied().unwrap_or(n);
        if let Some(s) = slot_of.get(&n) {
            return Some(RowRead::Slot(*s));
        }
        self.inputs.iter().position(|i| *i == n).map(RowRead::Input)
    }

    pub fn rows(&self) -> usize {
        self.lead.iter().product()
    }
    /// The elementwise regions of the group.
    pub fn regions(&self) -> impl Iterator<Item = &Region> {
        self.items.iter().filter_map(|i| if let RowItem::Region(r) = i { Some(r) } else { None })
    }
    /// The reductions of the group.
    pub fn reductions(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.items.iter().filter_map(|i| if let RowItem::Reduce(n) = i { Some(*n) } else { None })
    }
    /// Every node computed by the group.
    pub fn members(&self) -> Vec<NodeId> {
        self.items
            .iter()
            .flat_map(|i| match i {
                RowItem::Region(r) => r.nodes.clone(),
                RowItem::Reduce(n) => vec![*n],
            })
            .collect()
    }
}

/// A sum (`node`, an f32 `Reduce(Sum, axes)`) of the values its `prologue` region computes
/// (`input`, one of the region's outputs). The region's other outputs are written in full.
#[derive(Clone, Debug)]
pub struct ReduceKernel {
    pub prologue: Region,
    pub input: NodeId,
    pub node: NodeId,
}

impl ReduceKernel {
    /// What the kernel writes: the sum, then the region's outputs other than the summed input.
    pub fn outputs(&self) -> Vec<NodeId> {
        std::iter::once(self.node).chain(self.prologue.outputs.iter().copied().filter(|o| *o != self.input)).collect()
    }
}

/// Where the memory of a computation goes, in bytes.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MemoryPlan {
    /// Parameters and buffers the computation reads (held by the trainer between steps).
    pub parameters: usize,
    /// Bound inputs: the batch, optimiser state, gradient sums, scalars.
    pub inputs: usize,
    /// The most that kernel outputs take at once (activations, gradients, new parameters and
    /// states), with each value dropped after its last reader.
    pub peak_intermediates: usize,
    /// What the same kernels would hold if nothing were dropped before the end.
    pub without_reuse: usize,
    /// Per kernel (the plan's order): the values whose last reader it is.
    #[serde(skip)]
    pub release: Vec<Vec<NodeId>>,
    /// The values that own memory and are live while the peak is reached (written by then and
    /// not yet released).
    #[serde(skip)]
    pub live_at_peak: HashSet<NodeId>,
}

impl MemoryPlan {
    pub fn peak(&self) -> usize {
        self.parameters + self.inputs + self.peak_intermediates
    }
}
