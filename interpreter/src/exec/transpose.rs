//! Matrix transposes of 32-bit values (f32 bits, bf16 pairs): 4×4 blocks through SSE2 registers
//! on x86-64, value by value elsewhere and at the edges. Used where a layout changes: a permute
//! that swaps two blocks of axes (NCHW and channels-last, exec/movement.rs) and the bf16
//! products' operands (exec/bf16_product.rs).

use rayon::prelude::*;
use std::mem::MaybeUninit;

/// `dst[c * dst_stride + r] = src[r * src_stride + c]` for `r < rows`, `c < cols`.
pub fn transpose_words(src: &[u32], src_stride: usize, rows: usize, cols: usize, dst: &mut [MaybeUninit<u32>], dst_stride: usize) {
    if rows == 0 || cols == 0 {
        return;
    }
    assert!(src.len() >= (rows - 1) * src_stride + cols && dst.len() >= (cols - 1) * dst_stride + rows);
    #[cfg(target_arch = "x86_64")]
    let (r4, c4) = (rows / 4 * 4, cols / 4 * 4);
    #[cfg(not(target_arch = "x86_64"))]
    let (r4, c4) = (0, 0);
    #[cfg(target_arch = "x86_64")]
    for c in (0..c4).step_by(4) {
        for r in (0..r4).step_by(4) {
            // SAFETY: rows r..r+4 and columns c..c+4 are inside both matrices (asserted above).
            unsafe {
                transpose4(
                    src.as_ptr().add(r * src_stride + c),
                    src_stride,
                    dst.as_mut_ptr().add(c * dst_stride + r) as *mut u32,
                    dst_stride,
                )
            };
        }
    }
    for c in 0..cols {
        let from = if c < c4 { r4 } else { 0 };
        for r in from..rows {
            dst[c * dst_stride + r].write(src[r * src_stride + c]);
        }
    }
}

/// One 4×4 block of `transpose_words`.
///
/// # Safety
/// Four rows of four words at `src` (rows `src_stride` apart) and at `dst` (`dst_stride`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose4(src: *const u32, src_stride: usize, dst: *mut u32, dst_stride: usize) {
    use std::arch::x86_64::*;
    // SAFETY: as the function's (SSE2 is part of x86-64).
    unsafe {
        let row = |i: usize| _mm_loadu_si128(src.add(i * src_stride) as *const __m128i);
        let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
        let (t0, t1) = (_mm_unpacklo_epi32(r0, r1), _mm_unpacklo_epi32(r2, r3));
        let (t2, t3) = (_mm_unpackhi_epi32(r0, r1), _mm_unpackhi_epi32(r2, r3));
        let out = |i: usize, v: __m128i| _mm_storeu_si128(dst.add(i * dst_stride) as *mut __m128i, v);
        out(0, _mm_unpacklo_epi64(t0, t1));
        out(1, _mm_unpackhi_epi64(t0, t1));
        out(2, _mm_unpacklo_epi64(t2, t3));
        out(3, _mm_unpackhi_epi64(t2, t3));
    }
}

/// Rows a task and a block of the batched transpose: a block writes `BLOCK` output rows, often a
/// power of two apart (4 KiB for 32×32 images), which share a cache set, so a block is kept to
/// fewer rows than a set has ways.
const BLOCK: usize = 8;
const TASK_ROWS: usize = 32;
/// Words a task writes at least: output rows of few words (an RGB image's pixels to channels-
/// last, 3 words a row) made tasks of 96 words, 2,048 of them for a batch of 64 32×32 images,
/// and the transpose ran at 6 GB/s.
const TASK_WORDS: usize = 4096;

/// `b` matrices of `m` × `n` words each transposed (to `n` × `m`) into `dst` (b × n × m words,
/// every one written), on all threads: a task per `TASK_ROWS` output rows of a matrix (more
/// where rows are short: `TASK_WORDS`), each in blocks of `BLOCK` × `BLOCK`, or where the
/// output rows are shorter than a 4×4 block, column by column (`short_rows`). (One value at a
/// time through a strided gather, a channels-last `[64, 32, 32, 32]` activation took 3.4-5.6
/// ms.)
pub fn transpose_batched(src: &[u32], dst: &mut [MaybeUninit<u32>], b: usize, m: usize, n: usize) {
    if b * m * n == 0 {
        return;
    }
    let task_rows = TASK_ROWS.max(TASK_WORDS / m);
    dst[..b * m * n].par_chunks_mut(n * m).enumerate().for_each(|(bi, mat)| {
        let src = &src[bi * m * n..(bi + 1) * m * n];
        mat.par_chunks_mut(task_rows * m).enumerate().for_each(|(t, rows)| {
            let c0 = t * task_rows;
            let cols = rows.len() / m;
            match m {
                1 => return short_rows::<1>(&src[c0..], n, cols, rows),
                2 => return short_rows::<2>(&src[c0..], n, cols, rows),
                3 => return short_rows::<3>(&src[c0..], n, cols, rows),
                _ => {}
            }
            for cb in (0..cols).step_by(BLOCK) {
                let bc = BLOCK.min(cols - cb);
                for r0 in (0..m).step_by(BLOCK) {
                    let br = BLOCK.min(m - r0);
                    transpose_words(&src[r0 * n + c0 + cb..], n, br, bc, &mut rows[cb * m + r0..], m);
                }
            }
        });
    });
}

/// `transpose_words` of `R` rows (fewer than a block's four: an RGB image's channels), `cols`
/// columns, into rows of `R` words, column by column: the loop unrolled by the row count.
fn short_rows<const R: usize>(src: &[u32], src_stride: usize, cols: usize, dst: &mut [MaybeUninit<u32>]) {
    let rows: [&[u32]; R] = std::array::from_fn(|r| &src[r * src_stride..][..cols]);
    for (c, out) in dst.chunks_exact_mut(R).take(cols).enumerate() {
        for (o, row) in out.iter_mut().zip(rows) {
            o.write(row[c]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 4×4 blocks and the edges of the transpose.
    #[test]
    fn transposes_every_shape() {
        for (rows, cols) in [(1, 1), (2, 9), (3, 5), (4, 4), (5, 9), (16, 3), (13, 17)] {
            let stride = cols + 2;
            let src: Vec<u32> = (0..rows * stride).map(|i| i as u32).collect();
            let mut dst = vec![MaybeUninit::new(u32::MAX); cols * (rows + 1)];
            transpose_words(&src, stride, rows, cols, &mut dst, rows + 1);
            // SAFETY: every element was initialised (u32::MAX, then some overwritten).
            let dst: Vec<u32> = dst.iter().map(|v| unsafe { v.assume_init() }).collect();
            for c in 0..cols {
                for r in 0..rows {
                    assert_eq!(dst[c * (rows + 1) + r], src[r * stride + c], "{rows}x{cols} [{r},{c}]");
                }
                assert_eq!(dst[c * (rows + 1) + rows], u32::MAX, "{rows}x{cols}: written past a row");
            }
        }
    }

    /// Batched transposes of every size around a block and a task, against the definition.
    #[test]
    fn transposes_batches() {
        for (b, m, n) in
            [(1, 1, 1), (3, 5, 9), (2, 33, 70), (4, 1024, 32), (2, 32, 1024), (1, 7, 41), (2, 3, 3000), (2, 2, 70), (3, 1, 5000)]
        {
            let src: Vec<u32> = (0..b * m * n).map(|i| i as u32).collect();
            let mut dst = vec![MaybeUninit::new(u32::MAX); b * m * n];
            transpose_batched(&src, &mut dst, b, m, n);
            for bi in 0..b {
                for r in 0..m {
                    for c in 0..n {
                        // SAFETY: initialised above.
                        let got = unsafe { dst[bi * m * n + c * m + r].assume_init() };
                        assert_eq!(got, src[bi * m * n + r * n + c], "{b}x{m}x{n} [{bi},{r},{c}]");
                    }
                }
            }
        }
    }
}
