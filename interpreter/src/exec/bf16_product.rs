//! bf16 products on dlc's own AVX512-BF16 tile kernel (`dlc_jit::x64::bf16_gemm`), one of the
//! candidates `precision = bf16` products are measured on (gemm_select.rs). The operands are bf16
//! values stored as f32 (autocast rounded them); they are packed as bf16 pairs along the depth,
//! the layout `vdpbf16ps` reads: the left operand in blocks of `MR` rows, the right in panels of
//! `NR` columns (zero past the edges), then every (panel, rows) tile is one kernel call over the
//! whole depth. The products are exact and summed in f32, as the f32 kernels and oneDNN's bf16
//! matmul sum them (in their own orders), and the caller rounds the result to bf16.
//!
//! Tiles are spread over rayon's threads by panel (a panel's packed columns stay in the core's
//! caches across its row blocks), with the rows split too when there are too few panels to go
//! round.

use crate::runtime::tensor::round_bf16;
use dlc_jit::x64::bf16_gemm::{Bf16Tiles, MR, NR};
use rayon::prelude::*;
use std::sync::OnceLock;

/// The tile kernels, generated on first use; `None` on CPUs without AVX512-BF16.
pub fn tiles() -> Option<&'static Bf16Tiles> {
    static TILES: OnceLock<Option<Bf16Tiles>> = OnceLock::new();
    TILES.get_or_init(|| Bf16Tiles::new().ok()).as_ref()
}

/// Sixteen packed words on a cache line (B's panels are read a vector at a time).
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u32; 16]);

/// Two values' bf16 bits as one word: `lo` in the low half (the even depth).
#[inline(always)]
fn pair(lo: f32, hi: f32) -> u32 {
    round_bf16(lo).to_bits() >> 16 | (round_bf16(hi).to_bits() & 0xFFFF_0000)
}

/// Row block `block` of op(lhs) (m×k), packed: `kp` groups of MR words.
fn pack_rows(out: &mut [u32], lhs: &[f32], lhs_t: bool, m: usize, k: usize, block: usize) {
    let (r0, rows) = (block * MR, MR.min(m - block * MR));
    let at = |row: usize, d: usize| {
        if d >= k {
            0.0
        } else if lhs_t {
            lhs[d * m + row]
        } else {
            lhs[row * k + d]
        }
    };
    if lhs_t {
        // Stored k×m: a depth's rows are contiguous.
        for (p, words) in out.chunks_exact_mut(MR).enumerate() {
            for (r, w) in words[..rows].iter_mut().enumerate() {
                *w = pair(at(r0 + r, 2 * p), at(r0 + r, 2 * p + 1));
            }
        }
    } else {
        for r in 0..rows {
            let src = &lhs[(r0 + r) * k..(r0 + r + 1) * k];
            for (p, two) in src.chunks(2).enumerate() {
                out[p * MR + r] = pair(two[0], two.get(1).copied().unwrap_or(0.0));
            }
        }
    }
}

/// Column panel `panel` of op(rhs) (k×n), packed: `kp` groups of NR words.
fn pack_columns(out: &mut [u32], rhs: &[f32], rhs_t: bool, n: usize, k: usize, panel: usize) {
    let (c0, cols) = (panel * NR, NR.min(n - panel * NR));
    if rhs_t {
        // Stored n×k: a column's depths are contiguous.
        for c in 0..cols {
            let src = &rhs[(c0 + c) * k..(c0 + c + 1) * k];
            for (p, two) in src.chunks(2).enumerate() {
                out[p * NR + c] = pair(two[0], two.get(1).copied().unwrap_or(0.0));
            }
        }
    } else {
        for (p, words) in out.chunks_exact_mut(NR).enumerate() {
            let even = &rhs[2 * p * n + c0..][..cols];
            if 2 * p + 1 < k {
                let odd = &rhs[(2 * p + 1) * n + c0..][..cols];
                for ((w, lo), hi) in words.iter_mut().zip(even).zip(odd) {
                    *w = pair(*lo, *hi);
                }
            } else {
                for (w, lo) in words.iter_mut().zip(even) {
                    *w = pair(*lo, 0.0);
                }
            }
        }
    }
}

/// `f` over `0..n`, on rayon's threads when `parallel`.
fn for_each(parallel: bool, n: usize, f: impl Fn(usize) + Sync + Send) {
    if parallel {
        (0..n).into_par_iter().for_each(f);
    } else {
        (0..n).for_each(f);
    }
}

/// dst[m×n] = op(lhs)[m×k] @ op(rhs)[k×n], row-major (`lhs_t`: lhs stored k×m; `rhs_t`: rhs
/// stored n×k), on `threads` of rayon's threads. Every one of dst's first m*n values is written.
///
/// # Safety
/// `dst` has room for m*n values; lhs and rhs hold m*k and k*n; m, n, k > 0.
#[allow(clippy::too_many_arguments)]
pub unsafe fn run(
    tiles: &Bf16Tiles,
    m: usize,
    n: usize,
    k: usize,
    lhs: &[f32],
    lhs_t: bool,
    rhs: &[f32],
    rhs_t: bool,
    dst: *mut f32,
    threads: usize,
) {
    let kp = k.div_ceil(2);
    let (blocks, panels) = (m.div_ceil(MR), n.div_ceil(NR));
    let parallel = threads > 1;
    let mut a = vec![0u32; blocks * kp * MR];
    let mut b = vec![Line([0; 16]); panels * kp * NR / 16];
    // SAFETY: `Line` is 16 u32 with no padding.
    let b_words = unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut u32, b.len() * 16) };
    let pack_a = |(i, s): (usize, &mut [u32])| pack_rows(s, lhs, lhs_t, m, k, i);
    let pack_b = |(i, s): (usize, &mut [u32])| pack_columns(s, rhs, rhs_t, n, k, i);
    if parallel {
        a.par_chunks_exact_mut(kp * MR).enumerate().for_each(pack_a);
        b_words.par_chunks_exact_mut(kp * NR).enumerate().for_each(pack_b);
    } else {
        a.chunks_exact_mut(kp * MR).enumerate().for_each(pack_a);
        b_words.chunks_exact_mut(kp * NR).enumerate().for_each(pack_b);
    }
    // Row groups per panel: enough tasks to keep every thread busy.
    let groups = if !parallel || panels >= 4 * threads { 1 } else { (4 * threads).div_ceil(panels).min(blocks) };
    let (a, b, out) = (&a, &b, dst as usize);
    for_each(parallel, panels * groups, |task| {
        let (panel, group) = (task / groups, task % groups);
        let cols = NR.min(n - panel * NR);
        let b_panel = b[panel * kp * NR / 16..].as_ptr() as *const u32;
        for block in group * blocks / groups..(group + 1) * blocks / groups {
            let rows = MR.min(m - block * MR);
            let c = (out as *mut f32).wrapping_add(block * MR * n + panel * NR);
            // SAFETY: the packed operands hold kp groups for every block and panel; the tile
            // writes rows × cols values of dst inside its m×n (the caller's room); tasks write
            // disjoint tiles.
            unsafe { tiles.tile(rows, a[block * kp * MR..].as_ptr(), b_panel, kp, c, n, cols) };
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Products of every transpose, with odd depths and partial blocks and panels, against the
    /// exact product of the bf16 values; one thread and several.
    #[test]
    fn products_match_the_exact_product() {
        let Some(tiles) = tiles() else {
            eprintln!("no AVX512-BF16 on this CPU: nothing to run");
            return;
        };
        let bf = |v: f32| half::bf16::from_f32(v).to_f32();
        for (m, n, k) in [(37, 29, 53), (1, 1, 1), (12, 32, 2), (25, 65, 130), (128, 70, 7)] {
            let a: Vec<f32> = (0..m * k).map(|i| bf(((i * 7) % 13) as f32 * 0.3 - 1.7)).collect();
            let b: Vec<f32> = (0..k * n).map(|i| bf(((i * 5) % 11) as f32 * 0.7 - 2.1)).collect();
            let at: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
            let bt: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
            for threads in [1, 3] {
                for (lhs, lt, rhs, rt) in [(&a, false, &b, false), (&at, true, &b, false), (&a, false, &bt, true), (&at, true, &bt, true)] {
                    let mut out = vec![f32::NAN; m * n];
                    // SAFETY: the buffers hold m*k, k*n and m*n values.
                    unsafe { run(tiles, m, n, k, lhs, lt, rhs, rt, out.as_mut_ptr(), threads) };
                    for i in 0..m {
                        for j in 0..n {
                            let want: f64 = (0..k).map(|p| a[i * k + p] as f64 * b[p * n + j] as f64).sum();
                            let got = out[i * n + j] as f64;
                            assert!(
                                (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                                "{m}x{n}x{k} ({lt}, {rt}, {threads} threads) [{i},{j}]: {got} against {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}
