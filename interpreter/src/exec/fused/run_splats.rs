//! Broadcasts that are constant along a chunk, read as splats. A per-channel statistic of an
//! NCHW activation (batch norm's mean, a convolution's bias) is one value along each run of
//! H×W elements; the general native code reads it from a buffer filled for every chunk
//! (`broadcast_load`: 5.5% of the conv-BN step, plus a load stream in the kernel). The variant
//! here is the same kernel with each such load a splat, called once per run that a chunk
//! touches with the pointer set at the run's value.

use super::chunk::Small;
use super::Program;
use dlc_jit::kir::{Elementwise, Index, Inst};
use dlc_jit::native::Native;
use std::sync::Arc;

/// Runs shorter than this are not worth a call each.
const MIN_RUN: usize = 64;

/// Per kernel input: the strides it is broadcast with, if it is.
type InputStrides = Vec<Option<Vec<usize>>>;

/// Native code whose broadcasts with strides are splats, valid over any range of elements inside
/// one run of `run` (the trailing output dims along which every such broadcast has stride 0).
pub(crate) struct RunSplats {
    pub code: Arc<Native>,
    pub run: usize,
    /// Per kernel input: the strides it is broadcast with (its pointer is set at the run's
    /// value), or `None` for an input the variant reads as the general code does.
    pub strides: InputStrides,
}

/// The variant kernel of `e`, its run and its inputs' strides (see `RunSplats`), when every
/// broadcast with strides reads an input that nothing else reads, the runs are at least
/// `MIN_RUN` long, and there is such a broadcast.
pub(crate) fn variant(e: &Elementwise) -> Option<(Elementwise, usize, InputStrides)> {
    let strided = |i: &Inst| match i {
        Inst::Load { from, index: Index::Strided(s) } if s.iter().any(|s| *s != 0) => Some((*from, s.clone())),
        _ => None,
    };
    let loads: Vec<(dlc_jit::kir::Buf, Vec<usize>)> = e.body.iter().filter_map(strided).collect();
    if loads.is_empty() {
        return None;
    }
    // Each such input read by exactly one load (its pointer is set at that load's value).
    for (from, _) in &loads {
        if e.body.iter().filter(|i| matches!(i, Inst::Load { from: f, .. } if f == from)).count() != 1 {
            return None;
        }
    }
    // The run: trailing dims where every broadcast has stride 0 (size-1 dims pass).
    let mut run = 1;
    for d in (0..e.shape.len()).rev() {
        if e.shape[d] != 1 && loads.iter().any(|(_, s)| s[d] != 0) {
            break;
        }
        run *= e.shape[d];
    }
    if run < MIN_RUN {
        return None;
    }
    let body = e
        .body
        .iter()
        .map(|i| match strided(i) {
            Some((from, _)) => Inst::Load { from, index: Index::Splat },
            None => i.clone(),
        })
        .collect();
    let mut strides = vec![None; e.inputs.len()];
    for (from, s) in loads {
        if let dlc_jit::kir::Buf::Param(k) = from {
            strides[k] = Some(s);
        }
    }
    Some((Elementwise { body, ..e.clone() }, run, strides))
}

/// The element a broadcast with `strides` over `shape` reads at output element `at`.
fn offset(shape: &[usize], strides: &[usize], mut at: usize) -> usize {
    let mut off = 0;
    for d in (0..shape.len()).rev() {
        off += (at % shape[d]) * strides[d];
        at /= shape[d];
    }
    off
}

impl Program {
    /// Elements `start .. start + len` through the run-splat variant, one call per run the range
    /// touches. `false` (nothing done) when the program has no variant.
    pub(super) fn chunk_by_runs(&self, ins: &[&[f32]], start: usize, outs: &[*mut f32], len: usize) -> bool {
        let Some(v) = &self.run_splats else { return false };
        let mut at = start;
        while at < start + len {
            let n = (v.run - at % v.run).min(start + len - at);
            let mut ptrs: Small<*const f32> = Small::new(std::ptr::null());
            for (k, x) in ins.iter().enumerate() {
                ptrs.push(match &v.strides[k] {
                    Some(strides) => x[offset(&self.shape, strides, at)..].as_ptr(),
                    None if self.direct[k] => x[at..at + n].as_ptr(),
                    None => x.as_ptr(),
                });
            }
            let mut dsts: Small<*mut f32> = Small::new(std::ptr::null_mut());
            for o in outs {
                // SAFETY: `outs` point at element `start` of outputs holding `len` values.
                dsts.push(unsafe { o.add(at - start) });
            }
            // SAFETY: every input pointer covers the `n` values (or the one splat value) the
            // variant reads, every output `n` values; the variant's parameters are the
            // program's inputs in order with no buffers (each broadcast became a splat).
            unsafe { v.code.call(ptrs.as_slice(), dsts.as_slice(), n) };
            at += n;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlc_jit::kir::{Buf, Param, Ty};
    use dlc_language::ir::BinaryOp;
    use dlc_language::types::DType;
    use std::mem::MaybeUninit;

    /// `(x - mean[c]) * scale[c] + x` over [n, c, h, w] with per-channel `mean` and `scale`.
    fn per_channel(shape: [usize; 4]) -> Elementwise {
        let [n, c, h, w] = shape;
        let channel = Index::Strided(vec![0, 1, 0, 0]);
        let load = |k, index| Inst::Load { from: Buf::Param(k), index };
        Elementwise {
            shape: shape.to_vec(),
            inputs: vec![Param { ty: Ty::F32, len: n * c * h * w }, Param { ty: Ty::F32, len: c }, Param { ty: Ty::F32, len: c }],
            body: vec![
                load(0, Index::Linear),
                load(1, channel.clone()),
                load(2, channel),
                Inst::Binary(BinaryOp::Sub, 0, 1),
                Inst::Binary(BinaryOp::Mul, 3, 2),
                Inst::Binary(BinaryOp::Add, 4, 0),
            ],
            outputs: vec![(5, Ty::F32)],
        }
    }

    #[test]
    fn chunks_across_runs_give_the_buffered_codes_bits() {
        let shape = [3, 4, 10, 10];
        let e = per_channel(shape);
        let (v, run, strides) = variant(&e).expect("per-channel broadcasts have a run variant");
        assert_eq!(run, 100);
        let Ok(code) = dlc_jit::native::compile(&e) else { return };
        let mut p = Program::from_kir(&e, &[DType::F32]);
        p.native = Some(Arc::new(code));
        let total: usize = shape.iter().product();
        let x: Vec<f32> = (0..total).map(|i| (i % 37) as f32 * 0.3 - 5.0).collect();
        let mean: Vec<f32> = (0..4).map(|c| c as f32 * 1.25 - 2.0).collect();
        let scale: Vec<f32> = (0..4).map(|c| 0.5 + c as f32 * 0.75).collect();
        let ins: [&[f32]; 3] = [&x, &mean, &scale];
        let run_chunk = |p: &Program, start: usize, len: usize| {
            let mut out = vec![MaybeUninit::new(f32::NAN); len];
            let mut regs = p.registers(len);
            p.chunk(&ins, start, &mut [&mut out[..]], &mut regs, true);
            out.iter().map(|v| unsafe { v.assume_init() }).collect::<Vec<f32>>()
        };
        // Ranges inside one run, across two and across many, at every alignment.
        let ranges = [(0, 100), (5, 50), (95, 10), (150, 160), (0, total), (33, total - 40)];
        let buffered: Vec<Vec<f32>> = ranges.iter().map(|(s, n)| run_chunk(&p, *s, *n)).collect();
        p.run_splats = Some(RunSplats { code: Arc::new(dlc_jit::native::compile(&v).expect("the variant compiles")), run, strides });
        for ((start, len), want) in ranges.iter().zip(&buffered) {
            let got = run_chunk(&p, *start, *len);
            let exact: Vec<f32> = (*start..start + len)
                .map(|i| {
                    let c = i / 100 % 4;
                    (x[i] - mean[c]) * scale[c] + x[i]
                })
                .collect();
            assert_eq!(want, &exact, "buffered, start {start} len {len}");
            assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                exact.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "run splats, start {start} len {len}"
            );
        }
    }

    #[test]
    fn no_variant_where_a_broadcast_varies_inside_short_runs_or_its_input_is_read_twice() {
        // A bias along the last dim varies at every element: no run.
        let mut e = per_channel([2, 3, 8, 8]);
        for i in &mut e.body {
            if let Inst::Load { index: Index::Strided(s), .. } = i {
                *s = vec![0, 0, 0, 1];
            }
        }
        assert!(variant(&e).is_none());
        // Runs of 4×4 = 16 elements: too short to be worth a call each.
        assert!(variant(&per_channel([2, 3, 4, 4])).is_none());
        // The broadcast input also read at the output's index.
        let mut e = per_channel([2, 3, 8, 8]);
        e.body.push(Inst::Load { from: Buf::Param(1), index: Index::Linear });
        assert!(variant(&e).is_none());
    }
}
