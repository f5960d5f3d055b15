//! Sums over any set of axes, accumulated in f64, of an f32 tensor or of values a fused region
//! computes as they are summed (the reduction kernels of `passes::prologue`).
//!
//! The axes are merged into runs of kept or reduced dims, and the input is visited in memory
//! order: the innermost run is folded into one accumulator (reduced) or added into a row of them
//! (kept). Each output therefore sums its inputs in memory order, a reduced run by 32 lanes
//! (`Lanes`), so the result depends on the shape alone: not on the thread count, and not on
//! whether the values were read from a tensor or computed on the fly.
//!
//! Threads split the work over the outermost kept axis: each task owns a contiguous block of
//! outputs and visits their inputs in the order the one-thread loop would.
//!
//! A sum over every axis but a short last one (a bias gradient's sum over the batch, batch
//! norm's statistics of a channels-last tensor) is a column sum, taken otherwise
//! (`sum_columns`): whole rows read at a time, the rows cut into parts of a fixed number of rows,
//! each part summed by columns in row order and the parts added in order. That order too
//! depends on the shape alone.
//!
//! A region can have several of its outputs summed over the same axes in the same pass (sibling
//! reductions, such as batch norm's gradient sums, which read the same activations): each is
//! summed exactly as it would be alone.

use super::elementwise::as_uninit;
use super::fused::{Program, Registers, CHUNK};
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Where the values being summed come from.
pub enum Values<'a> {
    Tensor(&'a [f32]),
    /// One output of a fused region, computed from the region's inputs.
    Region(RegionValues<'a>),
}

pub struct RegionValues<'a> {
    pub program: &'a Program,
    pub inputs: Vec<&'a [f32]>,
    /// Which of the program's outputs are summed, each into sums of its own (distinct).
    pub summed: Vec<usize>,
    /// Where each other output goes (in output order, the summed ones skipped): buffers of the
    /// region's size, each element written once, as the summed values are computed.
    pub written: Vec<Unwritten>,
    /// Tensors of the region's size summed in the same pass (their sums after the outputs').
    pub also: Vec<&'a [f32]>,
}

/// The start of an output buffer that tasks fill in disjoint ranges.
#[derive(Clone, Copy)]
pub struct Unwritten(pub *mut MaybeUninit<f32>);
// SAFETY: tasks write disjoint element ranges (each input position is visited once), and the
// buffer outlives the sum (the caller owns it and sets its length after).
unsafe impl Send for Unwritten {}
unsafe impl Sync for Unwritten {}

impl Values<'_> {
    /// How many sets of sums the values make.
    fn count(&self) -> usize {
        match self {
            Values::Tensor(_) => 1,
            Values::Region(r) => r.summed.len() + r.also.len(),
        }
    }
}

/// One task's window on the values: a tensor is read in place, a region computed into
/// chunk-sized buffers, one for each summed output (`len` at most `CHUNK`).
struct Reader<'v, 'a> {
    values: &'v Values<'a>,
    bufs: Vec<Vec<f32>>,
    regs: Option<Registers>,
}

impl<'v, 'a> Reader<'v, 'a> {
    fn new(values: &'v Values<'a>) -> Self {
        match values {
            Values::Tensor(_) => Reader { values, bufs: vec![], regs: None },
            Values::Region(r) => Reader { values, bufs: vec![vec![0.0; CHUNK]; r.summed.len()], regs: Some(r.program.registers(CHUNK)) },
        }
    }

    /// `each(j, values)` with the values at `start .. start + len` of the j-th summed output.
    fn get(&mut self, start: usize, len: usize, mut each: impl FnMut(usize, &[f32])) {
        match self.values {
            Values::Tensor(x) => each(0, &x[start..start + len]),
            Values::Region(r) => {
                let mut others = r.written.iter();
                let outputs = r.written.len() + r.summed.len();
                let mut dsts: Vec<&mut [MaybeUninit<f32>]> = Vec::with_capacity(outputs);
                let mut sums: Vec<Option<&mut [MaybeUninit<f32>]>> = self.bufs.iter_mut().map(|b| Some(as_uninit(&mut b[..len]))).collect();
                for o in 0..outputs {
                    if let Some(j) = r.summed.iter().position(|s| *s == o) {
                        dsts.push(sums[j].take().expect("each summed output once"));
                    } else {
                        let out = others.next().expect("a buffer per other output");
                        // SAFETY: elements `start .. start + len` of this buffer are this
                        // call's alone (see `Unwritten`), and within its size.
                        dsts.push(unsafe { std::slice::from_raw_parts_mut(out.0.add(start), len) });
                    }
                }
                let regs = self.regs.as_mut().expect("a region's reader has registers");
                r.program.chunk(&r.inputs, start, &mut dsts, regs, r.program.native_now());
                for (j, b) in self.bufs.iter().enumerate() {
                    each(j, &b[..len]);
                }
                for (j, t) in r.also.iter().enumerate() {
                    each(r.summed.len() + j, &t[start..start + len]);
                }
            }
        }
    }
}

/// `LANES` running f64 sums, element i of the run going to sum i % `LANES`, added pairwise at the
/// end. The chains are independent, so the loop vectorises and is not bound by the latency of
/// one chain of additions (32 lanes are four AVX-512 accumulators: eight, one accumulator, ran
/// at one vector addition's latency, 6% of the conv-BN step); the order is fixed. A run can be
/// added in pieces whose lengths (all but the last) are multiples of `LANES`: the result is the
/// same as for the whole run at once.
#[derive(Clone)]
pub(super) struct Lanes {
    lanes: [f64; LANES],
}

const LANES: usize = 32;

impl Default for Lanes {
    fn default() -> Self {
        Lanes { lanes: [0.0; LANES] }
    }
}

crate::runtime::cpu::widest! {
    /// `lanes[i % LANES] += run[i]` in f64, in order.
    fn add_to_lanes(lanes: &mut [f64; LANES], run: &[f32]) {
        let mut blocks = run.chunks_exact(LANES);
        for b in &mut blocks {
            for (l, v) in lanes.iter_mut().zip(b) {
                *l += *v as f64;
            }
        }
        for (l, v) in lanes.iter_mut().zip(blocks.remainder()) {
            *l += *v as f64;
        }
    }
}

impl Lanes {
    pub(super) fn add(&mut self, run: &[f32]) {
        add_to_lanes(&mut self.lanes, run);
    }

    /// The lanes added as a balanced tree (`tree_total`).
    pub(super) fn total(&self) -> f64 {
        tree_total(&mut self.lanes.clone())
    }
}

/// The f64 sum of a contiguous run, by `Lanes` (a short one by `short_total`, the same sum).
pub(super) fn sum_run(run: &[f32]) -> f64 {
    if run.len() <= LANES / 2 {
        return short_total(run);
    }
    let mut l = Lanes::default();
    l.add(run);
    l.total()
}

/// `Lanes`' total of a run of at most `LANES / 2` values, without its 32 lanes and its call to
/// the widest vectors: cross-entropy's rows of ten classes were summed at 15 ns a row, a third
/// of the loss's row kernel. Lane i holds `0.0 + run[i]`, never -0.0, so the tree's first level
/// (adding the empty upper half's zeros) changes nothing and is skipped; the rest is the tree.
#[inline]
fn short_total(run: &[f32]) -> f64 {
    let mut l = [0f64; LANES / 2];
    for (l, v) in l.iter_mut().zip(run) {
        *l += *v as f64;
    }
    tree_total(&mut l)
}

/// Lanes (a power of two of them) added as a balanced tree: lane i with lane i + half, halving
/// down to one.
#[inline]
fn tree_total(l: &mut [f64]) -> f64 {
    let mut half = l.len() / 2;
    while half > 0 {
        for i in 0..half {
            l[i] += l[i + half];
        }
        half /= 2;
    }
    l[0]
}

/// Inputs below this size are summed on the calling thread.
const PARALLEL_FROM: usize = 1 << 16;

/// The sums over `axes` of the values of shape `shape` (row-major), one per kept position.
pub fn sum_axes(values: &Values, shape: &[usize], axes: &[usize]) -> Vec<f64> {
    sum_axes_many(values, shape, axes).swap_remove(0)
}

/// `sum_axes` of each set of values (a region's summed outputs, in `summed` order), in one pass.
pub fn sum_axes_many(values: &Values, shape: &[usize], axes: &[usize]) -> Vec<Vec<f64>> {
    // Merged dims (size, reduced), outermost first; size-1 dims dropped.
    let mut dims: Vec<(usize, bool)> = vec![];
    for (d, &n) in shape.iter().enumerate() {
        if n == 1 {
            continue;
        }
        let r = axes.contains(&d);
        match dims.last_mut() {
            Some((pn, pr)) if *pr == r => *pn *= n,
            _ => dims.push((n, r)),
        }
    }
    let total: usize = shape.iter().product();
    let out_len: usize = dims.iter().filter(|d| !d.1).map(|d| d.0).product();
    let mut accs = vec![vec![0f64; out_len]; values.count()];
    if total == 0 {
        return accs;
    }
    if dims.is_empty() {
        Reader::new(values).get(0, 1, |j, v| accs[j][0] = v[0] as f64);
        return accs;
    }
    if let [(rows, true), (cols, false)] = dims[..] {
        if cols <= CHUNK {
            sum_columns(values, rows, cols, &mut accs);
            return accs;
        }
    }
    let mut in_stride = vec![0usize; dims.len()];
    let mut out_stride = vec![0usize; dims.len()];
    let (mut si, mut so) = (1, 1);
    for d in (0..dims.len()).rev() {
        in_stride[d] = si;
        si *= dims[d].0;
        if !dims[d].1 {
            out_stride[d] = so;
            so *= dims[d].0;
        }
    }
    let walk = Walk { dims: &dims, in_stride: &in_stride, out_stride: &out_stride };
    // Split over the outermost kept dim: its index is the most significant digit of an output's
    // position, so a range of it owns a contiguous block of outputs.
    let split = dims.iter().position(|d| !d.1);
    let threads = rayon::current_num_threads();
    match split {
        Some(k) if total >= PARALLEL_FROM && threads > 1 && dims[k].0 > 1 => {
            let per = dims[k].0.div_ceil(4 * threads).max(1);
            let block = per * out_stride[k];
            // Each task's block of every set of sums.
            let mut tasks: Vec<Vec<&mut [f64]>> = (0..out_len.div_ceil(block)).map(|_| Vec::with_capacity(accs.len())).collect();
            for acc in accs.iter_mut() {
                for (task, b) in tasks.iter_mut().zip(acc.chunks_mut(block)) {
                    task.push(b);
                }
            }
            tasks.into_par_iter().enumerate().for_each_init(
                || Reader::new(values),
                |reader, (t, mut blocks)| {
                    let lo = t * per;
                    walk.run(reader, Some((k, lo, (lo + per).min(dims[k].0))), &mut blocks, lo * out_stride[k]);
                },
            );
        }
        _ => {
            let mut all: Vec<&mut [f64]> = accs.iter_mut().map(|a| a.as_mut_slice()).collect();
            walk.run(&mut Reader::new(values), None, &mut all, 0)
        }
    }
    accs
}

/// Values a part of a column sum covers at least, and how many parts a sum has at most.
const PART_VALUES: usize = 1 << 14;
const MAX_PARTS: usize = 256;

/// `acc[c] += rows[r][c]` in f64 for each row of `rows` (whole rows of `acc.len()` values, one
/// or many), in row order: a call a block of rows, where one a row (65,536 rows of 32 for a
/// channels-last batch norm statistic) spent more in the calls than in the additions. Short rows
/// are added in sums held in registers across the rows (an array of the row's fixed length).
fn add_rows(acc: &mut [f64], rows: &[f32]) {
    match acc.len() {
        8 => add_rows_8(acc, rows),
        16 => add_rows_16(acc, rows),
        32 => add_rows_32(acc, rows),
        64 => add_rows_64(acc, rows),
        _ => add_rows_any(acc, rows),
    }
}

crate::runtime::cpu::widest! {
    fn add_rows_any(acc: &mut [f64], rows: &[f32]) {
        for row in rows.chunks_exact(acc.len()) {
            for (a, v) in acc.iter_mut().zip(row) {
                *a += *v as f64;
            }
        }
    }
}

/// `add_rows` for rows of `$n`, the sums in an array (registers) across the rows.
macro_rules! add_rows_of {
    ($name:ident, $n:literal) => {
        crate::runtime::cpu::widest! {
            fn $name(acc: &mut [f64], rows: &[f32]) {
                let mut sums = [0f64; $n];
                sums.copy_from_slice(acc);
                for row in rows.chunks_exact($n) {
                    for (a, v) in sums.iter_mut().zip(row) {
                        *a += *v as f64;
                    }
                }
                acc.copy_from_slice(&sums);
            }
        }
    };
}
add_rows_of!(add_rows_8, 8);
add_rows_of!(add_rows_16, 16);
add_rows_of!(add_rows_32, 32);
add_rows_of!(add_rows_64, 64);

/// The column sums of `rows` × `cols` values (`cols` at most `CHUNK`) into `accs` (zeros, one
/// set of `cols` sums per set of values): parts of `PART_VALUES / cols` rows or more, each summed by
/// columns in row order from whole rows read a chunk at a time, on all threads; then the parts'
/// sums added in part order. (The general walk splits such a sum by blocks of columns, and then
/// reads a few values of each row a call: batch norm's statistics over a channels-last
/// `[64, 32, 32, 32]` took 30 ms a sum that way.)
fn sum_columns(values: &Values, rows: usize, cols: usize, accs: &mut [Vec<f64>]) {
    // At most MAX_PARTS parts, so that their sums stay small beside the values (2 MiB a set of
    // sums at 1024 columns).
    let per_part = (PART_VALUES / cols).max(rows.div_ceil(MAX_PARTS)).max(1);
    let rows_a_read = CHUNK / cols;
    let part = |reader: &mut Reader, p: usize| -> Vec<Vec<f64>> {
        let mut sums = vec![vec![0f64; cols]; accs.len()];
        let end = ((p + 1) * per_part).min(rows);
        for r in (p * per_part..end).step_by(rows_a_read) {
            let n = rows_a_read.min(end - r);
            reader.get(r * cols, n * cols, |j, v| add_rows(&mut sums[j], v));
        }
        sums
    };
    let parts = 0..rows.div_ceil(per_part);
    let sums: Vec<Vec<Vec<f64>>> = if rows * cols >= PARALLEL_FROM && rayon::current_num_threads() > 1 {
        parts.into_par_iter().map_init(|| Reader::new(values), part).collect()
    } else {
        let mut reader = Reader::new(values);
        parts.map(|p| part(&mut reader, p)).collect()
    };
    for part in sums {
        for (acc, s) in accs.iter_mut().zip(part) {
            add_sums(acc, &s);
        }
    }
}

/// `acc[c] += s[c]`.
fn add_sums(acc: &mut [f64], s: &[f64]) {
    for (a, v) in acc.iter_mut().zip(s) {
        *a += *v;
    }
}

/// The loop over merged dims.
struct Walk<'d> {
    dims: &'d [(usize, bool)],
    in_stride: &'d [usize],
    out_stride: &'d [usize],
}

impl Walk<'_> {
    /// Add the inputs of the outputs in `accs` (one block of outputs for each set of sums, each
    /// starting at output `acc_base`) into them, with dim `split.0` limited to
    /// `split.1 .. split.2` when given.
    fn run(&self, reader: &mut Reader, split: Option<(usize, usize, usize)>, accs: &mut [&mut [f64]], acc_base: usize) {
        let last = self.dims.len() - 1;
        let range = |d: usize| match split {
            Some((k, lo, hi)) if k == d => (lo, hi),
            _ => (0, self.dims[d].0),
        };
        let mut idx: Vec<usize> = (0..last).map(|d| range(d).0).collect();
        let (run, reduced) = self.dims[last];
        let (c0, c1) = range(last);
        let mut lanes = vec![Lanes::default(); accs.len()];
        loop {
            let in_off: usize = idx.iter().zip(self.in_stride).map(|(i, s)| i * s).sum();
            // (Outputs before `acc_base` are another task's: positions are taken relative to it.)
            let out_pos: usize = idx.iter().zip(self.out_stride).map(|(i, s)| i * s).sum();
            if reduced {
                lanes.iter_mut().for_each(|l| *l = Lanes::default());
                for p in (0..run).step_by(CHUNK) {
                    reader.get(in_off + p, CHUNK.min(run - p), |j, v| lanes[j].add(v));
                }
                for (acc, l) in accs.iter_mut().zip(&lanes) {
                    acc[out_pos - acc_base] += l.total();
                }
            } else {
                for p in (c0..c1).step_by(CHUNK) {
                    let n = CHUNK.min(c1 - p);
                    reader.get(in_off + p, n, |j, v| add_rows(&mut accs[j][out_pos + p - acc_base..][..n], v));
                }
            }
            // Next position of the outer dims, innermost first.
            let mut d = last;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < range(d).1 {
                    break;
                }
                idx[d] = range(d).0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `short_total` against `Lanes` for every short length, with signed zeros, NaN, infinities
    /// and values of every magnitude: the same bits.
    #[test]
    fn short_runs_sum_to_the_bits_of_lanes() {
        let values = [-0.0f32, 0.0, 1.5, -2.25, f32::MAX, f32::MIN_POSITIVE, 1e-40, -7e30, f32::INFINITY, 3.0e-8, -0.0, 12345.678];
        for len in 0..=LANES / 2 {
            for shift in 0..values.len() {
                let mut run: Vec<f32> = (0..len).map(|i| values[(i * 5 + shift) % values.len()]).collect();
                if shift == 3 && len > 2 {
                    run[len / 2] = f32::NAN;
                }
                let mut l = Lanes::default();
                l.add(&run);
                assert_eq!(short_total(&run).to_bits(), l.total().to_bits(), "{run:?}");
            }
            let zeros = vec![-0.0f32; len];
            let mut l = Lanes::default();
            l.add(&zeros);
            assert_eq!(short_total(&zeros).to_bits(), l.total().to_bits(), "{len} negative zeros");
        }
    }

    /// The definition: permute the reduced axes innermost and add each group in index order
    /// (exact in f64 for these small integers-over-8 values, whatever the order).
    fn by_definition(x: &[f32], shape: &[usize], axes: &[usize]) -> Vec<f64> {
        let keep: Vec<usize> = (0..shape.len()).filter(|a| !axes.contains(a)).collect();
        let out_len: usize = keep.iter().map(|a| shape[*a]).product();
        let mut out = vec![0f64; out_len];
        for (i, v) in x.iter().enumerate() {
            let mut rem = i;
            let mut pos = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                pos[d] = rem % shape[d];
                rem /= shape[d];
            }
            let o = keep.iter().fold(0, |o, a| o * shape[*a] + pos[*a]);
            out[o] += *v as f64;
        }
        out
    }

    #[test]
    fn sums_match_the_definition_on_one_thread_and_many() {
        let cases: Vec<(Vec<usize>, Vec<usize>)> = vec![
            (vec![64, 32, 9, 9], vec![0, 2, 3]),
            (vec![300, 257], vec![0]),
            (vec![300, 257], vec![1]),
            (vec![7, 1, 5, 3000], vec![0, 3]),
            (vec![1, 1], vec![0, 1]),
            (vec![5, 70000], vec![0, 1]),
            (vec![40, 3, 600], vec![1]),
            (vec![2, 3, 4, 5], vec![]),
            // Column sums (`sum_columns`): channels-last statistics, a bias gradient, three rows.
            (vec![64, 16, 16, 32], vec![0, 1, 2]),
            (vec![1024, 10], vec![0]),
            (vec![3, 1024], vec![0]),
            // A column (its size-1 dim dropped: one reduced run, not a column sum).
            (vec![70000, 1], vec![0]),
            // More rows than MAX_PARTS parts of PART_VALUES: parts made longer.
            (vec![4200, 1024], vec![0]),
        ];
        // Mixtures of kept and reduced axes around a size-1 dim.
        let cases = cases.into_iter().chain(
            [vec![0], vec![1], vec![4], vec![0, 2, 3], vec![1, 3], vec![0, 1, 2, 3, 4], vec![2], vec![0, 4]]
                .into_iter()
                .map(|axes| (vec![3, 4, 1, 5, 2], axes)),
        );
        for (shape, axes) in cases {
            let n: usize = shape.iter().product();
            let x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 17) as f32 / 8.0 - 1.0).collect();
            let want = by_definition(&x, &shape, &axes);
            let many = sum_axes(&Values::Tensor(&x), &shape, &axes);
            let one =
                rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(|| sum_axes(&Values::Tensor(&x), &shape, &axes));
            assert_eq!(many, want, "{shape:?} over {axes:?}");
            assert_eq!(one, many, "{shape:?} over {axes:?}: one thread");
        }
    }

    #[test]
    fn a_run_summed_in_pieces_equals_the_run_at_once() {
        let x: Vec<f32> = (0..5000).map(|i| (i as f32 * 0.37).sin() * 1e3).collect();
        let mut l = Lanes::default();
        for piece in x.chunks(1024) {
            l.add(piece);
        }
        assert_eq!(l.total().to_bits(), sum_run(&x).to_bits());
    }
}
