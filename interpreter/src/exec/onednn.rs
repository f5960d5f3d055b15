//! oneDNN, the library PyTorch's own CPU products and convolutions run on, loaded at run time
//! (Debian's `libdnnl2`, which `scripts/setup.sh` installs): a binary built here runs on a
//! machine without it, and only loses a candidate. oneDNN picks its own kernels for the CPU it
//! finds (AVX2, AVX-512, AMX), which is what makes it a per-machine candidate for products
//! beside the gemm crate's AVX2 and AVX-512 kernels (see gemm_select.rs).
//!
//! Debian builds it on OpenMP (libgomp). dlc never lets it start an OpenMP team: every call runs
//! on the calling thread (the team size set to one for that thread), and a product that has the
//! cores to itself is cut into bands on rayon's threads (gemm_kernels.rs), so one pool owns the
//! cores.

use std::ffi::{c_char, c_float, c_int, c_void, CString};
use std::sync::OnceLock;

/// `dnnl_sgemm`: row-major C = alpha * op(A) @ op(B) + beta * C.
type Sgemm = unsafe extern "C" fn(
    transa: c_char,
    transb: c_char,
    m: i64,
    n: i64,
    k: i64,
    alpha: c_float,
    a: *const c_float,
    lda: i64,
    b: *const c_float,
    ldb: i64,
    beta: c_float,
    c: *mut c_float,
    ldc: i64,
) -> c_int;
type SetThreads = unsafe extern "C" fn(c_int);

pub struct OneDnn {
    /// The library's handle (never closed).
    handle: usize,
    sgemm: Sgemm,
    set_threads: Option<SetThreads>,
    /// The library's version, as `dnnl_version` reports it.
    pub version: String,
}

// SAFETY: function pointers into a library that stays loaded for the process's life; oneDNN's
// gemm is thread-safe.
unsafe impl Send for OneDnn {}
unsafe impl Sync for OneDnn {}

#[repr(C)]
struct Version {
    major: c_int,
    minor: c_int,
    patch: c_int,
    hash: *const c_char,
    cpu_runtime: u32,
    gpu_runtime: u32,
}

fn open(name: &str) -> Option<*mut c_void> {
    let c = CString::new(name).ok()?;
    // SAFETY: dlopen with a NUL-terminated name; the handle is kept for the process's life
    // (never closed), so every pointer taken from it stays valid.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    (!h.is_null()).then_some(h)
}

fn symbol(handle: *mut c_void, name: &str) -> Option<*mut c_void> {
    let c = CString::new(name).ok()?;
    // SAFETY: a symbol lookup in a handle dlopen returned.
    let f = unsafe { libc::dlsym(handle, c.as_ptr()) };
    (!f.is_null()).then_some(f)
}

/// `len` items (rows, images) cut into one band per thread, at most `threads` bands of equal
/// size but the last: (first item, items). Every oneDNN call here runs one band on one of rayon's
/// threads.
pub fn bands(len: usize, threads: usize) -> Vec<(usize, usize)> {
    let band = len.div_ceil(threads.clamp(1, len.max(1))).max(1);
    (0..len).step_by(band).map(|b| (b, band.min(len - b))).collect()
}

/// The library, loaded on first use; `None` when it is not installed or `DLC_ONEDNN=0`.
pub fn get() -> Option<&'static OneDnn> {
    static LIB: OnceLock<Option<OneDnn>> = OnceLock::new();
    LIB.get_or_init(load).as_ref()
}

fn load() -> Option<OneDnn> {
    if std::env::var("DLC_ONEDNN").is_ok_and(|v| v == "0") {
        return None;
    }
    let lib = ["libdnnl.so.2", "libdnnl.so.3", "libdnnl.so"].iter().find_map(|n| open(n))?;
    let sgemm = symbol(lib, "dnnl_sgemm")?;
    let version = symbol(lib, "dnnl_version").map(|f| {
        // SAFETY: `dnnl_version` returns a pointer to a static struct of this layout.
        let v = unsafe { &*(std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> *const Version>(f))() };
        format!("{}.{}.{}", v.major, v.minor, v.patch)
    });
    let set_threads = open("libgomp.so.1").and_then(|g| symbol(g, "omp_set_num_threads"));
    // SAFETY: the symbols have these C signatures (dnnl.h, omp.h).
    unsafe {
        Some(OneDnn {
            handle: lib as usize,
            sgemm: std::mem::transmute::<*mut c_void, Sgemm>(sgemm),
            set_threads: set_threads.map(|f| std::mem::transmute::<*mut c_void, SetThreads>(f)),
            version: version.unwrap_or_else(|| "unknown".into()),
        })
    }
}

impl OneDnn {
    /// Another of the library's functions, by name.
    pub fn symbol(&self, name: &str) -> Option<*mut c_void> {
        symbol(self.handle as *mut c_void, name)
    }

    /// The OpenMP team size of the calling thread's next oneDNN calls.
    pub fn set_threads(&self, n: usize) {
        if let Some(set) = self.set_threads {
            // SAFETY: omp_set_num_threads only sets the calling thread's team size.
            unsafe { set(n.max(1) as c_int) };
        }
    }

    /// c[m×n] (row stride `ldc`) = op(a)[m×k] @ op(b)[k×n], row-major, on the calling thread
    /// alone (`ta`: a stored k×m; `tb`: b stored n×k; `lda`, `ldb` the stored rows' strides).
    /// False when oneDNN refused the call.
    ///
    /// # Safety
    /// The operands hold what the shapes and strides address.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn sgemm(
        &self,
        m: usize,
        n: usize,
        k: usize,
        a: *const f32,
        ta: bool,
        lda: usize,
        b: *const f32,
        tb: bool,
        ldb: usize,
        c: *mut f32,
        ldc: usize,
    ) -> bool {
        if let Some(set) = self.set_threads {
            set(1);
        }
        let t = |on: bool| if on { b'T' } else { b'N' } as c_char;
        let status = (self.sgemm)(
            t(ta),
            t(tb),
            m as i64,
            n as i64,
            k as i64,
            1.0,
            a,
            lda.max(1) as i64,
            b,
            ldb.max(1) as i64,
            0.0,
            c,
            ldc.max(1) as i64,
        );
        status == 0
    }
}
