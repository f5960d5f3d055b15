//! An elementwise kernel as AVX-512 code: `fn(inputs, outputs, len)` (the calling convention of
//! `crate::convention`) that runs the body over sixteen elements at a time in `zmm` registers, the
//! remainder once more under an opmask (loads zero the missing lanes, stores skip them), so
//! there is no scalar tail.
//!
//! Registers: `rdi`/`rsi` hold the input and output pointer arrays, `rdx` the end of the full
//! vectors (in bytes), `rax` the current byte offset, `k7` the remainder's lanes; up to ten
//! buffer pointers stay in registers for the whole loop (`POINTER_REGS`), more are fetched into
//! `r11` at each use. Body values get `zmm` registers from a free list, released after their last
//! use; constants stay in the table after the code and are read as broadcast memory operands.

use super::asm::*;
use crate::convention::{input_count, read, Read};
use crate::kir::{Buf, Elementwise, Inst, Ty};
use dlc_language::ir::{BinaryOp, UnaryOp};

const POINTER_REGS: [u8; 9] = [RCX, R8, R9, R10, RBX, RBP, R12, R13, R14];
/// Where the main loop's last step may start.
const UNROLLED_END: u8 = R15;
const SAVED: [u8; 6] = [RBX, RBP, R12, R13, R14, R15];
/// The opmask of the remainder's lanes.
pub(super) const TAIL_K: u8 = 7;

/// Vectors interleaved in the main loop at most: each value has a register per vector, each
/// selection an opmask per vector (`k1`-`k6`: two slots for each of three).
pub(super) const MAX_U: usize = 3;

/// One value's registers, one per interleaved vector (the first `u` are used).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct R([u8; MAX_U]);

/// A body value: in registers, or a broadcast memory operand (a constant of the table).
#[derive(Clone, Copy, Debug)]
pub(super) enum V {
    R(R),
    M(Mem),
}

/// An instruction's last operand.
#[derive(Clone, Copy, Debug)]
pub(super) enum Src {
    Z(R),
    M(Mem),
}

impl From<V> for Src {
    fn from(v: V) -> Src {
        match v {
            V::R(r) => Src::Z(r),
            V::M(m) => Src::M(m),
        }
    }
}

/// An opmask slot (0 or 1) as a destination's mask: masked lanes kept (`zero` false) or zeroed.
#[derive(Clone, Copy)]
pub(super) struct Sel {
    pub slot: u8,
    pub zero: bool,
}

pub(super) const fn keep(slot: u8) -> Option<Sel> {
    Some(Sel { slot, zero: false })
}

/// The state of one code generation.
pub(super) struct Gen {
    pub a: Asm,
    free: Vec<u8>,
    /// Set when more values were live than there are registers: the code is not used.
    pub failed: bool,
    /// Emitting the remainder: loads and stores masked by `k7`.
    tail: bool,
    /// Vectors computed side by side (independent chains for the out-of-order core).
    u: usize,
    /// Full vectors are stored non-temporally (`vmovntps`, the outputs 64-byte aligned).
    stream: bool,
}

/// Where a buffer pointer is: the array (`rdi` inputs, `rsi` outputs) and its index, and the
/// register it is kept in for the loop, if any.
struct Pointer {
    array: u8,
    index: usize,
    reg: Option<u8>,
}

impl Gen {
    pub fn alloc(&mut self) -> R {
        let mut r = R([0; MAX_U]);
        for slot in r.0.iter_mut().take(self.u) {
            *slot = self.free.pop().unwrap_or_else(|| {
                self.failed = true;
                0
            });
        }
        r
    }

    pub fn release(&mut self, r: R) {
        if !self.failed {
            for x in &r.0[..self.u] {
                debug_assert!(!self.free.contains(x), "zmm{x} released twice");
                self.free.push(*x);
            }
        }
    }

    pub fn c(&mut self, v: f32) -> Mem {
        self.a.constant(v.to_bits())
    }

    pub fn ci(&mut self, v: i32) -> Mem {
        self.a.constant(v as u32)
    }

    /// The opmask of `slot` for vector `i`.
    fn k(i: usize, slot: u8) -> u8 {
        1 + 2 * i as u8 + slot
    }

    fn mask(i: usize, sel: Option<Sel>) -> Mask {
        sel.map_or(NO_MASK, |s| Mask { k: Gen::k(i, s.slot), zero: s.zero })
    }

    fn rm(i: usize, s: Src) -> Rm {
        match s {
            Src::Z(r) => Rm::Z(r.0[i]),
            Src::M(m) => Rm::M(m),
        }
    }

    /// `d = a op b` for every vector.
    pub fn op3(&mut self, op: Op, d: R, a: R, b: Src, sel: Option<Sel>) {
        for i in 0..self.u {
            self.a.op3(op, d.0[i], a.0[i], Gen::rm(i, b), Gen::mask(i, sel));
        }
    }

    /// `d = op src` for every vector.
    pub fn op2(&mut self, op: Op, d: R, src: Src, sel: Option<Sel>) {
        for i in 0..self.u {
            self.a.op2(op, d.0[i], Gen::rm(i, src), Gen::mask(i, sel));
        }
    }

    /// Opmask `slot` = `a pred b`.
    pub fn cmp(&mut self, slot: u8, a: R, b: Src, pred: u8) {
        for i in 0..self.u {
            self.a.cmp(Gen::k(i, slot), a.0[i], Gen::rm(i, b), pred);
        }
    }

    /// Opmask slot 0 = slot 0 | slot 1 (or `&` with `and`).
    pub fn join_masks(&mut self, and: bool) {
        for i in 0..self.u {
            let (d, b) = (Gen::k(i, 0), Gen::k(i, 1));
            if and {
                self.a.kandw(d, d, b);
            } else {
                self.a.korw(d, d, b);
            }
        }
    }

    pub fn broadcast(&mut self, d: R, m: Mem, sel: Option<Sel>) {
        for i in 0..self.u {
            self.a.broadcast(d.0[i], m, Gen::mask(i, sel));
        }
    }

    /// `vpslld` (`ext` 6), `vpsrld` (2) or `vpsrad` (4) by an immediate.
    pub fn shift(&mut self, ext: u8, d: R, src: R, by: u8) {
        for i in 0..self.u {
            self.a.shift(ext, d.0[i], src.0[i], by);
        }
    }

    /// A new value `a op b`.
    pub fn op3_new(&mut self, op: Op, a: R, b: Src) -> R {
        let d = self.alloc();
        self.op3(op, d, a, b, None);
        d
    }

    /// `v` in registers, and whether they are new ones the caller must release.
    pub fn reg(&mut self, v: V) -> (R, bool) {
        match v {
            V::R(r) => (r, false),
            V::M(m) => {
                let r = self.alloc();
                self.broadcast(r, m, None);
                (r, true)
            }
        }
    }

    /// 1.0 where opmask slot 0 is set, 0.0 elsewhere.
    pub fn bool01(&mut self) -> R {
        let d = self.alloc();
        let one = self.c(1.0);
        self.broadcast(d, one, Some(Sel { slot: 0, zero: true }));
        d
    }

    fn tail_mask(&self) -> Mask {
        if self.tail {
            Mask { k: TAIL_K, zero: true }
        } else {
            NO_MASK
        }
    }

    /// The register holding pointer `p` (fetched into `r11` when it has none).
    fn base(&mut self, p: &Pointer) -> u8 {
        match p.reg {
            Some(r) => r,
            None => {
                self.a.load_gpr(R11, p.array, 8 * p.index as i32);
                R11
            }
        }
    }

    /// Every vector of `d` loaded from `p` at `rax` (the vectors one after another).
    fn load(&mut self, d: R, p: &Pointer) {
        let mask = self.tail_mask();
        for i in 0..self.u {
            let base = self.base(p);
            self.a.load(d.0[i], Mem::At { base, index: Some(RAX), disp: 64 * i as i32 }, mask);
        }
    }

    fn store(&mut self, p: &Pointer, s: R) {
        let mask = self.tail_mask();
        for i in 0..self.u {
            let base = self.base(p);
            let at = Mem::At { base, index: Some(RAX), disp: 64 * i as i32 };
            if self.stream && !self.tail {
                self.a.store_nt(at, s.0[i]);
            } else {
                self.a.store(at, s.0[i], mask);
            }
        }
    }
}

/// The machine code of `e` (with its constant table), or why there is none: with three
/// vectors interleaved in the main loop where the registers allow, else two, else one. With
/// `stream`, full vectors are stored non-temporally (every output must be 64-byte aligned; the
/// caller fences before another thread reads them) for outputs larger than the caches.
pub fn generate(e: &Elementwise, stream: bool) -> Result<Vec<u8>, String> {
    (1..=MAX_U)
        .rev()
        .find_map(|u| generate_with(e, u, stream).ok())
        .ok_or_else(|| "the kernel keeps more values live than there are vector registers".into())
}

/// The code with `u` vectors a step of the main loop.
fn generate_with(e: &Elementwise, u: usize, stream: bool) -> Result<Vec<u8>, String> {
    let n_in = input_count(e);
    // Which inputs the code reads: a parameter only read through broadcast buffers is not.
    let mut used = vec![false; n_in];
    let mut next_buffer = e.inputs.len();
    for inst in &e.body {
        if let Inst::Load { from: Buf::Param(k), index } = inst {
            match read(index) {
                Read::Buffer => {
                    used[next_buffer] = true;
                    next_buffer += 1;
                }
                Read::Chunk | Read::Splat => used[*k] = true,
            }
        }
    }
    let mut regs = POINTER_REGS.iter().copied();
    let mut pointer = |array: u8, index: usize| Pointer { array, index, reg: regs.next() };
    let ins: Vec<Option<Pointer>> = (0..n_in).map(|i| used[i].then(|| pointer(RDI, i))).collect();
    let outs: Vec<Pointer> = (0..e.outputs.len()).map(|j| pointer(RSI, j)).collect();

    let mut g = Gen { a: Asm::default(), free: (0..32).rev().collect(), failed: false, tail: false, u: 1, stream };
    for r in SAVED {
        g.a.push(r);
    }
    // k7 = (1 << (len % 16)) - 1; rdx = the full vectors' bytes; r15 = where the main loop's
    // last step starts at the latest (rdx - 64 (u - 1), compared signed).
    g.a.mov(RCX, RDX);
    g.a.and_imm(RCX, 15);
    g.a.mov32_imm(R11, 1);
    g.a.shl32_cl(R11);
    g.a.dec32(R11);
    g.a.kmovw_from(TAIL_K, R11);
    g.a.and_imm(RDX, -16);
    g.a.shl_imm(RDX, 2);
    g.a.mov(UNROLLED_END, RDX);
    g.a.add_imm(UNROLLED_END, -64 * (u as i32 - 1));
    for p in ins.iter().flatten().chain(&outs) {
        if let Some(r) = p.reg {
            g.a.load_gpr(r, p.array, 8 * p.index as i32);
        }
    }
    g.a.zero_rax();
    // The main loop, `u` vectors a step.
    let to_check = g.a.jmp();
    let top = g.a.here();
    g.u = u;
    body(&mut g, e, &ins, &outs);
    g.a.add_imm(RAX, 64 * u as i32);
    let check = g.a.here();
    g.a.patch(to_check, check);
    g.a.cmp_gpr(RAX, UNROLLED_END);
    g.a.jcc(CC_L, Some(top));
    // The full vectors left, one a step.
    g.u = 1;
    let to_check = g.a.jmp();
    let top = g.a.here();
    body(&mut g, e, &ins, &outs);
    g.a.add_imm(RAX, 64);
    let check = g.a.here();
    g.a.patch(to_check, check);
    g.a.cmp_gpr(RAX, RDX);
    g.a.jcc(CC_B, Some(top));
    // The remainder under k7.
    g.a.kortestw(TAIL_K);
    let to_done = g.a.jcc(CC_Z, None);
    g.tail = true;
    body(&mut g, e, &ins, &outs);
    let done = g.a.here();
    g.a.patch(to_done, done);
    g.a.vzeroupper();
    for r in SAVED.iter().rev() {
        g.a.pop(*r);
    }
    g.a.ret();
    if g.failed {
        return Err("the kernel keeps more values live than there are vector registers".into());
    }
    Ok(g.a.finish())
}

/// The body once, over the `u` vectors at `rax`, outputs stored.
fn body(g: &mut Gen, e: &Elementwise, ins: &[Option<Pointer>], outs: &[Pointer]) {
    // The last instruction reading each value (outputs read at the end).
    let end = e.body.len();
    let mut last = vec![None; end];
    for (i, inst) in e.body.iter().enumerate() {
        for j in operands(inst) {
            last[j] = Some(i);
        }
    }
    for (r, _) in &e.outputs {
        last[*r] = Some(end);
    }
    let mut next_buffer = e.inputs.len();
    let mut vals: Vec<V> = Vec::with_capacity(end);
    for (i, inst) in e.body.iter().enumerate() {
        let v = match inst {
            Inst::Load { from: Buf::Param(k), index } => {
                let r = g.alloc();
                match read(index) {
                    Read::Splat => {
                        let base = g.base(ins[*k].as_ref().expect("a splat's parameter is read"));
                        g.broadcast(r, Mem::At { base, index: None, disp: 0 }, None);
                    }
                    how => {
                        let p = if how == Read::Buffer {
                            next_buffer += 1;
                            next_buffer - 1
                        } else {
                            *k
                        };
                        g.load(r, ins[p].as_ref().expect("a loaded input is read"));
                    }
                }
                V::R(r)
            }
            Inst::Load { from: Buf::Slot(_), .. } => unreachable!("`supports` keeps row buffers out of compiled kernels"),
            Inst::Const(c) => V::M(g.c(*c)),
            Inst::Unary(op, x) => {
                let (x, owned) = g.reg(vals[*x]);
                let d = g.unary(*op, x);
                if owned {
                    g.release(x);
                }
                V::R(d)
            }
            Inst::Binary(op, x, y) => V::R(g.binary(*op, vals[*x], vals[*y])),
            Inst::Where(c, x, y) => {
                let (c, c_owned) = g.reg(vals[*c]);
                let zero = g.c(0.0);
                g.cmp(0, c, Src::M(zero), CMP_NEQ_UQ);
                let (y, y_owned) = g.reg(vals[*y]);
                let d = g.alloc();
                g.op3(VBLENDMPS, d, y, vals[*x].into(), keep(0));
                for (r, owned) in [(c, c_owned), (y, y_owned)] {
                    if owned {
                        g.release(r);
                    }
                }
                V::R(d)
            }
            Inst::ToBool(x) => {
                let (x, owned) = g.reg(vals[*x]);
                let zero = g.c(0.0);
                g.cmp(0, x, Src::M(zero), CMP_NEQ_UQ);
                if owned {
                    g.release(x);
                }
                V::R(g.bool01())
            }
            Inst::Round(Ty::BF16, x) => {
                let (x, owned) = g.reg(vals[*x]);
                let d = g.round_bf16(x);
                if owned {
                    g.release(x);
                }
                V::R(d)
            }
            Inst::Round(..) => unreachable!("`supports_on` keeps f16 rounding out of compiled kernels"),
        };
        vals.push(v);
        // Registers whose last reader this was (or that nothing reads) go back to the free list.
        let mut done: Vec<usize> = operands(inst).into_iter().filter(|j| last[*j] == Some(i)).collect();
        if last[i].is_none() {
            done.push(i);
        }
        done.sort_unstable();
        done.dedup();
        for j in done {
            if let V::R(r) = vals[j] {
                g.release(r);
            }
        }
    }
    for (j, (r, _)) in e.outputs.iter().enumerate() {
        let (src, owned) = g.reg(vals[*r]);
        g.store(&outs[j], src);
        if owned {
            g.release(src);
        }
    }
    // Everything still held is an output's value: the next emission starts with every register free.
    let mut held: Vec<R> = vec![];
    for (r, _) in &e.outputs {
        if let V::R(x) = vals[*r] {
            if !held.contains(&x) {
                held.push(x);
            }
        }
    }
    for r in held {
        g.release(r);
    }
}

/// The body values an instruction reads.
fn operands(inst: &Inst) -> Vec<usize> {
    match inst {
        Inst::Load { .. } | Inst::Const(_) => vec![],
        Inst::Unary(_, x) | Inst::ToBool(x) | Inst::Round(_, x) => vec![*x],
        Inst::Binary(_, x, y) => vec![*x, *y],
        Inst::Where(c, x, y) => vec![*c, *x, *y],
    }
}

impl Gen {
    fn unary(&mut self, op: UnaryOp, x: R) -> R {
        match op {
            UnaryOp::Neg => {
                let sign = self.ci(i32::MIN);
                self.op3_new(VPXORD, x, Src::M(sign))
            }
            UnaryOp::Abs => {
                let magnitude = self.ci(i32::MAX);
                self.op3_new(VPANDD, x, Src::M(magnitude))
            }
            UnaryOp::Sqrt => {
                let d = self.alloc();
                self.op2(VSQRTPS, d, Src::Z(x), None);
                d
            }
            UnaryOp::Recip => {
                let d = self.alloc();
                let one = self.c(1.0);
                self.broadcast(d, one, None);
                self.op3(VDIVPS, d, d, Src::Z(x), None);
                d
            }
            UnaryOp::Exp => self.exp32(x),
            UnaryOp::Erf => self.erf32(x),
            UnaryOp::Tanh => self.tanh32(x),
            UnaryOp::Log => self.log32(x),
            other => unreachable!("`supports` keeps {other:?} out of compiled kernels"),
        }
    }

    /// f32 to bf16 and back, on the bits as the interpreter's `round_bf16`: round to nearest,
    /// ties to even (`b + 0x7fff + lsb`, then the low half cleared); a NaN kept, made quiet.
    fn round_bf16(&mut self, x: R) -> R {
        let d = self.alloc();
        self.shift(2, d, x, 16);
        let (one, half_ulp, quiet, high) = (self.ci(1), self.ci(0x7fff), self.ci(0x0040_0000), self.ci(0xffff_0000_u32 as i32));
        self.op3(VPANDD, d, d, Src::M(one), None);
        self.op3(VPADDD, d, d, Src::M(half_ulp), None);
        self.op3(VPADDD, d, d, Src::Z(x), None);
        self.cmp(0, x, Src::Z(x), CMP_UNORD_Q);
        self.op3(VPORD, d, x, Src::M(quiet), keep(0));
        self.op3(VPANDD, d, d, Src::M(high), None);
        d
    }

    fn binary(&mut self, op: BinaryOp, x: V, y: V) -> R {
        // Addition and multiplication commute exactly: a constant goes second, as a memory operand.
        let (x, y) = match (op, x, y) {
            (BinaryOp::Add | BinaryOp::Mul, V::M(_), V::R(_)) => (y, x),
            _ => (x, y),
        };
        let (xr, x_owned) = self.reg(x);
        let d = match op {
            BinaryOp::Add => self.op3_new(VADDPS, xr, y.into()),
            BinaryOp::Sub => self.op3_new(VSUBPS, xr, y.into()),
            BinaryOp::Mul => self.op3_new(VMULPS, xr, y.into()),
            BinaryOp::Div => self.op3_new(VDIVPS, xr, y.into()),
            // `if x.is_nan() || x > y { x } else { y }` (and `<` for min).
            BinaryOp::Max | BinaryOp::Min => {
                let pred = if op == BinaryOp::Max { CMP_GT_OS } else { CMP_LT_OS };
                self.cmp(0, xr, Src::Z(xr), CMP_UNORD_Q);
                self.cmp(1, xr, y.into(), pred);
                self.join_masks(false);
                let (yr, y_owned) = self.reg(y);
                let d = self.alloc();
                self.op3(VBLENDMPS, d, yr, Src::Z(xr), keep(0));
                if y_owned {
                    self.release(yr);
                }
                d
            }
            BinaryOp::CmpLt | BinaryOp::CmpLe | BinaryOp::CmpEq | BinaryOp::CmpNe => {
                let pred = match op {
                    BinaryOp::CmpLt => CMP_LT_OS,
                    BinaryOp::CmpLe => CMP_LE_OS,
                    BinaryOp::CmpEq => CMP_EQ_OQ,
                    _ => CMP_NEQ_UQ,
                };
                self.cmp(0, xr, y.into(), pred);
                self.bool01()
            }
            BinaryOp::And | BinaryOp::Or => {
                let zero = self.c(0.0);
                self.cmp(0, xr, Src::M(zero), CMP_NEQ_UQ);
                let (yr, y_owned) = self.reg(y);
                self.cmp(1, yr, Src::M(zero), CMP_NEQ_UQ);
                if y_owned {
                    self.release(yr);
                }
                self.join_masks(op == BinaryOp::And);
                self.bool01()
            }
            other => unreachable!("`supports` keeps {other:?} out of compiled kernels"),
        };
        if x_owned {
            self.release(xr);
        }
        d
    }
}
