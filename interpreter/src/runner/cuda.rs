//! The CUDA driver: GPU 0 through cudarc (`dlc_jit::cuda::launch::Device`), each plan's kernels
//! compiled by NVRTC for the device's architecture through the on-disk PTX cache, launched on
//! one stream without waiting, matrix products through cuBLAS on the same stream; a download
//! waits for the work queued before it.
//!
//! Convolutions through cuDNN on the same stream (cudnn_conv.rs), each shape's algorithm chosen
//! by measurement and kept in the tuning file. Ran on an H200 (2026-11-26,
//! docs/gpu.md): launches, cuBLAS products, copies; every kernel bit for bit the interpreter's.

use super::driver::{Call, Conv, Driver, Epilogue, EventId, GraphId, ModuleId, Product};
use super::pinned_batches::{HostBuffer, PageLock, PinnedBatches, PINNED_FROM};
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, StridedBatchedConfig};
use cudarc::driver::{CudaFunction, CudaSlice, CudaViewMut, LaunchConfig, PinnedHostSlice, PushKernelArg};
use dlc_jit::cuda::launch::Device;
use dlc_jit::kir;
use dlc_jit::kir::Ty;
use dlc_jit::render::{self, Dialect, Launch};

pub struct Cuda {
    dev: Device,
    modules: Vec<Vec<CudaFunction>>,
    /// cuBLAS on the same stream, created on the first product.
    blas: Option<CudaBlas>,
    /// cuBLAS's workspace (see `CUBLAS_WORKSPACE`), kept as long as the handle.
    blas_workspace: Option<CudaBuf>,
    /// cuBLASLt for products with an epilogue, created on the first, with its workspace
    /// (dropped after the handle).
    lt: Option<super::cublaslt::Lt>,
    lt_workspace: Option<CudaBuf>,
    /// cuDNN on the same stream, opened on the first convolution (or why it could not be).
    convs: Option<Result<super::cudnn_conv::Convolutions, String>>,
    /// Page-locked staging buffers for uploads, each with the upload it last served.
    staging: Vec<(Pinned, u64)>,
    /// Batches the data feed's workers copied into page-locked memory (pinned_batches.rs):
    /// uploaded from there without staging.
    pinned: std::sync::Arc<PinnedBatches<Pinned>>,
    uploads: u64,
    /// Captured graphs, by `GraphId`.
    graphs: Vec<cudarc::driver::CudaGraph>,
    /// Results' buffers kept for reuse (`alloc_for`).
    results: Cache,
    /// `precision = tf32`: cuBLAS's TF32 tensor-core math for f32 products, cuDNN's tensor-op
    /// math for f32 convolutions (otherwise both are held to f32 FMA math).
    tf32: bool,
    /// The copy stream (made on the first upload ahead) and the events recorded on either
    /// stream, by id.
    copy_stream: Option<std::sync::Arc<cudarc::driver::CudaStream>>,
    events: std::collections::BTreeMap<EventId, cudarc::driver::CudaEvent>,
    next_event: EventId,
    /// NCCL's communicator for data parallel (nccl.rs), once the ranks are joined.
    ranks: Option<super::nccl::Ranks>,
}

/// A device buffer: an allocation of its own, or a part of a plan's arena (a window into the
/// arena's allocation that keeps it alive and frees nothing). Kernels, products and
/// convolutions write their outputs through a shared reference, as on the device; the handle
/// sits in a cell for the cudarc calls that take it mutably.
pub struct CudaBuf {
    slice: std::cell::UnsafeCell<std::mem::ManuallyDrop<CudaSlice<u8>>>,
    /// Its device address, read once (cudarc's `device_ptr` records an event each time).
    addr: u64,
    arena: Option<std::rc::Rc<CudaBuf>>,
    /// A result's buffer (`alloc_for`): kept for the next value of its tag when dropped.
    home: Option<(Cache, u64)>,
}

/// Results' buffers by (tag, bytes), kept for reuse (`Driver::alloc_for`).
type Cache = std::rc::Rc<std::cell::RefCell<std::collections::HashMap<(u64, usize), Vec<CudaSlice<u8>>>>>;

impl CudaBuf {
    fn new(
        slice: CudaSlice<u8>,
        stream: &cudarc::driver::CudaStream,
        arena: Option<std::rc::Rc<CudaBuf>>,
        home: Option<(Cache, u64)>,
    ) -> CudaBuf {
        use cudarc::driver::DevicePtr;
        let addr = slice.device_ptr(stream).0;
        CudaBuf { slice: std::cell::UnsafeCell::new(std::mem::ManuallyDrop::new(slice)), addr, arena, home }
    }

    /// The handle, to write the buffer through.
    ///
    /// # Safety
    /// No other reference to this handle may be in use while the result lives (the executor
    /// passes an output buffer to one call at a time, apart from its operands).
    #[allow(clippy::mut_from_ref)]
    unsafe fn out(&self) -> &mut CudaSlice<u8> {
        // SAFETY: as the caller promises.
        unsafe { &mut *self.slice.get() }
    }
}

impl std::ops::Deref for CudaBuf {
    type Target = CudaSlice<u8>;
    fn deref(&self) -> &CudaSlice<u8> {
        // SAFETY: shared reads of the handle; writes go through `out`, one call at a time.
        unsafe { &*self.slice.get() }
    }
}

impl Drop for CudaBuf {
    fn drop(&mut self) {
        // SAFETY: taken once, here, and not used after.
        let slice = unsafe { std::mem::ManuallyDrop::take(self.slice.get_mut()) };
        if self.arena.is_some() {
            // A window of the arena: the arena frees the memory.
            let _ = slice.leak();
        } else if let Some((cache, tag)) = &self.home {
            // Work queued before on the stream still reads it; anything that writes it next is
            // queued after that work.
            cache.borrow_mut().entry((*tag, slice.len())).or_default().push(slice);
        }
    }
}

/// cuBLAS's workspace (what PyTorch gives it on Hopper: `CUBLAS_WORKSPACE_CONFIG=:4096:8`, 32 MiB).
const CUBLAS_WORKSPACE: usize = 32 << 20;
/// At most this many staging buffers are kept (the least recently used one is replaced).
const STAGING_BUFFERS: usize = 8;

impl Cuda {
    /// With `precision = tf32` (see `tf32`).
    pub fn with_tf32(mut self, on: bool) -> Cuda {
        self.tf32 = on;
        self
    }

    pub fn open() -> Result<Cuda, String> {
        let dev = Device::open()?;
        let ctx = dev.ctx.clone();
        let pinned = PinnedBatches::new(PINNED_FROM, move |len| Pinned::alloc(&ctx, len));
        Ok(Cuda {
            dev,
            pinned,
            modules: vec![],
            blas: None,
            convs: None,
            staging: vec![],
            uploads: 0,
            graphs: vec![],
            results: Default::default(),
            blas_workspace: None,
            lt: None,
            lt_workspace: None,
            tf32: false,
            copy_stream: None,
            ranks: None,
            events: Default::default(),
            next_event: 0,
        })
    }

    /// cuBLAS on the stream: TF32 math under `precision = tf32`, and a workspace of its own, so
    /// that it allocates nothing while a step is captured as a graph (PyTorch sets one for the
    /// same reason).
    fn start_blas(&mut self) -> Result<(), String> {
        use cudarc::cublas::sys;
        let ok = |status: sys::cublasStatus_t, what: &str| match status {
            sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS => Ok(()),
            other => Err(format!("cuBLAS refused {what}: {other:?}")),
        };
        let blas = CudaBlas::new(self.dev.stream.clone()).map_err(|e| format!("cuBLAS could not start: {e:?}"))?;
        if self.tf32 {
            // SAFETY: a live handle; the call only sets the handle's math mode.
            ok(unsafe { sys::cublasSetMathMode(*blas.handle(), sys::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH) }, "TF32 math")?;
        }
        // SAFETY: cuBLAS's scratch space; nothing else reads or writes it.
        let ws = unsafe { self.dev.stream.alloc::<u8>(CUBLAS_WORKSPACE) }.map_err(|e| format!("a cuBLAS workspace: {e:?}"))?;
        let ws = CudaBuf::new(ws, &self.dev.stream, None, None);
        // SAFETY: a live handle, and a buffer of that size kept as long as the handle.
        ok(unsafe { sys::cublasSetWorkspace_v2(*blas.handle(), ws.addr as *mut std::ffi::c_void, CUBLAS_WORKSPACE) }, "its workspace")?;
        self.blas_workspace = Some(ws);
        self.blas = Some(blas);
        Ok(())
    }

    /// A product with its epilogue through cuBLASLt (cublaslt.rs), started on the first.
    fn gemm_lt(&mut self, p: &Product, addresses: [u64; 4]) -> Result<(), String> {
        if p.ty != Ty::F32 {
            return Err(format!("no cuBLASLt epilogue in {:?}", p.ty));
        }
        if self.lt.is_none() {
            // SAFETY: cuBLASLt's scratch space; nothing else reads or writes it.
            let ws =
                unsafe { self.dev.stream.alloc::<u8>(super::cublaslt::WORKSPACE) }.map_err(|e| format!("a cuBLASLt workspace: {e:?}"))?;
            let ws = CudaBuf::new(ws, &self.dev.stream, None, None);
            self.lt = Some(super::cublaslt::Lt::open(ws.addr, self.tf32)?);
            self.lt_workspace = Some(ws);
        }
        let stream = self.dev.stream.cu_stream() as cudarc::cublaslt::sys::cudaStream_t;
        self.lt.as_mut().expect("opened above").run(stream, p, addresses)
    }

    /// A buffer of `bytes` for `tag`: one a dropped value of that tag and size left in the
    /// results cache, else a new one allocated on `stream` (in its order).
    fn kept_or_new(&mut self, tag: u64, bytes: usize, stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> Result<CudaBuf, String> {
        let len = bytes.max(1);
        let kept = self.results.borrow_mut().get_mut(&(tag, len)).and_then(|l| l.pop());
        let slice = match kept {
            Some(s) => s,
            // SAFETY: every such buffer is written whole (by a kernel or a copy) before anything
            // reads it.
            None => unsafe { stream.alloc::<u8>(len) }.map_err(|e| format!("allocating {len} bytes on the GPU: {e:?}"))?,
        };
        Ok(CudaBuf::new(slice, stream, None, Some((self.results.clone(), tag))))
    }

    /// Copy `bytes` from the host into `buf` on `stream`: large copies through page-locked
    /// staging buffers (two kept per size, so one can be filled while the other's copy runs).
    fn write_on(&mut self, stream: &std::sync::Arc<cudarc::driver::CudaStream>, buf: &CudaBuf, bytes: &[u8]) -> Result<(), String> {
        if bytes.len() > buf.len() {
            return Err(format!("{} bytes written into a buffer of {}", bytes.len(), buf.len()));
        }
        // SAFETY: `buf` is written by this copy alone.
        let mut dst = unsafe { buf.out() }.slice_mut(..bytes.len());
        if bytes.len() < PINNED_FROM {
            return stream.memcpy_htod(bytes, &mut dst).map_err(|e| format!("copying to the GPU: {e:?}"));
        }
        if let Some(mut src) = self.pinned.take(bytes) {
            // A worker copied these bytes into page-locked memory: the DMA reads them there.
            let sent = src.send(stream, &mut dst);
            self.pinned.give_back(src);
            return sent;
        }
        self.uploads += 1;
        let same: Vec<usize> = (0..self.staging.len()).filter(|i| self.staging[*i].0.size() == bytes.len()).collect();
        let i = match same.iter().copied().min_by_key(|i| self.staging[*i].1) {
            Some(i) if same.len() >= 2 => i,
            _ => {
                let buf = Pinned::alloc(&self.dev.ctx, bytes.len())?;
                if self.staging.len() < STAGING_BUFFERS {
                    self.staging.push((buf, 0));
                    self.staging.len() - 1
                } else {
                    let oldest = (0..self.staging.len()).min_by_key(|i| self.staging[*i].1).expect("staging buffers");
                    self.staging[oldest] = (buf, 0);
                    oldest
                }
            }
        };
        let (staged, used) = &mut self.staging[i];
        *used = self.uploads;
        staged.bytes_mut()?.copy_from_slice(bytes);
        staged.send(stream, &mut dst)
    }
}

/// `p` through cuBLAS in element type `T` (f32, or bf16/f16 with f32 accumulation: cuBLAS's
/// `GemmEx` with a 32-bit compute type).
fn product<T>(
    blas: &CudaBlas,
    p: &Product,
    one: T,
    zero: T,
    a: &CudaSlice<u8>,
    b: &CudaSlice<u8>,
    c: &mut CudaSlice<u8>,
) -> Result<(), String>
where
    CudaBlas: Gemm<T>,
{
    use cudarc::cublas::sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
    let cm = p.column_major();
    let op = |t: bool| if t { CUBLAS_OP_T } else { CUBLAS_OP_N };
    let int = |v: usize| i32::try_from(v).map_err(|_| format!("a matrix dimension of {v} is beyond cuBLAS's 32-bit sizes"));
    let cfg = StridedBatchedConfig {
        gemm: GemmConfig {
            transa: op(cm.trans_first),
            transb: op(cm.trans_second),
            m: int(cm.m)?,
            n: int(cm.n)?,
            k: int(cm.k)?,
            alpha: one,
            lda: int(cm.ld_first)?,
            ldb: int(cm.ld_second)?,
            beta: zero,
            ldc: int(cm.ldc)?,
        },
        batch_size: int(p.batch)?,
        stride_a: cm.stride_first as i64,
        stride_b: cm.stride_second as i64,
        stride_c: cm.stride_c as i64,
    };
    let too_small = || "a product's buffer is smaller than its shape".to_string();
    // SAFETY: the buffers hold batch x (k x n, m x k, m x n) elements of `T` (checked by the
    // views' lengths), and the strides and leading dimensions describe exactly that layout.
    unsafe {
        let first = b.transmute::<T>(p.batch * p.k * p.n).ok_or_else(too_small)?;
        let second = a.transmute::<T>(p.batch * p.m * p.k).ok_or_else(too_small)?;
        let mut out = c.transmute_mut::<T>(p.batch * p.m * p.n).ok_or_else(too_small)?;
        blas.gemm_strided_batched(cfg, &first, &second, &mut out).map_err(|e| format!("cuBLAS: {e:?}"))
    }
}

/// Page-locked host memory, and an event after the last copy queued from it. The event is
/// ours: cudarc records its own only while it manages the synchronisation of several streams,
/// which the executor turns off (launch.rs), and without one a buffer written again could be
/// read by a copy still queued (stop 38 on an H200: runs with batches overwritten mid-flight
/// learned nothing).
pub struct Pinned {
    mem: PinnedHostSlice<u8>,
    read: Option<cudarc::driver::CudaEvent>,
}

impl Pinned {
    fn alloc(ctx: &std::sync::Arc<cudarc::driver::CudaContext>, len: usize) -> Result<Pinned, String> {
        // SAFETY: plain page-locked host memory, written whole before any copy reads it.
        let mem = unsafe { ctx.alloc_pinned::<u8>(len) }.map_err(|e| format!("page-locked memory of {len} bytes: {e:?}"))?;
        Ok(Pinned { mem, read: None })
    }

    /// Queue the copy of all of it into `dst` on `stream`, and record the event its next
    /// writer waits for.
    fn send(&mut self, stream: &std::sync::Arc<cudarc::driver::CudaStream>, dst: &mut CudaViewMut<'_, u8>) -> Result<(), String> {
        stream.memcpy_htod(&self.mem, dst).map_err(|e| format!("copying to the GPU: {e:?}"))?;
        self.read = Some(stream.record_event(None).map_err(|e| format!("an event after a copy to the GPU: {e:?}"))?);
        Ok(())
    }
}

impl HostBuffer for Pinned {
    fn size(&self) -> usize {
        self.mem.len()
    }
    fn bytes_mut(&mut self) -> Result<&mut [u8], String> {
        if let Some(copy) = &self.read {
            copy.synchronize().map_err(|e| format!("waiting for a copy to the GPU: {e:?}"))?;
        }
        self.mem.as_mut_slice().map_err(|e| format!("waiting for a page-locked buffer: {e:?}"))
    }
}

impl Driver for Cuda {
    type Buf = CudaBuf;

    fn page_lock(&self) -> Option<std::sync::Arc<dyn PageLock>> {
        Some(self.pinned.clone())
    }

    fn describe(&self) -> String {
        self.dev.gpu.to_string()
    }

    fn load(&mut self, kernels: &[(&str, &kir::Kernel)]) -> Result<(ModuleId, Vec<Launch>), String> {
        let (src, launches) = render::translation_unit(kernels, Dialect::Cuda).map_err(|e| e.to_string())?;
        let (module, _) = self.dev.module(&src)?;
        let functions = kernels.iter().map(|(name, _)| self.dev.function(&module, name)).collect::<Result<Vec<_>, _>>()?;
        self.modules.push(functions);
        Ok((self.modules.len() - 1, launches))
    }

    fn alloc(&mut self, bytes: usize) -> Result<CudaBuf, String> {
        // SAFETY: every output buffer is written whole by its kernel before anything reads it.
        unsafe { self.dev.stream.alloc::<u8>(bytes.max(1)) }
            .map(|b| CudaBuf::new(b, &self.dev.stream, None, None))
            .map_err(|e| format!("allocating {bytes} bytes on the GPU: {e:?}"))
    }

    fn part(&mut self, arena: &std::rc::Rc<CudaBuf>, offset: usize, bytes: usize) -> Result<CudaBuf, String> {
        if offset + bytes > arena.len() {
            return Err(format!("{bytes} bytes at {offset} are beyond an arena of {} bytes", arena.len()));
        }
        let base = arena.addr;
        // SAFETY: a window inside the arena's allocation, which the part keeps alive (`arena`)
        // and never frees (`Drop` leaks the window).
        let window = unsafe { self.dev.stream.upgrade_device_ptr::<u8>(base + offset as u64, bytes.max(1).min(arena.len() - offset)) };
        Ok(CudaBuf::new(window, &self.dev.stream, Some(arena.clone()), None))
    }

    /// A large upload (a batch) is copied into a page-locked buffer and sent from there
    /// without waiting: the host goes on to queue the step while the copy runs, in stream
    /// order before the kernels that read it. Each size keeps two buffers taken in turn, so a
    /// batch is written into one while the other's copy may still be running (`Pinned` waits for
    /// a buffer's last copy before handing it out for writing).
    fn upload(&mut self, bytes: &[u8]) -> Result<CudaBuf, String> {
        if bytes.len() < PINNED_FROM {
            return self.dev.upload(bytes).map(|b| CudaBuf::new(b, &self.dev.stream, None, None));
        }
        let dst = self.alloc(bytes.len())?;
        self.write(&dst, bytes)?;
        Ok(dst)
    }

    fn write(&mut self, buf: &CudaBuf, bytes: &[u8]) -> Result<(), String> {
        let stream = self.dev.stream.clone();
        self.write_on(&stream, buf, bytes)
    }

    /// The copy stream (made on first use; the executor orders the two streams with its own
    /// events, cudarc's per-buffer tracking being off) copies from page-locked memory while the
    /// compute stream runs.
    fn upload_ahead(&mut self, tag: u64, bytes: &[u8], after: Option<EventId>) -> Result<(CudaBuf, EventId), String> {
        let copy = match &self.copy_stream {
            Some(s) => s.clone(),
            None => {
                // (Every cross-stream use is ordered by `fence`/`wait` events: cudarc's own
                // tracking is off from the device's opening, launch.rs.)
                let s = self.dev.ctx.new_stream().map_err(|e| format!("a copy stream: {e:?}"))?;
                self.copy_stream = Some(s.clone());
                s
            }
        };
        if let Some(ev) = after.and_then(|a| self.events.get(&a)) {
            copy.wait(ev).map_err(|e| format!("ordering the copy stream: {e:?}"))?;
        }
        // A buffer kept for this tag, else one allocated on the copy stream itself, so that the
        // copy is ordered after its allocation (the compute stream reads it only after the
        // copy's event).
        let dst = self.kept_or_new(tag, bytes.len(), &copy)?;
        self.write_on(&copy, &dst, bytes)?;
        let ev = copy.record_event(None).map_err(|e| format!("an event on the copy stream: {e:?}"))?;
        self.next_event += 1;
        self.events.insert(self.next_event, ev);
        Ok((dst, self.next_event))
    }

    fn fence(&mut self) -> Result<EventId, String> {
        let ev = self.dev.stream.record_event(None).map_err(|e| format!("an event on the GPU: {e:?}"))?;
        self.next_event += 1;
        self.events.insert(self.next_event, ev);
        // Events older than the last few are never waited for again.
        while self.events.len() > 16 {
            self.events.pop_first();
        }
        Ok(self.next_event)
    }

    fn wait(&mut self, ev: EventId) -> Result<(), String> {
        match self.events.get(&ev) {
            Some(e) => self.dev.stream.wait(e).map_err(|e| format!("waiting for a copy: {e:?}")),
            None => Err(format!("no event {ev}")),
        }
    }

    fn alloc_for(&mut self, tag: u64, bytes: usize) -> Result<CudaBuf, String> {
        let stream = self.dev.stream.clone();
        self.kept_or_new(tag, bytes, &stream)
    }

    fn download(&mut self, buf: &CudaBuf, bytes: usize) -> Result<Vec<u8>, String> {
        let mut v = self.dev.download(buf)?;
        v.truncate(bytes);
        Ok(v)
    }

    fn gemm(&mut self, p: &Product, a: &CudaBuf, b: &CudaBuf, c: &CudaBuf, bias: Option<&CudaBuf>) -> Result<(), String> {
        if p.epilogue != Epilogue::None {
            let bias = bias.ok_or("a product's epilogue without its bias")?;
            return self.gemm_lt(p, [a.addr, b.addr, c.addr, bias.addr]);
        }
        // SAFETY: the output is a buffer apart from the operands, written by this call alone.
        let c = unsafe { c.out() };
        if self.blas.is_none() {
            self.start_blas()?;
        }
        let blas = self.blas.as_ref().expect("created above");
        match p.ty {
            Ty::F32 => product(blas, p, 1f32, 0f32, a, b, c),
            Ty::BF16 => product(blas, p, half::bf16::ONE, half::bf16::ZERO, a, b, c),
            Ty::F16 => product(blas, p, half::f16::ONE, half::f16::ZERO, a, b, c),
            other => Err(format!("no cuBLAS product in {other:?}")),
        }
    }

    fn conv(&mut self, c: &Conv, a: &CudaBuf, b: &CudaBuf, out: &CudaBuf, ws: Option<&CudaBuf>) -> Result<(), String> {
        // SAFETY: the output is a buffer apart from the operands, written by this call alone;
        // so is the workspace (a part of the plan's arena that no value holds during it).
        let (out, ws) = unsafe { (out.out(), ws.map(|w| w.out())) };
        let (stream, gpu) = (&self.dev.stream, self.dev.gpu.to_string());
        let tf32 = self.tf32;
        match self.convs.get_or_insert_with(|| super::cudnn_conv::Convolutions::open(stream, &gpu, tf32)) {
            Ok(convs) => convs.run(c, a, b, out, ws),
            Err(why) => Err(why.clone()),
        }
    }

    fn conv_workspace(&self, c: &Conv) -> Option<usize> {
        self.convs.as_ref()?.as_ref().ok()?.workspace_of(c)
    }

    fn synchronize(&mut self) -> Result<(), String> {
        self.dev.stream.synchronize().map_err(|e| format!("waiting for the GPU: {e:?}"))
    }

    fn copy(&mut self, src: &CudaBuf, dst: &CudaBuf, bytes: usize) -> Result<(), String> {
        // SAFETY: `dst` is written by this copy alone.
        let dst = unsafe { dst.out() };
        self.dev.stream.memcpy_dtod(&src.slice(..bytes), &mut dst.slice_mut(..bytes)).map_err(|e| format!("copying on the GPU: {e:?}"))
    }

    fn address(&self, b: &CudaBuf) -> usize {
        b.addr as usize
    }

    /// Stream capture of the calls (nothing runs), instantiated as an executable graph. The
    /// calls ran before, so no cuBLAS handle, cuDNN plan or workspace is made during capture.
    fn capture(&mut self, calls: &[Call<CudaBuf>]) -> Result<GraphId, String> {
        use cudarc::driver::sys;
        let stream = self.dev.stream.clone();
        stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| format!("starting a graph capture: {e:?}"))?;
        let issued = calls.iter().try_for_each(|c| c.run(self));
        let graph = stream.end_capture(sys::CUgraphInstantiate_flags(0));
        issued?;
        let graph = graph.map_err(|e| format!("capturing a graph: {e:?}"))?.ok_or("the capture recorded nothing")?;
        self.graphs.push(graph);
        Ok(self.graphs.len() - 1)
    }

    fn join_ranks(&mut self, world: &std::rc::Rc<crate::parallel::World>) -> Result<(), String> {
        // The streams are ordered by the executor's and nccl.rs's events, as with the copy
        // stream (cudarc's tracking is off from the device's opening, launch.rs).
        self.ranks = Some(super::nccl::Ranks::join(&self.dev.ctx, world)?);
        Ok(())
    }

    fn all_reduce_mean(&mut self, buf: &CudaBuf, n: usize) -> Result<(), String> {
        // SAFETY: the bucket's buffer is written by this all-reduce alone until `wait_collectives`.
        let slice = unsafe { buf.out() };
        let ranks = self.ranks.as_mut().ok_or("all-reduces before the ranks were joined")?;
        ranks.all_reduce_mean(&self.dev.stream, slice, n)
    }

    fn wait_collectives(&mut self) -> Result<(), String> {
        match self.ranks.as_mut() {
            Some(r) => r.wait(&self.dev.stream),
            None => Ok(()),
        }
    }

    fn replay(&mut self, id: GraphId, _calls: &[Call<CudaBuf>]) -> Result<(), String> {
        self.graphs.get(id).ok_or_else(|| format!("no graph {id}"))?.launch().map_err(|e| format!("launching a graph: {e:?}"))
    }

    fn launch(&mut self, module: ModuleId, index: usize, launch: &Launch, params: &[&CudaBuf]) -> Result<(), String> {
        let f = self.modules.get(module).and_then(|m| m.get(index)).ok_or_else(|| format!("no kernel {index} in module {module}"))?;
        let cfg = LaunchConfig {
            grid_dim: (launch.grid as u32, 1, 1),
            block_dim: (launch.block as u32, 1, 1),
            shared_mem_bytes: launch.shared_bytes as u32,
        };
        let mut b = self.dev.stream.launch_builder(f);
        for p in params {
            b.arg(&***p);
        }
        // SAFETY: the parameters are buffers of the kernel IR's parameter types and lengths, in
        // its order, allocated by the executor.
        unsafe { b.launch(cfg) }.map(|_| ()).map_err(|e| format!("launching a kernel: {e:?}"))
    }
}
