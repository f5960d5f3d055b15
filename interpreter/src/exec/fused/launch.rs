//! A launch: the chunks of one or more programs spread over the cores together.

use super::{output_tensor, Program, CHUNK};
use crate::runtime::tensor::Tensor;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::sync::Arc;

/// Run several independent programs as one launch: their chunks are spread over the cores
/// together. Returns each program's outputs.
///
/// The inputs are taken: an input whose buffer nothing else holds (the executor gives up the
/// values that die at this kernel), read only at each element's own index, and of an output's
/// length becomes that output's buffer when the program runs as native code, so the output is
/// written over the lines just read, in cache, instead of into a fresh buffer whose lines must
/// first be read from memory (AdamW's update of 669k parameters: 0.46 against 0.74 ms on one
/// Zen 4 core with its operands in memory). Native code loads every input of an element
/// before it stores any output of it, and no other element reads those inputs.
pub fn run_many(items: Vec<(&Program, Vec<Tensor>)>) -> Vec<Vec<Tensor>> {
    let mut inputs: Vec<Vec<Arc<Vec<f32>>>> = vec![];
    let mut programs: Vec<&Program> = vec![];
    for (p, ins) in items {
        programs.push(p);
        inputs.push(ins.into_iter().map(super::into_f32).collect());
    }
    // Each program runs natively or interpreted for the whole launch (see `Tune`).
    let native: Vec<bool> = programs.iter().map(|p| p.native_now()).collect();
    let overwritten: Vec<Vec<Option<usize>>> =
        programs.iter().zip(&inputs).zip(&native).map(|((p, ins), native)| overwritten_inputs(p, ins, *native)).collect();
    let views: Vec<Vec<&[f32]>> = inputs.iter().map(|v| v.iter().map(|a| a.as_slice()).collect()).collect();
    // Output buffers are written chunk by chunk on the worker threads, never zeroed first; an
    // output written over an input has no buffer of its own.
    let mut bufs: Vec<Vec<Vec<f32>>> = programs
        .iter()
        .zip(&overwritten)
        .map(|(p, over)| over.iter().map(|k| Vec::with_capacity(if k.is_some() { 0 } else { p.numel() })).collect())
        .collect();
    let total: usize = programs.iter().map(|p| p.numel()).sum();
    // A task is a run of chunks of one program sharing one set of registers: a few tasks per
    // thread over the whole launch.
    let per_task = total.div_ceil(CHUNK).div_ceil(4 * rayon::current_num_threads()).max(1) * CHUNK;
    type Part<'a> = &'a mut [MaybeUninit<f32>];
    let mut tasks: Vec<(usize, usize, Vec<Part>)> = vec![];
    for (pi, outs) in bufs.iter_mut().enumerate() {
        let n = programs[pi].numel();
        let mut parts: Vec<std::slice::ChunksMut<MaybeUninit<f32>>> = outs
            .iter_mut()
            .zip(&overwritten[pi])
            .map(|(b, over)| match over {
                // SAFETY: the input's buffer holds `n` values and nothing else owns it (checked
                // in `overwritten_inputs`); only native code reads and writes it during the
                // launch, through raw pointers, each element's loads before its stores.
                Some(k) => unsafe { std::slice::from_raw_parts_mut(views[pi][*k].as_ptr() as *mut MaybeUninit<f32>, n) },
                None => &mut b.spare_capacity_mut()[..n],
            })
            .map(|whole| whole.chunks_mut(per_task))
            .collect();
        for start in (0..n).step_by(per_task) {
            let slices: Vec<Part> = parts.iter_mut().map(|c| c.next().expect("as many chunks as tasks")).collect();
            tasks.push((pi, start, slices));
        }
    }
    // The tasks' times are summed per program for the measurement.
    let spent: Vec<std::sync::atomic::AtomicU64> = programs.iter().map(|_| Default::default()).collect();
    let work = |(pi, start, mut dsts): (usize, usize, Vec<Part>)| {
        let started = std::time::Instant::now();
        let p = programs[pi];
        let native = native[pi];
        let len = dsts.first().map(|d| d.len()).unwrap_or(0);
        // Registers for the values that need a buffer: interpreted, those not a scalar and not
        // written straight to an output; native, only the broadcast loads' buffers (the native
        // code keeps every other value in registers).
        let regs_len = CHUNK.min(len.max(1));
        let mut regs =
            p.registers_where(regs_len, |i| if native { p.buffered_load(i) } else { p.scalar[i].is_none() && p.output_of[i].is_none() });
        // Outputs larger than the caches: each chunk is computed into buffers of its own
        // (L1-resident) and streamed to memory (see stream.rs); smaller ones, and outputs written
        // over an input (whose lines are in cache), are written in place.
        let streamed = p.numel() >= crate::exec::stream::STREAM_MIN && overwritten[pi].iter().all(|k| k.is_none());
        let mut staging: Vec<Vec<MaybeUninit<f32>>> =
            if streamed { dsts.iter().map(|_| vec![MaybeUninit::uninit(); regs_len]).collect() } else { vec![] };
        // Native code with no broadcast buffers to fill runs the task's whole range in one call
        // (chunks are only for the buffers and the staging); streamed, when it can stream.
        let mut off = 0;
        if native && !(0..p.instrs.len()).any(|i| p.buffered_load(i)) {
            if !streamed {
                p.chunk(&views[pi], start, &mut dsts, &mut regs, native);
                off = len;
            } else if p.chunk_streaming(&views[pi], start, &mut dsts, &mut regs) {
                off = len;
            }
        }
        while off < len {
            let step = CHUNK.min(len - off);
            // (The chunk writes every element of its outputs.)
            // Native code that streams writes straight to the outputs; otherwise each chunk is
            // staged in L1 and copied out with non-temporal stores (see stream.rs), or, for
            // outputs that fit the caches, written in place.
            let mut parts: Vec<&mut [MaybeUninit<f32>]> = dsts.iter_mut().map(|d| &mut d[off..off + step]).collect();
            if streamed && !(native && p.chunk_streaming(&views[pi], start + off, &mut parts, &mut regs)) {
                let mut staged: Vec<&mut [MaybeUninit<f32>]> = staging.iter_mut().map(|s| &mut s[..step]).collect();
                p.chunk(&views[pi], start + off, &mut staged, &mut regs, native);
                for (s, d) in staging.iter().zip(parts.iter_mut()) {
                    // SAFETY: the chunk initialised the first `step` values of every staging buffer.
                    let s = unsafe { std::slice::from_raw_parts(s.as_ptr() as *const f32, step) };
                    crate::exec::stream::stream_copy(s, d);
                }
            } else if !streamed {
                p.chunk(&views[pi], start + off, &mut parts, &mut regs, native);
            }
            off += step;
        }
        if streamed {
            crate::exec::stream::fence();
        }
        spent[pi].fetch_add(started.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
    };
    if total > CHUNK {
        tasks.into_par_iter().for_each(work);
    } else {
        tasks.into_iter().for_each(work);
    }
    for ((p, native), ns) in programs.iter().zip(&native).zip(&spent) {
        p.record(*native, ns.load(std::sync::atomic::Ordering::Relaxed));
    }
    drop(views);
    programs.iter().zip(bufs).zip(&overwritten).zip(inputs).map(|(((p, outs), over), ins)| outputs_of(p, outs, over, ins)).collect()
}

/// A program's output tensors after its launch: its own buffers, and the inputs' it wrote over.
fn outputs_of(p: &Program, outs: Vec<Vec<f32>>, over: &[Option<usize>], mut ins: Vec<Arc<Vec<f32>>>) -> Vec<Tensor> {
    let mut taken: Vec<Option<Vec<f32>>> = ins.iter().map(|_| None).collect();
    for k in over.iter().flatten() {
        let arc = std::mem::take(&mut ins[*k]);
        taken[*k] = Some(Arc::try_unwrap(arc).expect("an overwritten input has no other owner"));
    }
    outs.into_iter()
        .zip(over)
        .zip(&p.outputs)
        .map(|((mut b, over), (_, dtype))| {
            let v = match over {
                Some(k) => taken[*k].take().expect("each input is overwritten by one output at most"),
                None => {
                    // SAFETY: the tasks covered every element of every output and initialised it.
                    unsafe { b.set_len(p.numel()) };
                    b
                }
            };
            output_tensor(*dtype, p.shape.clone(), v)
        })
        .collect()
}

/// Per output of `p`, the input (by position) it is written over, if any: only in a native
/// launch, for f32 (not bool) outputs, each input at most once, an input read only at the
/// element's own index, as long as the output, and owned by nothing but this launch.
fn overwritten_inputs(p: &Program, ins: &[Arc<Vec<f32>>], native: bool) -> Vec<Option<usize>> {
    let mut free: Vec<bool> = ins
        .iter()
        .zip(&p.overwritable)
        .map(|(a, ok)| native && *ok && a.len() == p.numel() && Arc::strong_count(a) == 1 && Arc::weak_count(a) == 0)
        .collect();
    p.outputs
        .iter()
        .map(|(_, dtype)| {
            if *dtype == dlc_language::types::DType::Bool {
                return None;
            }
            let k = free.iter().position(|f| *f)?;
            free[k] = false;
            Some(k)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::tensor::Data;
    use dlc_jit::kir::{Buf, Elementwise, Index, Inst, Param, Ty};
    use dlc_language::ir::BinaryOp;
    use dlc_language::types::DType;

    /// `(a * b + a, b - a)` over `n` elements, native where this machine compiles it, with `a`
    /// also read through a broadcast when `broadcast` (so it must never be written over).
    fn program(n: usize, broadcast: bool) -> Program {
        let load = |k, index| Inst::Load { from: Buf::Param(k), index };
        let second = if broadcast { Index::Strided(vec![1]) } else { Index::Linear };
        let e = Elementwise {
            shape: vec![n],
            inputs: vec![Param { ty: Ty::F32, len: n }; 2],
            body: vec![
                load(0, Index::Linear),
                load(1, Index::Linear),
                load(0, second),
                Inst::Binary(BinaryOp::Mul, 0, 1),
                Inst::Binary(BinaryOp::Add, 3, 2),
                Inst::Binary(BinaryOp::Sub, 1, 0),
            ],
            outputs: vec![(4, Ty::F32), (5, Ty::F32)],
        };
        let mut p = Program::from_kir(&e, &[DType::F32, DType::F32]);
        p.native = dlc_jit::native::compile(&e).ok().map(Arc::new);
        p
    }

    fn tensor(v: Vec<f32>) -> Tensor {
        Tensor { dtype: DType::F32, shape: vec![v.len()], data: Data::F32(Arc::new(v)) }
    }

    fn values(t: &Tensor) -> (Vec<f32>, *const f32) {
        let Data::F32(v) = &t.data else { panic!("f32 output") };
        (v.to_vec(), v.as_ptr())
    }

    #[test]
    fn outputs_take_the_buffers_of_inputs_nothing_else_holds_and_match_fresh_ones() {
        // Several tasks and a masked remainder.
        let n = 3 * CHUNK * rayon::current_num_threads() + 5;
        let a: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.25 - 7.0).collect();
        let b: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 1.5 + 0.125).collect();
        let want: Vec<Vec<f32>> = vec![a.iter().zip(&b).map(|(a, b)| a * b + a).collect(), a.iter().zip(&b).map(|(a, b)| b - a).collect()];
        for broadcast in [false, true] {
            let p = program(n, broadcast);
            // Shared: the caller keeps both inputs, so both outputs get fresh buffers.
            let (ta, tb) = (tensor(a.clone()), tensor(b.clone()));
            let shared = run_many(vec![(&p, vec![ta.clone(), tb.clone()])]).pop().unwrap();
            assert_eq!(values(&ta).0, a, "a shared input is never written over");
            assert_eq!(values(&tb).0, b);
            // Taken: the launch owns them, so native code writes over those it may.
            let (ta, tb) = (tensor(a.clone()), tensor(b.clone()));
            let pointers = [values(&ta).1, values(&tb).1];
            let taken = run_many(vec![(&p, vec![ta, tb])]).pop().unwrap();
            for (j, (s, t)) in shared.iter().zip(&taken).enumerate() {
                let (sv, tv) = (values(s), values(t));
                assert_eq!(sv.0, want[j], "output {j}");
                assert_eq!(tv.0, want[j], "output {j}, written over an input");
                assert!(!pointers.contains(&sv.1));
                // `a` is read through a broadcast too in the second program: only `b`'s buffer
                // may be reused there, by the first output.
                let expected = match (p.native.is_some(), broadcast, j) {
                    (false, _, _) => None,
                    (true, false, _) => Some(pointers[j]),
                    (true, true, 0) => Some(pointers[1]),
                    (true, true, _) => None,
                };
                assert_eq!(expected.map(|e| e == tv.1), expected.map(|_| true), "output {j}: whose buffer (broadcast {broadcast})");
                if expected.is_none() {
                    assert!(!pointers.contains(&tv.1), "output {j} must not take an input's buffer");
                }
            }
        }
    }
}
