//! One chunk of a program: its elements `start .. start + len`, interpreted instruction by
//! instruction over register buffers, or through the native code in one pass.

use super::broadcast::broadcast_load;
use super::{Instr, Operand, Program, Registers, Scalar};
use crate::exec::elementwise::{as_uninit, binary_slice, div_by_const, fill, unary_slice, write_all, Arg};
use dlc_language::ir::BinaryOp;
use std::mem::MaybeUninit;

/// A short list on the stack (spilling to the heap past 32): the pointers of one call, which a
/// row kernel makes once per row and region, where a `Vec` each time cost an allocation each.
pub(super) struct Small<T: Copy> {
    buf: [T; 32],
    len: usize,
    spill: Vec<T>,
}

impl<T: Copy> Small<T> {
    pub(super) fn new(fill: T) -> Small<T> {
        Small { buf: [fill; 32], len: 0, spill: vec![] }
    }

    pub(super) fn push(&mut self, v: T) {
        if self.len < 32 && self.spill.is_empty() {
            self.buf[self.len] = v;
            self.len += 1;
        } else {
            if self.spill.is_empty() {
                self.spill.extend_from_slice(&self.buf[..self.len]);
            }
            self.spill.push(v);
        }
    }

    pub(super) fn as_slice(&self) -> &[T] {
        if self.spill.is_empty() {
            &self.buf[..self.len]
        } else {
            &self.spill
        }
    }
}

impl Program {
    /// Elements `start .. start + len` of every output (`dsts`, one slice each).
    /// The outputs may be uninitialised: every element is written before anything reads it.
    /// With `native`, through the native code (when the program has it).
    pub(crate) fn chunk(&self, ins: &[&[f32]], start: usize, dsts: &mut [&mut [MaybeUninit<f32>]], regs: &mut Registers, native: bool) {
        let len = dsts.first().map(|d| d.len()).unwrap_or(0);
        let end = start + len;
        if let (Some(code), true) = (&self.native, native) {
            self.native_chunk(code, ins, start, dsts, regs, false);
            return;
        }
        // Where each register lives for this chunk: an output it is written straight into, or
        // its own buffer. (Scalars, unless output, live nowhere: readers take the value.)
        // A tiled broadcast lives in its tile, from this chunk's phase on (only ever read).
        let mut loc: Small<*mut f32> = Small::new(std::ptr::null_mut());
        for i in 0..self.instrs.len() {
            loc.push(match (self.output_of[i], &self.instrs[i], self.tiles[i]) {
                (Some(k), _, _) => dsts[k].as_mut_ptr() as *mut f32,
                (None, Instr::Expand { src: Operand::Input(k), .. }, Some(_)) => self.tile(i, ins[*k], regs, start) as *mut f32,
                (None, _, _) => regs.bufs[i].as_mut_ptr(),
            });
        }
        let loc = loc.as_slice();
        // SAFETY (for the slices made from `loc` below): every location holds at least `len`
        // values (registers are CHUNK long, outputs `len`); an instruction writes only its own
        // location (as `MaybeUninit`, all of it) and reads only earlier ones, already written, and
        // no two instructions share a location, so no slice written overlaps one read. `dsts` is
        // not touched again until the copies at the end.
        let arg = |o: Operand| -> Arg {
            match o {
                Operand::Reg(j) => match self.scalar[j] {
                    Some(Scalar::Imm(v)) => Arg::Scalar(v),
                    Some(Scalar::Splat(k)) => Arg::Scalar(ins[k][0]),
                    None => Arg::Slice(unsafe { std::slice::from_raw_parts(loc[j], len) }),
                },
                Operand::Input(k) => Arg::Slice(&ins[k][start..end]),
                Operand::Imm(v) => Arg::Scalar(v),
            }
        };
        let constant = |o: Operand| -> Option<f32> {
            match o {
                Operand::Reg(j) => match self.scalar[j] {
                    Some(Scalar::Imm(v)) => Some(v),
                    _ => None,
                },
                Operand::Imm(v) => Some(v),
                Operand::Input(_) => None,
            }
        };
        for (i, ins_i) in self.instrs.iter().enumerate() {
            if (self.scalar[i].is_some() && self.output_of[i].is_none()) || self.tiles[i].is_some() {
                continue;
            }
            let out = unsafe { std::slice::from_raw_parts_mut(loc[i] as *mut MaybeUninit<f32>, len) };
            match ins_i {
                Instr::Unary(op, x) => unary_slice(*op, arg(*x), out),
                // A division by a constant of the program (not a runtime scalar, which may
                // change every step) may multiply by its reciprocal where that is exact.
                Instr::Binary(BinaryOp::Div, a, b) => match (arg(*a), constant(*b)) {
                    (Arg::Slice(x), Some(y)) => div_by_const(x, y, out),
                    (x, _) => binary_slice(BinaryOp::Div, x, arg(*b), out),
                },
                Instr::Binary(op, a, b) => binary_slice(*op, arg(*a), arg(*b), out),
                Instr::Where(c, a, b) => select(arg(*c), arg(*a), arg(*b), out),
                Instr::Cast { to_bool, x } => match (arg(*x), *to_bool) {
                    (Arg::Slice(x), true) => {
                        for (o, a) in out.iter_mut().zip(x) {
                            o.write((*a != 0.0) as i32 as f32);
                        }
                    }
                    (Arg::Slice(x), false) => write_all(out, x),
                    (Arg::Scalar(a), to_bool) => fill(out, if to_bool { (a != 0.0) as i32 as f32 } else { a }),
                },
                Instr::Expand { src, strides } => match src {
                    Operand::Imm(v) => fill(out, *v),
                    Operand::Input(k) => broadcast_load(ins[*k], &self.shape, strides, start, out),
                    Operand::Reg(_) => unreachable!("the fusion pass never puts an expand's source in its region"),
                },
            }
            if let Some(d) = self.round[i] {
                // SAFETY: just written in full.
                crate::runtime::tensor::round_slice(d, unsafe { std::slice::from_raw_parts_mut(loc[i], len) });
            }
        }
        // A value output twice was written into the first of its outputs.
        for (k, (reg, _)) in self.outputs.iter().enumerate() {
            let first = self.output_of[*reg].expect("every output is placed");
            if first != k {
                // SAFETY: the first output was written in full above.
                let src = unsafe { std::slice::from_raw_parts(loc[*reg], len) };
                write_all(dsts[k], src);
            }
        }
    }
}

impl Program {
    /// As `chunk` through the native code, its outputs (larger than the caches) written with
    /// non-temporal stores by the code itself: the elements before the outputs' first 64-byte
    /// boundary in an ordinary call, the rest streamed. `false` (nothing done) when the program
    /// has no native code that streams, or its outputs are not equally aligned.
    pub(crate) fn chunk_streaming(&self, ins: &[&[f32]], start: usize, dsts: &mut [&mut [MaybeUninit<f32>]], regs: &mut Registers) -> bool {
        let Some(code) = self.native.as_ref().filter(|c| c.streams()) else { return false };
        let offset = |d: &[MaybeUninit<f32>]| d.as_ptr() as usize % 64;
        let first = dsts.first().map(|d| offset(d)).unwrap_or(0);
        if first % 4 != 0 || dsts.iter().any(|d| offset(d) != first) {
            return false;
        }
        let len = dsts.first().map(|d| d.len()).unwrap_or(0);
        let head = (((64 - first) % 64) / 4).min(len);
        let mut heads: Vec<&mut [MaybeUninit<f32>]> = Vec::with_capacity(dsts.len());
        let mut rests: Vec<&mut [MaybeUninit<f32>]> = Vec::with_capacity(dsts.len());
        for d in dsts.iter_mut() {
            let (h, r) = d.split_at_mut(head);
            heads.push(h);
            rests.push(r);
        }
        if head > 0 {
            self.native_chunk(code, ins, start, &mut heads, regs, false);
        }
        if len > head {
            self.native_chunk(code, ins, start + head, &mut rests, regs, true);
        }
        true
    }

    /// Whether instruction `i` is a broadcast load of an input with strides, which native code
    /// reads from a buffer the caller fills (a scalar broadcast is a splat in the kernel).
    pub(crate) fn buffered_load(&self, i: usize) -> bool {
        matches!(&self.instrs[i], Instr::Expand { src: Operand::Input(_), strides } if !strides.iter().all(|s| *s == 0))
    }

    /// Broadcast loads into their registers, then one native pass over the chunk, with the
    /// calling convention of `dlc_jit::native`: inputs read elementwise point at this chunk,
    /// those only read through a broadcast (smaller, and never read by the kernel but for a
    /// splat's element 0) at their start, then the broadcasts' registers in order (the kernel's
    /// strided loads, in body order, became these `Expand`s in that order).
    fn native_chunk(
        &self,
        code: &dlc_jit::native::Native,
        ins: &[&[f32]],
        start: usize,
        dsts: &mut [&mut [MaybeUninit<f32>]],
        regs: &mut Registers,
        stream: bool,
    ) {
        let len = dsts.first().map(|d| d.len()).unwrap_or(0);
        let end = start + len;
        let mut outs: Small<*mut f32> = Small::new(std::ptr::null_mut());
        for d in dsts.iter_mut() {
            outs.push(d.as_mut_ptr() as *mut f32);
        }
        // Broadcasts constant along the chunk's runs: splats, no buffers (run_splats.rs).
        if !stream && self.chunk_by_runs(ins, start, outs.as_slice(), len) {
            return;
        }
        let mut ptrs: Small<*const f32> = Small::new(std::ptr::null());
        for (k, x) in ins.iter().enumerate() {
            ptrs.push(if self.direct[k] { x[start..end].as_ptr() } else { x.as_ptr() });
        }
        for (i, inst) in self.instrs.iter().enumerate() {
            if let (Instr::Expand { src: Operand::Input(k), strides }, true) = (inst, self.buffered_load(i)) {
                ptrs.push(match self.tiles[i] {
                    Some(_) => self.tile(i, ins[*k], regs, start),
                    None => {
                        broadcast_load(ins[*k], &self.shape, strides, start, as_uninit(&mut regs.bufs[i][..len]));
                        regs.bufs[i].as_ptr()
                    }
                });
            }
        }
        // SAFETY: every pointer covers `len` f32 values; outputs are fresh buffers (64-byte
        // aligned when streaming, checked by the caller).
        unsafe {
            if stream {
                code.call_streaming(ptrs.as_slice(), outs.as_slice(), len)
            } else {
                code.call(ptrs.as_slice(), outs.as_slice(), len)
            }
        };
    }
}

/// `out[t] = c[t] != 0 ? a[t] : b[t]`. Each mix of slices and scalars is its own loop over
/// zipped slices (no indexing, so no bounds checks), which vectorises to a compare and a blend.
fn select(c: Arg, a: Arg, b: Arg, out: &mut [MaybeUninit<f32>]) {
    let pick = |c: f32, a: f32, b: f32| if c != 0.0 { a } else { b };
    match (c, a, b) {
        (Arg::Slice(c), Arg::Slice(a), Arg::Slice(b)) => {
            for (((o, c), a), b) in out.iter_mut().zip(c).zip(a).zip(b) {
                o.write(pick(*c, *a, *b));
            }
        }
        (Arg::Slice(c), Arg::Slice(a), Arg::Scalar(b)) => {
            for ((o, c), a) in out.iter_mut().zip(c).zip(a) {
                o.write(pick(*c, *a, b));
            }
        }
        (Arg::Slice(c), Arg::Scalar(a), Arg::Slice(b)) => {
            for ((o, c), b) in out.iter_mut().zip(c).zip(b) {
                o.write(pick(*c, a, *b));
            }
        }
        (Arg::Slice(c), Arg::Scalar(a), Arg::Scalar(b)) => {
            for (o, c) in out.iter_mut().zip(c) {
                o.write(pick(*c, a, b));
            }
        }
        (Arg::Scalar(c), a, b) => match if c != 0.0 { a } else { b } {
            Arg::Slice(x) => write_all(out, x),
            Arg::Scalar(v) => fill(out, v),
        },
    }
}
