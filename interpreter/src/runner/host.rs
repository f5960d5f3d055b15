//! The CPU's runner: the interpreter (with its fused, native and autotuned kernels) behind the
//! same interface as a device. "Resident" values are host tensors shared by reference, so
//! keeping a step's result for the next one copies nothing.

use super::{AfterKernel, Report, Runner, Slot};
use crate::exec::Executor;
use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use dlc_language::ir::{Graph, NodeId};
use dlc_language::passes::fusion::Plan;
use dlc_language::passes::memory::MemoryPlan;
use std::collections::HashMap;

pub struct HostRunner {
    ex: Executor,
    slots: HashMap<Slot, Tensor>,
    input_slots: HashMap<u32, Slot>,
    pinned: HashMap<NodeId, Tensor>,
    /// Slots the next run consumes (`Runner::donate`).
    donated: std::collections::HashSet<Slot>,
    runs: usize,
}

impl HostRunner {
    /// Over `ex` (its seed, fusion setting, kernel cache and profile as the caller set them).
    pub fn new(ex: Executor) -> HostRunner {
        HostRunner { ex, slots: HashMap::new(), input_slots: HashMap::new(), pinned: HashMap::new(), donated: Default::default(), runs: 0 }
    }
}

impl HostRunner {
    /// A result of the last run, as every runner gives it: nothing is computed on demand (the
    /// device executor cannot, so neither does the CPU's, and a caller that asks for anything
    /// else fails on both).
    fn result(&self, node: NodeId) -> Result<Tensor, RuntimeError> {
        self.ex.computed(node).ok_or_else(|| missing(format!("{node:?} is not a result of the last run")))
    }
}

/// The input nodes `plan` reads.
fn inputs_read(g: &Graph, plan: &Plan) -> std::collections::HashSet<u32> {
    use dlc_language::ir::{plan::Kernel, Op};
    plan.kernels
        .iter()
        .filter_map(|k| match k {
            Kernel::Library(n) | Kernel::Free(n) => match g.node(*n).op {
                Op::Input(i) => Some(i),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn missing(what: String) -> RuntimeError {
    RuntimeError::Unsupported(what)
}

impl Runner for HostRunner {
    fn report(&self) -> Report {
        Report { device: "the CPU".into(), modules: self.runs.min(1), ..Default::default() }
    }

    fn put(&mut self, slot: Slot, t: &Tensor) -> Result<(), RuntimeError> {
        self.slots.insert(slot, t.clone());
        Ok(())
    }

    fn read_input_from(&mut self, input: u32, slot: Slot) {
        self.input_slots.insert(input, slot);
    }

    fn donate(&mut self, slot: Slot) {
        self.donated.insert(slot);
    }

    fn run_observed(&mut self, g: &Graph, plan: &Plan, memory: &MemoryPlan, after: AfterKernel) -> Result<(), RuntimeError> {
        self.ex.clear_values();
        for (n, t) in &self.pinned {
            self.ex.preset(*n, t.clone());
        }
        // A donated slot's value moves into the executor, which then holds its only reference:
        // a parameter's, or that of the one input this plan reads from the slot (the input
        // nodes of other plans, another batch shape's step, may read it too).
        let read = inputs_read(g, plan);
        for slot in std::mem::take(&mut self.donated) {
            if let Slot::Param(id) = slot {
                if let Some(t) = self.slots.remove(&slot) {
                    self.ex.set_param(id, t);
                    self.ex.donated_params.insert(id);
                }
                continue;
            }
            let readers: Vec<u32> = self.input_slots.iter().filter(|(i, s)| **s == slot && read.contains(*i)).map(|(i, _)| *i).collect();
            // (With no reader, or several, the slot stays where it is.)
            if let [input] = readers[..] {
                if let Some(t) = self.slots.remove(&slot) {
                    self.ex.inputs.insert(input, t);
                    self.ex.donated_inputs.insert(input);
                }
            }
        }
        for (slot, t) in &self.slots {
            match slot {
                Slot::Param(id) => self.ex.set_param(*id, t.clone()),
                Slot::Input(id) => {
                    self.ex.inputs.insert(*id, t.clone());
                }
                Slot::State(..) | Slot::Sum(_) | Slot::Logged(..) | Slot::Metric(..) => {}
            }
        }
        for (input, slot) in &self.input_slots {
            if let Some(t) = self.slots.get(slot) {
                self.ex.inputs.insert(*input, t.clone());
            }
        }
        self.runs += 1;
        self.ex.run_planned_with(g, plan, memory, &mut |i, values| {
            after(i, &mut |n| values.get(&n).cloned().ok_or_else(|| missing(format!("{n:?} is not computed yet"))))
        })
    }

    fn fetch(&mut self, _g: &Graph, node: NodeId) -> Result<Tensor, RuntimeError> {
        self.result(node)
    }

    fn keep(&mut self, _g: &Graph, node: NodeId, slot: Slot) -> Result<(), RuntimeError> {
        let t = self.result(node)?;
        self.slots.insert(slot, t);
        Ok(())
    }

    fn pin(&mut self, _g: &Graph, node: NodeId) -> Result<(), RuntimeError> {
        let t = self.result(node)?;
        self.pinned.insert(node, t);
        Ok(())
    }

    fn unpin_all(&mut self) {
        self.pinned.clear();
    }

    fn take(&mut self, slot: Slot) -> Result<Tensor, RuntimeError> {
        self.slots.get(&slot).cloned().ok_or_else(|| missing(format!("nothing is resident in {slot:?}")))
    }
}
