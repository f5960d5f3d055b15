//! Which product kernel runs each product shape on this machine: measured, not assumed. The
//! first product of a shape (element type, m, n, k, transposes, threads) times every kernel
//! this machine has (gemm_kernels.rs) on its real operands, `REPS` rounds each, interleaved, and
//! keeps the fastest by its best round; the product's result is then computed by the winner, so
//! every result of a run comes from one kernel per shape. The choice is saved in the tuning file
//! with the fused kernels' choices (tune_store.rs) and later runs on this machine and build take
//! it without measuring. PyTorch's `cudnn.benchmark` makes the same kind of choice, per process.
//!
//! Products below `MEASURE_MIN` multiply-adds are not measured (a few microseconds, where a
//! wrong choice costs nothing worth the noise of timing it): they run on oneDNN where it is
//! installed (fastest on every small shape measured: 2.9 µs against 7.5 µs for 10×128×128), else
//! the AVX2 kernels.
//!
//! Kernels differ in the order they sum a product's terms, so their last bits differ: a run's
//! results depend on the kernel its machine chose, as PyTorch's depend on the MKL or oneDNN path
//! its machine takes. So that one process never computes one shape two ways (the fused and the
//! eager executor compared bit for bit, a step and its resumed twin), the choices are the
//! process's, shared by every executor; across processes the tuning file carries them, and the
//! first measurement of a shape saved there is the one later runs take.
//! `DLC_GEMM=avx2|avx512|onednn` names one kernel for every product (results then match across
//! machines that have it).

use super::elem::Elem;
use super::epilogue::Epilogue;
use super::gemm_kernels::{run, threads, GemmKernel};
use super::tune_store::{Pick, TuneStore};
use gemm_common::Parallelism;
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex};

/// Rounds each candidate is timed for (the best round counts).
const REPS: usize = 3;

/// Products with fewer multiply-adds than this run on the default kernel, unmeasured.
pub const MEASURE_MIN: usize = 1 << 20;

/// The kernel of every product and convolution shape chosen in this process, by tuning-file
/// key (see the module's comment).
fn chosen() -> &'static Mutex<HashMap<String, &'static str>> {
    static CHOSEN: std::sync::OnceLock<Mutex<HashMap<String, &'static str>>> = std::sync::OnceLock::new();
    CHOSEN.get_or_init(Default::default)
}

/// A product's identity for the choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Shape {
    /// The operands' type: f32, f64, or bf16 values stored as f32.
    ty: &'static str,
    m: usize,
    n: usize,
    k: usize,
    lhs_t: bool,
    rhs_t: bool,
    threads: usize,
}

impl Shape {
    fn key(&self) -> String {
        let t = |b: bool| if b { 't' } else { 'n' };
        format!("gemm:{}:{}x{}x{}:{}{}:p{}", self.ty, self.m, self.n, self.k, t(self.lhs_t), t(self.rhs_t), self.threads)
    }
}

pub struct GemmSelect {
    /// `DLC_GEMM`: one kernel for every product.
    forced: Option<GemmKernel>,
    /// The kernels this machine has, in the order they are tried.
    candidates: Vec<GemmKernel>,
    /// Measured in this run, by tuning-file key (what a save adds).
    measured: Mutex<Vec<(String, Pick)>>,
    pub store: Option<Arc<TuneStore>>,
    /// Convolutions' oneDNN primitives, made once per shape (convolutions are products too, and
    /// their kernel is chosen the same way: conv.rs).
    pub(super) convs: super::onednn_conv::Convs,
    /// bf16 products' oneDNN matmul primitives, made once per band shape.
    matmuls: super::onednn_matmul::Matmuls,
}

impl Default for GemmSelect {
    fn default() -> Self {
        GemmSelect::new(None)
    }
}

impl GemmSelect {
    pub fn new(store: Option<Arc<TuneStore>>) -> GemmSelect {
        let forced = std::env::var("DLC_GEMM").ok().and_then(|v| GemmKernel::parse(&v)).filter(|k| k.available());
        let candidates = GemmKernel::ALL.into_iter().filter(|k| k.available()).collect();
        GemmSelect { forced, candidates, measured: Default::default(), store, convs: Default::default(), matmuls: Default::default() }
    }

    /// The kernels products may run on here.
    pub fn candidates(&self) -> &[GemmKernel] {
        &self.candidates
    }

    /// Each product and convolution shape's kernel so far in this process: (tuning-file key,
    /// kernel), convolutions' kernels named `conv im2col` or `conv onednn`. A bf16 product that
    /// kept its f32 kernel is counted under that kernel's own shape, not again.
    pub fn choices(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = chosen()
            .lock()
            .expect("gemm choices")
            .iter()
            .filter(|(s, k)| !(s.starts_with("gemm:bf16:") && **k == "f32"))
            .map(|(s, k)| (s.clone(), if s.starts_with("conv:") { format!("conv {k}") } else { k.to_string() }))
            .collect();
        v.sort();
        v
    }

    /// This run's measurements, for the tuning file.
    pub fn take_measured(&self) -> Vec<(String, Pick)> {
        std::mem::take(&mut *self.measured.lock().expect("gemm choices"))
    }

    /// dst[m×n] = op(lhs)[m×k] @ op(rhs)[k×n], row-major (`lhs_t`: lhs stored k×m; `rhs_t`: rhs
    /// stored n×k), on the kernel chosen for the shape. Every one of dst's first m*n elements is
    /// written (it is not read).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn gemm<T: Elem>(
        &self,
        m: usize,
        n: usize,
        k: usize,
        lhs: &[T],
        lhs_t: bool,
        rhs: &[T],
        rhs_t: bool,
        dst: &mut [MaybeUninit<T>],
        par: Parallelism,
    ) {
        if m == 0 || n == 0 {
            return;
        }
        if k == 0 {
            dst[..m * n].fill(MaybeUninit::new(T::ZERO));
            return;
        }
        assert!(lhs.len() >= m * k && rhs.len() >= k * n && dst.len() >= m * n, "product operands too short");
        let ty = if std::mem::size_of::<T>() == 4 { "f32" } else { "f64" };
        let shape = Shape { ty, m, n, k, lhs_t, rhs_t, threads: threads(par) };
        let call = |kernel: GemmKernel, dst: &mut [MaybeUninit<T>]| {
            // SAFETY: the lengths were checked above; m, n, k > 0.
            unsafe { run(kernel, m, n, k, lhs.as_ptr(), lhs_t, rhs.as_ptr(), rhs_t, dst.as_mut_ptr() as *mut T, par) }
        };
        let kernel = self.kernel_for(shape, &mut |kernel| {
            let started = std::time::Instant::now();
            call(kernel, dst);
            started.elapsed().as_nanos() as u64
        });
        call(kernel, dst);
    }

    /// A product of bf16 values stored as f32 (`precision = bf16`): on the f32 kernel chosen for
    /// its shape, on oneDNN's bf16 matmul (AMX, AVX512-BF16; `onednn_matmul.rs`) or on dlc's own
    /// AVX512-BF16 tiles (`bf16_product.rs`), whichever this machine has and measures fastest for
    /// the shape (a named `DLC_GEMM` keeps every product on its f32 kernel).
    ///
    /// `round`: which operands hold f32 values still to be rounded to bf16 (the source of a
    /// cast the plan left to the product, fusion.rs `fold_casts`). The bf16 kernels round every
    /// value as they convert it, so they read these as they are; the f32 kernels get rounded
    /// copies (`with_bf16`). The result is written rounded to bf16 (dlc's tiles round in
    /// their registers; the other kernels' results are rounded after), then given `epilogue`
    /// (by dlc's tiles in their registers, after the other kernels in a pass that is timed
    /// with them when the kernels are measured).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn gemm_bf16(
        &self,
        m: usize,
        n: usize,
        k: usize,
        lhs: &[f32],
        lhs_t: bool,
        rhs: &[f32],
        rhs_t: bool,
        round: [bool; 2],
        dst: &mut [MaybeUninit<f32>],
        par: Parallelism,
        epilogue: Option<&Epilogue>,
    ) {
        let small = m * n * k < MEASURE_MIN || lhs.len() < m * k || rhs.len() < k * n || dst.len() < m * n;
        let names = bf16_candidates();
        let on_f32 = |dst: &mut [MaybeUninit<f32>]| {
            with_bf16(lhs, round[0], |lhs| with_bf16(rhs, round[1], |rhs| self.gemm(m, n, k, lhs, lhs_t, rhs, rhs_t, dst, par)));
            finish_result(dst, m * n, epilogue);
        };
        if self.forced.is_some() || small || names.len() < 2 {
            return on_f32(dst);
        }
        // The candidates are part of the key, as for f32 products (`kernel_for`).
        let key = format!("{}:{}", Shape { ty: "bf16", m, n, k, lhs_t, rhs_t, threads: threads(par) }.key(), names.join("+"));
        // Whether candidate `name` computed the product (oneDNN may have no primitive for it).
        let run = |name: &str, dst: &mut [MaybeUninit<f32>]| -> bool {
            let out = dst.as_mut_ptr() as *mut f32;
            match name {
                // SAFETY (both): the lengths were checked above; m, n, k > 0.
                "onednn-bf16" => {
                    let done = unsafe { self.matmuls.run(m, n, k, lhs, lhs_t, rhs, rhs_t, out) };
                    if done {
                        finish_result(dst, m * n, epilogue);
                    }
                    done
                }
                #[cfg(target_arch = "x86_64")]
                "avx512-bf16" => super::bf16_product::tiles().is_some_and(|t| {
                    unsafe { super::bf16_product::run(t, m, n, k, lhs, lhs_t, rhs, rhs_t, out, threads(par), true, epilogue) };
                    true
                }),
                _ => {
                    on_f32(dst);
                    true
                }
            }
        };
        let mut time = |c: usize| {
            let started = std::time::Instant::now();
            if !run(names[c], dst) {
                return u64::MAX;
            }
            started.elapsed().as_nanos() as u64
        };
        let pick = self.choose(key, names, &mut time);
        if !run(names[pick], dst) {
            on_f32(dst);
        }
    }

    /// The kernel for `shape`: forced, the only one, the default for a small product, chosen
    /// before in this process, read from the tuning file, or measured now with `time` (a
    /// product's nanoseconds on a kernel). The lock is held while a shape is measured, so
    /// concurrent first products of one shape (a convolution's images) all wait for the one
    /// choice rather than each make their own.
    fn kernel_for(&self, shape: Shape, time: &mut dyn FnMut(GemmKernel) -> u64) -> GemmKernel {
        if let Some(k) = self.forced {
            return k;
        }
        if self.candidates.len() < 2 {
            return self.candidates.first().copied().unwrap_or(GemmKernel::Avx2);
        }
        if shape.m * shape.n * shape.k < MEASURE_MIN {
            return if self.candidates.contains(&GemmKernel::OneDnn) { GemmKernel::OneDnn } else { GemmKernel::Avx2 };
        }
        let names: Vec<&'static str> = self.candidates.iter().map(|c| c.name()).collect();
        // The candidates are part of the key: a choice made before oneDNN was installed (or with
        // `DLC_ONEDNN=0`) is not taken once it is there, and is measured again.
        let key = format!("{}:{}", shape.key(), names.join("+"));
        let pick = self.choose(key, &names, &mut |i| time(self.candidates[i]));
        self.candidates[pick]
    }

    /// The choice among the kernels `names` for the shape `key` (a product's or a convolution's):
    /// made before in this process, read from the tuning file, or measured now with `time`
    /// (nanoseconds of the shape on candidate `i`), `REPS` rounds each, interleaved, the fastest
    /// by its best round. No lock is held while measuring (a convolution's candidates make
    /// products, which choose too); when two threads measure one shape at once (a convolution's
    /// images), the first to record its choice wins and both use it.
    pub(super) fn choose(&self, key: String, names: &[&'static str], time: &mut dyn FnMut(usize) -> u64) -> usize {
        let position = |k: &str| names.iter().position(|n| *n == k);
        if let Some(i) = chosen().lock().expect("gemm choices").get(&key).and_then(|k| position(k)) {
            return i;
        }
        let stored = self.store.as_ref().and_then(|s| s.pick(&key)).and_then(|p| position(&p.name));
        let mut pick = None;
        let mine = stored.unwrap_or_else(|| {
            let mut best = vec![u64::MAX; names.len()];
            for _ in 0..REPS {
                for (i, b) in best.iter_mut().enumerate() {
                    *b = (*b).min(time(i));
                }
            }
            let winner = (0..best.len()).min_by_key(|i| best[*i]).expect("candidates");
            let ns = names.iter().zip(&best).map(|(c, t)| (c.to_string(), *t)).collect();
            pick = Some(Pick { name: names[winner].into(), ns });
            winner
        });
        let mut chosen = chosen().lock().expect("gemm choices");
        let kept = *chosen.entry(key.clone()).or_insert(names[mine]);
        if let (Some(p), true) = (pick, kept == names[mine]) {
            self.measured.lock().expect("gemm choices").push((key, p));
        }
        position(kept).unwrap_or(mine)
    }
}

/// The first `len` values of a product's result, just written, rounded to bf16 and given the
/// product's epilogue (the kernels that do neither themselves).
fn finish_result(dst: &mut [MaybeUninit<f32>], len: usize, epilogue: Option<&Epilogue>) {
    // SAFETY: the product wrote these `len` values.
    let values = unsafe { &mut *(&mut dst[..len] as *mut [MaybeUninit<f32>] as *mut [f32]) };
    crate::runtime::tensor::round_slice(dlc_language::types::DType::BF16, values);
    if let Some(e) = epilogue {
        e.rows(values);
    }
}

thread_local! {
    /// The f32 kernels' rounded copies of operands, kept between products (a fresh 2 MiB copy
    /// cost more in page faults than the product it fed: 0.3 ms against 0.1 at 10×512×1024).
    static ROUNDED: std::cell::RefCell<Vec<Vec<f32>>> = Default::default();
}

/// `f(x as bf16 values)`: `x` rounded into a copy when `round` (f32 values a folded cast left
/// to the product), else as it is.
fn with_bf16<R>(x: &[f32], round: bool, f: impl FnOnce(&[f32]) -> R) -> R {
    if !round {
        return f(x);
    }
    // Taken, not borrowed: `f` may run another product on this thread.
    let mut copy = ROUNDED.with(|b| b.borrow_mut().pop()).unwrap_or_default();
    copy.resize(x.len(), 0.0);
    crate::runtime::tensor::round_bf16_into(&mut copy, x);
    let r = f(&copy);
    ROUNDED.with(|b| b.borrow_mut().push(copy));
    r
}

/// The kernels a bf16 product may run on here: the f32 kernels always, oneDNN's bf16 matmul
/// where a 2.x library is installed, dlc's AVX512-BF16 tiles where the CPU has the instruction
/// (found once a process, not at every product).
fn bf16_candidates() -> &'static [&'static str] {
    static NAMES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names = vec!["f32"];
        if super::onednn_api::available() {
            names.push("onednn-bf16");
        }
        #[cfg(target_arch = "x86_64")]
        if super::bf16_product::tiles().is_some() {
            names.push("avx512-bf16");
        }
        names
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel this machine has computes the product (to f32 rounding), transposed
    /// operands included; the choice is made once per shape and then kept.
    #[test]
    fn every_kernel_computes_the_product_and_a_shape_is_chosen_once() {
        let (m, n, k) = (37, 29, 53);
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 13) as f32 * 0.25 - 1.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 11) as f32 * 0.5 - 2.0).collect();
        let mut want = vec![0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                want[i * n + j] = (0..k).map(|p| a[i * k + p] as f64 * b[p * n + j] as f64).sum();
            }
        }
        // Transposed copies: a stored k×m, b stored n×k.
        let at: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
        let bt: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
        for kernel in GemmKernel::ALL.into_iter().filter(|k| k.available()) {
            for (lhs, lt, rhs, rt) in [(&a, false, &b, false), (&at, true, &b, false), (&a, false, &bt, true), (&at, true, &bt, true)] {
                let mut out = vec![f32::NAN; m * n];
                // SAFETY: the buffers hold m*k, k*n and m*n values.
                unsafe { run(kernel, m, n, k, lhs.as_ptr(), lt, rhs.as_ptr(), rt, out.as_mut_ptr(), Parallelism::None) };
                for (o, w) in out.iter().zip(&want) {
                    assert!((*o as f64 - w).abs() <= 1e-4 * w.abs().max(1.0), "{} ({lt}, {rt}): {o} against {w}", kernel.name());
                }
            }
        }
    }

    /// A product large enough to be measured is measured once per process, then its choice is
    /// kept; a small one is never measured.
    #[test]
    fn a_shape_is_measured_once_and_small_products_never() {
        let (m, n, k) = (128, 96, 160);
        assert!(m * n * k >= MEASURE_MIN);
        let a = vec![0.5f32; m * k];
        let b = vec![0.25f32; k * n];
        let select = GemmSelect::new(None);
        let mut out = vec![MaybeUninit::new(0f32); m * n];
        select.gemm(m, n, k, &a, false, &b, false, &mut out, Parallelism::None);
        select.gemm(m, n, k, &a, false, &b, false, &mut out, Parallelism::None);
        // SAFETY: the product wrote every element.
        assert!(out.iter().all(|v| unsafe { v.assume_init() } == 0.125 * k as f32));
        let names: Vec<&str> = select.candidates().iter().map(|c| c.name()).collect();
        let key = format!("{}:{}", Shape { ty: "f32", m, n, k, lhs_t: false, rhs_t: false, threads: 1 }.key(), names.join("+"));
        let measured = select.take_measured();
        if select.candidates().len() > 1 && select.forced.is_none() {
            assert_eq!(measured.iter().filter(|(k, _)| *k == key).count(), 1, "{measured:?}");
            assert!(select.choices().iter().any(|(k, _)| *k == key));
        }
        select.gemm(4, 4, 4, &a, false, &b, false, &mut out, Parallelism::None);
        assert!(select.take_measured().is_empty());
    }

    /// bf16 products on oneDNN's matmul (where a 2.x library is installed) against the exact
    /// product of their bf16 values, transposes and uneven bands included.
    #[test]
    fn bf16_products_on_onednn_match_the_exact_product() {
        if !super::super::onednn_api::available() {
            eprintln!("oneDNN 2.x is not installed: nothing to compare");
            return;
        }
        let (m, n, k) = (37, 29, 53);
        let bf = |v: f32| half::bf16::from_f32(v).to_f32();
        assert_eq!(super::super::onednn_matmul::to_bf16_bits(-1.7), half::bf16::from_f32(-1.7).to_bits());
        let a: Vec<f32> = (0..m * k).map(|i| bf(((i * 7) % 13) as f32 * 0.3 - 1.7)).collect();
        let b: Vec<f32> = (0..k * n).map(|i| bf(((i * 5) % 11) as f32 * 0.7 - 2.1)).collect();
        let at: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
        let bt: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
        let select = GemmSelect::new(None);
        for (lhs, lt, rhs, rt) in [(&a, false, &b, false), (&at, true, &b, false), (&a, false, &bt, true), (&at, true, &bt, true)] {
            let mut out = vec![f32::NAN; m * n];
            // SAFETY: the buffers hold m*k, k*n and m*n values.
            let ran = unsafe { select.matmuls.run(m, n, k, lhs, lt, rhs, rt, out.as_mut_ptr()) };
            if !ran {
                eprintln!("no bf16 matmul on this CPU");
                return;
            }
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k).map(|p| a[i * k + p] as f64 * b[p * n + j] as f64).sum();
                    let got = out[i * n + j] as f64;
                    assert!((got - want).abs() <= 1e-4 * want.abs().max(1.0), "({lt}, {rt}) [{i},{j}]: {got} against {want}");
                }
            }
        }
    }
}
