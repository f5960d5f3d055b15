//! Each plan's intermediate values in one allocation: the arena `dlc_language::passes::arena`
//! plans when the plan is compiled, allocated on the plan's first run and kept, so a value sits
//! at the same device address in every step and a step allocates nothing but its results (the
//! roots, which outlive it). `DLC_ARENA=0` allocates every output per launch instead (to
//! compare).
//!
//! The arena also holds the plan's convolution workspace, after its values: the most bytes any
//! of its convolutions' algorithms needs (the convolutions run one at a time). The algorithms
//! are chosen by measurement when the plan first runs, so the first run's convolutions use the
//! driver's own workspace and the arena grows by the workspace for the second run on; from then
//! on the planned bytes are the allocated bytes.

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

/// The arena of the plan being run: its offsets, its allocation, and where its convolution
/// workspace is (offset, bytes) once known.
pub(super) struct Current<B> {
    pub offsets: Rc<Arena>,
    pub buf: Rc<B>,
    pub workspace: Option<(usize, usize)>,
}

/// `n` rounded up to a multiple of `ALIGN`.
fn aligned(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
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
    /// Make the arena of the compiled plan `key` the current one, allocating it on first use
    /// (and again, larger, once its convolutions' workspace is known).
    pub(super) fn enter_arena(&mut self, key: &(Vec<NodeId>, usize)) -> Result<(), RuntimeError> {
        self.arena = None;
        self.run_convs.clear();
        self.plan_tag = super::tag(key);
        let Some(offsets) = self.plans.get(key).and_then(|c| c.arena.clone()) else { return Ok(()) };
        let ws = self.workspaces.get(key).copied().filter(|b| *b > 0);
        let size = ws.map_or(offsets.size, |b| aligned(offsets.size) + b);
        let buf = match self.arena_bufs.get(key) {
            Some((b, bytes)) if *bytes == size => b.clone(),
            old => {
                // The first allocation, or the first with the workspace (the values' part is
                // counted once).
                let b = Rc::new(self.driver.alloc(size).map_err(fail)?);
                if old.is_none() {
                    self.report.arena_live_peak += offsets.live_peak;
                }
                self.report.arena_bytes += size - old.map_or(0, |o| o.1);
                self.report.conv_workspace_bytes += ws.unwrap_or(0);
                self.arena_bufs.insert(key.clone(), (b.clone(), size));
                b
            }
        };
        self.arena = Some(Current { offsets: offsets.clone(), buf, workspace: ws.map(|b| (aligned(offsets.size), b)) });
        Ok(())
    }

    /// After a plan's first run: its workspace is the most any of its convolutions needs.
    pub(super) fn settle_workspace(&mut self, key: &(Vec<NodeId>, usize)) {
        if self.workspaces.contains_key(key) || self.arena.is_none() {
            return;
        }
        let most = self.run_convs.iter().filter_map(|c| self.driver.conv_workspace(c)).max().unwrap_or(0);
        self.workspaces.insert(key.clone(), most);
    }

    /// The workspace for convolution `c` in the current arena, if it has one large enough.
    pub(super) fn conv_workspace(&mut self, c: &crate::runner::driver::Conv) -> Result<Option<D::Buf>, RuntimeError> {
        self.run_convs.push(c.clone());
        let Some((at, bytes)) = self.arena.as_ref().and_then(|a| a.workspace) else { return Ok(None) };
        match self.driver.conv_workspace(c) {
            Some(need) if need > 0 && need <= bytes => {
                let buf = self.arena.as_ref().map(|a| a.buf.clone()).expect("checked above");
                self.driver.part(&buf, at, need).map(Some).map_err(fail)
            }
            _ => Ok(None),
        }
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
