//! The eager interpreter: executes graph nodes one by one, like eager PyTorch. It is the
//! reference every compiled kernel is tested against.

mod backward;
#[cfg(target_arch = "x86_64")]
mod bf16_product;
mod contract;
pub(crate) mod conv;
mod elem;
mod elementwise;
mod epilogue;
mod exact_div;
pub mod fused;
mod gemm_kernels;
pub mod gemm_select;
mod hot_workers;
mod kernel_cache;
mod math32;
mod movement;
mod on_pool;
mod onednn;
mod onednn_api;
mod onednn_conv;
mod onednn_kept;
mod onednn_matmul;
mod pool;
mod reduce;
mod reduce_kernels;
mod rows;
mod stream;
mod sum_axes;
mod transpose;
pub mod tune;
pub mod tune_store;
mod word_buffers;

use crate::runtime::rng;
use crate::runtime::tensor::{Data, Tensor};
use crate::runtime::RuntimeError;
use dlc_language::ir::{Graph, Init, NodeId, Op, RandDist};
use dlc_language::passes::fusion::{self, Kernel, Plan};
use dlc_language::types::shape::concrete;
use dlc_language::types::DType;
use std::collections::HashMap;
use std::sync::Arc;

pub use conv::onednn_convolutions;

/// Each kernel kind's launches and seconds (`dlc bench --profile`).
pub type KernelTimes = Arc<std::sync::Mutex<HashMap<String, (usize, f64)>>>;

/// What `run_planned_with` calls after each kernel: its position, and the values so far.
pub type AfterKernel<'a> = &'a mut dyn FnMut(usize, &HashMap<NodeId, Tensor>) -> Result<(), RuntimeError>;

/// Executes nodes of a growing graph on demand, remembering every result (the graph is
/// hash-consed, so a node's value never changes).
#[derive(Default)]
pub struct Executor {
    cache: HashMap<NodeId, Tensor>,
    pub params: HashMap<u32, Tensor>,
    pub inputs: HashMap<u32, Tensor>,
    /// Seed for parameter initialisation.
    pub seed: u64,
    /// Run fused regions as one kernel each (`eval_many`); off means one kernel per op
    /// (`--no-fuse`). Results are equal either way.
    pub fuse: bool,
    /// Compiled fused regions (and their native code), shared by the executors of a run.
    pub kernels: Arc<fused::KernelCache>,
    /// When set, `run_plan` adds each kernel's time to it, by kind (`dlc bench --profile`).
    pub profile: Option<KernelTimes>,
    /// Parameters and inputs the next run may consume: its `Param`/`Input` node takes the value
    /// out of `params`/`inputs` rather than sharing it, so once it dies in the run its buffer
    /// can be written over (an optimiser's update in place, see `fused::run_many`). The caller
    /// replaces them after the run; cleared by `clear_values`.
    pub donated_params: std::collections::HashSet<u32>,
    pub donated_inputs: std::collections::HashSet<u32>,
}

impl Executor {
    pub fn new(seed: u64) -> Executor {
        Executor { seed, fuse: true, ..Default::default() }
    }

    /// Give a parameter its current value (the trainer's, after updates).
    pub fn set_param(&mut self, id: u32, t: Tensor) {
        self.params.insert(id, t);
    }

    pub fn param(&mut self, g: &Graph, id: u32) -> Result<Tensor, RuntimeError> {
        if self.donated_params.contains(&id) {
            // (Never initialised afresh: a donated parameter read twice is a planning error.)
            return self.params.remove(&id).ok_or_else(|| {
                RuntimeError::Unsupported(format!("parameter `{}` was read twice in a run that consumes it", g.params[id as usize].path))
            });
        }
        if let Some(t) = self.params.get(&id) {
            return Ok(t.clone());
        }
        let info = &g.params[id as usize];
        let shape = concrete(&info.ty.shape).ok_or_else(|| RuntimeError::SymbolicShape(info.ty.to_string()))?;
        let n: usize = shape.iter().product();
        // One stream per parameter, derived from the run seed and the parameter's index.
        let stream = self.seed.wrapping_mul(0x100_0000_01B3) ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9);
        let vals: Vec<f64> = match info.init {
            Init::Constant(v) => vec![f64::from_bits(v); n],
            Init::Uniform { lo, hi } => {
                let (lo, hi) = (f64::from_bits(lo), f64::from_bits(hi));
                (0..n).map(|i| lo + (hi - lo) * rng::uniform(stream, i as u64)).collect()
            }
            Init::Normal { mean, std } => {
                let (m, s) = (f64::from_bits(mean), f64::from_bits(std));
                (0..n).map(|i| m + s * rng::normal(stream, i as u64)).collect()
            }
        };
        let t = Tensor::from_f64(info.ty.dtype, shape, vals);
        self.params.insert(id, t.clone());
        Ok(t)
    }

    /// Compute everything `plan` needs (its kernels in order), caching the results; then `eval`
    /// of any of the plan's roots is a lookup. Fused regions run as one kernel each.
    pub fn run_plan(&mut self, g: &Graph, plan: &Plan) -> Result<(), RuntimeError> {
        self.run_planned(g, plan, &dlc_language::passes::memory::plan_memory(g, plan))
    }

    /// `run_plan` with the plan's memory plan computed beforehand (once for a plan run every
    /// step). Each value is dropped once its last reader has run (the roots are kept), so the
    /// memory held is the memory plan's, and the allocator reuses what was freed.
    pub fn run_planned(&mut self, g: &Graph, plan: &Plan, memory: &dlc_language::passes::memory::MemoryPlan) -> Result<(), RuntimeError> {
        self.run_planned_with(g, plan, memory, &mut |_, _| Ok(()))
    }

    /// `run_planned`, calling `after(i, values)` once kernel `i` has run (before the values it
    /// read last are dropped): a data-parallel step starts a bucket's all-reduce there.
    pub fn run_planned_with(
        &mut self,
        g: &Graph,
        plan: &Plan,
        memory: &dlc_language::passes::memory::MemoryPlan,
        after: AfterKernel,
    ) -> Result<(), RuntimeError> {
        if !on_pool::worthwhile() {
            return self.run_kernels(g, plan, memory, after);
        }
        on_pool::run(|| self.run_kernels(g, plan, memory, after))
    }

    fn run_kernels(
        &mut self,
        g: &Graph,
        plan: &Plan,
        memory: &dlc_language::passes::memory::MemoryPlan,
        after: AfterKernel,
    ) -> Result<(), RuntimeError> {
        for (i, (k, dead)) in plan.kernels.iter().zip(&memory.release).enumerate() {
            let started = self.profile.as_ref().map(|_| std::time::Instant::now());
            match k {
                Kernel::View(_) => {}
                Kernel::Free(n) | Kernel::Library(n) => {
                    if !self.cache.contains_key(n) {
                        // (A plain sum may run in one pass with fused reductions: reduce_kernels.rs.)
                        let pass = self.pass_at(g, &plan.kernels, i);
                        if pass.reduces.is_empty() {
                            let t = self.run_node(g, *n)?;
                            self.cache.insert(*n, t);
                        } else {
                            self.run_pass(g, &pass)?;
                        }
                    }
                }
                Kernel::Fused(r) => self.run_regions(g, std::slice::from_ref(r), dead)?,
                Kernel::Group(rs) => self.run_regions(g, rs, dead)?,
                Kernel::Gemm(gk) => {
                    if !self.cache.contains_key(&gk.output()) {
                        let t = self.run_gemm(g, gk)?;
                        self.cache.insert(gk.output(), t);
                    }
                }
                Kernel::Reduce(rk) => {
                    if !rk.outputs().iter().all(|o| self.cache.contains_key(o)) {
                        let pass = self.pass_at(g, &plan.kernels, i);
                        self.run_pass(g, &pass)?;
                    }
                }
                Kernel::Rows(rg) => {
                    if !rg.outputs.iter().all(|o| self.cache.contains_key(o)) {
                        let inputs: Vec<Tensor> = rg.inputs.iter().map(|i| self.cache[i].clone()).collect();
                        for (o, t) in rg.outputs.iter().zip(rows::run(&self.kernels, g, rg, &inputs)?) {
                            self.cache.insert(*o, t);
                        }
                    }
                }
            }
            if let (Some(p), Some(t0)) = (&self.profile, started) {
                let kind = match k {
                    Kernel::Fused(_) => "fused elementwise".to_string(),
                    Kernel::Group(_) => "fused group".to_string(),
                    Kernel::Rows(_) => "fused rows".to_string(),
                    Kernel::Reduce(_) => "fused reduction".to_string(),
                    Kernel::Gemm(_) => "matmul with epilogue".to_string(),
                    Kernel::Library(n) | Kernel::Free(n) | Kernel::View(n) => g.node(*n).op.kind_name(),
                };
                let mut p = p.lock().expect("profile lock");
                let e = p.entry(kind).or_insert((0, 0.0));
                e.0 += 1;
                e.1 += t0.elapsed().as_secs_f64();
            }
            after(i, &self.cache)?;
            for n in dead {
                self.cache.remove(n);
            }
        }
        Ok(())
    }

    /// Run fused regions as one launch (those whose outputs are all computed already are skipped).
    /// The regions of one kernel. Values that die at this kernel (`dead`) leave the cache before
    /// it runs, so a buffer nothing else holds can become an output's (see `fused::run_many`).
    fn run_regions(&mut self, g: &Graph, regions: &[fusion::Region], dead: &[NodeId]) -> Result<(), RuntimeError> {
        let todo: Vec<(&fusion::Region, Arc<fused::Program>)> = regions
            .iter()
            .filter(|r| !r.outputs.iter().all(|o| self.cache.contains_key(o)))
            .map(|r| Ok((r, self.kernels.program(g, r)?)))
            .collect::<Result<_, RuntimeError>>()?;
        let mut dying: HashMap<NodeId, Tensor> = HashMap::new();
        for n in dead {
            if let Some(t) = self.cache.remove(n) {
                dying.insert(*n, t);
            }
        }
        let input = |i: &NodeId| self.cache.get(i).or_else(|| dying.get(i)).cloned().expect("a region's inputs are computed");
        let items: Vec<(&fused::Program, Vec<Tensor>)> =
            todo.iter().map(|(r, p)| (p.as_ref(), r.inputs.iter().map(input).collect())).collect();
        // (The launch then holds the only reference to a dying value no other region reads.)
        drop(dying);
        let results = fused::run_many(items);
        for ((r, _), outs) in todo.iter().zip(results) {
            for (o, t) in r.outputs.iter().zip(outs) {
                self.cache.insert(*o, t);
            }
        }
        Ok(())
    }

    /// The values of `roots`, planned together (fused when `self.fuse`).
    pub fn eval_many(&mut self, g: &Graph, roots: &[NodeId]) -> Result<Vec<Tensor>, RuntimeError> {
        let planned = dlc_language::passes::driver::plan(g, roots, self.fuse)?;
        self.run_planned(g, &planned.plan, &planned.memory)?;
        roots.iter().map(|r| self.eval(g, *r)).collect()
    }

    /// Give a node a value computed elsewhere (a benchmark's input, computed once).
    pub fn preset(&mut self, node: NodeId, t: Tensor) {
        self.cache.insert(node, t);
    }

    /// The value of `node` if it has been computed (nothing is computed here).
    pub fn computed(&self, node: NodeId) -> Option<Tensor> {
        self.cache.get(&node).cloned()
    }

    /// Forget computed values (inputs change between steps) but keep parameters and compiled
    /// kernels.
    pub fn clear_values(&mut self) {
        self.cache.clear();
        self.inputs.clear();
        self.donated_params.clear();
        self.donated_inputs.clear();
    }

    /// The value of `root`, computing whatever it depends on that is not cached yet.
    pub fn eval(&mut self, g: &Graph, root: NodeId) -> Result<Tensor, RuntimeError> {
        if let Some(t) = self.cache.get(&root) {
            return Ok(t.clone());
        }
        for id in g.topo(&[root]) {
            if self.cache.contains_key(&id) {
                continue;
            }
            let t = self.run_node(g, id)?;
            self.cache.insert(id, t);
        }
        self.cache.get(&root).cloned().ok_or_else(|| RuntimeError::Unsupported("node was not computed".into()))
    }

    /// A product with its epilogue (`Kernel::Gemm`): its bias and relu, or its mask, read as f32.
    fn run_gemm(&mut self, g: &Graph, gk: &dlc_language::ir::plan::GemmKernel) -> Result<Tensor, RuntimeError> {
        let out = g.node(gk.output());
        let shape = concrete(&out.shape).ok_or_else(|| RuntimeError::SymbolicShape(out.ty().to_string()))?;
        let values = |n: Option<NodeId>| -> Result<Option<Arc<Vec<f32>>>, RuntimeError> {
            match n.map(|n| &self.cache[&n].data) {
                None => Ok(None),
                Some(Data::F32(v)) => Ok(Some(v.clone())),
                Some(_) => Err(RuntimeError::Unsupported("a product's epilogue outside f32".into())),
            }
        };
        let (bias, mask) = (values(gk.bias)?, values(gk.mask)?);
        let numel: usize = shape.iter().product();
        if bias.as_ref().is_some_and(|b| shape.last() != Some(&b.len())) || mask.as_ref().is_some_and(|y| y.len() != numel) {
            return Err(RuntimeError::Unsupported(format!("a product's epilogue does not fit its result {shape:?}")));
        }
        let e = epilogue::Epilogue { bias: bias.as_deref().map(|b| &b[..]), relu: gk.relu(), mask: mask.as_deref().map(|y| &y[..]) };
        let t = self.product(g, gk.product, shape, Some(e))?;
        // (A widened bf16 product's values are already f32s: only the dtype changes.)
        Ok(Tensor { dtype: out.dtype, ..t })
    }

    /// A matrix product `id` of `shape`, given `epilogue` when there is one (`Kernel::Gemm`).
    fn product(&mut self, g: &Graph, id: NodeId, shape: Vec<usize>, epilogue: Option<epilogue::Epilogue>) -> Result<Tensor, RuntimeError> {
        let node = g.node(id);
        // An operand that is a transpose is read from its source with swapped strides,
        // whether or not the plan materialised it (a `View` in a fused plan, a copy in the
        // eager one): the product then sums in the same order either way, so fused and eager
        // runs agree bit for bit.
        // A cast to bf16 that was not computed (the plan left it to the product, or an
        // evaluation's plan has its transpose from the values computed once) is read as its
        // f32 source, which the bf16 product rounds as it reads it: the same values.
        let mut operands = vec![];
        for s in &node.src {
            let transposed = fusion::is_transpose(&g.node(*s).op);
            let shown = if transposed { g.node(*s).src[0] } else { *s };
            let rounded = node.dtype == DType::BF16 && fusion::is_folded_cast(g, shown, |n| self.cache.contains_key(&n));
            let value = if rounded { g.node(shown).src[0] } else { shown };
            if (transposed || rounded) && !self.cache.contains_key(&value) {
                let t = self.eval(g, value)?;
                self.cache.insert(value, t);
            }
            let Some(t) = self.cache.get(&value) else {
                return Err(RuntimeError::Unsupported(format!("matmul operand {s:?} was not computed")));
            };
            operands.push(contract::Operand { value: t.clone(), transposed, rounded });
        }
        contract::matmul_t(&self.kernels.gemm, node.dtype, &operands[0], &operands[1], shape, epilogue)
    }

    fn run_node(&mut self, g: &Graph, id: NodeId) -> Result<Tensor, RuntimeError> {
        let node = g.node(id);
        let shape = concrete(&node.shape).ok_or_else(|| RuntimeError::SymbolicShape(node.ty().to_string()))?;
        if let Op::MatMul = node.op {
            return self.product(g, id, shape, None);
        }
        // A recompute view shows its first source; the second only ordered it in the plan (and
        // a plan may run the view earlier, as a row kernel hoists it).
        if matches!(node.op, Op::Recompute) {
            return Ok(self.cache[&node.src[0]].clone());
        }
        let src: Vec<Tensor> = node.src.iter().map(|s| self.cache[s].clone()).collect();
        let dtype = node.dtype;
        let n: usize = shape.iter().product();
        Ok(match &node.op {
            Op::Input(i) => {
                let t = if self.donated_inputs.contains(i) { self.inputs.remove(i) } else { self.inputs.get(i).cloned() };
                let t = t.ok_or_else(|| RuntimeError::UnboundInput(g.inputs[*i as usize].name.clone()))?;
                if t.shape != shape {
                    return Err(RuntimeError::Unsupported(format!(
                        "input `{}` has shape {:?}, expected {:?}",
                        g.inputs[*i as usize].name, t.shape, shape
                    )));
                }
                t.widened()
            }
            Op::Param(p) => self.param(g, *p)?,
            Op::Literal(l) => Tensor::from_f64(dtype, shape, g.literals[*l as usize].iter().copied()),
            Op::Const(bits) => Tensor::from_f64(dtype, shape, std::iter::once(f64::from_bits(*bits))),
            Op::Rand { dist, seed } => {
                // With a source (the step number of a training step) the stream is reseeded by it.
                let stream = match src.first() {
                    Some(step) => seed ^ (step.to_f64()[0] as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    None => *seed,
                };
                let f = |i: usize| match dist {
                    RandDist::Uniform => rng::uniform(stream, i as u64),
                    RandDist::Normal => rng::normal(stream, i as u64),
                };
                Tensor::from_f64(dtype, shape, (0..n).map(f))
            }
            Op::Iota if dtype == DType::I64 => Tensor { dtype, shape, data: Data::I64(Arc::new((0..n as i64).collect())) },
            Op::Iota => Tensor::from_f64(dtype, shape, (0..n).map(|i| i as f64)),
            Op::Cast => src[0].cast(dtype),
            Op::Unary(u) => elementwise::unary(*u, &src[0]),
            Op::Binary(b) => elementwise::binary(*b, &src[0], &src[1], dtype)?,
            Op::Where => elementwise::where_(&src[0], &src[1], &src[2]),
            Op::Reduce(r, axes) => reduce::reduce(*r, &src[0], axes, shape),
            Op::Reshape => src[0].with_shape(shape),
            Op::Permute(p) => movement::permute(&src[0], p),
            Op::Expand => movement::expand(&src[0], &shape),
            Op::Slice { start, step } => movement::slice(&src[0], start, step, &shape),
            Op::Concat(axis) => movement::concat(&src, *axis, shape),
            Op::MatMul => contract::matmul(&self.kernels.gemm, &src[0], &src[1], shape)?,
            Op::Conv2d(a) => conv::conv2d(&self.kernels.gemm, &src[0], &src[1], a, shape),
            Op::Pool2d { kind, kernel, stride, padding, channels_last } => {
                pool::pool2d(&src[0], *kind, (*kernel, *stride, *padding), *channels_last, shape)
            }
            Op::Take => contract::take(&src[0], &src[1], shape)?,
            Op::Detach => src[0].clone(),
            Op::Recompute => unreachable!("a recompute view is read above"),
            Op::Unslice { start, step } => backward::unslice(&src[0], start, step, shape),
            Op::Conv2dGradInput(a) => conv::conv2d_grad_input(&self.kernels.gemm, &src[0], &src[1], a, shape),
            Op::Conv2dGradWeight(a) => conv::conv2d_grad_weight(&self.kernels.gemm, &src[0], &src[1], a, shape),
            Op::Pool2dGrad { kind, kernel, stride, padding, channels_last } => {
                pool::pool2d_grad(&src[0], &src[1], *kind, (*kernel, *stride, *padding), *channels_last)
            }
            Op::TakeGrad => backward::take_grad(&src[0], &src[1], shape)?,
        })
    }
}
