//! A launch: the chunks of one or more programs spread over the cores together.

use super::{as_f32, output_tensor, Program, CHUNK};
use crate::runtime::tensor::Tensor;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::sync::Arc;

/// Run several independent programs as one launch: their chunks are spread over the cores
/// together. Returns each program's outputs.
pub fn run_many(items: &[(&Program, &[Tensor])]) -> Vec<Vec<Tensor>> {
    let inputs: Vec<Vec<Arc<Vec<f32>>>> = items.iter().map(|(_, ins)| ins.iter().map(as_f32).collect()).collect();
    let views: Vec<Vec<&[f32]>> = inputs.iter().map(|v| v.iter().map(|a| a.as_slice()).collect()).collect();
    // Output buffers are written chunk by chunk on the worker threads, never zeroed first.
    let mut bufs: Vec<Vec<Vec<f32>>> =
        items.iter().map(|(p, _)| p.outputs.iter().map(|_| Vec::with_capacity(p.numel())).collect()).collect();
    let total: usize = items.iter().map(|(p, _)| p.numel()).sum();
    // A task is a run of chunks of one program sharing one set of registers: a few tasks per
    // thread over the whole launch.
    let per_task = total.div_ceil(CHUNK).div_ceil(4 * rayon::current_num_threads()).max(1) * CHUNK;
    type Part<'a> = &'a mut [MaybeUninit<f32>];
    let mut tasks: Vec<(usize, usize, Vec<Part>)> = vec![];
    for (pi, outs) in bufs.iter_mut().enumerate() {
        let n = items[pi].0.numel();
        let mut parts: Vec<std::slice::ChunksMut<MaybeUninit<f32>>> =
            outs.iter_mut().map(|b| b.spare_capacity_mut()[..n].chunks_mut(per_task)).collect();
        for start in (0..n).step_by(per_task) {
            let slices: Vec<Part> = parts.iter_mut().map(|c| c.next().expect("as many chunks as tasks")).collect();
            tasks.push((pi, start, slices));
        }
    }
    // Each program runs natively or interpreted for the whole launch (see `Tune`); the tasks'
    // times are summed per program for the measurement.
    let native: Vec<bool> = items.iter().map(|(p, _)| p.native_now()).collect();
    let spent: Vec<std::sync::atomic::AtomicU64> = items.iter().map(|_| Default::default()).collect();
    let work = |(pi, start, mut dsts): (usize, usize, Vec<Part>)| {
        let started = std::time::Instant::now();
        let p = items[pi].0;
        let native = native[pi];
        let len = dsts.first().map(|d| d.len()).unwrap_or(0);
        // Registers for the values that need a buffer: interpreted, those not a scalar and not
        // written straight to an output; native, only the broadcast loads' buffers (the native
        // code keeps every other value in registers).
        let regs_len = CHUNK.min(len.max(1));
        let mut regs: Vec<Vec<f32>> = (0..p.instrs.len())
            .map(|i| {
                let needed = if native { p.buffered_load(i) } else { p.scalar[i].is_none() && p.output_of[i].is_none() };
                vec![0f32; if needed { regs_len } else { 0 }]
            })
            .collect();
        // Outputs larger than the caches: each chunk is computed into buffers of its own
        // (L1-resident) and streamed to memory (see stream.rs); smaller ones are written in place.
        let streamed = p.numel() >= crate::exec::stream::STREAM_MIN;
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
    for (((p, _), native), ns) in items.iter().zip(&native).zip(&spent) {
        p.record(*native, ns.load(std::sync::atomic::Ordering::Relaxed));
    }
    for (outs, (p, _)) in bufs.iter_mut().zip(items) {
        for b in outs {
            // SAFETY: the tasks covered every element of every output and initialised it.
            unsafe { b.set_len(p.numel()) };
        }
    }
    items
        .iter()
        .zip(bufs)
        .map(|((p, _), outs)| p.outputs.iter().zip(outs).map(|((_, dtype), v)| output_tensor(*dtype, p.shape.clone(), v)).collect())
        .collect()
}
