//! Convolutions (forward, data gradient, weight gradient, f32) through oneDNN's primitives, the
//! direct convolutions PyTorch's CPU path runs. oneDNN picks the layout its kernels want for the
//! machine (blocked `nChw16c` on AVX-512); dlc's tensors stay NCHW, so each call reorders its
//! operands in and its result out, and the primitives and reorders are made once per shape.
//! Channels-last convolutions (chosen by the layout pass, `Shape::channels_last`) are made with
//! their activations' own NHWC layout, which oneDNN's NHWC kernels read and write as stored:
//! only the weight is reordered.
//! On the Intel Xeon of issue 24 the MNIST CNN's second convolution (128×32×26×26 to 64 channels)
//! ran forward in 10.9 ms, weight gradient 8.9 ms, data gradient 9.4 ms, against oneDNN's own
//! im2col + gemm on plain NCHW at 21.4, 22.9 and 18.5 ms.
//!
//! A primitive runs on the calling thread alone; the images are banded over rayon's threads
//! (`Convs::run`). The C API's plumbing is onednn_api.rs.

use super::onednn_api::*;
use super::onednn_kept::{Kept, Source};
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    Forward,
    Data,
    Weights,
}

/// A convolution's sizes (groups of one): input [n, c, h, w], weight [o, c, kh, kw], output
/// [n, o, oh, ow]; dilation as oneDNN counts it (0 for none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    pub x: [i64; 4],
    pub w: [i64; 4],
    pub y: [i64; 4],
    pub stride: [i64; 2],
    pub dil: [i64; 2],
    pub pad_l: [i64; 2],
    pub pad_r: [i64; 2],
    /// The tensors are channels-last (x, y NHWC, w OHWI; the dims above stay in NCHW order):
    /// oneDNN's NHWC kernels read and write them as they are, with no reorder (the weight's
    /// reorder is the weight's size).
    pub channels_last: bool,
}

/// One operand: its NCHW/OIHW description and the primitive's, and the reorder between them
/// when they differ.
struct Operand {
    user: Md,
    inner: Md,
    /// The reorder and its scratchpad's description.
    reorder: Option<(H, Md)>,
}

/// A convolution made for one shape and direction: the primitive, its two inputs and output.
struct Prepared {
    prim: H,
    /// The convolution's scratchpad's description.
    scratchpad: Md,
    pds: Vec<H>,
    ins: [(c_int, Operand); 2],
    out: (c_int, Operand),
}

// SAFETY: oneDNN primitives may be executed from any thread.
unsafe impl Send for Prepared {}
unsafe impl Sync for Prepared {}

impl Drop for Prepared {
    fn drop(&mut self) {
        let Some(a) = api() else { return };
        // SAFETY: handles this struct created and nothing else holds.
        unsafe {
            for (r, _) in self.ins.iter().map(|i| &i.1).chain([&self.out.1]).filter_map(|o| o.reorder) {
                (a.prim_destroy)(r);
            }
            (a.prim_destroy)(self.prim);
            for pd in &self.pds {
                (a.pd_destroy)(*pd);
            }
        }
    }
}

/// The operand the primitive `pd` reads or writes as `query`, against its plain layout `user`;
/// `into`: the reorder goes from the user's layout into the primitive's (an input), else out.
fn operand(a: &Api, pd: H, query: c_int, user: Md, into: bool, pds: &mut Vec<H>) -> Option<Operand> {
    // SAFETY: `pd` is a live primitive descriptor; the returned descriptor lives as long.
    let inner = unsafe { *(a.pd_query_md)(pd, query, 0).as_ref()? };
    // SAFETY: both are initialised descriptors.
    let same = unsafe { (a.md_equal)(&user, &inner) } != 0;
    let reorder = if same {
        None
    } else {
        let (from, to) = if into { (&user, &inner) } else { (&inner, &user) };
        let mut rpd: H = std::ptr::null_mut();
        let mut prim: H = std::ptr::null_mut();
        // SAFETY: descriptors and engine are valid; outputs are written on success.
        unsafe {
            if (a.reorder_pd_create)(&mut rpd, from, a.engine, to, a.engine, a.attr) != 0 {
                return None;
            }
            pds.push(rpd);
            if (a.prim_create)(&mut prim, rpd) != 0 {
                return None;
            }
            Some((prim, *(a.pd_query_md)(rpd, Q_SCRATCHPAD, 0).as_ref()?))
        }
    };
    Some(Operand { user, inner, reorder })
}

fn prepare(a: &Api, dir: Dir, s: &Shape) -> Option<Prepared> {
    let (xu, wu, yu, xa, wa, ya) = if s.channels_last {
        let (x, y) = (md_channels_last(a, &s.x)?, md_channels_last(a, &s.y)?);
        (x, md_channels_last(a, &s.w)?, y, x, md(a, &s.w, F32, TAG_ANY)?, y)
    } else {
        let any = |d: &[i64; 4]| md(a, d, F32, TAG_ANY);
        (md(a, &s.x, F32, TAG_ABCD)?, md(a, &s.w, F32, TAG_ABCD)?, md(a, &s.y, F32, TAG_ABCD)?, any(&s.x)?, any(&s.w)?, any(&s.y)?)
    };
    let mut pds = vec![];
    let mut fwd_op = OpDesc([0; OP_BYTES]);
    let (st, dl, pl, pr) = (s.stride.as_ptr(), s.dil.as_ptr(), s.pad_l.as_ptr(), s.pad_r.as_ptr());
    let mut fwd: H = std::ptr::null_mut();
    // SAFETY: descriptor blocks of the library's sizes; every pointer is valid for the call.
    unsafe {
        if (a.fwd_init)(&mut fwd_op, FORWARD_TRAINING, CONV_DIRECT, &xa, &wa, std::ptr::null(), &ya, st, dl, pl, pr) != 0
            || (a.pd_create)(&mut fwd, &fwd_op, a.attr, a.engine, std::ptr::null_mut()) != 0
        {
            return None;
        }
    }
    pds.push(fwd);
    let pd = match dir {
        Dir::Forward => fwd,
        Dir::Data | Dir::Weights => {
            let mut op = OpDesc([0; OP_BYTES]);
            let mut pd: H = std::ptr::null_mut();
            // SAFETY: as above; the forward descriptor is the hint backward needs.
            unsafe {
                let init = match dir {
                    Dir::Data => (a.bwd_data_init)(&mut op, CONV_DIRECT, &xa, &wa, &ya, st, dl, pl, pr),
                    _ => (a.bwd_weights_init)(&mut op, CONV_DIRECT, &xa, &wa, std::ptr::null(), &ya, st, dl, pl, pr),
                };
                if init != 0 || (a.pd_create)(&mut pd, &op, a.attr, a.engine, fwd) != 0 {
                    return None;
                }
            }
            pds.push(pd);
            pd
        }
    };
    let (ins, out) = match dir {
        Dir::Forward => (
            [(ARG_SRC, operand(a, pd, Q_SRC, xu, true, &mut pds)?), (ARG_WEIGHTS, operand(a, pd, Q_WEIGHTS, wu, true, &mut pds)?)],
            (ARG_DST, operand(a, pd, Q_DST, yu, false, &mut pds)?),
        ),
        Dir::Data => (
            [
                (ARG_DIFF_DST, operand(a, pd, Q_DIFF_DST, yu, true, &mut pds)?),
                (ARG_WEIGHTS, operand(a, pd, Q_WEIGHTS, wu, true, &mut pds)?),
            ],
            (ARG_DIFF_SRC, operand(a, pd, Q_DIFF_SRC, xu, false, &mut pds)?),
        ),
        Dir::Weights => (
            [(ARG_SRC, operand(a, pd, Q_SRC, xu, true, &mut pds)?), (ARG_DIFF_DST, operand(a, pd, Q_DIFF_DST, yu, true, &mut pds)?)],
            (ARG_DIFF_WEIGHTS, operand(a, pd, Q_DIFF_WEIGHTS, wu, false, &mut pds)?),
        ),
    };
    let mut prim: H = std::ptr::null_mut();
    // SAFETY: a live primitive descriptor.
    if unsafe { (a.prim_create)(&mut prim, pd) } != 0 {
        return None;
    }
    // SAFETY: as above; the descriptor is copied out.
    let scratchpad = unsafe { *(a.pd_query_md)(pd, Q_SCRATCHPAD, 0).as_ref()? };
    Some(Prepared { prim, scratchpad, pds, ins, out })
}

/// Primitives made so far, by direction and shape (owned by a run's kernel cache).
/// A primitive made for a shape, or `None` when oneDNN refused it (asked once).
type Made = Option<Arc<Prepared>>;

#[derive(Default)]
pub struct Convs {
    made: Mutex<std::collections::HashMap<(Dir, Shape), Made>>,
    /// The data gradients' blocked copies of dy, for the weight gradients (onednn_kept.rs).
    kept: Kept,
}

impl Convs {
    /// Run `dir` on `ins` (forward: x, w; data: dy, w; weights: x, dy), all NCHW/OIHW f32;
    /// the result NCHW/OIHW (`out_len` values). `None` when oneDNN cannot (no 2.x library, a
    /// shape it refuses): the caller computes it another way.
    ///
    /// The batch is cut into one band of images per rayon thread, each band a one-thread
    /// primitive, as products are banded (gemm_kernels.rs): an OpenMP team beside rayon's pool
    /// took the cores from it. The weight gradient's bands are summed in band order, so for a
    /// thread count the result is always the same.
    ///
    /// A data gradient's blocked copy of dy is kept for the weight gradient, which reads it
    /// next (onednn_kept.rs).
    pub fn run(&self, dir: Dir, s: &Shape, ins: [&Arc<Vec<f32>>; 2], out_len: usize) -> Option<Vec<f32>> {
        let a = api()?;
        let n = s.x[0] as usize;
        let bands = super::onednn::bands(n, rayon::current_num_threads());
        let (x_img, y_img) = ((s.x[1] * s.x[2] * s.x[3]) as usize, (s.y[1] * s.y[2] * s.y[3]) as usize);
        let lib = super::onednn::get()?;
        // oneDNN 2.x sizes a primitive's work split (and the spin barrier of its weight
        // gradient) by the creating thread's OpenMP team size, and then waits at execution for
        // that many threads: primitives are made for the one thread each band runs on. (Made
        // with the default of all cores, a band's weight gradient waited forever.)
        lib.set_threads(1);
        let mut prepared = vec![];
        for (_, size) in &bands {
            let mut part = *s;
            part.x[0] = *size as i64;
            part.y[0] = *size as i64;
            let mut made = self.made.lock().expect("onednn convolutions");
            prepared.push(made.entry((dir, part)).or_insert_with(|| prepare(a, dir, &part).map(Arc::new)).clone()?);
        }
        // Each band's operands: the batch-major ones cut at its first image, and where each
        // batch-major one starts (the key of its kept copy).
        let firsts = match dir {
            Dir::Forward => [Some(x_img), None],
            Dir::Data => [Some(y_img), None],
            Dir::Weights => [Some(x_img), Some(y_img)],
        };
        let cut = |start: usize, size: usize| -> [(&[f32], Option<Source>); 2] {
            let part = |i: usize| match firsts[i] {
                Some(img) => (&ins[i][start * img..][..size * img], Some(Source { tensor: ins[i], offset: start * img })),
                None => (ins[i].as_slice(), None),
            };
            [part(0), part(1)]
        };
        let ok = std::sync::atomic::AtomicBool::new(true);
        if dir == Dir::Weights {
            // (Not `vec![Vec::with_capacity(..); n]`: a clone of an empty vector has no capacity.)
            let mut parts: Vec<Vec<f32>> = bands.iter().map(|_| Vec::with_capacity(out_len)).collect();
            rayon::scope(|sc| {
                for ((part, (start, size)), p) in parts.iter_mut().zip(&bands).zip(&prepared) {
                    let (ins, ok) = (cut(*start, *size), &ok);
                    sc.spawn(move |_| {
                        lib.set_threads(1);
                        // SAFETY: `part` has room for the out_len values the primitive writes.
                        if unsafe { execute(a, p, ins, part.as_mut_ptr(), &self.kept, dir) } {
                            unsafe { part.set_len(out_len) };
                        } else {
                            ok.store(false, std::sync::atomic::Ordering::Relaxed);
                        }
                    });
                }
            });
            let mut parts = parts.into_iter();
            let mut sum = parts.next()?;
            for p in parts {
                for (d, v) in sum.iter_mut().zip(p) {
                    *d += v;
                }
            }
            return ok.into_inner().then_some(sum);
        }
        let mut out: Vec<f32> = Vec::with_capacity(out_len);
        let img = if dir == Dir::Forward { y_img } else { x_img };
        let base = out.as_mut_ptr() as usize;
        rayon::scope(|sc| {
            for ((start, size), p) in bands.iter().zip(&prepared) {
                let (ins, ok) = (cut(*start, *size), &ok);
                sc.spawn(move |_| {
                    lib.set_threads(1);
                    // SAFETY: each band writes its own images' part of `out`.
                    if !unsafe { execute(a, p, ins, (base as *mut f32).add(start * img), &self.kept, dir) } {
                        ok.store(false, std::sync::atomic::Ordering::Relaxed);
                    }
                });
            }
        });
        if !ok.into_inner() {
            return None;
        }
        // SAFETY: the bands wrote every image of the output.
        unsafe { out.set_len(out_len) };
        Some(out)
    }
}

/// One primitive on its operands (in the user's layouts; a batch-major one with where it comes
/// from), its result written at `out`. A data gradient keeps its copy of dy; a weight gradient
/// takes the kept copies of its operands (onednn_kept.rs).
///
/// # Safety
/// `out` has room for the result; the operands hold what the primitive's shape reads.
unsafe fn execute(a: &Api, p: &Prepared, ins: [(&[f32], Option<Source>); 2], out: *mut f32, kept: &Kept, dir: Dir) -> bool {
    let mut mems = Mems(a, vec![]);
    let mut scratch: Vec<Vec<f32>> = vec![];
    let mut reorders: Vec<(H, H, H, H)> = vec![];
    let mut args: Vec<ExecArg> = vec![];
    // The copies to keep once the primitive has run: their place in `scratch`, and their source.
    let mut keep = vec![];
    for ((arg, op), (data, source)) in p.ins.iter().zip(ins) {
        let Some(user) = mems.make(&op.user, data.as_ptr() as *mut c_void) else { return false };
        let mem = match &op.reorder {
            None => user,
            Some((r, pad)) => match source.as_ref().filter(|_| dir == Dir::Weights).and_then(|s| kept.take(a, s, &op.inner)) {
                Some(copy) => {
                    scratch.push(copy);
                    let Some(inner) = mems.make(&op.inner, scratch.last_mut().expect("pushed").as_mut_ptr() as *mut c_void) else {
                        return false;
                    };
                    inner
                }
                None => {
                    let Some(inner) = buffer(&mut mems, &mut scratch, &op.inner) else { return false };
                    if let (Some(s), Dir::Data) = (source, dir) {
                        keep.push((scratch.len() - 1, s, op.inner));
                    }
                    let Some(pad) = buffer(&mut mems, &mut scratch, pad) else { return false };
                    reorders.push((*r, user, inner, pad));
                    inner
                }
            },
        };
        args.push(ExecArg { arg: *arg, memory: mem });
    }
    let (arg, op) = &p.out;
    let Some(user) = mems.make(&op.user, out as *mut c_void) else { return false };
    let out_reorder = match &op.reorder {
        None => {
            args.push(ExecArg { arg: *arg, memory: user });
            None
        }
        Some((r, pad)) => {
            let Some(inner) = buffer(&mut mems, &mut scratch, &op.inner) else { return false };
            let Some(pad) = buffer(&mut mems, &mut scratch, pad) else { return false };
            args.push(ExecArg { arg: *arg, memory: inner });
            Some((*r, inner, user, pad))
        }
    };
    let Some(pad) = buffer(&mut mems, &mut scratch, &p.scratchpad) else { return false };
    args.push(ExecArg { arg: ARG_SCRATCHPAD, memory: pad });
    // Every memory object wraps a buffer that outlives the call, which waits for the stream.
    let ok = on_stream(a, |stream| {
        let reorder = |r: H, from: H, to: H, pad: H| {
            let args = [
                ExecArg { arg: ARG_SRC, memory: from },
                ExecArg { arg: ARG_DST, memory: to },
                ExecArg { arg: ARG_SCRATCHPAD, memory: pad },
            ];
            (a.prim_execute)(r, stream, 3, args.as_ptr()) == 0
        };
        let mut ok = reorders.iter().all(|(r, from, to, pad)| reorder(*r, *from, *to, *pad));
        ok = ok && (a.prim_execute)(p.prim, stream, args.len() as c_int, args.as_ptr()) == 0;
        if let Some((r, from, to, pad)) = out_reorder {
            ok = ok && reorder(r, from, to, pad);
        }
        ok
    });
    if ok {
        for (i, source, layout) in keep {
            kept.keep(&source, layout, std::mem::take(&mut scratch[i]));
        }
    }
    recycle(scratch);
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A weight gradient reuses the blocked copy of dy the data gradient made, gives what it
    /// gives without it, and never takes the copy of another tensor of the same shape; a forward
    /// convolution keeps nothing.
    #[test]
    fn a_weight_gradient_takes_only_the_copies_of_its_own_operands() {
        if !available() {
            eprintln!("oneDNN 2.x is not installed: nothing to check");
            return;
        }
        // 32 channels: oneDNN reads them blocked, so x and dy are reordered (3 it reads as stored).
        let (n, c, h, w, o) = (4i64, 32i64, 8i64, 8i64, 32i64);
        let s = Shape {
            x: [n, c, h, w],
            w: [o, c, 3, 3],
            y: [n, o, h, w],
            stride: [1, 1],
            dil: [0, 0],
            pad_l: [1, 1],
            pad_r: [1, 1],
            channels_last: false,
        };
        let values =
            |len: i64, seed: usize| Arc::new((0..len as usize).map(|i| ((i * seed % 23) as f32 - 11.0) * 0.125).collect::<Vec<f32>>());
        let (x, wt, dy, other_dy) =
            (values(n * c * h * w, 37), values(o * c * 9, 17), values(n * o * h * w, 53), values(n * o * h * w, 41));
        let alone = |dy: &Arc<Vec<f32>>| {
            poison_pools();
            Convs::default().run(Dir::Weights, &s, [&x, dy], wt.len()).expect("weight gradient")
        };
        let convs = Convs::default();
        let run = |dir: Dir, ins: [&Arc<Vec<f32>>; 2], len: usize| {
            poison_pools();
            convs.run(dir, &s, ins, len).expect("a convolution")
        };
        run(Dir::Forward, [&x, &wt], dy.len());
        assert_eq!(convs.kept.held(), 0, "a forward convolution keeps nothing");
        run(Dir::Data, [&dy, &wt], x.len());
        let bands = convs.kept.held();
        assert!(bands >= 1, "dy kept for each band");
        // Another tensor of dy's shape: nothing is taken.
        assert_eq!(run(Dir::Weights, [&x, &other_dy], wt.len()), alone(&other_dy));
        assert_eq!((convs.kept.taken(), convs.kept.held()), (0, bands));
        assert_eq!(run(Dir::Weights, [&x, &dy], wt.len()), alone(&dy));
        assert_eq!((convs.kept.taken(), convs.kept.held()), (bands, 0));
    }

    /// Channels-last convolutions (NHWC activations, OHWI weights, read and written as stored)
    /// give the NCHW ones' results in every direction, to f32 rounding: odd channel counts,
    /// a stride and uneven padding, several bands.
    #[test]
    fn channels_last_convolutions_equal_nchw() {
        if !available() {
            eprintln!("oneDNN 2.x is not installed: nothing to check");
            return;
        }
        let (n, c, h, w, o) = (5usize, 3usize, 9usize, 7usize, 5usize);
        let (oh, ow) = (5usize, 4usize);
        let (xd, wd, yd) = ([n, c, h, w], [o, c, 3, 3], [n, o, oh, ow]);
        let dims = |d: [usize; 4]| d.map(|v| v as i64);
        let nchw = Shape {
            x: dims(xd),
            w: dims(wd),
            y: dims(yd),
            stride: [2, 2],
            dil: [0, 0],
            pad_l: [1, 1],
            pad_r: [1, 1],
            channels_last: false,
        };
        let nhwc = Shape { channels_last: true, ..nchw };
        let values = |len: usize, seed: usize| (0..len).map(|i| ((i * seed % 29) as f32 - 14.0) * 0.0625).collect::<Vec<f32>>();
        // [a, b, p, q] stored in that order to [a, p, q, b] (NCHW to NHWC, OIHW to OHWI), and back.
        let to_last = |v: &[f32], [_, b, p, q]: [usize; 4]| {
            let mut out = vec![0f32; v.len()];
            for (i, x) in v.iter().enumerate() {
                let (ai, bi, pi, qi) = (i / (b * p * q), i / (p * q) % b, i / q % p, i % q);
                out[((ai * p + pi) * q + qi) * b + bi] = *x;
            }
            out
        };
        let (x, wt, dy) = (values(n * c * h * w, 37), values(o * c * 9, 17), values(n * o * oh * ow, 53));
        let cases =
            [(Dir::Forward, [(&x, xd), (&wt, wd)], yd), (Dir::Data, [(&dy, yd), (&wt, wd)], xd), (Dir::Weights, [(&x, xd), (&dy, yd)], wd)];
        for (dir, [(p, pd), (q, qd)], out) in cases {
            let len = out.iter().product();
            let plain = Convs::default().run(dir, &nchw, [&Arc::new(p.clone()), &Arc::new(q.clone())], len).expect("NCHW");
            let (pl, ql) = (Arc::new(to_last(p, pd)), Arc::new(to_last(q, qd)));
            let last = Convs::default().run(dir, &nhwc, [&pl, &ql], len).expect("channels-last");
            let want = to_last(&plain, out);
            for (i, (g, e)) in last.iter().zip(&want).enumerate() {
                assert!((g - e).abs() <= 1e-5 * e.abs().max(1.0), "{dir:?} [{i}]: {g} against {e}");
            }
        }
    }
}
