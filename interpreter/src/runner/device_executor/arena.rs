//! Each plan's intermediate values in one allocation: the arena `dlc_language::passes::arena`
//! plans when the plan is compiled, allocated on the plan's first run and kept, so a value sits
//! at the same device address in every step and a step allocates nothing but its results (the
//! roots, which outlive it). `DLC_ARENA=0` allocates every output per launch instead (to
//! compare).

use super::{fail, shape_of, DeviceExecutor};
use crate::runner::driver::Driver;
use crate::runner::storage;
use crate::runtime::RuntimeError;
use dlc_language::ir::{Graph, NodeId};
use dlc_language::passes::arena::{plan_arena, Arena};
use dlc_language::passes::fusion::Plan;
use dlc_language::passes::memory::MemoryPlan;
use std::rc::Rc;

/// Offsets are multiples of this: `cuMemAlloc`'s alignment, more than any vector load needs.
pub const ALIGN: usize = 256;

/// The arena of the plan being run: its offsets and its allocation.
pub(super) struct Current<B> {
    pub offsets: Rc<Arena>,
    pub buf: Rc<B>,
}

/// Bytes `n` takes on the device (0 for a value kept on the host).
pub(super) fn device_bytes(g: &Graph, n: NodeId) -> usize {
    let node = g.node(n);
    storage::device_type(node.dtype).map_or(0, |ty| shape_of(g, n).iter().product::<usize>() * ty.bytes())
}

/// The arena of `plan` (`None` when there is nothing to place, or with `DLC_ARENA=0`).
pub(super) fn plan(g: &Graph, plan: &Plan, memory: &MemoryPlan) -> Option<Arena> {
    if crate::runner::switched_off("DLC_ARENA") || memory.release.len() != plan.kernels.len() {
        return None;
    }
    let a = plan_arena(g, plan, memory, &|n| device_bytes(g, n), ALIGN);
    (!a.offsets.is_empty()).then_some(a)
}

impl<D: Driver> DeviceExecutor<D> {
    /// Make the arena of the compiled plan `key` the current one, allocating it on first use.
    pub(super) fn enter_arena(&mut self, key: &(Vec<NodeId>, usize)) -> Result<(), RuntimeError> {
        self.arena = None;
        self.plan_tag = super::tag(key);
        let Some(offsets) = self.plans.get(key).and_then(|c| c.arena.clone()) else { return Ok(()) };
        let buf = match self.arena_bufs.get(key) {
            Some(b) => b.clone(),
            None => {
                let b = Rc::new(self.driver.alloc(offsets.size).map_err(fail)?);
                self.report.arena_bytes += offsets.size;
                self.report.arena_live_peak += offsets.live_peak;
                self.arena_bufs.insert(key.clone(), b.clone());
                b
            }
        };
        self.arena = Some(Current { offsets, buf });
        Ok(())
    }

    /// The buffer kernel output `n` of `bytes` bytes is written into: its place in the current
    /// plan's arena, or an allocation of its own (a result, or a value the arena has no room
    /// for).
    pub(super) fn output(&mut self, g: &Graph, n: NodeId, bytes: usize) -> Result<D::Buf, RuntimeError> {
        if let Some(a) = &self.arena {
            if let Some(off) = a.offsets.offsets.get(&n) {
                if bytes <= device_bytes(g, n) {
                    let (buf, off) = (a.buf.clone(), *off);
                    self.report.arena_outputs += 1;
                    return self.driver.part(&buf, off, bytes).map_err(fail);
                }
            }
        }
        self.report.allocated_outputs += 1;
        // A result: a buffer of its own, reused from the same result of an earlier run.
        self.driver.alloc_for(super::tag((self.plan_tag, n)), bytes).map_err(fail)
    }
}
