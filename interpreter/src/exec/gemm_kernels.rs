//! The matrix-product kernels a machine may have, each callable by name: the gemm crate's
//! AVX2/FMA and AVX-512 microkernels (the crate, built with `x86-v4`, would pick AVX-512 on its
//! own whenever the CPU has it; calling its generic driver with either microkernel set keeps
//! both), and oneDNN's `sgemm` where the library is installed. Which one runs for a product is
//! measured per shape and machine (gemm_select.rs): on the Intel Xeon this was written on the
//! AVX-512 kernels win, on the AMD Zen 4 the project was measured on before they lost.

use super::elem::Elem;
use gemm_common::gemm::gemm_basic_generic;
use gemm_common::Parallelism;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GemmKernel {
    /// The gemm crate's AVX2/FMA microkernels (or its portable ones off x86-64).
    Avx2,
    /// The gemm crate's AVX-512 microkernels.
    Avx512,
    /// oneDNN's `dnnl_sgemm` (f32 only), with its own per-CPU kernels.
    OneDnn,
}

impl GemmKernel {
    pub const ALL: [GemmKernel; 3] = [GemmKernel::Avx2, GemmKernel::Avx512, GemmKernel::OneDnn];

    pub fn name(self) -> &'static str {
        match self {
            GemmKernel::Avx2 => "avx2",
            GemmKernel::Avx512 => "avx512",
            GemmKernel::OneDnn => "onednn",
        }
    }

    /// The name, with the library's version for oneDNN.
    pub fn describe(self) -> String {
        match (self, super::onednn::get()) {
            (GemmKernel::OneDnn, Some(lib)) => format!("onednn {}", lib.version),
            _ => self.name().to_string(),
        }
    }

    pub fn parse(s: &str) -> Option<GemmKernel> {
        GemmKernel::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Whether this machine (and this process) can run it.
    pub fn available(self) -> bool {
        match self {
            GemmKernel::Avx2 => true,
            #[cfg(target_arch = "x86_64")]
            GemmKernel::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            GemmKernel::Avx512 => false,
            GemmKernel::OneDnn => super::onednn::get().is_some(),
        }
    }
}

/// dst[m×n] = op(lhs)[m×k] @ op(rhs)[k×n], row-major, with `kernel` (`lhs_t`: lhs stored k×m;
/// `rhs_t`: rhs stored n×k; read through strides, no transposed copy). `dst` need not be
/// initialised: every one of its first m*n elements is written. A kernel that does not serve the
/// element type (oneDNN for f64) or the machine falls back to `Avx2`.
///
/// # Safety
/// `lhs`, `rhs` and `dst` hold m*k, k*n and m*n elements; m, n, k > 0.
#[allow(clippy::too_many_arguments)]
pub unsafe fn run<T: Elem>(
    kernel: GemmKernel,
    m: usize,
    n: usize,
    k: usize,
    lhs: *const T,
    lhs_t: bool,
    rhs: *const T,
    rhs_t: bool,
    dst: *mut T,
    par: Parallelism,
) {
    if kernel == GemmKernel::OneDnn {
        if let (Some(lib), Some((l, r, d))) = (super::onednn::get(), T::as_f32_ptrs(lhs, rhs, dst)) {
            if onednn_on_pool(lib, m, n, k, l, lhs_t, r, rhs_t, d, threads(par)) {
                return;
            }
        }
    }
    // (column stride, row stride) of each operand.
    let (lcs, lrs) = if lhs_t { (m as isize, 1) } else { (1, k as isize) };
    let (rcs, rrs) = if rhs_t { (k as isize, 1) } else { (1, n as isize) };
    let wide = kernel == GemmKernel::Avx512 && GemmKernel::Avx512.available();
    T::gemm(wide, &Strided { m, n, k, dst, drs: n as isize, lhs, lcs, lrs, rhs, rcs, rrs }, par)
}

/// The threads a product may use.
pub fn threads(par: Parallelism) -> usize {
    match par {
        Parallelism::Rayon(t) => t,
        _ => 1,
    }
}

/// oneDNN's sgemm on rayon's threads, not OpenMP's: the rows of the product (its columns when it
/// has fewer rows than threads) are cut into one band per thread and each band is a one-thread
/// sgemm. An OpenMP team beside rayon's pool took the cores from each other (the MLP batch-1024
/// step's products: 17.0 ms a step in the step against 11.6 ms measured alone). Each output
/// element is still one dot product over all of k, so the bands change no value.
///
/// # Safety
/// As `run`, with f32 operands.
#[allow(clippy::too_many_arguments)]
unsafe fn onednn_on_pool(
    lib: &super::onednn::OneDnn,
    m: usize,
    n: usize,
    k: usize,
    lhs: *const f32,
    lhs_t: bool,
    rhs: *const f32,
    rhs_t: bool,
    dst: *mut f32,
    threads: usize,
) -> bool {
    let lda = if lhs_t { m } else { k };
    let ldb = if rhs_t { k } else { n };
    if threads <= 1 {
        return lib.sgemm(m, n, k, lhs, lhs_t, lda, rhs, rhs_t, ldb, dst, n);
    }
    // Raw pointers are not Send: pass addresses.
    let (l, r, d) = (lhs as usize, rhs as usize, dst as usize);
    let by_rows = m >= threads * 8 || m >= n;
    let len = if by_rows { m } else { n };
    let ok = std::sync::atomic::AtomicBool::new(true);
    rayon::scope(|s| {
        for (start, size) in super::onednn::bands(len, threads) {
            let ok = &ok;
            s.spawn(move |_| {
                let (l, r, d) = (l as *const f32, r as *const f32, d as *mut f32);
                // A band of rows: lhs from row `start` (column `start` when stored transposed),
                // dst from row `start`; a band of columns: rhs and dst from column `start`.
                let done = if by_rows {
                    let l = if lhs_t { l.add(start) } else { l.add(start * k) };
                    lib.sgemm(size, n, k, l, lhs_t, lda, r, rhs_t, ldb, d.add(start * n), n)
                } else {
                    let r = if rhs_t { r.add(start * k) } else { r.add(start) };
                    lib.sgemm(m, size, k, l, lhs_t, lda, r, rhs_t, ldb, d.add(start), n)
                };
                if !done {
                    ok.store(false, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    ok.into_inner()
}

/// A product's operands as the gemm crate reads them: pointers with (column, row) strides.
#[derive(Clone, Copy)]
pub struct Strided<T> {
    m: usize,
    n: usize,
    k: usize,
    dst: *mut T,
    /// dst's row stride (its column stride is 1).
    drs: isize,
    lhs: *const T,
    lcs: isize,
    lrs: isize,
    rhs: *const T,
    rcs: isize,
    rrs: isize,
}

/// The generic driver of the gemm crate with one microkernel set: the body of the crate's own
/// per-ISA `gemm_basic`, with the set named instead of detected.
macro_rules! driver {
    ($simd:ty, $ukr:path, $ty:ty, $lanes:expr, $p:expr, $par:expr) => {{
        use $ukr as u;
        let p = $p;
        gemm_basic_generic::<_, $ty, { $lanes }, { u::MR_DIV_N * $lanes }, { u::NR }, { u::MR_DIV_N }, { u::H_M }, { u::H_N }>(
            <$simd as gemm_common::simd::MixedSimd<$ty, $ty, $ty, $ty>>::try_new().expect("checked by the caller"),
            p.m,
            p.n,
            p.k,
            p.dst,
            1,
            p.drs,
            false,
            p.lhs,
            p.lcs,
            p.lrs,
            p.rhs,
            p.rcs,
            p.rrs,
            0.0,
            1.0,
            false,
            false,
            false,
            |a, b, c| a * b + c,
            &u::UKR,
            &u::H_UKR,
            false,
            $par,
        )
    }};
}

/// A product in one element type through the gemm crate's driver.
pub trait GemmElem: Sized {
    /// `wide`: the AVX-512 microkernels (the caller checked the CPU has them).
    ///
    /// # Safety
    /// As `run`.
    unsafe fn gemm(wide: bool, p: &Strided<Self>, par: Parallelism);

    /// The pointers as f32 pointers, when this is f32 (what oneDNN's sgemm takes).
    fn as_f32_ptrs(lhs: *const Self, rhs: *const Self, dst: *mut Self) -> Option<(*const f32, *const f32, *mut f32)>;
}

/// `GemmElem` for an element type: its microkernel crate and lanes per AVX-512 and AVX2 vector.
macro_rules! gemm_elem {
    ($ty:ident, $kernels:ident, $wide_lanes:expr, $lanes:expr) => {
        impl GemmElem for $ty {
            unsafe fn gemm(wide: bool, p: &Strided<$ty>, par: Parallelism) {
                #[cfg(target_arch = "x86_64")]
                {
                    if wide {
                        return driver!(gemm_common::simd::V4, $kernels::microkernel::avx512f::$ty, $ty, $wide_lanes, p, par);
                    }
                    if std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx2") {
                        return driver!(gemm_common::simd::V3, $kernels::microkernel::fma::$ty, $ty, $lanes, p, par);
                    }
                }
                let _ = wide;
                let Strided { m, n, k, dst, drs, lhs, lcs, lrs, rhs, rcs, rrs } = *p;
                gemm::gemm(m, n, k, dst, 1, drs, false, lhs, lcs, lrs, rhs, rcs, rrs, 0.0, 1.0, false, false, false, par)
            }

            fn as_f32_ptrs(lhs: *const $ty, rhs: *const $ty, dst: *mut $ty) -> Option<(*const f32, *const f32, *mut f32)> {
                (std::any::TypeId::of::<$ty>() == std::any::TypeId::of::<f32>())
                    .then(|| (lhs as *const f32, rhs as *const f32, dst as *mut f32))
            }
        }
    };
}

gemm_elem!(f32, gemm_f32, 16, 8);
gemm_elem!(f64, gemm_f64, 8, 4);
