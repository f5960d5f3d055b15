//! The tile kernels against the exact products, the rounding against `half`, the epilogues
//! against the plain kernels' sums.

use super::*;

fn bf16(x: f32) -> u32 {
    half::bf16::from_f32(x).to_bits() as u32
}

/// Every row count and a partial last column block, A read as blocks (`tile`) and as rows
/// (`tile_from_rows`, a row stride longer than the depth, the words past it NaN pairs), against
/// the exact product of the bf16 values (small integers times powers of two, so every sum is
/// exact in f32 too).
#[test]
fn tiles_compute_the_exact_product() {
    if !available() {
        eprintln!("no AVX512-BF16 on this CPU: nothing to run");
        return;
    }
    let tiles = Bf16Tiles::new().expect("generated");
    let kp = 37;
    let value = |i: usize, j: usize, s: usize| ((i * 7 + j * 3 + s) % 17) as f32 * 0.25 - 2.0;
    for a_rows in [None, Some(45)] {
        for (rows, round) in (1..=MR).flat_map(|rows| [(rows, false), (rows, true)]) {
            for cols in [1, 15, 16, 17, 31, 32] {
                let ldc = 40;
                let finish = Finish { round, bias: None, mask: None };
                let (c, _) = plain_and_finished(&tiles, kp, value, (rows, cols, ldc), a_rows, finish);
                check_stored(&c, ldc, (rows, cols, round), |r, j| (0..2 * kp).map(|d| value(r, d, 1) * value(d, j, 4)).sum());
            }
        }
    }
}

/// A tile of `rows` × `cols` (rows `ldc` apart in the result, every other value left NaN) over
/// `kp` depth pairs of A[r, d] = value(r, d, 1) and B[d, j] = value(d, j, 4), A read as blocks
/// (`tile`) or as rows `a_rows` words apart (`tile_from_rows`; the words past the depth NaN
/// pairs): the plain kernel's sums (rounded as `finish` says), and `finish`'s. `finish`'s bias
/// or mask must hold what the tile reads.
fn plain_and_finished(
    tiles: &Bf16Tiles,
    kp: usize,
    value: impl Fn(usize, usize, usize) -> f32,
    (rows, cols, ldc): (usize, usize, usize),
    a_rows: Option<usize>,
    finish: Finish,
) -> (Vec<f32>, Vec<f32>) {
    let stride = a_rows.unwrap_or(kp);
    let (mut blocks, mut by_row) = (vec![0u32; kp * MR], vec![u32::MAX; MR * stride]);
    let mut b = Line::zeroed(kp * NR);
    for p in 0..kp {
        for r in 0..MR {
            let w = bf16(value(r, 2 * p, 1)) | bf16(value(r, 2 * p + 1, 1)) << 16;
            blocks[p * MR + r] = w;
            by_row[r * stride + p] = w;
        }
        for c in 0..NR {
            b.words_mut()[p * NR + c] = bf16(value(2 * p, c, 4)) | bf16(value(2 * p + 1, c, 4)) << 16;
        }
    }
    let run = |finish: Finish| {
        let mut c = vec![f32::NAN; MR * ldc];
        // SAFETY: buffers of the sizes the kernels read and write; the caller's bias or mask
        // holds what the tile reads.
        unsafe {
            if a_rows.is_some() {
                tiles.tile_from_rows(rows, (by_row.as_ptr(), stride), b.words().as_ptr(), kp, (c.as_mut_ptr(), ldc), cols, finish)
            } else {
                tiles.tile(rows, (blocks.as_ptr(), MR), (b.words().as_ptr(), NR), kp, (c.as_mut_ptr(), ldc), cols, finish)
            }
        }
        c
    };
    (run(Finish { bias: None, mask: None, ..finish }), run(finish))
}

/// The epilogue kernels (a bias, a bias and relu; rounding or not; both layouts of A): the
/// plain kernel's stored sums plus the bias, then `0 < s ? s : 0`, bit for bit, with a NaN,
/// an infinity and sums the bias makes negative; the bias read only for the tile's columns.
#[test]
fn epilogue_tiles_add_the_bias_then_relu() {
    if !available() {
        return;
    }
    let tiles = Bf16Tiles::new().expect("generated");
    let value = |i: usize, j: usize, s: usize| ((i * 3 + j * 5 + s) % 11) as f32 * 0.5 - 2.5;
    let mut bias: Vec<f32> = (0..NR).map(|j| j as f32 * 0.75 - 9.0).collect();
    bias[3] = f32::NAN;
    bias[7] = f32::NEG_INFINITY;
    bias[8] = f32::INFINITY;
    for (rows, round, cols) in [(12, false, 32), (12, true, 32), (5, true, 17), (1, false, 3), (7, true, 16)] {
        for relu in [false, true] {
            for by_rows in [false, true] {
                let ldc = 35;
                let finish = Finish { round, bias: Some((bias.as_ptr(), relu)), mask: None };
                let (plain, given) = plain_and_finished(&tiles, 19, value, (rows, cols, ldc), by_rows.then_some(19), finish);
                for r in 0..MR {
                    for j in 0..ldc {
                        let (got, sum) = (given[r * ldc + j], plain[r * ldc + j]);
                        if r >= rows || j >= cols {
                            assert!(got.is_nan(), "[{r}, {j}] written");
                            continue;
                        }
                        let s = sum + bias[j];
                        let want = if !relu || 0.0 < s { s } else { 0.0 };
                        assert!(
                            got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan(),
                            "rows {rows} relu {relu}: [{r}, {j}] {got} against {want}"
                        );
                    }
                }
            }
        }
    }
}

/// The mask kernels: the plain kernel's stored sums where `y` is positive, else +0, bit for
/// bit (a NaN, -0.0, +0.0 and infinities among the `y`s), `y` read with the result's
/// stride; both layouts, rounding or not.
#[test]
fn mask_tiles_keep_the_sums_where_y_is_positive() {
    if !available() {
        return;
    }
    let tiles = Bf16Tiles::new().expect("generated");
    let value = |i: usize, j: usize, s: usize| ((i * 7 + j * 2 + s) % 9) as f32 * 0.5 - 2.0;
    let ldc = 37;
    let specials = [f32::NAN, -0.0, 0.0, f32::INFINITY, f32::NEG_INFINITY, 1e-40, -1e-40];
    let y: Vec<f32> = (0..MR * ldc).map(|i| if i % 5 == 0 { specials[(i / 5) % specials.len()] } else { (i % 7) as f32 - 3.0 }).collect();
    for (rows, round, cols) in [(12, false, 32), (12, true, 32), (5, true, 17), (1, false, 3), (9, false, 16)] {
        for by_rows in [false, true] {
            let finish = Finish { round, bias: None, mask: Some(y.as_ptr()) };
            let (plain, kept) = plain_and_finished(&tiles, 9, value, (rows, cols, ldc), by_rows.then_some(9), finish);
            for i in 0..MR * ldc {
                let (r, j) = (i / ldc, i % ldc);
                if r >= rows || j >= cols {
                    assert!(kept[i].is_nan(), "[{r}, {j}] written");
                    continue;
                }
                let want = if 0.0 < y[i] { plain[i] } else { 0.0 };
                assert_eq!(kept[i].to_bits(), want.to_bits(), "rows {rows}: [{r}, {j}] y {}", y[i]);
            }
        }
    }
}

/// A tile's `rows` × `cols` values in `c` (rows `ldc` apart) are `exact(r, j)` (rounded to
/// bf16 when `round`) and the rest of `c` is unwritten (NaN).
fn check_stored(c: &[f32], ldc: usize, (rows, cols, round): (usize, usize, bool), exact: impl Fn(usize, usize) -> f32) {
    for r in 0..MR {
        for j in 0..ldc {
            let got = c[r * ldc + j];
            if r < rows && j < cols {
                let sum = exact(r, j);
                let want = if round { half::bf16::from_f32(sum).to_f32() } else { sum };
                assert_eq!(got, want, "rows {rows}, cols {cols}, round {round}: [{r}, {j}]");
            } else {
                assert!(got.is_nan(), "rows {rows}, cols {cols}: [{r}, {j}] written");
            }
        }
    }
}

/// The rounding kernels round as `half` does (to nearest, ties to even; a NaN stays a NaN):
/// each column sums four bf16 values (exactly, in f32) into a value bf16 cannot hold: ties
/// from even and from odd, just above and below a tie, negative, a tie at the largest
/// finite value (rounds to infinity), infinity, NaN.
#[test]
fn rounding_tiles_round_as_half() {
    if !available() {
        return;
    }
    let tiles = Bf16Tiles::new().expect("generated");
    let p = |e: i32| 2f32.powi(e);
    let max = f32::from_bits(0x7F7F_0000);
    let columns: [[f32; 4]; 9] = [
        [1.0, p(-8), 0.0, 0.0],
        [1.0 + p(-7), p(-8), 0.0, 0.0],
        [1.0, p(-8), p(-12), 0.0],
        [1.0, p(-9), p(-10), p(-11)],
        [-1.0, -p(-8), -p(-12), 0.0],
        [max, p(119), 0.0, 0.0],
        [f32::INFINITY, 1.0, 0.0, 0.0],
        [f32::NAN, 1.0, 0.0, 0.0],
        [3.0, p(-20), p(-21), -p(-30)],
    ];
    let bf = |x: f32| half::bf16::from_f32(x).to_bits() as u32;
    let (kp, one) = (2, bf(1.0));
    let a = vec![one | one << 16; kp * MR];
    let mut b = Line::zeroed(kp * NR);
    for (j, col) in columns.iter().enumerate() {
        for p in 0..kp {
            b.words_mut()[p * NR + j] = bf(col[2 * p]) | bf(col[2 * p + 1]) << 16;
        }
    }
    let mut c = vec![0f32; NR];
    // SAFETY: buffers of the sizes `tile` reads and writes.
    unsafe {
        tiles.tile(
            1,
            (a.as_ptr(), MR),
            (b.words().as_ptr(), NR),
            kp,
            (c.as_mut_ptr(), NR),
            NR,
            Finish { round: true, bias: None, mask: None },
        )
    };
    for (j, col) in columns.iter().enumerate() {
        let want = half::bf16::from_f32(col.iter().sum()).to_f32();
        assert!(want.is_nan() && c[j].is_nan() || c[j].to_bits() == want.to_bits(), "{col:?}: {} against {want}", c[j]);
    }
    assert_eq!(c[0], 1.0, "a tie from even stays");
    assert_eq!(c[5], f32::INFINITY, "a tie at the largest finite value rounds up");
}

/// 64-byte aligned words.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u32; 16]);

impl Line {
    fn zeroed(words: usize) -> Vec<Line> {
        vec![Line([0; 16]); words.div_ceil(16)]
    }
}

trait Words {
    fn words(&self) -> &[u32];
    fn words_mut(&mut self) -> &mut [u32];
}

impl Words for Vec<Line> {
    fn words(&self) -> &[u32] {
        // SAFETY: `Line` is 16 u32 with no padding.
        unsafe { std::slice::from_raw_parts(self.as_ptr() as *const u32, self.len() * 16) }
    }
    fn words_mut(&mut self) -> &mut [u32] {
        // SAFETY: as `words`.
        unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr() as *mut u32, self.len() * 16) }
    }
}
