//! What the device executor needs of a GPU: buffers, copies both ways, a plan's kernels loaded as
//! one module, and launches. Two drivers implement it: CUDA through cudarc (cuda.rs), and the
//! same CUDA C compiled for the CPU with the emulation header (emulated.rs), which is how the
//! executor above it (buffers, bindings, launches, the host fallback) is tested on a machine
//! without a GPU.

use dlc_jit::kir::{self, Ty};
use dlc_jit::render::Launch;

/// One loaded module's kernels, by position in the list `load` was given.
pub type ModuleId = usize;

pub trait Driver {
    /// A device buffer. Dropping it frees the memory.
    type Buf;
    /// The device in words (`NVIDIA H100 80GB HBM3 (sm_90, ...)`, `emulated on the CPU`).
    fn describe(&self) -> String;
    /// Compile and load these kernels (name, kernel IR) as one module; each gets its launch.
    fn load(&mut self, kernels: &[(&str, &kir::Kernel)]) -> Result<(ModuleId, Vec<Launch>), String>;
    /// A buffer of `bytes` (at least one byte), contents undefined.
    fn alloc(&mut self, bytes: usize) -> Result<Self::Buf, String>;
    fn upload(&mut self, bytes: &[u8]) -> Result<Self::Buf, String>;
    /// The `bytes` bytes of `arena` (an allocation of this driver) from `offset`, as a buffer of
    /// its own: it keeps the arena alive and frees nothing when dropped. A plan's values are
    /// such parts of the plan's arena (see `dlc_language::passes::arena`).
    fn part(&mut self, arena: &std::rc::Rc<Self::Buf>, offset: usize, bytes: usize) -> Result<Self::Buf, String>;
    /// The first `bytes` bytes of `buf` (waits for the work queued before it).
    fn download(&mut self, buf: &Self::Buf, bytes: usize) -> Result<Vec<u8>, String>;
    /// Queue kernel `index` of `module` on `params` (in `Kernel::params` order).
    fn launch(&mut self, module: ModuleId, index: usize, launch: &Launch, params: &[&Self::Buf]) -> Result<(), String>;
    /// Queue the matrix product `p` of `a` and `b` into `c` (cuBLAS on the GPU). `c` is
    /// written through a shared reference, as a kernel writes its output parameters.
    fn gemm(&mut self, p: &Product, a: &Self::Buf, b: &Self::Buf, c: &Self::Buf, bias: Option<&Self::Buf>) -> Result<(), String>;
    /// Queue the convolution `c` (cuDNN on the GPU) of `a` and `b` into `out`, operands as
    /// `Conv::operands` orders them, using `ws` as its workspace (at least `conv_workspace(c)`
    /// bytes: a part of the plan's arena), or without one a workspace of the driver's own.
    fn conv(&mut self, c: &Conv, a: &Self::Buf, b: &Self::Buf, out: &Self::Buf, ws: Option<&Self::Buf>) -> Result<(), String>;
    /// The workspace bytes `c`'s algorithm needs, once `c` has run (its algorithm chosen).
    fn conv_workspace(&self, c: &Conv) -> Option<usize>;
    /// Wait for the work queued so far (`dlc bench --profile` times each kernel to its end).
    fn synchronize(&mut self) -> Result<(), String>;
    /// A buffer for the value `tag` names (a result of a plan): a buffer freed by an earlier
    /// value of the same tag and size is reused first, so a step's results get the addresses of
    /// the step before the last whatever else was allocated in between (see
    /// device_executor/graphs.rs). Contents undefined.
    fn alloc_for(&mut self, tag: u64, bytes: usize) -> Result<Self::Buf, String>;
    /// Queue a copy of `bytes` from the host into the start of `buf` (after the work queued
    /// before it).
    fn write(&mut self, buf: &Self::Buf, bytes: &[u8]) -> Result<(), String>;
    /// Copy `bytes` from the host into a buffer for `tag` (as `alloc_for`) on the copy stream,
    /// beside the work queued on the compute stream, and record an event after it. Nothing on
    /// the compute stream may read the buffer before `wait`ing for the event.
    /// `after`: an event of `fence` the copy must wait for (the last reads of the buffer the
    /// tag reuses were queued before it).
    fn upload_ahead(&mut self, tag: u64, bytes: &[u8], after: Option<EventId>) -> Result<(Self::Buf, EventId), String>;
    /// An event after the work queued on the compute stream so far.
    fn fence(&mut self) -> Result<EventId, String>;
    /// Make the work queued next on the compute stream wait for event `ev` (the host does not
    /// wait).
    fn wait(&mut self, ev: EventId) -> Result<(), String>;
    /// Queue a copy of the first `bytes` bytes of `src` into `dst`.
    fn copy(&mut self, src: &Self::Buf, dst: &Self::Buf, bytes: usize) -> Result<(), String>;
    /// The buffer's device address: two calls on the same addresses are the same call.
    fn address(&self, b: &Self::Buf) -> usize;
    /// Record `calls` as a graph, without running them (CUDA: stream capture, then
    /// instantiation). Called only with calls that ran before, so nothing is set up during it.
    fn capture(&mut self, calls: &[Call<Self::Buf>]) -> Result<GraphId, String>;
    /// Run graph `id`; `calls` are the calls it recorded, on the same addresses (the executor
    /// replays a graph only then), holding the buffers alive.
    fn replay(&mut self, id: GraphId, calls: &[Call<Self::Buf>]) -> Result<(), String>;
    /// Join the ranks of `world` for all-reduces on the device (NCCL: the unique id made on rank
    /// 0 and broadcast over MPI), or say why not.
    fn join_ranks(&mut self, world: &std::rc::Rc<crate::parallel::World>) -> Result<(), String>;
    /// Queue the mean over the ranks of the first `n` f32 values of `buf`, in place (the sum,
    /// divided by the rank count and rounded once), after the work queued so far; it may run
    /// beside the work queued after it, which must not touch `buf` before `wait_collectives`.
    fn all_reduce_mean(&mut self, buf: &Self::Buf, n: usize) -> Result<(), String>;
    /// Make the work queued next wait for every all-reduce queued so far.
    fn wait_collectives(&mut self) -> Result<(), String>;
    /// The pool the data feed's workers copy batches into (page-locked memory), which uploads
    /// of those batches read from (see pinned_batches.rs).
    fn page_lock(&self) -> Option<std::sync::Arc<dyn super::pinned_batches::PageLock>> {
        None
    }
}

/// A captured graph, by the order of capture.
pub type GraphId = usize;

/// An event recorded on the copy stream, by the order of recording.
pub type EventId = u64;

/// A call of a step as the executor issues it: a graph is a recorded sequence of these.
pub enum Call<B> {
    Launch { module: ModuleId, index: usize, launch: Launch, params: Vec<std::rc::Rc<B>> },
    Gemm { p: Product, a: std::rc::Rc<B>, b: std::rc::Rc<B>, c: std::rc::Rc<B>, bias: Option<std::rc::Rc<B>> },
    Conv { c: Conv, a: std::rc::Rc<B>, b: std::rc::Rc<B>, out: std::rc::Rc<B>, ws: Option<std::rc::Rc<B>> },
}

impl<B> Call<B> {
    /// Run the call on `d` now.
    pub fn run<D: Driver<Buf = B> + ?Sized>(&self, d: &mut D) -> Result<(), String> {
        match self {
            Call::Launch { module, index, launch, params } => {
                let refs: Vec<&B> = params.iter().map(|b| b.as_ref()).collect();
                d.launch(*module, *index, launch, &refs)
            }
            Call::Gemm { p, a, b, c, bias } => d.gemm(p, a, b, c, bias.as_deref()),
            Call::Conv { c, a, b, out, ws } => d.conv(c, a, b, out, ws.as_deref()),
        }
    }

    /// What the call does and on which addresses, hashed: equal calls on equal addresses have
    /// equal keys (and different ones, different keys but for a 2^-64 chance). A hash, not
    /// text, so that recording a step costs little beside launching it.
    pub fn key<D: Driver<Buf = B> + ?Sized>(&self, d: &D) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        match self {
            Call::Launch { module, index, launch, params } => {
                (0u8, module, index, launch).hash(&mut h);
                params.iter().for_each(|b| d.address(b).hash(&mut h));
            }
            Call::Gemm { p, a, b, c, bias } => {
                (1u8, p, d.address(a), d.address(b), d.address(c), bias.as_ref().map(|b| d.address(b))).hash(&mut h)
            }
            Call::Conv { c, a, b, out, ws } => {
                (2u8, c, d.address(a), d.address(b), d.address(out), ws.as_ref().map(|w| d.address(w))).hash(&mut h)
            }
        }
        h.finish()
    }
}

/// Which of a convolution's three computations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConvDir {
    Forward,
    Data,
    Weight,
}

/// A 2-d convolution in storage `ty`: x `[n, c, h, w]` (NCHW), w `[o, c / groups, kh, kw]` (OIHW),
/// y `[n, o, oh, ow]`, and the graph's attributes (stride, padding, dilation, groups); when
/// `attrs.channels_last`, the shapes as stored: x `[n, h, w, c]`, w `[o, kh, kw, c / groups]`,
/// y `[n, oh, ow, o]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Conv {
    pub dir: ConvDir,
    pub x: [usize; 4],
    pub w: [usize; 4],
    pub y: [usize; 4],
    pub attrs: dlc_language::types::rules::Conv2dAttrs,
    /// The operands' and output's storage (f32, bf16, f16); the sums run in f32.
    pub ty: Ty,
}

impl Conv {
    /// The shapes of the operands `Driver::conv` takes, `[a, b, out]`: forward x, w into y; data
    /// gradient dy, w into dx; weight gradient x, dy into dw. The one place that says which.
    pub fn operands(&self) -> [[usize; 4]; 3] {
        match self.dir {
            ConvDir::Forward => [self.x, self.w, self.y],
            ConvDir::Data => [self.y, self.w, self.x],
            ConvDir::Weight => [self.x, self.y, self.w],
        }
    }

    /// The convolution whose operands (`[a, b, out]`, as `operands` orders them) have these shapes.
    pub fn from_operands(dir: ConvDir, [a, b, out]: [[usize; 4]; 3], attrs: dlc_language::types::rules::Conv2dAttrs, ty: Ty) -> Conv {
        let (x, w, y) = match dir {
            ConvDir::Forward => (a, b, out),
            ConvDir::Data => (out, b, a),
            ConvDir::Weight => (a, out, b),
        };
        Conv { dir, x, w, y, attrs, ty }
    }
}

/// A batch of row-major products as the interpreter computes them: `c[i] = op(a[i]) @ op(b[i])`,
/// `c[i]` m x n, `op(a[i])` m x k (stored k x m when `a_t`), `op(b[i])` k x n (stored n x k when
/// `b_t`), in storage `ty` with f32 accumulation; then its epilogue on each element of `c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Product {
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a_t: bool,
    pub b_t: bool,
    pub ty: Ty,
    pub epilogue: Epilogue,
}

/// What a product does to its result as it writes it (`passes::epilogue`): with a bias, the
/// driver's `gemm` gets a buffer of `n` values, one per column of `c`, added to every row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Epilogue {
    None,
    Bias,
    /// The bias, then `where(0 < x, x, 0)`.
    BiasRelu,
}

/// The same product as a column-major (BLAS) call. A row-major matrix is its transpose in
/// column-major terms, so the call computes `c^T = op(b)^T op(a)^T`: its first operand is `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnMajor {
    pub trans_first: bool,
    pub trans_second: bool,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub ld_first: usize,
    pub ld_second: usize,
    pub ldc: usize,
    pub stride_first: usize,
    pub stride_second: usize,
    pub stride_c: usize,
}

impl Product {
    pub fn column_major(&self) -> ColumnMajor {
        let Product { m, n, k, a_t, b_t, .. } = *self;
        ColumnMajor {
            trans_first: b_t,
            trans_second: a_t,
            m: n,
            n: m,
            k,
            ld_first: if b_t { k } else { n },
            ld_second: if a_t { m } else { k },
            ldc: n,
            stride_first: k * n,
            stride_second: m * k,
            stride_c: m * n,
        }
    }
}
