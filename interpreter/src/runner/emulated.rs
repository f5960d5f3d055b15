//! The emulated device: buffers in host memory, and each plan's kernels as the CUDA C the GPU
//! would get, compiled by the system C++ compiler after the emulation header
//! (`emulation.rs`) and called through their host entries. Not a way to run fast: it is
//! how the device executor is exercised end to end (and in CI) where there is no GPU. Selected
//! by `DLC_EMULATE_GPU=1` with `--device cuda`.

use super::driver::{Call, Conv, ConvDir, Driver, Epilogue, EventId, GraphId, ModuleId, Product};
use super::emulation::{self, Entry, CXX};
use super::host_lib::HostLib;
use dlc_jit::kir;
use dlc_jit::kir::Ty;
use dlc_jit::render::Launch;
use std::cell::UnsafeCell;
use std::path::PathBuf;

/// Freed buffers by tag (`Driver::alloc_for`; 0 for a plain allocation) and size, reused
/// last-freed first, as a GPU's caching allocator reuses them:
/// a steady-state step then gets the same addresses as the step before the last, which lets its
/// calls repeat and a graph of them be replayed.
type FreeList = std::rc::Rc<std::cell::RefCell<std::collections::HashMap<(u64, usize), Vec<Vec<u8>>>>>;

/// An allocation: its bytes, handed back to the free list when the last buffer on it is dropped.
struct Mem {
    bytes: UnsafeCell<Vec<u8>>,
    free: FreeList,
    tag: u64,
}

impl Drop for Mem {
    fn drop(&mut self) {
        let v = std::mem::take(self.bytes.get_mut());
        self.free.borrow_mut().entry((self.tag, v.len())).or_default().push(v);
    }
}

/// A buffer of host memory the kernels write through a pointer: an allocation of its own, or a
/// part of an arena (the arena's bytes from an offset).
pub struct HostBuf {
    mem: std::rc::Rc<Mem>,
    offset: usize,
    len: usize,
}

impl HostBuf {
    fn ptr(&self) -> *mut libc::c_void {
        // SAFETY: the executor never holds a reference into the bytes while a kernel runs, and
        // `offset` is within the allocation (checked by `part`).
        unsafe { (*self.mem.bytes.get()).as_mut_ptr().add(self.offset) as *mut libc::c_void }
    }

    /// The buffer's bytes.
    ///
    /// # Safety
    /// Nothing may write them while the slice lives.
    unsafe fn bytes(&self) -> &[u8] {
        // SAFETY: as the caller promises.
        unsafe { &(&*self.mem.bytes.get())[self.offset..self.offset + self.len] }
    }

    /// The buffer's bytes, to write.
    ///
    /// # Safety
    /// Nothing else may read or write them while the slice lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn bytes_mut(&self) -> &mut [u8] {
        // SAFETY: as the caller promises.
        unsafe { &mut (&mut *self.mem.bytes.get())[self.offset..self.offset + self.len] }
    }
}

pub struct Emulated {
    dir: PathBuf,
    modules: Vec<(HostLib, Vec<Entry>)>,
    /// Convolutions run as the CPU runs them (the product kernels' choices are process-wide,
    /// so a shape is computed the same way here as by the CPU's executor).
    gemm: crate::exec::gemm_select::GemmSelect,
    free: FreeList,
    /// Each captured graph: its calls' keys (`Call::key`), which a replay must match.
    graphs: Vec<Vec<u64>>,
    /// The copy stream: copies queued by `upload_ahead` and not yet waited for, with their
    /// events. A copy lands when the compute stream waits for its event (the latest moment a
    /// GPU could finish it), and any call that touches its destination before then is an error.
    copies: Vec<(EventId, HostBuf, Vec<u8>)>,
    events: EventId,
    /// `precision = tf32`: f32 products and convolutions round their operands to TF32 first,
    /// as tensor cores do (accumulating in f32).
    tf32: bool,
    /// Data parallel: the ranks (all-reduces go through MPI, NCCL's place), and the all-reduces
    /// queued and not yet waited for, each with the values it was queued on. They land at
    /// `wait_collectives`, in order on every rank; a call that touches such a buffer before
    /// then is an error, as a kernel racing NCCL's communication stream would be on a GPU.
    ranks: Option<std::rc::Rc<crate::parallel::World>>,
    reducing: Vec<(HostBuf, Vec<f32>)>,
    /// Convolutions that have run, whose workspace size is then known (as cuDNN's is once an
    /// algorithm is chosen).
    planned_convs: std::collections::HashSet<Conv>,
    /// Batches the data feed's workers copied (into plain memory here, page-locked on a GPU):
    /// uploads ahead send those copies. Every batch, however small, so that every test on the
    /// emulated GPU goes through the path.
    pinned: std::sync::Arc<super::pinned_batches::PinnedBatches<Vec<u8>>>,
}

/// The workspace the emulated GPU asks for a convolution: the bytes of its output (an
/// im2col-like scratch whose size varies by shape and direction, so the executor's placement of
/// workspaces is exercised).
fn emulated_workspace(c: &Conv) -> usize {
    c.operands()[2].iter().product::<usize>() * c.ty.bytes()
}

impl Emulated {
    pub fn new() -> Emulated {
        // One directory per device: each removes its own when dropped.
        static DEVICES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = DEVICES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("dlc-emulated-gpu-{}-{n}", std::process::id()));
        Emulated {
            dir,
            modules: vec![],
            gemm: Default::default(),
            free: Default::default(),
            graphs: vec![],
            copies: vec![],
            events: 0,
            tf32: false,
            ranks: None,
            reducing: vec![],
            planned_convs: Default::default(),
            pinned: super::pinned_batches::PinnedBatches::new(1, |len| Ok(vec![0u8; len])),
        }
    }
}

/// `x` rounded to TF32 (10 mantissa bits, to nearest, ties to even), as a tensor core reads an
/// f32 operand.
pub fn round_tf32(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    let b = x.to_bits();
    let rounded = b.wrapping_add(0xfff + ((b >> 13) & 1)) & !0x1fff;
    f32::from_bits(rounded)
}

impl Emulated {
    /// With `precision = tf32` (see `tf32`).
    pub fn with_tf32(mut self, on: bool) -> Emulated {
        self.tf32 = on;
        self
    }

    /// An error when a call on the compute stream touches a buffer whose copy from the copy
    /// stream has not been waited for: on a GPU it would read the bytes before they arrive.
    fn no_copy_pending(&self, bufs: &[&HostBuf]) -> Result<(), String> {
        for (ev, dst, _) in &self.copies {
            let (start, end) = (dst.ptr() as usize, dst.ptr() as usize + dst.len);
            if bufs.iter().any(|b| (b.ptr() as usize) < end && start < b.ptr() as usize + b.len) {
                return Err(format!("a call read a buffer before waiting for the copy into it (event {ev} of the copy stream)"));
            }
        }
        for (dst, _) in &self.reducing {
            let (start, end) = (dst.ptr() as usize, dst.ptr() as usize + dst.len);
            if bufs.iter().any(|b| (b.ptr() as usize) < end && start < b.ptr() as usize + b.len) {
                return Err("a call touched a gradient bucket before waiting for its all-reduce".into());
            }
        }
        Ok(())
    }
}

impl Default for Emulated {
    fn default() -> Self {
        Emulated::new()
    }
}

impl Drop for Emulated {
    fn drop(&mut self) {
        self.modules.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Driver for Emulated {
    type Buf = HostBuf;

    fn describe(&self) -> String {
        "a GPU emulated on the CPU (DLC_EMULATE_GPU=1: the CUDA C kernels compiled by the system C++ compiler)".into()
    }

    fn load(&mut self, kernels: &[(&str, &kir::Kernel)]) -> Result<(ModuleId, Vec<Launch>), String> {
        let (src, launches) = emulation::translation_unit(kernels)?;
        let lib = HostLib::build(&src, &self.dir, "device_module", &CXX)?;
        let mut entries = vec![];
        for (name, _) in kernels {
            let f = lib.symbol(&format!("emu_{name}"))?;
            // SAFETY: `emu_NAME` as `emulation::translation_unit` renders it.
            entries.push(unsafe { std::mem::transmute::<*mut libc::c_void, Entry>(f) });
        }
        self.modules.push((lib, entries));
        Ok((self.modules.len() - 1, launches))
    }

    fn alloc(&mut self, bytes: usize) -> Result<HostBuf, String> {
        self.alloc_for(0, bytes)
    }

    fn alloc_for(&mut self, tag: u64, bytes: usize) -> Result<HostBuf, String> {
        let len = bytes.max(1);
        let v = self.free.borrow_mut().get_mut(&(tag, len)).and_then(|l| l.pop()).unwrap_or_else(|| vec![0u8; len]);
        Ok(HostBuf { mem: std::rc::Rc::new(Mem { bytes: UnsafeCell::new(v), free: self.free.clone(), tag }), offset: 0, len })
    }

    fn write(&mut self, buf: &HostBuf, bytes: &[u8]) -> Result<(), String> {
        self.no_copy_pending(&[buf])?;
        if bytes.len() > buf.len {
            return Err(format!("{} bytes written into a buffer of {}", bytes.len(), buf.len));
        }
        // SAFETY: no kernel runs during the copy (calls return when done).
        unsafe { buf.bytes_mut()[..bytes.len()].copy_from_slice(bytes) };
        Ok(())
    }

    fn upload(&mut self, bytes: &[u8]) -> Result<HostBuf, String> {
        let b = self.alloc(bytes.len())?;
        self.write(&b, bytes)?;
        Ok(b)
    }

    fn fence(&mut self) -> Result<EventId, String> {
        // The compute stream's work has run when its call returned.
        self.events += 1;
        Ok(self.events)
    }

    fn upload_ahead(&mut self, tag: u64, bytes: &[u8], _after: Option<EventId>) -> Result<(HostBuf, EventId), String> {
        let dst = self.alloc_for(tag, bytes.len())?;
        self.events += 1;
        let alias = HostBuf { mem: dst.mem.clone(), offset: dst.offset, len: dst.len };
        // From the copy a data worker made, where it made one (the bytes sent are its).
        let sent = match self.pinned.take(bytes) {
            Some(src) => {
                let sent = src.clone();
                self.pinned.give_back(src);
                sent
            }
            None => bytes.to_vec(),
        };
        self.copies.push((self.events, alias, sent));
        Ok((dst, self.events))
    }

    fn page_lock(&self) -> Option<std::sync::Arc<dyn super::pinned_batches::PageLock>> {
        Some(self.pinned.clone())
    }

    fn wait(&mut self, ev: EventId) -> Result<(), String> {
        let (done, pending): (Vec<_>, Vec<_>) = std::mem::take(&mut self.copies).into_iter().partition(|(e, _, _)| *e <= ev);
        self.copies = pending;
        for (_, dst, bytes) in done {
            // SAFETY: no kernel runs during the copy.
            unsafe { dst.bytes_mut()[..bytes.len()].copy_from_slice(&bytes) };
        }
        Ok(())
    }

    fn conv_workspace(&self, c: &Conv) -> Option<usize> {
        self.planned_convs.contains(c).then(|| emulated_workspace(c))
    }

    fn join_ranks(&mut self, world: &std::rc::Rc<crate::parallel::World>) -> Result<(), String> {
        self.ranks = Some(world.clone());
        Ok(())
    }

    fn all_reduce_mean(&mut self, buf: &HostBuf, n: usize) -> Result<(), String> {
        self.no_copy_pending(&[buf])?;
        if n * 4 > buf.len {
            return Err(format!("an all-reduce of {n} values in a buffer of {} bytes", buf.len));
        }
        // SAFETY: no kernel runs while the values are read.
        let values = unsafe { buf.bytes() }[..n * 4].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        self.reducing.push((HostBuf { mem: buf.mem.clone(), offset: buf.offset, len: n * 4 }, values));
        Ok(())
    }

    fn wait_collectives(&mut self) -> Result<(), String> {
        let world = self.ranks.clone().ok_or("all-reduces before the ranks were joined")?;
        let w = world.size() as f64;
        for (dst, mut values) in std::mem::take(&mut self.reducing) {
            world.sum_gradients(&mut values);
            let bytes: Vec<u8> = values.iter().flat_map(|v| ((*v as f64 / w) as f32).to_le_bytes()).collect();
            // SAFETY: no kernel runs while the means are written.
            unsafe { dst.bytes_mut().copy_from_slice(&bytes) };
        }
        Ok(())
    }

    fn copy(&mut self, src: &HostBuf, dst: &HostBuf, bytes: usize) -> Result<(), String> {
        self.no_copy_pending(&[src, dst])?;
        if bytes > src.len.min(dst.len) {
            return Err(format!("a copy of {bytes} bytes between buffers of {} and {}", src.len, dst.len));
        }
        // SAFETY: no kernel runs during the copy; `ptr::copy` allows the two to overlap.
        unsafe { std::ptr::copy(src.ptr() as *const u8, dst.ptr() as *mut u8, bytes) };
        Ok(())
    }

    fn address(&self, b: &HostBuf) -> usize {
        b.ptr() as usize
    }

    /// A graph here is the calls' keys: replaying checks that the calls are the recorded ones
    /// on the same addresses, then runs them in order, as a CUDA graph replays its launches.
    fn capture(&mut self, calls: &[Call<HostBuf>]) -> Result<GraphId, String> {
        let keys: Vec<u64> = calls.iter().map(|c| c.key(self)).collect();
        self.graphs.push(keys);
        Ok(self.graphs.len() - 1)
    }

    fn replay(&mut self, id: GraphId, calls: &[Call<HostBuf>]) -> Result<(), String> {
        let recorded = self.graphs.get(id).ok_or_else(|| format!("no graph {id}"))?;
        if recorded.len() != calls.len() || calls.iter().zip(recorded).any(|(c, k)| c.key(self) != *k) {
            return Err(format!("graph {id} replayed on other calls or buffers than it recorded"));
        }
        calls.iter().try_for_each(|c| c.run(self))
    }

    fn part(&mut self, arena: &std::rc::Rc<HostBuf>, offset: usize, bytes: usize) -> Result<HostBuf, String> {
        if offset + bytes > arena.len {
            return Err(format!("{bytes} bytes at {offset} are beyond an arena of {} bytes", arena.len));
        }
        Ok(HostBuf { mem: arena.mem.clone(), offset: arena.offset + offset, len: bytes.max(1).min(arena.len - offset) })
    }

    fn synchronize(&mut self) -> Result<(), String> {
        Ok(()) // every call ran to its end before it returned
    }

    fn download(&mut self, buf: &HostBuf, bytes: usize) -> Result<Vec<u8>, String> {
        self.no_copy_pending(&[buf])?;
        // SAFETY: no kernel runs while the executor downloads (launches return when done).
        let v = unsafe { buf.bytes() };
        Ok(v[..bytes.min(v.len())].to_vec())
    }

    fn gemm(&mut self, p: &Product, a: &HostBuf, b: &HostBuf, c: &HostBuf, bias: Option<&HostBuf>) -> Result<(), String> {
        self.no_copy_pending(&[a, b, c])?;
        // cuBLASLt's epilogue: one bias value per row of the column-major result (a column of
        // ours), added in f32 to the sum, then the relu.
        let bias: Option<Vec<f32>> = match (p.epilogue, bias) {
            (Epilogue::None, None) => None,
            (Epilogue::Bias | Epilogue::BiasRelu, Some(bias)) if p.ty == Ty::F32 => {
                self.no_copy_pending(&[bias])?;
                // SAFETY: nothing writes the bias during the product.
                let v = unsafe { bias.bytes() };
                if v.len() < p.n * 4 {
                    return Err(format!("a bias of {} bytes for {} columns", v.len(), p.n));
                }
                Some(v[..p.n * 4].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
            }
            (e, b) => return Err(format!("no {e:?} epilogue in {:?} with a bias given: {}", p.ty, b.is_some())),
        };
        let relu = p.epilogue == Epilogue::BiasRelu;
        let cm = p.column_major();
        let widen = |buf: &HostBuf| -> Vec<f32> {
            // SAFETY: nothing writes the operands during the product.
            let v = unsafe { buf.bytes() };
            let t = super::storage::from_bytes(dlc_language::types::DType::F32, vec![], p.ty, v);
            match t.data {
                crate::runtime::tensor::Data::F32(x) => x.to_vec(),
                _ => t.to_f64().into_iter().map(|x| x as f32).collect(),
            }
        };
        let (mut first, mut second) = (widen(b), widen(a));
        if self.tf32 && p.ty == Ty::F32 {
            first.iter_mut().chain(second.iter_mut()).for_each(|x| *x = round_tf32(*x));
        }
        // SAFETY: the product's output overlaps none of its operands (the arena plan keeps
        // values read by a kernel apart from what it writes).
        let out = unsafe { c.bytes_mut() };
        // A column-major gemm exactly as BLAS defines it: element (r, c) of a stored matrix is
        // at r + c * ld, op(X)(i, l) is X(l, i) when transposed; f32 accumulation.
        for batch in 0..p.batch {
            let (f0, s0, c0) = (batch * cm.stride_first, batch * cm.stride_second, batch * cm.stride_c);
            for j in 0..cm.n {
                for i in 0..cm.m {
                    let mut acc = 0f32;
                    for l in 0..cm.k {
                        let x = if cm.trans_first { first[f0 + l + i * cm.ld_first] } else { first[f0 + i + l * cm.ld_first] };
                        let y = if cm.trans_second { second[s0 + j + l * cm.ld_second] } else { second[s0 + l + j * cm.ld_second] };
                        acc += x * y;
                    }
                    if let Some(bias) = &bias {
                        acc += bias[i];
                        acc = if !relu || 0.0 < acc { acc } else { 0.0 };
                    }
                    let at = c0 + i + j * cm.ldc;
                    match p.ty {
                        Ty::F32 => out[at * 4..at * 4 + 4].copy_from_slice(&acc.to_le_bytes()),
                        Ty::BF16 => {
                            let r = crate::runtime::tensor::round_bf16(acc);
                            out[at * 2..at * 2 + 2].copy_from_slice(&((r.to_bits() >> 16) as u16).to_le_bytes())
                        }
                        _ => out[at * 2..at * 2 + 2].copy_from_slice(&dlc_jit::kir::f32_to_f16(acc).to_le_bytes()),
                    }
                }
            }
        }
        Ok(())
    }

    /// The CPU's convolution on the buffers' f32 values: what cuDNN computes, up to its order of
    /// summation, so the executor's use of the call (operands, shapes, attributes) is tested.
    fn conv(&mut self, c: &Conv, a: &HostBuf, b: &HostBuf, out: &HostBuf, ws: Option<&HostBuf>) -> Result<(), String> {
        self.no_copy_pending(&[a, b, out])?;
        let need = emulated_workspace(c);
        if let Some(ws) = ws {
            self.no_copy_pending(&[ws])?;
            if ws.len < need {
                return Err(format!("a convolution's workspace of {} bytes, {need} needed", ws.len));
            }
            // cuDNN scribbles over its workspace: all ones (NaN as f32), so that a workspace
            // placed over a value still alive changes that value ...
            // SAFETY: nothing else reads or writes the workspace during the convolution.
            unsafe { ws.bytes_mut().fill(0xff) };
        }
        self.planned_convs.insert(c.clone());
        use crate::exec::conv;
        // Operands widened from their storage to f32, the output rounded back to it.
        let ty = c.ty;
        let tensor = |buf: &HostBuf, shape: [usize; 4]| {
            // SAFETY: nothing writes the operands during the convolution.
            let v = unsafe { buf.bytes() };
            super::storage::from_bytes(
                dlc_language::types::DType::F32,
                shape.to_vec(),
                ty,
                &v[..shape.iter().product::<usize>() * ty.bytes()],
            )
        };
        let [sa, sb, so] = c.operands();
        let tf32 = self.tf32 && ty == Ty::F32;
        let operand = |buf: &HostBuf, shape: [usize; 4]| {
            let t = tensor(buf, shape);
            if !tf32 {
                return t;
            }
            let v: Vec<f32> = t.to_f64().into_iter().map(|x| round_tf32(x as f32)).collect();
            crate::runtime::tensor::Tensor::f32(shape.to_vec(), v)
        };
        let (a, b, shape) = (operand(a, sa), operand(b, sb), so.to_vec());
        let t = match c.dir {
            ConvDir::Forward => conv::conv2d(&self.gemm, &a, &b, &c.attrs, shape),
            ConvDir::Data => conv::conv2d_grad_input(&self.gemm, &a, &b, &c.attrs, shape),
            ConvDir::Weight => conv::conv2d_grad_weight(&self.gemm, &a, &b, &c.attrs, shape),
        };
        let bytes = super::storage::to_bytes(&t, ty);
        // SAFETY: the output overlaps none of the operands, already read above.
        let o = unsafe { out.bytes_mut() };
        if o.len() < bytes.len() {
            return Err(format!("a convolution's output buffer holds {} bytes, not {}", o.len(), bytes.len()));
        }
        o[..bytes.len()].copy_from_slice(&bytes);
        if let Some(ws) = ws {
            // ... before and after the output is written: a workspace over an operand, the
            // output or any value still alive corrupts it.
            // SAFETY: as above.
            unsafe { ws.bytes_mut().fill(0xff) };
        }
        Ok(())
    }

    fn launch(&mut self, module: ModuleId, index: usize, launch: &Launch, params: &[&HostBuf]) -> Result<(), String> {
        self.no_copy_pending(params)?;
        let f = self.modules.get(module).and_then(|m| m.1.get(index)).ok_or_else(|| format!("no kernel {index} in module {module}"))?;
        let mut ptrs: Vec<*mut libc::c_void> = params.iter().map(|b| b.ptr()).collect();
        // Every kind walks its index space in grid-stride loops, so two blocks compute what the
        // whole grid would (and keep the emulation's block runs few).
        f(ptrs.as_mut_ptr(), launch.grid.clamp(1, 2) as u32, launch.block as u32);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy on the copy stream lands when the compute stream waits for its event; any call
    /// that touches the buffer before that wait is an error, as reading it on a GPU would read
    /// the bytes before they arrive.
    #[test]
    fn a_copy_ahead_is_read_only_after_its_event() {
        let mut d = Emulated::new();
        let (buf, ev) = d.upload_ahead(7, &[1, 2, 3, 4], None).expect("upload");
        let early = d.download(&buf, 4).expect_err("read before the wait");
        assert!(early.contains(&format!("event {ev} of the copy stream")), "{early}");
        let other = d.alloc(4).expect("alloc");
        assert!(d.copy(&buf, &other, 4).is_err());
        d.wait(ev).expect("wait");
        assert_eq!(d.download(&buf, 4).expect("read after the wait"), vec![1, 2, 3, 4]);
    }

    /// TF32 keeps 10 of f32's 23 mantissa bits, rounding to nearest with ties to even.
    #[test]
    fn tf32_rounding() {
        let ulp = 2f32.powi(-10);
        assert_eq!(round_tf32(1.0 + ulp), 1.0 + ulp);
        assert_eq!(round_tf32(1.0 + ulp / 2.0), 1.0, "a tie goes to the even neighbour");
        assert_eq!(round_tf32(1.0 + 1.5 * ulp), 1.0 + 2.0 * ulp, "a tie goes to the even neighbour");
        assert_eq!(round_tf32(1.0 + 0.75 * ulp), 1.0 + ulp);
        assert_eq!(round_tf32(-3.0e-3), -round_tf32(3.0e-3));
        assert!(round_tf32(f32::NAN).is_nan());
        assert_eq!(round_tf32(f32::INFINITY), f32::INFINITY);
    }

    /// A part of an arena is the arena's bytes from its offset; a freed buffer is reused for the
    /// next allocation of its tag and size.
    #[test]
    fn parts_and_reuse() {
        let mut d = Emulated::new();
        let arena = std::rc::Rc::new(d.upload(&[0, 1, 2, 3, 4, 5, 6, 7]).expect("arena"));
        let part = d.part(&arena, 4, 4).expect("part");
        d.write(&part, &[9, 9]).expect("write");
        assert_eq!(d.download(&arena, 8).expect("arena"), vec![0, 1, 2, 3, 9, 9, 6, 7]);
        assert!(d.part(&arena, 6, 4).is_err());
        let a = d.alloc_for(3, 16).expect("alloc");
        let at = d.address(&a);
        drop(a);
        let other = d.alloc_for(4, 16).expect("another tag");
        assert_ne!(d.address(&other), at);
        let same = d.alloc_for(3, 16).expect("the same tag");
        assert_eq!(d.address(&same), at);
    }
}
