//! A steady-state step as a graph: the device calls of a plan's run (launches, products,
//! convolutions) are recorded instead of issued, and at the end of the run they are issued
//! one by one, or, when the same calls on the same addresses were recorded in a recent run of
//! the plan, captured once as a graph (CUDA: stream capture) and from then on replayed as one
//! launch. Equal calls on equal addresses make a replay the same work as issuing the calls, so
//! a replayed step equals an eager one bit for bit.
//!
//! Addresses repeat because a plan's intermediates sit in its arena (arena.rs) and freed
//! buffers are reused (a GPU's caching allocator, the emulated driver's free list): a step's
//! results take the buffers of the step before the last, so steps alternate between two sets of
//! calls and a plan keeps a few graphs. Values kept past the step (a put-off logged loss, an
//! evaluation's metric) are copied out of the result's buffer, so holding them does not change
//! what the next steps get.
//!
//! Not recorded: a plan's first run (convolution plans and the product library are set up
//! then), a run with profiling (each kernel is waited for), and from the moment the host reads
//! a value in the middle of a run (a host op, data parallelism's all-reduce): the calls so far
//! are issued and the rest of the run is eager. A plan whose calls have not repeated after a
//! dozen runs is not recorded any more. `DLC_CUDA_GRAPHS=0` turns graphs off.

use super::{fail, DeviceExecutor, Place, Value};
use crate::runner::driver::{Call, Driver, GraphId};
use crate::runner::Slot;
use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use super::PlanKey;

/// Graphs kept per plan (steps alternate between two sets of addresses; a few more for
/// evaluation plans that run with other inputs).
const GRAPHS_PER_PLAN: usize = 4;
/// Recent runs' calls kept per plan, to recognise a repeat.
const RECENT: usize = 4;
/// Runs of a plan without a repeat after which it is no longer recorded.
const GIVE_UP_AFTER: usize = 12;

/// The calls of the run in progress.
pub(super) struct Trace<B> {
    calls: Vec<Call<B>>,
    recording: bool,
    /// The host read a value during the run: the calls were issued, the rest runs eagerly.
    flushed: bool,
}

impl<B> Default for Trace<B> {
    fn default() -> Self {
        Trace { calls: vec![], recording: false, flushed: false }
    }
}

#[derive(Default)]
struct PlanGraphs {
    runs: usize,
    recent: VecDeque<Vec<u64>>,
    graphs: Vec<(Vec<u64>, GraphId)>,
}

/// Each plan's graphs, and whether graphs are off (asked, or a capture failed).
#[derive(Default)]
pub(super) struct Graphs {
    plans: HashMap<PlanKey, PlanGraphs>,
    off: Option<bool>,
}

impl Graphs {
    fn off(&mut self) -> bool {
        *self.off.get_or_insert_with(|| crate::runner::switched_off("DLC_CUDA_GRAPHS"))
    }
}

impl<D: Driver> DeviceExecutor<D> {
    /// Issue a device call: recorded while the run is, else now.
    pub(super) fn issue(&mut self, call: Call<D::Buf>) -> Result<(), RuntimeError> {
        if self.trace.recording {
            self.trace.calls.push(call);
            return Ok(());
        }
        call.run(&mut self.driver).map_err(fail)
    }

    /// Issue the calls recorded so far (the host is about to read a value); the rest of the run
    /// is eager.
    pub(super) fn flush(&mut self) -> Result<(), RuntimeError> {
        if !self.trace.recording {
            return Ok(());
        }
        self.trace.recording = false;
        self.trace.flushed = true;
        for c in std::mem::take(&mut self.trace.calls) {
            c.run(&mut self.driver).map_err(fail)?;
        }
        Ok(())
    }

    /// Start a run of plan `key`: record its calls when it may become a graph.
    pub(super) fn begin_trace(&mut self, key: &PlanKey) {
        let off = self.graphs.off() || self.profile.is_some();
        let p = self.graphs.plans.entry(key.clone()).or_default();
        p.runs += 1;
        let hopeless = p.graphs.is_empty() && p.runs > GIVE_UP_AFTER;
        self.trace = Trace { calls: vec![], recording: !off && p.runs > 1 && !hopeless, flushed: false };
    }

    /// End the run of plan `key`: replay the graph of its calls, capture one when the calls
    /// repeat a recent run's, or issue them.
    pub(super) fn end_trace(&mut self, key: &PlanKey) -> Result<(), RuntimeError> {
        let trace = std::mem::take(&mut self.trace);
        if !trace.recording || trace.calls.is_empty() {
            return Ok(());
        }
        let keys: Vec<u64> = trace.calls.iter().map(|c| c.key(&self.driver)).collect();
        let p = self.graphs.plans.entry(key.clone()).or_default();
        if let Some((_, id)) = p.graphs.iter().find(|(k, _)| *k == keys) {
            let id = *id;
            self.report.graph_replays += 1;
            self.report.calls_in_graphs += trace.calls.len();
            return self.driver.replay(id, &trace.calls).map_err(fail);
        }
        if p.recent.contains(&keys) && p.graphs.len() < GRAPHS_PER_PLAN {
            match self.driver.capture(&trace.calls) {
                Ok(id) => {
                    p.graphs.push((keys, id));
                    self.report.graphs_captured += 1;
                    self.report.graph_replays += 1;
                    self.report.calls_in_graphs += trace.calls.len();
                    return self.driver.replay(id, &trace.calls).map_err(fail);
                }
                Err(e) => {
                    // Said once; the run goes on without graphs.
                    self.report.not_lowered.push(format!("graphs of steps: {e}"));
                    self.graphs.off = Some(true);
                }
            }
        } else {
            p.recent.push_back(keys);
            if p.recent.len() > RECENT {
                p.recent.pop_front();
            }
        }
        trace.calls.iter().try_for_each(|c| c.run(&mut self.driver)).map_err(fail)
    }

    /// Put `t` into the buffer `slot` already holds when nothing else holds it and it has the
    /// same type and size (a batch, every step): the slot keeps its address. Whether it did.
    pub(super) fn write_in_place(&mut self, slot: Slot, t: &Tensor) -> Result<bool, RuntimeError> {
        let Some(Value { place: Place::Device(buf, ty), dtype, shape }) = self.slots.get(&slot) else { return Ok(false) };
        if Rc::strong_count(buf) != 1 || *dtype != t.dtype || *shape != t.shape || crate::runner::storage::device_type(t.dtype) != Some(*ty)
        {
            return Ok(false);
        }
        let buf = buf.clone();
        let written = crate::runner::storage::with_device_bytes(t, |bytes, _| {
            self.report.bytes_up += bytes.len() as u64;
            self.driver.write(&buf, bytes)
        });
        written.expect("a device type, checked above").map_err(fail)?;
        Ok(true)
    }

    /// A result to keep in `slot`: a logged value or a metric, kept past the next steps, is
    /// copied out of its buffer (which the steps after reuse); anything else is kept as it is.
    pub(super) fn kept_apart(&mut self, slot: Slot, v: Value<D::Buf>) -> Result<Value<D::Buf>, RuntimeError> {
        if !matches!(slot, Slot::Logged(..) | Slot::Metric(..)) || self.graphs.off() {
            return Ok(v);
        }
        let Place::Device(src, ty) = &v.place else { return Ok(v) };
        let bytes = v.numel() * ty.bytes();
        let dst = self.driver.alloc(bytes).map_err(fail)?;
        self.driver.copy(src, &dst, bytes).map_err(fail)?;
        Ok(Value { dtype: v.dtype, shape: v.shape.clone(), place: Place::Device(Rc::new(dst), *ty) })
    }
}
