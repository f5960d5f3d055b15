//! Where each kernel of a plan runs on a GPU, for `dlc explain`: generated kernels by kind,
//! products on the device's gemm, convolutions on cuDNN, what is computed once, what goes
//! through the host.

use super::{conv, device_kernel, gemm_type};
use dlc_language::ir::Graph;
use dlc_language::passes::fusion::{Kernel, Plan};

/// Where each kernel of `plan` runs on a GPU (`dlc explain`): generated kernels by kind, matrix
/// products on the device's gemm, and what goes through the host, by op.
#[derive(Debug, Default, serde::Serialize)]
pub struct Placement {
    pub generated: std::collections::BTreeMap<String, usize>,
    pub gemm: usize,
    /// Convolutions (and their gradients) on the driver's convolution: cuDNN.
    pub conv: usize,
    /// Ops with no operands and no kernel (an iota): computed on the host once, then kept.
    pub once: std::collections::BTreeMap<String, usize>,
    pub host: std::collections::BTreeMap<String, usize>,
    /// Bytes of the plan's arena (its intermediate values, each at an offset planned before the
    /// run; see arena.rs), and the most bytes those values hold at once.
    pub arena_bytes: usize,
    pub arena_live_peak: usize,
}

pub fn placement(g: &Graph, plan: &Plan) -> Placement {
    let memory = dlc_language::passes::memory::plan_memory(g, plan);
    let arena = super::arena::plan(g, plan, &memory).unwrap_or_default();
    let mut p = Placement { arena_bytes: arena.size, arena_live_peak: arena.live_peak, ..Placement::default() };
    for k in &plan.kernels {
        match k {
            Kernel::View(_) | Kernel::Free(_) => {}
            Kernel::Library(n) if gemm_type(g, *n).is_some() => p.gemm += 1,
            Kernel::Gemm(gk) if gemm_type(g, gk.product).is_some() => p.gemm += 1,
            Kernel::Library(n) if conv::on_device(g, *n) => p.conv += 1,
            other => match (device_kernel(g, other), other) {
                (Ok(Some((kernel, _))), _) => *p.generated.entry(kernel.kind().to_string()).or_insert(0) += 1,
                (_, Kernel::Library(n)) if g.node(*n).src.is_empty() => *p.once.entry(g.node(*n).op.kind_name()).or_insert(0) += 1,
                (_, Kernel::Library(n)) => *p.host.entry(g.node(*n).op.kind_name()).or_insert(0) += 1,
                _ => *p.host.entry(format!("fused {}", kind_of(other))).or_insert(0) += 1,
            },
        }
    }
    p
}

pub(super) fn kind_of(k: &Kernel) -> &'static str {
    match k {
        Kernel::Fused(_) => "elementwise",
        Kernel::Group(_) => "group",
        Kernel::Rows(_) => "rows",
        Kernel::Reduce(_) => "reduction",
        Kernel::Gemm(_) => "product with epilogue",
        Kernel::Library(_) | Kernel::Free(_) | Kernel::View(_) => "library",
    }
}
