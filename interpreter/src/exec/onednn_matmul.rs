//! bf16 products on oneDNN's matmul primitive, which runs them on AMX or AVX512-BF16 where the
//! CPU has them (`brg:avx512_core_amx_bf16` on the Xeon of issue 24: 520-560 GFLOP/s on one core
//! against about 140 for the f32 kernels). Under `precision = bf16` a product's operands are bf16
//! values stored as f32 (autocast rounded them), so converting them to bf16 storage is exact;
//! the primitive multiplies them exactly and sums in f32, and the f32 result is rounded to bf16 as
//! the f32 kernels' is (contract.rs). The rows of the product are banded over rayon's threads,
//! each band a one-thread primitive, as convolutions are (onednn_conv.rs).

use super::onednn_api::*;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

/// A band's product made for its shape: rows, columns, depth and whether the right operand is
/// stored transposed.
type Key = (usize, usize, usize, bool);

struct Prim {
    prim: H,
    pd: H,
    src: Md,
    wei: Md,
    dst: Md,
    scratchpad: Md,
}

// SAFETY: oneDNN primitives may be executed from any thread.
unsafe impl Send for Prim {}
unsafe impl Sync for Prim {}

impl Drop for Prim {
    fn drop(&mut self) {
        if let Some(a) = api() {
            // SAFETY: handles this struct made and nothing else holds.
            unsafe {
                (a.prim_destroy)(self.prim);
                (a.pd_destroy)(self.pd);
            }
        }
    }
}

fn prepare(a: &Api, (rows, n, k, rhs_t): Key) -> Option<Prim> {
    let (rows, n, k) = (rows as i64, n as i64, k as i64);
    let src = md(a, &[rows, k], BF16, TAG_AB)?;
    let wei = md(a, &[k, n], BF16, if rhs_t { TAG_BA } else { TAG_AB })?;
    let dst = md(a, &[rows, n], F32, TAG_AB)?;
    let mut op = OpDesc([0; OP_BYTES]);
    let (mut pd, mut prim): (H, H) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: descriptor blocks of the library's sizes; every pointer is valid for the call.
    unsafe {
        if (a.matmul_init)(&mut op, &src, &wei, std::ptr::null(), &dst) != 0
            || (a.pd_create)(&mut pd, &op, a.attr, a.engine, std::ptr::null_mut()) != 0
        {
            return None;
        }
        if (a.prim_create)(&mut prim, pd) != 0 {
            (a.pd_destroy)(pd);
            return None;
        }
        let scratchpad = *(a.pd_query_md)(pd, Q_SCRATCHPAD, 0).as_ref()?;
        Some(Prim { prim, pd, src, wei, dst, scratchpad })
    }
}

/// The matmul primitives made so far, by band shape (owned by a run's kernel cache).
#[derive(Default)]
pub struct Matmuls {
    made: Mutex<HashMap<Key, Option<Arc<Prim>>>>,
}

/// `x` (a bf16 value stored as f32) in bf16 storage: the upper half of its rounding to bf16
/// (`tensor::round_bf16`, branch-free on the bits, so the conversion loops vectorise; `half`'s
/// scalar conversion took longer than the bf16 products it fed).
#[inline(always)]
fn to_bf16(x: f32) -> u16 {
    (crate::runtime::tensor::round_bf16(x).to_bits() >> 16) as u16
}

/// Rows `start..start + rows` of op(lhs) in bf16, row-major, where lhs is stored k×m: a
/// transpose, in 16×16 tiles so that both sides move a cache line at a time (element by element,
/// the gather took as long as the weight gradient's bf16 product itself).
fn transposed_band(lhs: &[f32], m: usize, k: usize, start: usize, rows: usize) -> Vec<u16> {
    const TILE: usize = 32;
    assert!(start + rows <= m && lhs.len() >= k * m);
    // The band's columns of the stored k×m matrix, converted row by row (contiguous, so the
    // conversion vectorises), then transposed as 16-bit values in tiles.
    let mut stored = vec![0u16; k * rows];
    for (p, dst) in stored.chunks_exact_mut(rows.max(1)).enumerate().take(k) {
        for (d, s) in dst.iter_mut().zip(&lhs[p * m + start..][..rows]) {
            *d = to_bf16(*s);
        }
    }
    let mut out = vec![0u16; rows * k];
    for r0 in (0..rows).step_by(TILE) {
        for p0 in (0..k).step_by(TILE) {
            for r in r0..(r0 + TILE).min(rows) {
                for p in p0..(p0 + TILE).min(k) {
                    // SAFETY: r < rows and p < k, and both buffers hold rows * k values.
                    unsafe { *out.get_unchecked_mut(r * k + p) = *stored.get_unchecked(p * rows + r) };
                }
            }
        }
    }
    out
}

/// `to_bf16`, for the tests.
#[cfg(test)]
pub fn to_bf16_bits(x: f32) -> u16 {
    to_bf16(x)
}

impl Matmuls {
    /// dst[m×n] = op(lhs)[m×k] @ op(rhs)[k×n], row-major (`lhs_t`: lhs stored k×m; `rhs_t`: rhs
    /// stored n×k), the operands' bf16 values multiplied on the CPU's bf16 units. False when
    /// oneDNN cannot (no 2.x library, no bf16 kernel here): the caller computes it in f32.
    ///
    /// # Safety
    /// `dst` has room for m*n values; the operands hold m*k and k*n.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn run(&self, m: usize, n: usize, k: usize, lhs: &[f32], lhs_t: bool, rhs: &[f32], rhs_t: bool, dst: *mut f32) -> bool {
        let (Some(a), Some(lib)) = (api(), super::onednn::get()) else { return false };
        let bands = super::onednn::bands(m, rayon::current_num_threads());
        // Made for the one thread a band runs on (see onednn_conv.rs on oneDNN's thread count).
        lib.set_threads(1);
        let mut prims = vec![];
        for (_, rows) in &bands {
            let mut made = self.made.lock().expect("onednn matmuls");
            match made.entry((*rows, n, k, rhs_t)).or_insert_with(|| prepare(a, (*rows, n, k, rhs_t)).map(Arc::new)).clone() {
                Some(p) => prims.push(p),
                None => return false,
            }
        }
        let mut rhs16 = vec![0u16; k * n];
        {
            use rayon::prelude::*;
            rhs16.par_chunks_mut(1 << 16).zip(rhs[..k * n].par_chunks(1 << 16)).for_each(|(d, s)| {
                for (d, s) in d.iter_mut().zip(s) {
                    *d = to_bf16(*s);
                }
            });
        }
        let ok = std::sync::atomic::AtomicBool::new(true);
        let base = dst as usize;
        rayon::scope(|sc| {
            for ((start, rows), p) in bands.iter().zip(&prims) {
                let (ok, rhs16) = (&ok, &rhs16);
                sc.spawn(move |_| {
                    lib.set_threads(1);
                    // The band's rows of op(lhs), contiguous.
                    let lhs16: Vec<u16> = if lhs_t {
                        transposed_band(lhs, m, k, *start, *rows)
                    } else {
                        lhs[start * k..(start + rows) * k].iter().map(|x| to_bf16(*x)).collect()
                    };
                    let out = (base as *mut f32).add(start * n);
                    if !execute(a, p, &lhs16, rhs16, out) {
                        ok.store(false, std::sync::atomic::Ordering::Relaxed);
                    }
                });
            }
        });
        ok.into_inner()
    }
}

/// One band's product.
///
/// # Safety
/// `out` has room for the band's rows × n values.
unsafe fn execute(a: &Api, p: &Prim, lhs: &[u16], rhs: &[u16], out: *mut f32) -> bool {
    let mut mems = Mems(a, vec![]);
    let mut scratch: Vec<Vec<f32>> = vec![];
    let (Some(src), Some(wei), Some(dst), Some(pad)) = (
        mems.make(&p.src, lhs.as_ptr() as *mut c_void),
        mems.make(&p.wei, rhs.as_ptr() as *mut c_void),
        mems.make(&p.dst, out as *mut c_void),
        buffer(&mut mems, &mut scratch, &p.scratchpad),
    ) else {
        return false;
    };
    let args = [
        ExecArg { arg: ARG_SRC, memory: src },
        ExecArg { arg: ARG_WEIGHTS, memory: wei },
        ExecArg { arg: ARG_DST, memory: dst },
        ExecArg { arg: ARG_SCRATCHPAD, memory: pad },
    ];
    let ok = on_stream(a, |stream| (a.prim_execute)(p.prim, stream, args.len() as c_int, args.as_ptr()) == 0);
    recycle(scratch);
    ok
}
