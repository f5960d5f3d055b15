//! Channels-last or not, measured: the MNIST CNN's second convolution (N=128, C=32, 26x26 -> 64
//! channels, 3x3, no padding) as im2col + gemm in NCHW (what dlc runs) and in NHWC, forward only,
//! images in parallel with each product on one core, as `exec/conv.rs` does. It checks the two
//! layouts agree, then prints three alternating timings (median of 30 each).
//!
//! `cargo run --release -p dlc --example conv_layout` (docs/benchmarks.md has the figures).
use rayon::prelude::*;
use std::time::Instant;
const N: usize = 128;
const C: usize = 32;
const H: usize = 26;
const O: usize = 64;
const K: usize = 3;
const OH: usize = 24;
/// dst[m×n] = a[m×k] · b[k×n] on one core, operands through (column, row) strides.
///
/// # Safety
/// The pointers must cover the matrices their strides describe.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm(m: usize, n: usize, k: usize, dst: *mut f32, a: *const f32, acs: isize, ars: isize, b: *const f32, bcs: isize, brs: isize) {
    gemm::gemm(m, n, k, dst, 1, n as isize, false, a, acs, ars, b, bcs, brs, 0.0, 1.0, false, false, false, gemm::Parallelism::None)
}
fn nchw(x: &[f32], w: &[f32], y: &mut [f32]) {
    let cols = OH * OH;
    let kk = C * K * K;
    y.par_chunks_mut(O * cols).enumerate().for_each_init(
        || vec![0f32; kk * cols],
        |col, (b, yb)| {
            let img = &x[b * C * H * H..][..C * H * H];
            for c in 0..C {
                for ky in 0..K {
                    for kx in 0..K {
                        let row = &mut col[((c * K + ky) * K + kx) * cols..][..cols];
                        for oy in 0..OH {
                            row[oy * OH..][..OH].copy_from_slice(&img[(c * H + oy + ky) * H + kx..][..OH]);
                        }
                    }
                }
            }
            // SAFETY: `col` holds kk*cols values, `w` O*kk, and `yb` O*cols.
            unsafe { gemm(O, cols, kk, yb.as_mut_ptr(), w.as_ptr(), 1, kk as isize, col.as_ptr(), 1, cols as isize) }
        },
    );
}
fn nhwc(x: &[f32], w_t: &[f32], y: &mut [f32]) {
    // x [N, H, W, C]; w_t [K*K*C, O] (rows (ky, kx, c)); y [N, OH, OW, O]
    let cols = OH * OH;
    let kk = K * K * C;
    y.par_chunks_mut(cols * O).enumerate().for_each_init(
        || vec![0f32; cols * kk],
        |col, (b, yb)| {
            let img = &x[b * H * H * C..][..H * H * C];
            for oy in 0..OH {
                for ox in 0..OH {
                    let row = &mut col[(oy * OH + ox) * kk..][..kk];
                    for ky in 0..K {
                        row[ky * K * C..][..K * C].copy_from_slice(&img[((oy + ky) * H + ox) * C..][..K * C]);
                    }
                }
            }
            // SAFETY: `col` holds cols*kk values, `w_t` kk*O, and `yb` cols*O.
            unsafe { gemm(cols, O, kk, yb.as_mut_ptr(), col.as_ptr(), 1, kk as isize, w_t.as_ptr(), 1, O as isize) }
        },
    );
}
fn time(f: &mut dyn FnMut()) -> f64 {
    let mut ts = vec![];
    for _ in 0..30 {
        let t = Instant::now();
        f();
        ts.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
    ts[15]
}
fn main() {
    let x: Vec<f32> = (0..N * C * H * H).map(|i| ((i * 7919) % 1000) as f32 / 1000.0).collect();
    let w: Vec<f32> = (0..O * C * K * K).map(|i| ((i * 104729) % 1000) as f32 / 1000.0 - 0.5).collect();
    // The same tensors in channels-last.
    let mut xl = vec![0f32; x.len()];
    for b in 0..N {
        for c in 0..C {
            for i in 0..H * H {
                xl[(b * H * H + i) * C + c] = x[(b * C + c) * H * H + i];
            }
        }
    }
    let mut wt = vec![0f32; w.len()];
    for o in 0..O {
        for c in 0..C {
            for ky in 0..K {
                for kx in 0..K {
                    wt[((ky * K + kx) * C + c) * O + o] = w[((o * C + c) * K + ky) * K + kx];
                }
            }
        }
    }
    let mut y1 = vec![0f32; N * O * OH * OH];
    let mut y2 = y1.clone();
    nchw(&x, &w, &mut y1);
    nhwc(&xl, &wt, &mut y2);
    let mut maxd = 0f32;
    for b in 0..N {
        for o in 0..O {
            for i in 0..OH * OH {
                maxd = maxd.max((y1[(b * O + o) * OH * OH + i] - y2[(b * OH * OH + i) * O + o]).abs());
            }
        }
    }
    println!("max difference between the layouts: {maxd:e}");
    assert!(maxd < 1e-4, "the layouts disagree");
    let flop = 2.0 * (N * O * OH * OH * C * K * K) as f64;
    for _ in 0..3 {
        let a = time(&mut || nchw(&x, &w, &mut y1));
        let b = time(&mut || nhwc(&xl, &wt, &mut y2));
        println!("NCHW {a:.2} ms ({:.0} GFLOP/s), NHWC {b:.2} ms ({:.0} GFLOP/s)", flop / a / 1e6, flop / b / 1e6);
    }
}
