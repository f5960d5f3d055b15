//! Runs a kernel plan on a device: every value a device buffer, the plan's generated kernels
//! (fused regions, optimiser groups, row kernels, sums over axes) compiled once per plan as one
//! module and launched in plan order, each intermediate value at its offset in the plan's arena
//! (arena.rs) and each result in a buffer of its own, and what stays resident between steps
//! (parameters, optimiser state, gradient sums) kept in slots that a step's results are moved
//! into without a copy. A step's calls repeated on the same addresses are replayed as a graph
//! (graphs.rs), and the next batch is uploaded on the copy stream while a step runs (ahead.rs).
//!
//! Matrix products run on the device through the driver's gemm (cuBLAS), a transpose left as a
//! view read through the call's transpose flag; convolutions through the driver's convolution
//! (cuDNN, device_executor/conv.rs). Library ops that `kir::lower_library` can express (a lone
//! elementwise op, broadcasts, permutations, slices and their gradients, concatenations, i64
//! arithmetic, f32 sums over axes, argmax over rows, pooling and its gradient, uniform draws
//! and normal draws from the CPU's stream, the embedding lookup and its gradient) are kernels of
//! the plan's module like the fused ones; a lookup is followed by its index check, whose flag is
//! read where the host next waits for the device (an index out of range stops the run with the
//! CPU's error). An op with no operands and no kernel (an iota) is computed once on the host and
//! kept (`Report::once_ops`). What has no device kernel yet (reductions other than sums and
//! argmax, a kernel the kernel IR cannot express) runs on the host: its inputs are downloaded,
//! the interpreter computes it, and its outputs are uploaded. `Report::host_ops` counts these
//! round trips by op, so `explain`/`bench` can say what still crosses the bus.
//!
//! With `dlc bench --profile` each kernel is waited for and timed (`profiled`).

mod ahead;
mod arena;
mod collectives;
mod conv;
mod graphs;
mod placement;
mod products;
use products::gemm_type;
mod profile;
mod through_host;

pub use placement::{placement, Placement};

use super::driver::{Call, Driver, ModuleId};
use super::storage;
use super::{AfterKernel, Report, Runner, Slot};
use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use dlc_jit::kir::{self, Ty};
use dlc_jit::render::Launch;
use dlc_language::ir::{Graph, NodeId, Op};
use dlc_language::passes::fusion::{is_transpose, Kernel, Plan};
use dlc_language::passes::memory::MemoryPlan;
use dlc_language::types::DType;
use std::collections::HashMap;
use std::rc::Rc;

/// Where a value lives: a device buffer in its storage type, or (a dtype the device does not
/// store, such as f64) the host.
enum Place<B> {
    Device(Rc<B>, Ty),
    Host(Tensor),
}

struct Value<B> {
    dtype: DType,
    shape: Vec<usize>,
    place: Place<B>,
}

impl<B> Clone for Value<B> {
    fn clone(&self) -> Self {
        let place = match &self.place {
            Place::Device(b, ty) => Place::Device(b.clone(), *ty),
            Place::Host(t) => Place::Host(t.clone()),
        };
        Value { dtype: self.dtype, shape: self.shape.clone(), place }
    }
}

impl<B> Value<B> {
    fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The nodes a kernel's parameters bind: inputs then outputs, per member, in parameter order.
pub type Binding = Vec<(Vec<NodeId>, Vec<NodeId>)>;

/// A lookup's index-check flag and its table's rows.
type Flag<B> = (Rc<B>, usize);

/// A plan's kernels as loaded: per plan kernel, its place in the module and launch shape, or
/// `None` where it runs on the host.
struct Compiled {
    module: Option<ModuleId>,
    kernels: Vec<Option<Loaded>>,
    /// Where its intermediate values go (see arena.rs).
    arena: Option<Rc<dlc_language::passes::arena::Arena>>,
}

/// A generated kernel as loaded: its index in the module, launch shape, parameters, kind, and
/// the nodes its parameters bind (inputs then outputs, per member, in parameter order).
#[derive(Clone)]
struct Loaded {
    index: usize,
    launch: Launch,
    params: Vec<(kir::Param, bool)>,
    kind: &'static str,
    io: Binding,
    /// A lookup's index check: its index in the module, launch shape, and the table's rows.
    check: Option<(usize, Launch, usize)>,
}

pub struct DeviceExecutor<D: Driver> {
    driver: D,
    slots: HashMap<Slot, Value<D::Buf>>,
    /// Which slot an input node reads (unlisted inputs read `Slot::Input(id)`).
    input_slots: HashMap<u32, Slot>,
    /// The current run's values.
    values: HashMap<NodeId, Value<D::Buf>>,
    /// Values every run starts with (`Runner::pin`).
    pinned: HashMap<NodeId, Value<D::Buf>>,
    /// Constants and literals, uploaded once (the graph is hash-consed: a node never changes).
    constants: HashMap<NodeId, Value<D::Buf>>,
    /// Compiled plans, by their roots and length.
    plans: HashMap<(Vec<NodeId>, usize), Compiled>,
    report: Report,
    /// The driver could not run a convolution (no cuDNN): the rest go through the host.
    conv_unavailable: std::collections::HashSet<Ty>,
    /// When set (`dlc bench --profile`), each kernel is waited for and its time added here,
    /// by kind and output shape.
    profile: Option<crate::exec::KernelTimes>,
    /// Each lookup's index-check flag (by module and check kernel), zero until an index is
    /// out of range; and the flags written since the host last read them, with their rows.
    flags: HashMap<(ModuleId, usize), Rc<D::Buf>>,
    unread_flags: std::collections::BTreeMap<(ModuleId, usize), Flag<D::Buf>>,
    /// Whether work was queued since the host last read a result (the next read waits for it).
    queued: bool,
    /// Each compiled plan's arena allocation, and the one of the plan being run.
    arena_bufs: HashMap<PlanKey, (Rc<D::Buf>, usize)>,
    /// Each plan's convolution workspace in its arena, in bytes (known after its first run,
    /// once the driver has chosen the algorithms), and the convolutions of the run in progress.
    workspaces: HashMap<PlanKey, usize>,
    run_convs: Vec<super::driver::Conv>,
    arena: Option<arena::Current<D::Buf>>,
    /// Batches uploaded ahead on the copy stream, by slot, and the event after the work queued
    /// before the current run (what an upload into a reused buffer waits for).
    ahead: HashMap<Slot, ahead::Ahead<D::Buf>>,
    fence: Option<super::driver::EventId>,
    /// The tag of the plan being run (its results' buffers are tagged with it).
    plan_tag: u64,
    /// The calls of the run in progress, when they are recorded to be replayed as a graph (see
    /// graphs.rs), and the graphs of each plan.
    trace: graphs::Trace<D::Buf>,
    graphs: graphs::Graphs,
    /// Data parallel on the device (collectives.rs): whether the driver joined the ranks, the
    /// world, the buckets of the run in progress, and each bucket's buffer with its bytes.
    joined: collectives::Joined,
    world: Option<Rc<crate::parallel::World>>,
    pending: Option<collectives::Pending>,
    bucket_bufs: Vec<(Rc<D::Buf>, usize)>,
}

/// A compiled plan, by its roots and length.
type PlanKey = (Vec<NodeId>, usize);

/// A buffer tag (`Driver::alloc_for`) for what `of` names: a plan's result, a slot's batch.
fn tag(of: impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    of.hash(&mut h);
    // (Tag 0 is a plain allocation's.)
    h.finish() | 1
}

fn fail(e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Unsupported(format!("on the device: {e}"))
}

fn shape_of(g: &Graph, n: NodeId) -> Vec<usize> {
    g.node(n).shape.iter().map(|d| d.as_known().unwrap_or(0) as usize).collect()
}

impl<D: Driver> DeviceExecutor<D> {
    pub fn new(driver: D) -> DeviceExecutor<D> {
        let report = Report { device: driver.describe(), ..Default::default() };
        DeviceExecutor {
            driver,
            slots: HashMap::new(),
            input_slots: HashMap::new(),
            values: HashMap::new(),
            pinned: HashMap::new(),
            constants: HashMap::new(),
            plans: HashMap::new(),
            report,
            conv_unavailable: Default::default(),
            profile: None,
            flags: HashMap::new(),
            queued: false,
            unread_flags: Default::default(),
            arena_bufs: HashMap::new(),
            workspaces: HashMap::new(),
            run_convs: vec![],
            arena: None,
            plan_tag: 0,
            ahead: HashMap::new(),
            fence: None,
            trace: Default::default(),
            graphs: Default::default(),
            joined: Default::default(),
            world: None,
            pending: None,
            bucket_bufs: vec![],
        }
    }

    /// Read the index checks launched since the last read: an index out of range stops the
    /// run with the interpreter's error. Called where the host waits for the device anyway.
    fn read_index_checks(&mut self) -> Result<(), RuntimeError> {
        for (key, (flag, rows)) in std::mem::take(&mut self.unread_flags) {
            self.flush()?;
            self.note_wait();
            self.report.bytes_down += 8;
            let bytes = self.driver.download(&flag, 8).map_err(fail)?;
            let k = i64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
            if k != 0 {
                self.flags.remove(&key); // a fresh flag for whatever runs next
                return Err(RuntimeError::Unsupported(format!("index {k} is out of range for {rows} rows")));
            }
        }
        Ok(())
    }

    /// Count a read of the device as a wait when work was queued since the last one.
    fn note_wait(&mut self) {
        if std::mem::take(&mut self.queued) {
            self.report.waits += 1;
        }
    }

    pub fn with_profile(mut self, profile: Option<crate::exec::KernelTimes>) -> DeviceExecutor<D> {
        self.profile = profile;
        self
    }

    fn upload(&mut self, t: &Tensor) -> Result<Value<D::Buf>, RuntimeError> {
        let uploaded = storage::with_device_bytes(t, |bytes, ty| {
            self.report.bytes_up += bytes.len() as u64;
            self.driver.upload(bytes).map(|b| Place::Device(Rc::new(b), ty))
        });
        let place = match uploaded {
            Some(p) => p.map_err(fail)?,
            None => Place::Host(t.clone().widened()),
        };
        Ok(Value { dtype: t.dtype, shape: t.shape.clone(), place })
    }

    fn download(&mut self, v: &Value<D::Buf>) -> Result<Tensor, RuntimeError> {
        match &v.place {
            Place::Host(t) => Ok(t.clone()),
            Place::Device(b, ty) => {
                let n = v.numel() * ty.bytes();
                self.flush()?;
                self.note_wait();
                let bytes = self.driver.download(b, n).map_err(fail)?;
                self.report.bytes_down += bytes.len() as u64;
                Ok(storage::from_bytes(v.dtype, v.shape.clone(), *ty, &bytes))
            }
        }
    }

    /// Lower and load a plan's kernels once.
    fn compile(&mut self, g: &Graph, plan: &Plan, memory: &MemoryPlan) -> Result<(), RuntimeError> {
        let key = (plan.roots.clone(), plan.kernels.len());
        if self.plans.contains_key(&key) {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let tag = self.plans.len();
        let mut lowered: Vec<(String, usize, kir::Kernel, Binding)> = vec![];
        // Each lookup's index check, loaded after the plan's kernels: (name, plan kernel, kernel).
        let mut checks: Vec<(String, usize, kir::Kernel)> = vec![];
        for (i, k) in plan.kernels.iter().enumerate() {
            match device_kernel(g, k) {
                Ok(Some((kernel, io))) => {
                    if let kir::Kernel::Take(t) = &kernel {
                        checks.push((
                            format!("p{tag}_k{i}_index_check"),
                            i,
                            kir::Kernel::IndexCheck(kir::IndexCheck { rows: t.rows, n: t.n }),
                        ));
                    }
                    lowered.push((format!("p{tag}_k{i}_{}", kernel.kind()), i, kernel, io));
                }
                Ok(None) => {}
                Err(e) => self.report.not_lowered.push(format!("kernel #{i}: {e}")),
            }
        }
        let named: Vec<(&str, &kir::Kernel)> =
            lowered.iter().map(|(n, _, k, _)| (n.as_str(), k)).chain(checks.iter().map(|(n, _, k)| (n.as_str(), k))).collect();
        let mut kernels = vec![None; plan.kernels.len()];
        let module = if named.is_empty() {
            None
        } else {
            let (module, launches) = self.driver.load(&named).map_err(fail)?;
            for (index, ((_, i, k, io), launch)) in lowered.iter().zip(&launches).enumerate() {
                kernels[*i] = Some(Loaded { index, launch: *launch, params: k.params(), kind: k.kind(), io: io.clone(), check: None });
            }
            for (c, ((_, i, k), launch)) in checks.iter().zip(&launches[lowered.len()..]).enumerate() {
                let (Some(loaded), kir::Kernel::IndexCheck(ic)) = (kernels[*i].as_mut(), k) else { continue };
                loaded.check = Some((lowered.len() + c, *launch, ic.rows));
            }
            self.report.modules += 1;
            Some(module)
        };
        self.report.compile_s += started.elapsed().as_secs_f64();
        self.plans.insert(key, Compiled { module, kernels, arena: arena::plan(g, plan, memory).map(Rc::new) });
        Ok(())
    }

    /// The value of a free node (an input, a parameter, a constant, or a view of another value).
    fn free(&mut self, g: &Graph, n: NodeId) -> Result<Value<D::Buf>, RuntimeError> {
        let node = g.node(n);
        let shape = shape_of(g, n);
        match &node.op {
            Op::Input(i) => {
                let slot = self.input_slots.get(i).copied().unwrap_or(Slot::Input(*i));
                let v = self.slots.get(&slot).cloned().ok_or_else(|| RuntimeError::UnboundInput(g.inputs[*i as usize].name.clone()))?;
                if v.shape != shape {
                    return Err(RuntimeError::Unsupported(format!(
                        "input `{}` has shape {:?}, expected {shape:?}",
                        g.inputs[*i as usize].name, v.shape
                    )));
                }
                Ok(v)
            }
            Op::Param(p) => self.slots.get(&Slot::Param(*p)).cloned().ok_or_else(|| fail(format!("parameter {p} was not uploaded"))),
            Op::Reshape | Op::Detach | Op::Recompute => {
                let src =
                    self.values.get(&node.src[0]).cloned().ok_or_else(|| fail(format!("{:?} read before it was computed", node.src[0])))?;
                Ok(Value { dtype: node.dtype, shape, place: src.place })
            }
            _ => self.once(g, &Kernel::Free(n), n),
        }
    }

    /// The value a kernel reads: computed by an earlier kernel of this run, or free.
    fn value(&mut self, g: &Graph, n: NodeId) -> Result<Value<D::Buf>, RuntimeError> {
        match self.values.get(&n) {
            Some(v) => Ok(v.clone()),
            None => self.free(g, n),
        }
    }

    /// Launch plan kernel `k` as the generated kernel `loaded` of `module`.
    fn launch(&mut self, g: &Graph, module: ModuleId, loaded: &Loaded) -> Result<(), RuntimeError> {
        let params = &loaded.params;
        let groups = &loaded.io;
        let nodes: Vec<(NodeId, bool)> =
            groups.iter().flat_map(|(ins, outs)| ins.iter().map(|n| (*n, false)).chain(outs.iter().map(|n| (*n, true)))).collect();
        if nodes.len() != params.len() {
            return Err(fail(format!("{} parameters for {} values", params.len(), nodes.len())));
        }
        let mut bufs: Vec<Rc<D::Buf>> = vec![];
        let mut outs = vec![];
        for ((p, is_out), (n, _)) in params.iter().zip(&nodes) {
            if *is_out {
                let b = Rc::new(self.output(g, *n, p.len * p.ty.bytes())?);
                outs.push((*n, b.clone(), p.ty));
                bufs.push(b);
                continue;
            }
            let v = self.value(g, *n)?;
            let b = match &v.place {
                Place::Device(b, ty) if *ty == p.ty && v.numel() == p.len => b.clone(),
                _ => {
                    // A value kept on the host, or stored in another type: converted for this launch.
                    let t = self.download(&v)?;
                    let bytes = storage::to_bytes(&t, p.ty);
                    self.report.bytes_up += bytes.len() as u64;
                    Rc::new(self.driver.upload(&bytes).map_err(fail)?)
                }
            };
            bufs.push(b);
        }
        let checked = bufs.get(1).cloned();
        self.issue(Call::Launch { module, index: loaded.index, launch: loaded.launch, params: bufs })?;
        self.report.launches += 1;
        *self.report.launches_by_kind.entry(loaded.kind.to_string()).or_insert(0) += 1;
        if let Some((index, launch, rows)) = &loaded.check {
            // The lookup's indices (its second parameter) checked into the flag kept for it.
            let key = (module, *index);
            let flag = match self.flags.get(&key) {
                Some(f) => f.clone(),
                None => {
                    let f = Rc::new(self.driver.upload(&0i64.to_le_bytes()).map_err(fail)?);
                    self.flags.insert(key, f.clone());
                    f
                }
            };
            let indices = checked.ok_or_else(|| fail("a lookup without indices"))?;
            self.issue(Call::Launch { module, index: *index, launch: *launch, params: vec![indices, flag.clone()] })?;
            self.report.launches += 1;
            *self.report.launches_by_kind.entry("index_check".into()).or_insert(0) += 1;
            self.unread_flags.insert(key, (flag, *rows));
        }
        for (n, b, ty) in outs {
            let node = g.node(n);
            self.values.insert(n, Value { dtype: node.dtype, shape: shape_of(g, n), place: Place::Device(b, ty) });
        }
        Ok(())
    }
}

/// A plan kernel as a device kernel, with the nodes its parameters bind: the generated kinds,
/// and the library ops `kir::lower_library` can compute (products are the gemm's, not these).
pub fn device_kernel(g: &Graph, k: &Kernel) -> Result<Option<(kir::Kernel, Binding)>, kir::LowerError> {
    match k {
        Kernel::Library(n) if gemm_type(g, *n).is_some() => Ok(None),
        Kernel::Library(n) => Ok(kir::lower_library(g, *n)?.map(|(kernel, inputs)| (kernel, vec![(inputs, vec![*n])]))),
        other => Ok(kir::lower_kernel(g, other)?.map(|kernel| (kernel, other.io()))),
    }
}

impl<D: Driver> Runner for DeviceExecutor<D> {
    fn counters(&self) -> super::Counters {
        self.report.counters()
    }

    fn report(&self) -> Report {
        let mut r = self.report.clone();
        r.uploads_pinned_by_workers = self.driver.page_lock().map_or(0, |p| p.taken());
        r
    }

    fn page_lock(&self) -> Option<std::sync::Arc<dyn crate::runner::pinned_batches::PageLock>> {
        self.driver.page_lock()
    }

    fn put_ahead(&mut self, slot: Slot, t: &Tensor) -> Result<(), RuntimeError> {
        self.upload_ahead(slot, t)
    }

    fn put(&mut self, slot: Slot, t: &Tensor) -> Result<(), RuntimeError> {
        if self.take_ahead(slot, t)? || self.write_in_place(slot, t)? {
            return Ok(());
        }
        let v = self.upload(t)?;
        self.slots.insert(slot, v);
        Ok(())
    }

    fn read_input_from(&mut self, input: u32, slot: Slot) {
        self.input_slots.insert(input, slot);
    }

    fn run_observed(&mut self, g: &Graph, plan: &Plan, memory: &MemoryPlan, after: AfterKernel) -> Result<(), RuntimeError> {
        self.values = self.pinned.clone();
        self.queued = true;
        self.compile(g, plan, memory)?;
        let key = (plan.roots.clone(), plan.kernels.len());
        self.enter_arena(&key)?;
        self.mark_run_start()?;
        self.begin_trace(&key);
        for (i, k) in plan.kernels.iter().enumerate() {
            let outputs: Vec<NodeId> = match k {
                Kernel::View(_) => vec![],
                Kernel::Library(n) | Kernel::Free(n) => vec![*n],
                Kernel::Gemm(gk) => vec![gk.output()],
                _ => k.io().into_iter().flat_map(|(_, outs)| outs).collect(),
            };
            if outputs.iter().all(|o| self.values.contains_key(o)) {
                continue;
            }
            let started = self.profile.as_ref().map(|_| std::time::Instant::now());
            match k {
                Kernel::View(_) => {}
                Kernel::Free(n) => {
                    let v = self.free(g, *n)?;
                    self.values.insert(*n, v);
                }
                Kernel::Library(n) if conv::conv_of(&g.node(*n).op).is_some() => {
                    let v = match self.conv(g, *n)? {
                        Some(v) => v,
                        None => self.host(g, k, &outputs)?.remove(0),
                    };
                    self.values.insert(*n, v);
                }
                Kernel::Library(n) if matches!(g.node(*n).op, Op::MatMul) => {
                    let v = match self.matmul(g, *n, None)? {
                        Some(v) => v,
                        None => self.host(g, k, &outputs)?.remove(0),
                    };
                    self.values.insert(*n, v);
                }
                Kernel::Gemm(gk) => {
                    let v = match self.matmul(g, gk.product, Some(gk))? {
                        Some(v) => v,
                        None => self.host(g, k, &outputs)?.remove(0),
                    };
                    self.values.insert(gk.output(), v);
                }
                _ => {
                    let compiled = &self.plans[&key];
                    match (compiled.module, compiled.kernels[i].clone()) {
                        (Some(module), Some(loaded)) => self.launch(g, module, &loaded)?,
                        // An op with no operands and no kernel (an iota, a seeded `randn`) is
                        // the same every run: computed once on the host, then kept on the device.
                        _ if matches!(k, Kernel::Library(n) if g.node(*n).src.is_empty()) => {
                            let v = self.once(g, k, outputs[0])?;
                            self.values.insert(outputs[0], v);
                        }
                        _ => {
                            for (o, v) in outputs.iter().zip(self.host(g, k, &outputs)?) {
                                self.values.insert(*o, v);
                            }
                        }
                    }
                }
            }
            self.profiled(g, k, &outputs, started)?;
            let mut fetch = |n: NodeId| -> Result<Tensor, RuntimeError> {
                let v = self.values.get(&n).cloned().ok_or_else(|| fail(format!("{n:?} is not computed yet")))?;
                self.download(&v)
            };
            after(i, &mut fetch)?;
            self.start_ready_buckets(i)?;
            if let Some(dead) = memory.release.get(i) {
                for n in dead {
                    self.values.remove(n);
                }
            }
        }
        self.finish_buckets(g)?;
        self.settle_workspace(&key);
        self.end_trace(&key)
    }

    fn average_on_device(&mut self, world: &Rc<crate::parallel::World>, buckets: Vec<super::DeviceBucket>) -> Result<bool, RuntimeError> {
        self.average_buckets(world, buckets)
    }

    fn fetch(&mut self, _g: &Graph, node: NodeId) -> Result<Tensor, RuntimeError> {
        self.read_index_checks()?;
        let v = self.values.get(&node).cloned().ok_or_else(|| fail(format!("{node:?} is not a result of the last run")))?;
        self.download(&v)
    }

    fn keep(&mut self, _g: &Graph, node: NodeId, slot: Slot) -> Result<(), RuntimeError> {
        let v = self.values.get(&node).cloned().ok_or_else(|| fail(format!("{node:?} is not a result of the last run")))?;
        let v = self.kept_apart(slot, v)?;
        self.slots.insert(slot, v);
        Ok(())
    }

    fn pin(&mut self, _g: &Graph, node: NodeId) -> Result<(), RuntimeError> {
        let v = self.values.get(&node).cloned().ok_or_else(|| fail(format!("{node:?} is not a result of the last run")))?;
        self.pinned.insert(node, v);
        Ok(())
    }

    fn unpin_all(&mut self) {
        self.pinned.clear();
    }

    fn take(&mut self, slot: Slot) -> Result<Tensor, RuntimeError> {
        self.read_index_checks()?;
        let v = self.slots.get(&slot).cloned().ok_or_else(|| fail(format!("nothing is resident in {slot:?}")))?;
        self.download(&v)
    }
}
