//! oneDNN 2.x's primitive API, loaded at run time (onednn.rs holds the library): the calls
//! convolutions (onednn_conv.rs) and bf16 products (onednn_matmul.rs) make, the engine they share
//! and the attributes every primitive is made with.
//!
//! Version 2's C API describes operations with structs the caller owns (`dnnl_memory_desc_t`,
//! 696 bytes; `dnnl_convolution_desc_t`, 5976; `dnnl_matmul_desc_t`, 2800): they are opaque byte
//! blocks here, only ever passed back to the library. Version 3 replaced these calls, so only a
//! 2.x library serves primitives (products through sgemm take any version).

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

pub(super) const MD_BYTES: usize = 696;
pub(super) const OP_BYTES: usize = 5976;

#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub(super) struct Md(pub(super) [u8; MD_BYTES]);
#[repr(C, align(8))]
pub(super) struct OpDesc(pub(super) [u8; OP_BYTES]);

pub(super) type H = *mut c_void;

#[repr(C)]
pub(super) struct ExecArg {
    pub(super) arg: c_int,
    pub(super) memory: H,
}

// Enumerations of dnnl_types.h (oneDNN 2.x).
pub(super) const F32: c_int = 3;
pub(super) const BF16: c_int = 2;
pub(super) const TAG_AB: c_int = 3;
pub(super) const TAG_BA: c_int = 22;
pub(super) const TAG_ANY: c_int = 1;
pub(super) const TAG_ABCD: c_int = 5;
pub(super) const FORWARD_TRAINING: c_int = 64;
pub(super) const CONV_DIRECT: c_int = 1;
pub(super) const Q_SRC: c_int = 129;
pub(super) const Q_DIFF_SRC: c_int = 130;
pub(super) const Q_WEIGHTS: c_int = 131;
pub(super) const Q_DIFF_WEIGHTS: c_int = 132;
pub(super) const Q_DST: c_int = 133;
pub(super) const Q_DIFF_DST: c_int = 134;
pub(super) const Q_SCRATCHPAD: c_int = 136;
pub(super) const ARG_SCRATCHPAD: c_int = 80;
pub(super) const SCRATCHPAD_USER: c_int = 1;
pub(super) const ARG_SRC: c_int = 1;
pub(super) const ARG_DST: c_int = 17;
pub(super) const ARG_WEIGHTS: c_int = 33;
pub(super) const ARG_DIFF_SRC: c_int = 129;
pub(super) const ARG_DIFF_DST: c_int = 145;
pub(super) const ARG_DIFF_WEIGHTS: c_int = 161;
pub(super) const ENGINE_CPU: c_int = 1;
pub(super) const STREAM_DEFAULT: u32 = 1;

pub(super) type Dims = *const i64;
pub(super) struct Api {
    pub(super) engine_create: unsafe extern "C" fn(*mut H, c_int, usize) -> c_int,
    pub(super) stream_create: unsafe extern "C" fn(*mut H, H, u32) -> c_int,
    pub(super) stream_wait: unsafe extern "C" fn(H) -> c_int,
    pub(super) stream_destroy: unsafe extern "C" fn(H) -> c_int,
    pub(super) md_init: unsafe extern "C" fn(*mut Md, c_int, Dims, c_int, c_int) -> c_int,
    pub(super) md_init_strides: unsafe extern "C" fn(*mut Md, c_int, Dims, c_int, Dims) -> c_int,
    pub(super) md_equal: unsafe extern "C" fn(*const Md, *const Md) -> c_int,
    pub(super) md_size: unsafe extern "C" fn(*const Md) -> usize,
    pub(super) fwd_init:
        unsafe extern "C" fn(*mut OpDesc, c_int, c_int, *const Md, *const Md, *const Md, *const Md, Dims, Dims, Dims, Dims) -> c_int,
    pub(super) bwd_data_init: unsafe extern "C" fn(*mut OpDesc, c_int, *const Md, *const Md, *const Md, Dims, Dims, Dims, Dims) -> c_int,
    pub(super) matmul_init: unsafe extern "C" fn(*mut OpDesc, *const Md, *const Md, *const Md, *const Md) -> c_int,
    pub(super) bwd_weights_init:
        unsafe extern "C" fn(*mut OpDesc, c_int, *const Md, *const Md, *const Md, *const Md, Dims, Dims, Dims, Dims) -> c_int,
    pub(super) pd_create: unsafe extern "C" fn(*mut H, *const OpDesc, H, H, H) -> c_int,
    pub(super) pd_query_md: unsafe extern "C" fn(H, c_int, c_int) -> *const Md,
    pub(super) pd_destroy: unsafe extern "C" fn(H) -> c_int,
    pub(super) reorder_pd_create: unsafe extern "C" fn(*mut H, *const Md, H, *const Md, H, H) -> c_int,
    pub(super) prim_create: unsafe extern "C" fn(*mut H, H) -> c_int,
    pub(super) prim_execute: unsafe extern "C" fn(H, H, c_int, *const ExecArg) -> c_int,
    pub(super) prim_destroy: unsafe extern "C" fn(H) -> c_int,
    pub(super) mem_create: unsafe extern "C" fn(*mut H, *const Md, H, *mut c_void) -> c_int,
    pub(super) mem_destroy: unsafe extern "C" fn(H) -> c_int,
    pub(super) engine: H,
    /// Attributes every primitive is made with: the scratchpad is the caller's, so that bands
    /// run at once never share the library's one.
    pub(super) attr: H,
}

// SAFETY: function pointers and an engine handle, which oneDNN allows to share between threads.
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

// Each transmute's target is the field it initialises, whose type spells the C signature.
#[allow(clippy::missing_transmute_annotations)]
pub(super) fn api() -> Option<&'static Api> {
    static API: OnceLock<Option<Api>> = OnceLock::new();
    API.get_or_init(|| {
        let lib = super::onednn::get()?;
        if !lib.version.starts_with("2.") {
            return None;
        }
        let f = |name: &str| lib.symbol(name);
        // SAFETY: each symbol has the C signature of its field (dnnl.h, oneDNN 2.x).
        unsafe {
            let mut a = Api {
                engine_create: std::mem::transmute::<H, _>(f("dnnl_engine_create")?),
                stream_create: std::mem::transmute::<H, _>(f("dnnl_stream_create")?),
                stream_wait: std::mem::transmute::<H, _>(f("dnnl_stream_wait")?),
                stream_destroy: std::mem::transmute::<H, _>(f("dnnl_stream_destroy")?),
                md_init: std::mem::transmute::<H, _>(f("dnnl_memory_desc_init_by_tag")?),
                md_init_strides: std::mem::transmute::<H, _>(f("dnnl_memory_desc_init_by_strides")?),
                md_equal: std::mem::transmute::<H, _>(f("dnnl_memory_desc_equal")?),
                md_size: std::mem::transmute::<H, _>(f("dnnl_memory_desc_get_size")?),
                fwd_init: std::mem::transmute::<H, _>(f("dnnl_dilated_convolution_forward_desc_init")?),
                bwd_data_init: std::mem::transmute::<H, _>(f("dnnl_dilated_convolution_backward_data_desc_init")?),
                bwd_weights_init: std::mem::transmute::<H, _>(f("dnnl_dilated_convolution_backward_weights_desc_init")?),
                matmul_init: std::mem::transmute::<H, _>(f("dnnl_matmul_desc_init")?),
                pd_create: std::mem::transmute::<H, _>(f("dnnl_primitive_desc_create")?),
                pd_query_md: std::mem::transmute::<H, _>(f("dnnl_primitive_desc_query_md")?),
                pd_destroy: std::mem::transmute::<H, _>(f("dnnl_primitive_desc_destroy")?),
                reorder_pd_create: std::mem::transmute::<H, _>(f("dnnl_reorder_primitive_desc_create")?),
                prim_create: std::mem::transmute::<H, _>(f("dnnl_primitive_create")?),
                prim_execute: std::mem::transmute::<H, _>(f("dnnl_primitive_execute")?),
                prim_destroy: std::mem::transmute::<H, _>(f("dnnl_primitive_destroy")?),
                mem_create: std::mem::transmute::<H, _>(f("dnnl_memory_create")?),
                mem_destroy: std::mem::transmute::<H, _>(f("dnnl_memory_destroy")?),
                engine: std::ptr::null_mut(),
                attr: std::ptr::null_mut(),
            };
            let attr_create: unsafe extern "C" fn(*mut H) -> c_int = std::mem::transmute::<H, _>(f("dnnl_primitive_attr_create")?);
            let set_mode: unsafe extern "C" fn(H, c_int) -> c_int =
                std::mem::transmute::<H, _>(f("dnnl_primitive_attr_set_scratchpad_mode")?);
            let ok = (a.engine_create)(&mut a.engine, ENGINE_CPU, 0) == 0
                && attr_create(&mut a.attr) == 0
                && set_mode(a.attr, SCRATCHPAD_USER) == 0;
            ok.then_some(a)
        }
    })
    .as_ref()
}

/// Whether convolutions can run on oneDNN here.
pub fn available() -> bool {
    api().is_some()
}

/// Which of the three.
/// Memory objects made for one call, destroyed at its end.
pub(super) struct Mems<'a>(pub(super) &'a Api, pub(super) Vec<H>);

impl Mems<'_> {
    pub(super) fn make(&mut self, m: &Md, ptr: *mut c_void) -> Option<H> {
        let mut h: H = std::ptr::null_mut();
        // SAFETY: `ptr` holds the bytes `m` describes (the caller's buffers are sized for it).
        (unsafe { (self.0.mem_create)(&mut h, m, self.0.engine, ptr) } == 0).then(|| {
            self.1.push(h);
            h
        })
    }
}

impl Drop for Mems<'_> {
    fn drop(&mut self) {
        for h in &self.1 {
            // SAFETY: memory objects made by `make`, used by no primitive any more.
            unsafe { (self.0.mem_destroy)(*h) };
        }
    }
}

/// A buffer of its own for the memory `m` describes (a layout's copy, a scratchpad), kept in
/// `scratch` until the call ends, which hands it back (`recycle`). Taken from the thread's
/// pool and not zeroed: oneDNN writes what it reads of these (a reorder writes a blocked
/// layout's padding too), and zeroing a fresh 8 MiB copy of an activation at every
/// convolution was 4% of the conv-BN step.
pub(super) fn buffer(mems: &mut Mems, scratch: &mut Vec<Vec<f32>>, m: &Md) -> Option<H> {
    // SAFETY: an initialised descriptor.
    let bytes = unsafe { (mems.0.md_size)(m) };
    let len = bytes.div_ceil(4).max(1);
    let mut v = POOL.with(|p| {
        let mut p = p.borrow_mut();
        // The smallest pooled buffer that is large enough, else the largest (grown).
        let fits = (0..p.len()).filter(|i| p[*i].len() >= len).min_by_key(|i| p[*i].len());
        let pick = fits.or_else(|| (0..p.len()).max_by_key(|i| p[*i].len()));
        pick.map(|i| p.swap_remove(i)).unwrap_or_default()
    });
    if v.len() < len {
        v.resize(len, 0.0);
    }
    scratch.push(v);
    let ptr = scratch.last_mut().expect("pushed").as_mut_ptr() as *mut c_void;
    mems.make(m, ptr)
}

/// Return a call's buffers to the thread's pool, which keeps at most `POOLED` of them and
/// `POOLED_BYTES` in all (the largest go first).
pub(super) fn recycle(scratch: Vec<Vec<f32>>) {
    const POOLED: usize = 8;
    const POOLED_BYTES: usize = 64 << 20;
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        // (A buffer handed on, as a kept copy, left an empty one in its place.)
        p.extend(scratch.into_iter().filter(|v| v.capacity() > 0));
        p.sort_by_key(|v| v.len());
        while p.len() > POOLED || p.iter().map(|v| v.len() * 4).sum::<usize>() > POOLED_BYTES {
            p.pop();
        }
    });
}

thread_local! {
    static POOL: std::cell::RefCell<Vec<Vec<f32>>> = const { std::cell::RefCell::new(vec![]) };
}

/// Fill every thread's pool with buffers of NaNs, as large as the pool keeps: a call that read a
/// pooled buffer before writing it would then give NaNs (tests).
#[cfg(test)]
pub(super) fn poison_pools() {
    let poison = || recycle((0..4).map(|k| vec![f32::NAN; (1 << 20) >> k]).collect());
    rayon::broadcast(|_| poison());
    poison();
}

/// A memory descriptor of `dims` in data type `dt` and layout `tag`.
pub(super) fn md(a: &Api, dims: &[i64], dt: c_int, tag: c_int) -> Option<Md> {
    let mut m = Md([0; MD_BYTES]);
    // SAFETY: `m` is a descriptor-sized block; `dims` has the entries its length says.
    (unsafe { (a.md_init)(&mut m, dims.len() as c_int, dims.as_ptr(), dt, tag) } == 0).then_some(m)
}

/// A memory descriptor of a 4-d tensor `dims` (NCHW or OIHW order) stored with its second dim
/// innermost (NHWC, OHWI: a channels-last tensor), f32. (By strides, not by the tag's number,
/// which differs between oneDNN's versions.)
pub(super) fn md_channels_last(a: &Api, dims: &[i64; 4]) -> Option<Md> {
    let [_, c, h, w] = *dims;
    let strides = [h * w * c, 1, w * c, c];
    let mut m = Md([0; MD_BYTES]);
    // SAFETY: `m` is a descriptor-sized block; `dims` and `strides` have 4 entries.
    (unsafe { (a.md_init_strides)(&mut m, 4, dims.as_ptr(), F32, strides.as_ptr()) } == 0).then_some(m)
}

/// `run` on a fresh stream of the calling thread, waited on before returning: whether the stream
/// was made, `run` succeeded and the wait did.
///
/// # Safety
/// The primitives `run` executes read and write only buffers that outlive this call.
pub(super) unsafe fn on_stream(a: &Api, run: impl FnOnce(H) -> bool) -> bool {
    let mut stream: H = std::ptr::null_mut();
    if (a.stream_create)(&mut stream, a.engine, STREAM_DEFAULT) != 0 {
        return false;
    }
    let ok = run(stream);
    let ok = (a.stream_wait)(stream) == 0 && ok;
    (a.stream_destroy)(stream);
    ok
}
