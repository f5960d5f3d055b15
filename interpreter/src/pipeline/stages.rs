//! What one stage does, shared by the two ways a pipeline runs: over a whole epoch's elements
//! (`apply`) and one batch at a time on the feed's workers (`stream.rs`). A `map` compiled once;
//! the order `shuffle` gives; the positions `take`, `skip` and `split` keep.

use super::{int_arg, leaves, str_arg, Element};
use crate::exec::fused::KernelCache;
use crate::exec::Executor;
use crate::runtime::rng;
use crate::runtime::RuntimeError;
use dlc_language::eval::value::Stage;
use dlc_language::ir::{Graph, NodeId, Op};
use dlc_language::passes::driver::Planned;
use std::sync::Arc;

/// A `map` stage compiled once, as a step is: its elementwise chain (cast, scale, normalise) one
/// fused kernel that reads the element's bytes and writes its floats once, broadcast constants
/// recomputed where they are read. It runs on any element, on any thread.
#[derive(Clone)]
pub struct MapStage {
    planned: Box<Planned>,
    /// The graph's input ids of the element's leaves, in order.
    inputs: Vec<u32>,
    outs: Vec<NodeId>,
    /// The fused kernels' programs, built once and shared by every element.
    kernels: Arc<KernelCache>,
}

impl MapStage {
    pub fn new(stage: &Stage, graph: &Graph) -> Result<MapStage, RuntimeError> {
        let (mut ins, mut outs) = (vec![], vec![]);
        leaves(&stage.input, &mut ins);
        leaves(&stage.output, &mut outs);
        let inputs = ins.iter().map(|n| if let Op::Input(i) = graph.node(*n).op { i } else { u32::MAX }).collect();
        let planned = dlc_language::passes::driver::plan(graph, &outs, true).map_err(|e| RuntimeError::Unsupported(format!("{e:?}")))?;
        Ok(MapStage { planned: Box::new(planned), inputs, outs, kernels: Arc::new(KernelCache::new(false)) })
    }

    /// The function applied to `e`.
    pub fn run(&self, graph: &Graph, e: Element) -> Result<Element, RuntimeError> {
        // A fresh executor per element: the inputs change, and results are cached by node.
        let mut ex = Executor::new(0);
        ex.kernels = self.kernels.clone();
        for (id, t) in self.inputs.iter().zip(e) {
            ex.inputs.insert(*id, t);
        }
        ex.run_planned(graph, &self.planned.plan, &self.planned.memory)?;
        self.outs.iter().map(|n| ex.eval(graph, *n)).collect()
    }
}

/// The order `shuffle` gives `n` elements in `epoch` (position k takes element `order[k]`):
/// Fisher–Yates with the counter-based generator, so it depends on (seed, epoch) only.
pub fn shuffle_order(stage: &Stage, epoch: u64, n: usize) -> Vec<usize> {
    seeded_permutation(epoch_stream(int_arg(stage, "seed", 0), epoch), n)
}

/// The counter-based generator's stream of a shuffle's draws in `epoch`, for its `seed`.
pub fn epoch_stream(seed: i64, epoch: u64) -> u64 {
    (seed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ epoch
}

/// A permutation of `0..n` by Fisher–Yates, its draws from `stream`.
pub fn seeded_permutation(stream: u64, n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (rng::uniform(stream, i as u64) * (i + 1) as f64) as usize;
        order.swap(i, j.min(i));
    }
    order
}

/// The positions of `n` that `take`, `skip` or `split` keeps.
pub fn kept(stage: &Stage, n: usize) -> std::ops::Range<usize> {
    let count = || (int_arg(stage, "n", 0).max(0) as usize).min(n);
    match stage.kind {
        "take" => 0..count(),
        "skip" => count()..n,
        _ => {
            let f = stage.arg("fraction").and_then(|v| v.as_float()).unwrap_or(0.9);
            let cut = ((n as f64 * f).round() as usize).min(n);
            let second = matches!(str_arg(stage, "part").as_deref(), Some("rest" | "test" | "second"));
            if second {
                cut..n
            } else {
                0..cut
            }
        }
    }
}
