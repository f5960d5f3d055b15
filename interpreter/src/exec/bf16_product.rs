//! bf16 products on dlc's own AVX512-BF16 tile kernel (`dlc_jit::x64::bf16_gemm`), one of the
//! candidates `precision = bf16` products are measured on (gemm_select.rs). The operands are bf16
//! values stored as f32 (autocast rounded them); each is converted to a matrix of 32-bit words,
//! one row per pair of depths and one word per row (of the left operand) or column (of the
//! right), two bf16 values a word: the layout `vdpbf16ps` reads. Then every tile of `MR` rows and
//! `NR` columns is one kernel call over the whole depth. The products are exact and summed in
//! f32, as the f32 kernels and oneDNN's bf16 matmul sum them (in their own orders), and the caller
//! rounds the result to bf16.
//!
//! A row-major left operand is converted row by row where it stands, and the tiles read its
//! rows as twelve streams (`operands`). A transposed right operand is converted row by row
//! and then transposed as 32-bit words in 4×4 blocks: converting word by word straight into the
//! kernel's layout took longer than the product itself (0.6 ms for the 128×784 by 784×512
//! forward product on one core, against 0.45 ms of tiles).
//!
//! Tiles are spread over rayon's threads by column panel (two a task when there are enough),
//! with the rows split too when there are too few panels to go round, and by rows across every
//! panel for a shallow product.

use super::epilogue::Epilogue;
use super::word_buffers::{buffer, recycle, Words};
use crate::runtime::tensor::round_bf16;
use dlc_jit::x64::bf16_gemm::{Bf16Tiles, Finish, MR, NR};
use rayon::prelude::*;
use std::sync::OnceLock;

/// The tile kernels, generated on first use; `None` on CPUs without AVX512-BF16.
pub fn tiles() -> Option<&'static Bf16Tiles> {
    static TILES: OnceLock<Option<Bf16Tiles>> = OnceLock::new();
    TILES.get_or_init(|| Bf16Tiles::new().ok()).as_ref()
}

/// Two values' bf16 bits as one word: `lo` in the low half (the even depth).
#[inline(always)]
fn pair(lo: f32, hi: f32) -> u32 {
    round_bf16(lo).to_bits() >> 16 | (round_bf16(hi).to_bits() & 0xFFFF_0000)
}

/// `words[c] = pair(even[c], odd[c])`, or `pair(even[c], 0)` past an odd depth (no `odd` row),
/// for the words' length: one row pair of an operand whose depth runs down. Inlined into the
/// `widest!` loops that call it, so it runs in their vectors.
#[inline(always)]
fn pair_rows(words: &mut [u32], even: &[f32], odd: Option<&[f32]>) {
    match odd {
        Some(odd) => {
            for ((w, lo), hi) in words.iter_mut().zip(even).zip(odd) {
                *w = pair(*lo, *hi);
            }
        }
        None => {
            for (w, lo) in words.iter_mut().zip(even) {
                *w = pair(*lo, 0.0);
            }
        }
    }
}

crate::runtime::cpu::widest! {
    /// Columns `c0..c0 + cols` of a matrix `x` whose depth runs down (k rows of `stride`) as
    /// words: `out[p * width + c] = pair(x[2p][c0 + c], x[2p + 1][c0 + c])`, zero past an odd
    /// depth. One call a panel, so that the pairs of a row are made in the widest vectors.
    fn zip_rows(out: &mut [u32], x: &[f32], stride: usize, k: usize, c0: usize, cols: usize, width: usize) {
        for (p, words) in out.chunks_mut(width).take(k.div_ceil(2)).enumerate() {
            let odd = (2 * p + 1 < k).then(|| &x[(2 * p + 1) * stride + c0..][..cols]);
            pair_rows(&mut words[..cols], &x[2 * p * stride + c0..][..cols], odd);
        }
    }
}

crate::runtime::cpu::widest! {
    /// Depth pairs `p0..p0 + count` of a matrix `x` stored k×n (its depth runs down) as every
    /// column panel's words: `panels[j]` holds rows `p0..` of panel j (NR words a row), word c
    /// of row p being `pair(x[2p][NR*j + c], x[2p + 1][NR*j + c])`, zero past an odd depth. The
    /// rows are read whole and in order: converted panel by panel (`zip_rows` over NR columns),
    /// each row was read 128 bytes at a time, 3 KiB apart, and 87% of the samples waited on
    /// those loads.
    fn zip_panels(panels: &mut [&mut [u32]], x: &[f32], n: usize, k: usize, p0: usize, count: usize) {
        for p in 0..count {
            let even = &x[2 * (p0 + p) * n..][..n];
            let odd = (2 * (p0 + p) + 1 < k).then(|| &x[(2 * (p0 + p) + 1) * n..][..n]);
            for (j, panel) in panels.iter_mut().enumerate() {
                let (c0, cols) = (j * NR, NR.min(n - j * NR));
                pair_rows(&mut panel[p * NR..][..cols], &even[c0..c0 + cols], odd.map(|o| &o[c0..c0 + cols]));
            }
        }
    }
}

/// Depth pairs `p0..p1` of the right operand stored k×n, into every panel of its words at `b`
/// (`kp` rows of NR words a panel, one panel after another), its rows read whole and in order
/// (`zip_panels`).
///
/// # Safety
/// `b` has room for n.div_ceil(NR) * kp * NR words; calls on disjoint depth ranges may run at once.
unsafe fn right_rows(b: *mut u32, rhs: &[f32], n: usize, k: usize, (p0, p1): (usize, usize)) {
    let kp = k.div_ceil(2);
    // SAFETY: panel j's rows p0..p1 lie inside `b`'s room, and no other call writes them.
    let mut panels: Vec<&mut [u32]> =
        (0..n.div_ceil(NR)).map(|j| unsafe { std::slice::from_raw_parts_mut(b.add((j * kp + p0) * NR), (p1 - p0) * NR) }).collect();
    zip_panels(&mut panels, rhs, n, k, p0, p1 - p0);
}

crate::runtime::cpu::widest! {
    /// `out[p] = pair(row[2p], row[2p + 1])` (zero past an odd end): a row whose depth runs across.
    /// A word's halves are consecutive values, so the words are the row's bf16 bits in order,
    /// written as 16-bit halves (a narrowing store, where pairing `chunks_exact(2)` shuffled
    /// lanes: 1024 rows of 784 in 50 µs on one thread).
    fn row_pairs(out: &mut [u32], row: &[f32]) {
        assert!(out.len() >= row.len().div_ceil(2));
        // SAFETY: `out`'s words seen as twice as many 16-bit halves (u16's alignment is
        // smaller), the low half first (x86-64 and every target dlc runs on are little-endian).
        let halves = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u16, 2 * out.len()) };
        for (h, x) in halves.iter_mut().zip(row) {
            *h = (round_bf16(*x).to_bits() >> 16) as u16;
        }
        if row.len() % 2 == 1 {
            halves[row.len()] = 0;
        }
    }
}

/// Rows (or columns) `start..start + count` of an operand whose depth runs along its stored
/// rows (`x` is rows of k), as the kernel reads them: `kp` rows of `width` words, row p
/// holding each one's pair at depth p (words past `count` are left as they were: they are
/// never stored from). Converted row by row, then transposed.
fn block_words(out: &mut [u32], x: &[f32], k: usize, start: usize, count: usize, width: usize) {
    let kp = k.div_ceil(2);
    let mut converted = buffer(count * kp);
    for (r, words) in converted.chunks_mut(kp).take(count).enumerate() {
        row_pairs(words, &x[(start + r) * k..(start + r + 1) * k]);
    }
    // SAFETY: a `u32` slice seen as `MaybeUninit<u32>`, only ever written with values.
    let out = unsafe { &mut *(out as *mut [u32] as *mut [std::mem::MaybeUninit<u32>]) };
    super::transpose::transpose_words(&converted, kp, count, kp, out, width);
    recycle(converted);
}

/// `f((i, chunk))` for each `size`-word chunk of `words`, on rayon's threads when `parallel`.
fn each_chunk(words: &mut [u32], size: usize, parallel: bool, f: impl Fn((usize, &mut [u32])) + Sync + Send) {
    if parallel {
        words.par_chunks_mut(size).enumerate().for_each(f);
    } else {
        words.chunks_mut(size).enumerate().for_each(f);
    }
}

/// Words of A between two of its rows as `operands` lays them out from rows: the depth's
/// pairs rounded up to 16 words and 16 more (an odd number of 64-byte lines, so the twelve rows
/// a tile reads at once do not share the L1's sets the way rows a power of two apart would).
fn row_stride(kp: usize) -> usize {
    kp.next_multiple_of(16) + 16
}

/// Depth pairs `p0..p1` of a left operand stored k×m, into its blocks at `a` (each `kp` rows
/// of MR words): the pairs made row by row into a scratch buffer (rows of m words, long enough
/// to vectorise: converted block by block, the rows were 12 values long, 0.54 ns a value at
/// 512×1024), then each block's columns copied out while they are in cache.
///
/// # Safety
/// `a` has room for m.div_ceil(MR) * kp * MR words; calls on disjoint depth ranges may run at once.
unsafe fn left_blocks(a: *mut u32, lhs: &[f32], m: usize, k: usize, (p0, p1): (usize, usize)) {
    let kp = k.div_ceil(2);
    // Scratch rows an odd number of cache lines apart: 2 KiB apart (m = 512), the 64 rows a
    // block's words are copied from shared two of the L1's sets (1024×512: 62 → 52 µs).
    let width = row_stride(m);
    let mut scratch = buffer((p1 - p0) * width);
    zip_rows(&mut scratch[..(p1 - p0) * width], &lhs[2 * p0 * m..], m, k.min(2 * p1) - 2 * p0, 0, m, width);
    for block in 0..m.div_ceil(MR) {
        let (r0, rows) = (block * MR, MR.min(m - block * MR));
        for p in p0..p1 {
            let from = scratch[(p - p0) * width + r0..].as_ptr();
            // SAFETY: block `block`'s row p lies inside `a`'s room, and no other call writes it.
            // A whole block's row is copied as one array, in two vector moves (by its count, a
            // `memmove` call each: 1024×784, 103 → 80 µs).
            unsafe {
                let to = a.add((block * kp + p) * MR);
                if rows == MR {
                    std::ptr::write_unaligned(to as *mut [u32; MR], std::ptr::read_unaligned(from as *const [u32; MR]));
                } else {
                    std::ptr::copy_nonoverlapping(from, to, rows);
                }
            }
        }
    }
    recycle(scratch);
}

/// Depth pairs a task converts at most: a left operand's scratch rows (`left_blocks`) stay
/// inside a core's L2 (64 pairs of 512 words: 128 KiB).
const PAIRS_A_TASK: usize = 64;

/// op(lhs) (m×k) as the kernels read it, and the stride of its rows when it is laid out by
/// rows (`Bf16Tiles::tile_from_rows`), else `None`; and, when `b` is given, the right operand
/// stored k×n converted into its panels there (`right_rows`). Both in one pass of tasks on
/// rayon's threads when `parallel` (a pass costs 20-40 µs on the 2-core VM: a weight
/// gradient's product converted A by rows, then by blocks, then B, in three).
///
/// Stored m×k (its depth across), each row's words are the row converted where it stands, and
/// the tiles read twelve rows as twelve streams: transposing each block of twelve rows into
/// rows of twelve words took 85 of the 135 µs that converting the fc1 product's 1024×784 took
/// on one thread. Stored k×m (its depth down): blocks of MR rows, each `kp` rows of MR words,
/// contiguous (so that a tile reads one stream: rows of words a whole row of the product apart
/// crossed a page every depth pair at batch 1024).
fn operands(
    lhs: &[f32],
    lhs_t: bool,
    m: usize,
    k: usize,
    b: Option<(&mut [u32], &[f32], usize)>,
    parallel: bool,
) -> (Words, Option<usize>) {
    let kp = k.div_ceil(2);
    let stride = (!lhs_t).then(|| row_stride(kp));
    let len = match stride {
        Some(stride) => m * stride,
        None => m.div_ceil(MR) * kp * MR,
    };
    let mut a = buffer(len);
    let a_at = a.as_mut_ptr() as usize;
    let (b_at, b_from) = match b {
        Some((words, rhs, n)) => (Some(words.as_mut_ptr() as usize), Some((rhs, n))),
        None => (None, None),
    };
    // Task t converts A's rows (or depth pairs) and B's depth pairs in its t-th share.
    let a_items = if lhs_t { kp } else { m };
    let tasks =
        if parallel { kp.div_ceil(PAIRS_A_TASK).max(4 * rayon::current_num_threads()).min(a_items) } else { kp.div_ceil(PAIRS_A_TASK) };
    let share = |t: usize, items: usize| (t * items / tasks, (t + 1) * items / tasks);
    let task = |t: usize| {
        let (a0, a1) = share(t, a_items);
        // SAFETY: `a` holds `len` words, room for every block (or row) of A; tasks convert
        // disjoint rows (or depth pairs) of A and disjoint depth pairs of B.
        match stride {
            Some(stride) => {
                for r in a0..a1 {
                    let words = unsafe { std::slice::from_raw_parts_mut((a_at as *mut u32).add(r * stride), kp) };
                    row_pairs(words, &lhs[r * k..(r + 1) * k]);
                }
            }
            None => unsafe { left_blocks(a_at as *mut u32, lhs, m, k, (a0, a1)) },
        }
        if let (Some(at), Some((rhs, n))) = (b_at, b_from) {
            unsafe { right_rows(at as *mut u32, rhs, n, k, share(t, kp)) };
        }
    };
    if tasks > 1 && parallel {
        (0..tasks).into_par_iter().for_each(task);
    } else {
        (0..tasks).for_each(task);
    }
    (a, stride)
}

/// dst[m×n] = op(lhs)[m×k] @ op(rhs)[k×n], row-major (`lhs_t`: lhs stored k×m; `rhs_t`: rhs
/// stored n×k), on `threads` of rayon's threads, each sum rounded to bf16 when `round` (in the
/// tile kernel's registers), then given `epilogue` (its bias and relu, also in the tile's
/// registers). Every one of dst's first m*n values is written.
///
/// The left operand is converted first (`operands`); then each column panel's task converts
/// its panel of the right operand and computes its tiles, so the conversion is spread over the
/// threads without a pass of its own (a pass of rayon tasks costs 20-40 µs on the 2-core VM,
/// more than the conversion it spreads), unless the right operand is stored k×n and larger than
/// a core's L2 (then converted whole first, with the left one) or a panel's tiles are split.
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
    round: bool,
    epilogue: Option<&Epilogue>,
) {
    let (kp, blocks, panels) = (k.div_ceil(2), m.div_ceil(MR), n.div_ceil(NR));
    let parallel = threads > 1;
    let mut b = buffer(panels * kp * NR);
    // Stored k×n and larger than a core's L2 (1 MiB on the Zen 4), the right operand is
    // converted whole first, row by row (`zip_panels`), with the left one: panel by panel, its
    // rows were read 128 bytes at a time from L3 or memory. Smaller ones stay in cache and are
    // converted by each panel's task, where its tiles then find them (a pass of their own cost
    // 90 µs of the 128×512×512 product's 310 µs on 2 threads).
    let whole = !rhs_t && k * n > 1 << 18;
    let b_whole = whole.then(|| (&mut b[..panels * kp * NR], rhs, n));
    let (a, a_rows) = operands(lhs, lhs_t, m, k, b_whole, parallel && (m * k >= 1 << 18 || whole));
    // Row groups per panel: enough tasks to keep every thread busy. With several groups a panel
    // is shared, so the panels are converted in a pass of their own first.
    let groups = if !parallel || panels >= 4 * threads { 1 } else { (4 * threads).div_ceil(panels).min(blocks) };
    let b_panel = |(panel, words): (usize, &mut [u32])| {
        let (c0, cols) = (panel * NR, NR.min(n - panel * NR));
        if rhs_t {
            block_words(words, rhs, k, c0, cols, NR)
        } else {
            zip_rows(words, rhs, n, k, c0, cols, NR)
        }
    };
    let (a_words, out) = (&a, dst as usize);
    // Block `block`'s tile of panel `panel`, whose words are `words`.
    let tile_at = |block: usize, panel: usize, words: &[u32]| {
        let (rows, cols) = (MR.min(m - block * MR), NR.min(n - panel * NR));
        let c = (out as *mut f32).wrapping_add(block * MR * n + panel * NR);
        // SAFETY: a block's words are kp rows of MR (by rows: its rows, kp words each, `stride`
        // apart), a panel's kp rows of NR; the tile writes rows × cols values of dst inside its
        // m×n (the caller's room); tasks write disjoint tiles.
        let finish = finish_of(round, epilogue, n, (block, panel));
        unsafe {
            match a_rows {
                Some(stride) => {
                    tiles.tile_from_rows(rows, (a_words[block * MR * stride..].as_ptr(), stride), words.as_ptr(), kp, (c, n), cols, finish)
                }
                None => tiles.tile(rows, (a_words[block * kp * MR..].as_ptr(), MR), (words.as_ptr(), NR), kp, (c, n), cols, finish),
            }
        };
    };
    let tiles_of = |panel: usize, group: usize, words: &[u32]| {
        for block in group * blocks / groups..(group + 1) * blocks / groups {
            tile_at(block, panel, words);
        }
    };
    let b_panels = &mut b[..panels * kp * NR];
    // A shallow product's time is writing its result: by panels, each task wrote a strip 128
    // bytes wide down every row, a page every two rows at n = 512 (1024×512 by depth 10: 110-155
    // µs in the MLP step against PyTorch's 36). So its few words of B are converted first and
    // each task writes whole rows: its blocks' tiles across every panel.
    let shallow = parallel && kp <= 16 && panels > 1 && blocks > 1;
    // Panels a task takes together where there are enough to go round: each block of A, from
    // L3 when A is larger than a core's L2, then serves two tiles (1024×512×784 on 2 threads
    // 947-1082 → 890-908 µs).
    let per_task = if parallel && panels >= 8 * threads { 2 } else { 1 };
    if shallow {
        if !whole {
            each_chunk(b_panels, kp * NR, false, b_panel);
        }
        let b_panels = &b[..panels * kp * NR];
        let tasks = (4 * threads).min(blocks);
        (0..tasks).into_par_iter().for_each(|t| {
            for block in t * blocks / tasks..(t + 1) * blocks / tasks {
                for panel in 0..panels {
                    tile_at(block, panel, &b_panels[panel * kp * NR..]);
                }
            }
        });
    } else if groups == 1 && whole && parallel {
        // B is converted already, so a pair of panels need not be one task's: the tiles are cut
        // into tasks of equal counts, pair by pair and block by block. By pairs, the weight
        // gradient's 25 panels (n = 784) made 13 tasks, 7 for one thread and 6 for the other.
        let b_panels = &b[..panels * kp * NR];
        balanced_tiles(panels, blocks, per_task, 4 * threads, |block, panel| tile_at(block, panel, &b_panels[panel * kp * NR..]));
    } else if groups == 1 {
        // A task a panel, or two (`per_task`): the task converts its panels (unless B was
        // converted whole) and computes their tiles block by block.
        let task = |(t, words): (usize, &mut [u32])| {
            let first = t * per_task;
            if !whole {
                for (j, w) in words.chunks_mut(kp * NR).enumerate() {
                    b_panel((first + j, w));
                }
            }
            for block in 0..blocks {
                for (j, w) in words.chunks(kp * NR).enumerate() {
                    tile_at(block, first + j, w);
                }
            }
        };
        each_chunk(b_panels, per_task * kp * NR, parallel, task);
    } else {
        // Several row groups a panel: the panels converted first, then a task a group.
        if !whole {
            each_chunk(b_panels, kp * NR, true, b_panel);
        }
        let b_panels = &b[..panels * kp * NR];
        let task = |t: usize| tiles_of(t / groups, t % groups, &b_panels[t / groups * kp * NR..]);
        (0..panels * groups).into_par_iter().for_each(task);
    }
    recycle(b);
    recycle(a);
}

/// What the tile of `block` and `panel` of an m×n result does before it stores its sums: the
/// rounding, and the epilogue's bias from the panel's first column or mask from the tile's
/// first value.
fn finish_of(round: bool, epilogue: Option<&Epilogue>, n: usize, (block, panel): (usize, usize)) -> Finish {
    Finish {
        round,
        bias: epilogue.and_then(|e| e.bias.map(|b| (b[panel * NR..].as_ptr(), e.relu))),
        mask: epilogue.and_then(|e| e.mask.map(|y| y[block * MR * n + panel * NR..].as_ptr())),
    }
}

/// `tile(block, panel)` for every tile, in `tasks` tasks on rayon's threads of as equal a count
/// of tiles as can be: the tiles in order of panel groups (`per` panels a group), then blocks,
/// then the group's panels, so that each block of A serves the group's tiles at once; task t
/// takes the units (a block's tiles of a group) whose first tile falls in its share.
fn balanced_tiles(panels: usize, blocks: usize, per: usize, tasks: usize, tile: impl Fn(usize, usize) + Sync) {
    let total = panels * blocks;
    let tasks = tasks.clamp(1, total);
    (0..tasks).into_par_iter().for_each(|t| {
        let (lo, hi) = (t * total / tasks, (t + 1) * total / tasks);
        let mut at = 0;
        for first in (0..panels).step_by(per) {
            let width = per.min(panels - first);
            let span = width * blocks;
            if at < hi && lo < at + span {
                // Blocks whose first tile, at + block * width, lies in lo..hi.
                let (b0, b1) = (lo.saturating_sub(at).div_ceil(width), (hi - at).div_ceil(width).min(blocks));
                for block in b0..b1 {
                    for panel in first..first + width {
                        tile(block, panel);
                    }
                }
            }
            at += span;
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
        // (20, 400, 40) has a panel a task on three threads; (20, 400, 9) and (128, 70, 7) are
        // shallow (tasks by rows across every panel); the others several tasks a panel;
        // (14, 300, 1001)'s right operand stored k×n is past `whole`'s size (converted in one
        // pass down its rows, by chunks of depth pairs on three threads), with a partial panel
        // and an odd depth.
        for (m, n, k) in [
            (37, 29, 53),
            (1, 1, 1),
            (12, 32, 2),
            (25, 65, 130),
            (128, 70, 7),
            (5, 3, 67),
            (20, 400, 9),
            (20, 400, 40),
            (13, 40, 600),
            (14, 300, 1001),
        ] {
            let a: Vec<f32> = (0..m * k).map(|i| bf(((i * 7) % 13) as f32 * 0.3 - 1.7)).collect();
            let b: Vec<f32> = (0..k * n).map(|i| bf(((i * 5) % 11) as f32 * 0.7 - 2.1)).collect();
            let at: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
            let bt: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
            for threads in [1, 3] {
                for (lhs, lt, rhs, rt) in [(&a, false, &b, false), (&at, true, &b, false), (&a, false, &bt, true), (&at, true, &bt, true)] {
                    let (mut out, mut rounded) = (vec![f32::NAN; m * n], vec![f32::NAN; m * n]);
                    // SAFETY: the buffers hold m*k, k*n and m*n values.
                    unsafe { run(tiles, m, n, k, lhs, lt, rhs, rt, out.as_mut_ptr(), threads, false, None) };
                    unsafe { run(tiles, m, n, k, lhs, lt, rhs, rt, rounded.as_mut_ptr(), threads, true, None) };
                    // The same sums, rounded to bf16 in the tiles' registers.
                    assert!(out.iter().zip(&rounded).all(|(x, r)| round_bf16(*x).to_bits() == r.to_bits()), "{m}x{n}x{k}: rounded");
                    // With a bias and relu, and with a relu's backward mask (read with the
                    // result's stride), applied in the tiles' registers: the bits of the pass
                    // over the rounded result.
                    let bias: Vec<f32> = (0..n).map(|j| j as f32 * 0.5 - 3.0).collect();
                    let y: Vec<f32> = (0..m * n).map(|i| ((i * 7) % 5) as f32 - 2.0).collect();
                    for e in [Epilogue { bias: Some(&bias), relu: true, mask: None }, Epilogue { bias: None, relu: false, mask: Some(&y) }]
                    {
                        let mut given = vec![f32::NAN; m * n];
                        unsafe { run(tiles, m, n, k, lhs, lt, rhs, rt, given.as_mut_ptr(), threads, true, Some(&e)) };
                        let mut want = rounded.clone();
                        e.rows(&mut want);
                        assert!(given.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits()), "{m}x{n}x{k}: {e:?}");
                    }
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

    /// Every tile exactly once, whatever the counts of panels, blocks and tasks.
    #[test]
    fn balanced_tiles_cover_every_tile_once() {
        for (panels, blocks, per, tasks) in [(25, 43, 2, 8), (16, 86, 2, 8), (1, 1, 2, 8), (3, 2, 2, 16), (7, 5, 1, 3)] {
            let seen: Vec<std::sync::atomic::AtomicUsize> = (0..panels * blocks).map(|_| Default::default()).collect();
            balanced_tiles(panels, blocks, per, tasks, |block, panel| {
                seen[panel * blocks + block].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            });
            assert!(seen.iter().all(|s| s.load(std::sync::atomic::Ordering::Relaxed) == 1), "{panels}x{blocks} by {per}");
        }
    }

    /// A product's time on one thread and on all, conversions included, the MLP's shapes (run
    /// with `cargo test --release -p dlc --lib bf16_product -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn time_the_products() {
        let Some(tiles) = tiles() else { return };
        for (m, n, k, lt, rt) in [
            (128, 512, 784, false, true),
            (128, 512, 512, false, true),
            (128, 512, 512, false, false),
            (512, 784, 128, true, false),
            (1024, 512, 784, false, true),
            (512, 784, 1024, true, false),
            (1024, 512, 512, false, true),
            (1024, 512, 512, false, false),
            (512, 512, 1024, true, false),
            (1024, 512, 10, false, false),
        ] {
            let lhs = vec![0.5f32; m * k];
            let rhs = vec![0.25f32; k * n];
            let mut out = vec![0f32; m * n];
            let kp = k.div_ceil(2);
            let mut words = vec![0u32; n.div_ceil(NR) * kp * NR];
            let time = |f: &mut dyn FnMut()| {
                let t0 = std::time::Instant::now();
                for _ in 0..20 {
                    f();
                }
                t0.elapsed().as_secs_f64() * 1e6 / 20.0
            };
            let parts = [
                time(&mut || recycle(operands(&lhs, lt, m, k, None, false).0)),
                time(&mut || {
                    if !rt && k * n > 1 << 18 {
                        // SAFETY: `words` has room for every panel.
                        return unsafe { right_rows(words.as_mut_ptr(), &rhs, n, k, (0, kp)) };
                    }
                    if !rt {
                        return words
                            .chunks_mut(kp * NR)
                            .enumerate()
                            .for_each(|(i, w)| zip_rows(w, &rhs, n, k, i * NR, NR.min(n - i * NR), NR));
                    }
                    for (i, w) in words.chunks_mut(kp * NR).enumerate() {
                        block_words(w, &rhs, k, i * NR, NR.min(n - i * NR), NR);
                    }
                }),
            ];
            eprintln!("{m}x{n}x{k} {lt} {rt}: converting A {:.0} us, B {:.0} us on one thread", parts[0], parts[1]);
            for threads in [1, rayon::current_num_threads()] {
                let us = (0..50)
                    .map(|_| {
                        let t = std::time::Instant::now();
                        // SAFETY: the buffers hold m*k, k*n and m*n values.
                        unsafe { run(tiles, m, n, k, &lhs, lt, &rhs, rt, out.as_mut_ptr(), threads, true, None) };
                        t.elapsed().as_secs_f64() * 1e6
                    })
                    .fold(f64::MAX, f64::min);
                eprintln!("{m}x{n}x{k} {lt} {rt}, {threads} threads: {us:.0} us ({:.1} GMAC/s)", (m * n * k) as f64 / us / 1e3);
            }
        }
    }
}
