//! Where a training step runs: a `Runner` holds values on its device and runs kernel plans
//! there, with what must outlive a step (parameters, optimiser state, gradient sums) resident in
//! slots that a step's results move into without a copy. The trainer's steps go through it on
//! every device: the CPU's runner is the interpreter (host.rs); a GPU's is the device executor
//! (device_executor.rs) over a driver (driver.rs): CUDA through cudarc (cuda.rs), or the same
//! CUDA C compiled for the CPU (emulated.rs, `DLC_EMULATE_GPU=1`), which is how the device
//! executor is tested without a GPU. The registry (registry.rs) lists the devices as peers and
//! opens a runner on any of them; nothing above this module asks which device it runs on.

mod cublaslt;
pub mod cuda;
mod cudnn_conv;
pub mod device_executor;
pub mod driver;
pub mod emulated;
pub mod emulation;
pub mod host;
pub mod host_lib;
mod nccl;
pub mod pinned_batches;
pub mod registry;
pub mod storage;

pub use device_executor::device_kernel;
pub use registry::{open, DeviceKind, RunnerOptions};

use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use dlc_language::ir::{Graph, NodeId};
use dlc_language::passes::fusion::Plan;
use dlc_language::passes::memory::MemoryPlan;
use std::collections::BTreeMap;

/// A resident value's name: a parameter or buffer (by parameter id), the `j`th optimiser state
/// of trainer parameter `k`, gradient sum `k` of `accumulate`, a bound input, the `j`th
/// logged value of the `k`th step whose read was put off, or the `j`th metric of an
/// evaluation's `b`th batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    Param(u32),
    State(usize, usize),
    Sum(usize),
    Input(u32),
    Logged(usize, usize),
    Metric(usize, usize),
}

/// What a runner did, for `explain`, `bench` and the end-of-run line.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub device: String,
    /// Modules compiled (one per plan with generated kernels) and the seconds spent lowering,
    /// compiling and loading plans.
    pub modules: usize,
    pub compile_s: f64,
    /// Generated kernels launched, and by kind (elementwise, group, rows, sum).
    pub launches: usize,
    pub launches_by_kind: BTreeMap<String, usize>,
    /// Ops computed on the host for want of a device kernel, by op: each a round trip.
    pub host_ops: BTreeMap<String, usize>,
    /// Ops with no operands and no kernel (a constant, an iota), computed on the host once per
    /// plan and then kept on the device: not a round trip of any step.
    #[serde(default)]
    pub once_ops: BTreeMap<String, usize>,
    /// Kernels the kernel IR could not express (they ran on the host), and why.
    pub not_lowered: Vec<String>,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Times the host waited for the device: reads of results with work queued since the last.
    #[serde(default)]
    pub waits: usize,
    /// Bytes of the plans' arenas (allocated once per plan), the most bytes their values hold
    /// at once, and kernel outputs written into an arena against those allocated on their own
    /// (results, which outlive their plan).
    #[serde(default)]
    pub arena_bytes: usize,
    #[serde(default)]
    pub arena_live_peak: usize,
    #[serde(default)]
    pub arena_outputs: usize,
    #[serde(default)]
    pub allocated_outputs: usize,
    /// Runs whose calls were captured as a graph, and runs replayed as one (see
    /// device_executor/graphs.rs).
    #[serde(default)]
    pub graphs_captured: usize,
    #[serde(default)]
    pub graph_replays: usize,
    /// Batches uploaded on the copy stream while the step before them ran.
    #[serde(default)]
    pub uploads_ahead: usize,
    /// Uploads read from page-locked memory a data worker had copied the batch into (no copy
    /// on the step's thread).
    #[serde(default)]
    pub uploads_pinned_by_workers: usize,
    /// Of `launches`, the calls made by replaying graphs (the rest were issued one by one).
    #[serde(default)]
    pub calls_in_graphs: usize,
    /// Gradient buckets all-reduced on the device (data parallel: NCCL, or MPI on the emulated
    /// GPU's memory), not through the host.
    #[serde(default)]
    pub device_allreduces: usize,
    /// Of `arena_bytes`, the plans' convolution workspaces.
    #[serde(default)]
    pub conv_workspace_bytes: usize,
}

/// A data-parallel step's gradient bucket, for `Runner::average_on_device`: its all-reduce can
/// start after kernel `ready_after` of the backward plan; `grads` are (gradient node of that
/// plan, the input of the update plan that reads its average), in the bucket's order.
#[derive(Clone, Debug)]
pub struct DeviceBucket {
    pub ready_after: usize,
    pub grads: Vec<(NodeId, u32)>,
}

/// A runner's running totals at one moment: `bench` takes their difference over its timed steps
/// (what a steady-state step copies, launches and waits for).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Counters {
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Calls issued one by one (kernels, products, convolutions), and graphs launched.
    pub calls_issued: usize,
    pub graph_launches: usize,
    /// Times the host waited for the device.
    pub waits: usize,
}

impl Report {
    pub fn counters(&self) -> Counters {
        Counters {
            bytes_up: self.bytes_up,
            bytes_down: self.bytes_down,
            calls_issued: self.launches - self.calls_in_graphs.min(self.launches),
            graph_launches: self.graph_replays,
            waits: self.waits,
        }
    }
}

impl Counters {
    /// What happened between `earlier` and these, per step over `steps` steps.
    pub fn per_step_since(&self, earlier: &Counters, steps: usize) -> PerStep {
        let n = steps.max(1) as f64;
        PerStep {
            bytes_up: (self.bytes_up - earlier.bytes_up) as f64 / n,
            bytes_down: (self.bytes_down - earlier.bytes_down) as f64 / n,
            calls_issued: (self.calls_issued - earlier.calls_issued) as f64 / n,
            graph_launches: (self.graph_launches - earlier.graph_launches) as f64 / n,
            waits: (self.waits - earlier.waits) as f64 / n,
        }
    }
}

/// A steady-state step's traffic with the device, averaged over the timed steps.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PerStep {
    pub bytes_up: f64,
    pub bytes_down: f64,
    pub calls_issued: f64,
    pub graph_launches: f64,
    pub waits: f64,
}

impl PerStep {
    pub fn scaled(&self, by: f64) -> PerStep {
        PerStep {
            bytes_up: self.bytes_up * by,
            bytes_down: self.bytes_down * by,
            calls_issued: self.calls_issued * by,
            graph_launches: self.graph_launches * by,
            waits: self.waits * by,
        }
    }
}

/// What `Runner::run_observed` calls after each kernel: its position, and a way to read values.
pub type AfterKernel<'a> = &'a mut dyn FnMut(usize, &mut dyn FnMut(NodeId) -> Result<Tensor, RuntimeError>) -> Result<(), RuntimeError>;

pub trait Runner {
    fn report(&self) -> Report;
    /// Data parallel: average `buckets` across the ranks of `world` on the device during the
    /// next `run` (each bucket's all-reduce started once its gradients are written), and bind
    /// the averages to the update's inputs at the run's end. False where the runner cannot (the
    /// CPU, no NCCL): the trainer then averages through the host.
    fn average_on_device(&mut self, world: &std::rc::Rc<crate::parallel::World>, buckets: Vec<DeviceBucket>) -> Result<bool, RuntimeError> {
        let _ = (world, buckets);
        Ok(false)
    }
    /// The report's running totals, without copying the rest of it (read after every step).
    fn counters(&self) -> Counters {
        self.report().counters()
    }
    /// Upload `t` into `slot` (replacing what was there).
    fn put(&mut self, slot: Slot, t: &Tensor) -> Result<(), RuntimeError>;
    /// Upload `t` for the next `put` of `slot`, now, beside the work in flight (a GPU's copy
    /// stream): that `put` then finds it on the device. The CPU has nothing to do.
    fn put_ahead(&mut self, slot: Slot, t: &Tensor) -> Result<(), RuntimeError> {
        let _ = (slot, t);
        Ok(())
    }
    /// Where the data feed's workers copy batches for their uploads (a device's page-locked
    /// pool), if anywhere.
    fn page_lock(&self) -> Option<std::sync::Arc<dyn pinned_batches::PageLock>> {
        None
    }
    /// Make input node `input` read `slot` in the runs that follow.
    fn read_input_from(&mut self, input: u32, slot: Slot);
    /// The next run may consume `slot`'s value (write over its buffer once the run has read it
    /// for the last time, as an optimiser's update does in place): the caller replaces the slot
    /// (`keep`) after the run, and until then it may be empty, also when the run fails. A
    /// runner free to ignore it (the default) keeps the value.
    fn donate(&mut self, _slot: Slot) {}
    /// Run `plan` on the device; its roots stay available until the next run.
    fn run(&mut self, g: &Graph, plan: &Plan, memory: &MemoryPlan) -> Result<(), RuntimeError> {
        self.run_observed(g, plan, memory, &mut |_, _| Ok(()))
    }
    /// `run`, calling `after(i, fetch)` once plan kernel `i` has run; `fetch` reads a value
    /// computed so far (to the host).
    fn run_observed(&mut self, g: &Graph, plan: &Plan, memory: &MemoryPlan, after: AfterKernel) -> Result<(), RuntimeError>;
    /// A root of the last run, downloaded.
    fn fetch(&mut self, g: &Graph, node: NodeId) -> Result<Tensor, RuntimeError>;
    /// Make a root of the last run the value of `slot`, without a copy.
    fn keep(&mut self, g: &Graph, node: NodeId, slot: Slot) -> Result<(), RuntimeError>;
    /// A slot's value, downloaded.
    fn take(&mut self, slot: Slot) -> Result<Tensor, RuntimeError>;
    /// Keep a root of the last run as the value of its node in the runs that follow (an
    /// evaluation's values that depend on the parameters alone), until `unpin_all`.
    fn pin(&mut self, g: &Graph, node: NodeId) -> Result<(), RuntimeError>;
    fn unpin_all(&mut self);
}

/// Whether the environment turns a device feature off (`DLC_ARENA=0`, `DLC_CUDA_GRAPHS=0`,
/// `DLC_UPLOAD_AHEAD=0`, to compare with it on).
pub(crate) fn switched_off(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "0")
}

/// Whether `DLC_EMULATE_GPU=1` asks for the emulated device (tests and CI, without a GPU).
pub fn emulation_requested() -> bool {
    std::env::var("DLC_EMULATE_GPU").is_ok_and(|v| v == "1")
}
