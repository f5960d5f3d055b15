//! A chunk program's registers, and the tiles of its periodic broadcasts.
//!
//! A broadcast whose strides are 0 over every dim outside some trailing block of dims reads the
//! same `P` values (the block's size) again and again: output element i reads element `i % P`
//! of one period. A per-channel value of a channels-last activation (`[N, H, W, C]`, strides
//! `[0, 0, 0, 1]`, P = C) is one, and so is a bias over a batch's rows. Filled into a chunk's
//! buffer the general way (`broadcast_load`) that is a copy per period, 32 calls a chunk of 1024
//! values at C = 32, which left channels-last batch norm's kernels at twice the time of NCHW's
//! (stop 47). Instead its register holds the period repeated over `len + P` values, filled once
//! for each source it is read from; a chunk from element `start` reads it from `start % P` on.

use super::{Instr, Operand, Program};
use crate::exec::elementwise::as_uninit;

/// Periods longer than this are read the general way (a tile would outgrow the caches, and a
/// long period is few copies a chunk anyway).
const MAX_PERIOD: usize = 4096;

/// The period of a broadcast with `strides` over `shape`: the size of the trailing dims from the
/// first one it is not broadcast along, when that is shorter than the whole and at most
/// `MAX_PERIOD`.
pub(super) fn period(shape: &[usize], strides: &[usize]) -> Option<usize> {
    let first = (0..shape.len()).find(|d| shape[*d] != 1 && strides[*d] != 0)?;
    let p: usize = shape[first..].iter().product();
    (p < shape.iter().product::<usize>() && p <= MAX_PERIOD).then_some(p)
}

/// The buffers a program's instructions compute into, one per instruction (empty where the
/// instruction needs none), and for the tiled ones, which source each holds.
pub(crate) struct Registers {
    pub(super) bufs: Vec<Vec<f32>>,
    /// Per instruction: the address of the input its tile was filled from (0: not filled). A
    /// set of registers lives for one task of one launch, whose inputs do not change.
    filled: Vec<usize>,
}

impl Program {
    /// Registers for running this program on up to `len` elements at a time, a buffer for each
    /// instruction that `needed` names (a tiled broadcast's `len` plus its period long).
    pub(crate) fn registers_where(&self, len: usize, needed: impl Fn(usize) -> bool) -> Registers {
        let bufs = (0..self.instrs.len())
            .map(|i| match (needed(i), self.tiles[i]) {
                (false, _) => vec![],
                (true, Some(p)) => vec![0f32; len + p],
                (true, None) => vec![0f32; len],
            })
            .collect();
        Registers { bufs, filled: vec![0; self.instrs.len()] }
    }

    /// Registers for every instruction.
    pub(crate) fn registers(&self, len: usize) -> Registers {
        self.registers_where(len, |_| true)
    }

    /// Where tiled instruction `i` reads for the chunk from element `start` (on from there, as
    /// many values as the registers were made for): its tile, filled from `src` if it holds
    /// another source.
    pub(super) fn tile(&self, i: usize, src: &[f32], regs: &mut Registers, start: usize) -> *const f32 {
        let (Some(p), Instr::Expand { strides, .. }) = (self.tiles[i], &self.instrs[i]) else {
            unreachable!("only periodic broadcasts are tiled")
        };
        let buf = &mut regs.bufs[i];
        if regs.filled[i] != src.as_ptr() as usize {
            super::broadcast::broadcast_load(src, &self.shape, strides, 0, as_uninit(&mut buf[..p]));
            let mut have = p;
            while have < buf.len() {
                let n = have.min(buf.len() - have);
                buf.copy_within(..n, have);
                have += n;
            }
            regs.filled[i] = src.as_ptr() as usize;
        }
        buf[start % p..].as_ptr()
    }
}

/// Per instruction: its period when its result is read from a tile, a periodic broadcast of an
/// input that is not itself an output and is not rounded (a tile is only ever read).
pub(super) fn tiled(
    instrs: &[Instr],
    shape: &[usize],
    output_of: &[Option<usize>],
    round: &[Option<dlc_language::types::DType>],
) -> Vec<Option<usize>> {
    instrs
        .iter()
        .enumerate()
        .map(|(i, inst)| match inst {
            Instr::Expand { src: Operand::Input(_), strides } if output_of[i].is_none() && round[i].is_none() => period(shape, strides),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::period;

    #[test]
    fn periods_are_the_trailing_dims_from_the_first_one_read() {
        assert_eq!(period(&[64, 32, 32, 32], &[0, 0, 0, 1]), Some(32));
        assert_eq!(period(&[128, 1024], &[0, 1]), Some(1024));
        // A size-1 dim between is skipped; a stride-0 dim inside the period is part of it.
        assert_eq!(period(&[8, 1, 4, 5], &[0, 7, 1, 0]), Some(20));
        // NCHW's per-channel value: a period of C·H·W, too long (run splats take it).
        assert_eq!(period(&[64, 32, 32, 32], &[0, 1, 0, 0]), None);
        // Read along the outermost dim: the whole, no period.
        assert_eq!(period(&[6, 5], &[1, 0]), None);
        // A scalar broadcast is a splat, not a tile.
        assert_eq!(period(&[6, 5], &[0, 0]), None);
    }
}
