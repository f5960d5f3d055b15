//! A row group (`dlc_language::passes::rows`) run as one kernel: the rows are split over the
//! cores, and each row goes through the group's items in order, every value the group computes
//! held in a buffer the size of one row (or one value per row). Only the group's outputs are
//! written at full size. Each region runs its fused program on the row (`Program::for_rows`) and
//! each reduction folds the row exactly as `reduce` does, so results equal the eager
//! interpreter's bit for bit.
//!
//! Short rows (a rank-2 group whose rows hold at most `BLOCK_VALUES / 2` values) run a block
//! of rows at a time instead: each region over the block (`Program::for_blocks`), each reduction
//! row by row inside it. A call per row and region cost 0.5 µs: 0.5 ms a step for
//! cross-entropy's 1024 rows of ten classes, whose work is some 20 µs.

use super::elementwise::{as_uninit, write_all};
use super::fused::{as_f32, concrete, output_tensor, KernelCache, Registers, RowProgram};
use super::reduce::{row_max, row_sum};
use crate::runtime::tensor::Tensor;
use crate::runtime::RuntimeError;
use dlc_language::ir::{Graph, NodeId, Op, ReduceOp};
use dlc_language::passes::rows::{RowGroup, RowItem};
use rayon::prelude::*;
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::Arc;
// Where a step reads: a slot of the group, or input `k` (read at the row's start through its
// strides over the leading dims).
use dlc_language::ir::plan::RowRead as Source;

enum Step {
    Region {
        rows: Arc<RowProgram>,
        /// Per input of the row program: where it comes from, and (for a group input) its
        /// strides over the leading dims.
        reads: Vec<(Source, Vec<usize>)>,
        /// The slot of each output.
        writes: Vec<usize>,
    },
    Reduce {
        max: bool,
        from: Source,
        to: usize,
    },
}

fn native_rows_allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| std::env::var("DLC_NATIVE_ROWS").map(|v| v != "0").unwrap_or(true))
}

/// Rows per task: enough that a task's rows hold some 4K values (a row group's steps cost some
/// 5 ns a value: cross-entropy's 1024 rows of ten classes ran as one task, 66 µs on one core,
/// with 16K a task).
fn rows_per_task(len: usize) -> usize {
    (4_096 / len.max(1)).max(1)
}

/// Values a block of short rows holds at most (see the module's comment).
const BLOCK_VALUES: usize = 4096;

/// Rows each step runs at once: a block of short rows of a rank-2 group, else one. (A group
/// with several leading dims runs row by row: a block would cross their boundaries, where
/// an input broadcast over one of them does not advance by one stride a row.)
fn rows_per_block(rg: &RowGroup) -> usize {
    if rg.lead.len() == 1 {
        (BLOCK_VALUES / rg.len.max(1)).max(1)
    } else {
        1
    }
}

/// Run the group on its inputs (in `RowGroup::inputs` order); one tensor per group output.
pub fn run(cache: &KernelCache, g: &Graph, rg: &RowGroup, inputs: &[Tensor]) -> Result<Vec<Tensor>, RuntimeError> {
    let started = std::time::Instant::now();
    // Native code for the regions: under `--jit`, or measured against the interpreter for
    // groups of `AUTOTUNE_MIN` elements or more (one choice for the whole group, see `Tune`).
    // (`DLC_NATIVE_ROWS=0` keeps row kernels interpreted, to compare.)
    let measured = !cache.jit && cache.autotune && rg.rows() * rg.len >= super::fused::AUTOTUNE_MIN && native_rows_allowed();
    let want_native = cache.jit || measured;
    let block = rows_per_block(rg);
    let (steps, slots, slot_of) = schedule(cache, g, rg, block, want_native)?;
    let row_len = |n: NodeId| -> usize { g.node(n).shape.get(rg.lead.len()).and_then(|d| d.as_known()).unwrap_or(1) as usize };
    let compiled: Vec<&super::fused::Program> =
        steps.iter().filter_map(|s| if let Step::Region { rows, .. } = s { rows.program.native_ref() } else { None }).collect();
    let tune = (measured && !compiled.is_empty()).then(|| {
        let text: String = compiled.iter().map(|p| p.native_text()).collect();
        let group = (rg.members(), rg.inputs.clone(), rg.outputs.clone());
        cache.row_tune(group, &text, rg.rows() * rg.len)
    });
    let native = !compiled.is_empty() && (cache.jit || tune.as_ref().is_some_and(|t| t.0.native_now()));
    let ins: Vec<Arc<Vec<f32>>> = inputs.iter().map(as_f32).collect();
    let rows = rg.rows();
    let outs: Vec<(usize, usize)> = rg.outputs.iter().map(|o| (slot_of[o], row_len(*o))).collect();
    // Outputs are written row by row by the tasks, every element once.
    let mut bufs: Vec<Vec<f32>> = outs.iter().map(|(_, l)| Vec::with_capacity(rows * l)).collect();
    let per_task = rows_per_task(rg.len);
    // Each task: a block of rows and its part of every output.
    type Part<'a> = &'a mut [MaybeUninit<f32>];
    let mut tasks: Vec<(usize, Vec<Part>)> = vec![];
    let mut parts: Vec<std::slice::ChunksMut<MaybeUninit<f32>>> =
        bufs.iter_mut().zip(&outs).map(|(b, (_, l))| b.spare_capacity_mut()[..rows * l].chunks_mut(per_task * l.max(&1))).collect();
    for first in (0..rows).step_by(per_task) {
        tasks.push((first, parts.iter_mut().map(|p| p.next().expect("a part per task")).collect()));
    }
    let work = |(first, mut dsts): (usize, Vec<Part>)| {
        let mut state: Vec<Vec<f32>> = slots.iter().map(|l| vec![0f32; *l * block]).collect();
        let mut regs: Vec<Option<Registers>> = steps
            .iter()
            .map(|s| match s {
                Step::Region { rows, writes, .. } => Some(rows.program.registers(slots[writes[0]] * block)),
                Step::Reduce { .. } => None,
            })
            .collect();
        let last = (first + per_task).min(rows);
        for r in (first..last).step_by(block) {
            let count = block.min(last - r);
            run_rows(&steps, &mut regs, &mut state, (&ins, &slots), rg, (r, count), native);
            for ((slot, l), dst) in outs.iter().zip(dsts.iter_mut()) {
                write_all(&mut dst[(r - first) * l..(r - first + count) * l], &state[*slot][..count * l]);
            }
        }
    };
    if rows > per_task {
        tasks.into_par_iter().for_each(work);
    } else {
        tasks.into_iter().for_each(work);
    }
    for (b, (_, l)) in bufs.iter_mut().zip(&outs) {
        // SAFETY: the tasks wrote every row of every output.
        unsafe { b.set_len(rows * l) };
    }
    if let Some(t) = &tune {
        t.0.record(native, started.elapsed().as_nanos() as u64);
    }
    Ok(rg.outputs.iter().zip(bufs).map(|(o, v)| output_tensor(g.node(*o).dtype, concrete(g, *o), v)).collect())
}

/// A row group's steps, the length of each slot, and the slot of each value computed.
type Scheduled = (Vec<Step>, Vec<usize>, HashMap<NodeId, usize>);

/// The group's items as steps over slots (a row-sized buffer per value the group computes;
/// detaches read their source's): each region's row program with where it reads and writes,
/// and each reduction.
fn schedule(cache: &KernelCache, g: &Graph, rg: &RowGroup, block: usize, want_native: bool) -> Result<Scheduled, RuntimeError> {
    let rank = rg.lead.len() + 1;
    let row_len = |n: NodeId| -> usize { g.node(n).shape.get(rank - 1).and_then(|d| d.as_known()).unwrap_or(1) as usize };
    let mut slots: Vec<usize> = vec![];
    let mut slot_of: HashMap<NodeId, usize> = HashMap::new();
    let new_slot = |n: NodeId, slots: &mut Vec<usize>, slot_of: &mut HashMap<NodeId, usize>| -> usize {
        slot_of.insert(n, slots.len());
        slots.push(row_len(n));
        slots.len() - 1
    };
    let source = |n: NodeId, slot_of: &HashMap<NodeId, usize>| -> Result<Source, RuntimeError> {
        rg.read(n, slot_of).ok_or_else(|| RuntimeError::Unsupported(format!("row group: {n:?} is neither computed nor read")))
    };
    let mut steps = vec![];
    for item in &rg.items {
        match item {
            RowItem::Region(r) => {
                let rows = cache.row_program(g, r, block, want_native)?;
                let reads = rows
                    .views
                    .iter()
                    .map(|(k, outer)| Ok((source(r.inputs[*k], &slot_of)?, outer.clone())))
                    .collect::<Result<Vec<_>, RuntimeError>>()?;
                let writes = r.outputs.iter().map(|o| new_slot(*o, &mut slots, &mut slot_of)).collect();
                steps.push(Step::Region { rows, reads, writes });
            }
            RowItem::Reduce(n) => {
                let max = matches!(g.node(*n).op, Op::Reduce(ReduceOp::Max, _));
                let from = source(g.node(*n).src[0], &slot_of)?;
                let to = new_slot(*n, &mut slots, &mut slot_of);
                steps.push(Step::Reduce { max, from, to });
            }
        }
    }
    Ok((steps, slots, slot_of))
}

/// Rows `first..first + count` through every step (`count` at most the block the programs
/// were made for): regions compute into their slots (a row's values after the previous row's),
/// reductions one value per row. `slots` are the slots' lengths per row.
fn run_rows(
    steps: &[Step],
    regs: &mut [Option<Registers>],
    state: &mut [Vec<f32>],
    (ins, slots): (&[Arc<Vec<f32>>], &[usize]),
    rg: &RowGroup,
    (first, count): (usize, usize),
    native: bool,
) {
    for (step, regs) in steps.iter().zip(regs.iter_mut()) {
        match step {
            Step::Region { rows, reads, writes } => {
                // Outputs out of the table while the inputs are borrowed from it (an item
                // never reads what it writes).
                let mut taken: Vec<Vec<f32>> = writes.iter().map(|w| std::mem::take(&mut state[*w])).collect();
                let views: Vec<&[f32]> = reads
                    .iter()
                    .map(|(src, outer)| match src {
                        Source::Slot(s) => state[*s].as_slice(),
                        Source::Input(k) => &ins[*k][row_start(first, &rg.lead, outer)..],
                    })
                    .collect();
                let mut dsts: Vec<&mut [MaybeUninit<f32>]> =
                    taken.iter_mut().zip(writes).map(|(t, w)| as_uninit(&mut t[..slots[*w] * count])).collect();
                let regs = regs.as_mut().expect("a region step has registers");
                rows.program.chunk(&views, 0, &mut dsts, regs, native);
                for (w, t) in writes.iter().zip(taken) {
                    state[*w] = t;
                }
            }
            Step::Reduce { max, from, to } => {
                for j in 0..count {
                    let row: &[f32] = match from {
                        Source::Slot(s) => &state[*s][j * rg.len..(j + 1) * rg.len],
                        Source::Input(k) => &ins[*k][(first + j) * rg.len..(first + j + 1) * rg.len],
                    };
                    let v = if *max { row_max(row) } else { row_sum(row) };
                    state[*to][j] = v;
                }
            }
        }
    }
}

/// Where row `r` (an index over the leading dims `lead`) starts in an input with strides
/// `outer` over those dims.
fn row_start(r: usize, lead: &[usize], outer: &[usize]) -> usize {
    let mut rem = r;
    let mut at = 0;
    for d in (0..lead.len()).rev() {
        at += (rem % lead[d]) * outer[d];
        rem /= lead[d];
    }
    at
}
