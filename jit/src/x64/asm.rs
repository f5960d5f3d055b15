//! An x86-64 machine-code writer for the few instructions the AVX-512 kernels need: EVEX-encoded
//! 512-bit float and integer ops on `zmm0`-`zmm31` (with opmask merging or zeroing, and
//! broadcast memory operands), VEX opmask ops, and the handful of general-purpose instructions of
//! a loop. Encodings follow the Intel SDM, volume 2 (2.7 "Intel AVX-512 encoding"); every
//! memory operand is either `[base + index + disp]` through a SIB byte or a constant of the
//! kernel's table, `[rip + disp32]`, patched when the code is finished.

/// General-purpose register numbers (the encoding's 4-bit numbers).
pub const RAX: u8 = 0;
pub const RCX: u8 = 1;
pub const RDX: u8 = 2;
pub const RBX: u8 = 3;
pub const RSP: u8 = 4;
pub const RBP: u8 = 5;
pub const RSI: u8 = 6;
pub const RDI: u8 = 7;
pub const R8: u8 = 8;
pub const R9: u8 = 9;
pub const R10: u8 = 10;
pub const R11: u8 = 11;
pub const R12: u8 = 12;
pub const R13: u8 = 13;
pub const R14: u8 = 14;
pub const R15: u8 = 15;

/// A memory operand.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mem {
    /// Entry `i` (4 bytes) of the constant table placed after the code.
    Const(u32),
    /// `[base + index + disp]` (index scaled by 1).
    At { base: u8, index: Option<u8>, disp: i32 },
}

/// The register-or-memory operand of an instruction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rm {
    Z(u8),
    M(Mem),
}

/// Which opcode map an EVEX instruction lives in, and its implied prefix.
#[derive(Clone, Copy)]
pub struct Op {
    /// 1: 0F, 2: 0F38, 3: 0F3A.
    pub map: u8,
    /// 0: none, 1: 66, 2: F3, 3: F2.
    pub pp: u8,
    pub code: u8,
}

pub const fn op(map: u8, pp: u8, code: u8) -> Op {
    Op { map, pp, code }
}

// Float ops (0F, no prefix, W0).
pub const VMOVUPS_LOAD: Op = op(1, 0, 0x10);
pub const VMOVUPS_STORE: Op = op(1, 0, 0x11);
pub const VMOVAPS: Op = op(1, 0, 0x28);
pub const VMOVNTPS: Op = op(1, 0, 0x2B);
pub const VSQRTPS: Op = op(1, 0, 0x51);
pub const VADDPS: Op = op(1, 0, 0x58);
pub const VMULPS: Op = op(1, 0, 0x59);
pub const VCVTDQ2PS: Op = op(1, 0, 0x5B);
pub const VSUBPS: Op = op(1, 0, 0x5C);
pub const VMINPS: Op = op(1, 0, 0x5D);
pub const VDIVPS: Op = op(1, 0, 0x5E);
pub const VMAXPS: Op = op(1, 0, 0x5F);
pub const VCMPPS: Op = op(1, 0, 0xC2);
// With a prefix: F3 0F 5B is the truncating conversion to i32.
pub const VCVTTPS2DQ: Op = op(1, 2, 0x5B);
// Integer ops (66 0F, W0).
pub const VPSHIFT_IMM: Op = op(1, 1, 0x72);
pub const VPANDD: Op = op(1, 1, 0xDB);
pub const VPORD: Op = op(1, 1, 0xEB);
pub const VPXORD: Op = op(1, 1, 0xEF);
pub const VPADDD: Op = op(1, 1, 0xFE);
// 66 0F38, W0.
pub const VBROADCASTSS: Op = op(2, 1, 0x18);
pub const VBLENDMPS: Op = op(2, 1, 0x65);
pub const VFMADD213PS: Op = op(2, 1, 0xA8);
pub const VFMADD231PS: Op = op(2, 1, 0xB8);

/// `vcmpps` predicates: the ordered ones are false for NaN, `NEQ_UQ` true (Rust's `!=`).
pub const CMP_EQ_OQ: u8 = 0x00;
pub const CMP_LT_OS: u8 = 0x01;
pub const CMP_LE_OS: u8 = 0x02;
pub const CMP_UNORD_Q: u8 = 0x03;
pub const CMP_NEQ_UQ: u8 = 0x04;
pub const CMP_GT_OS: u8 = 0x0E;

/// Condition codes of `jcc`.
pub const CC_B: u8 = 0x2;
pub const CC_Z: u8 = 0x4;
pub const CC_NZ: u8 = 0x5;
pub const CC_L: u8 = 0xC;

/// Opmask: which `k` register masks the destination and whether masked lanes are zeroed.
#[derive(Clone, Copy, Default)]
pub struct Mask {
    pub k: u8,
    pub zero: bool,
}

pub const NO_MASK: Mask = Mask { k: 0, zero: false };

#[derive(Default)]
pub struct Asm {
    pub code: Vec<u8>,
    /// (position of a rip-relative disp32, end of its instruction, constant index).
    fixups: Vec<(usize, usize, u32)>,
    /// The constant table, as bits.
    consts: Vec<u32>,
}

impl Asm {
    /// The table index of a 4-byte constant (made once per value).
    pub fn constant(&mut self, bits: u32) -> Mem {
        let i = match self.consts.iter().position(|c| *c == bits) {
            Some(i) => i,
            None => {
                self.consts.push(bits);
                self.consts.len() - 1
            }
        };
        Mem::Const(i as u32)
    }

    fn byte(&mut self, b: u8) {
        self.code.push(b);
    }

    fn dword(&mut self, v: u32) {
        self.code.extend_from_slice(&v.to_le_bytes());
    }

    /// An EVEX instruction, 512 bits wide, W0: `reg` is ModRM.reg (a destination or a source
    /// register, or an opcode extension), `vvvv` the second source (0 when unused), `rm` the
    /// last operand; `bcst` broadcasts a memory operand's one f32 to every lane.
    #[allow(clippy::too_many_arguments)]
    pub fn evex(&mut self, op: Op, reg: u8, vvvv: u8, rm: Rm, mask: Mask, bcst: bool, imm: Option<u8>) {
        let (x, b) = match rm {
            Rm::Z(r) => ((r >> 4) & 1, (r >> 3) & 1),
            Rm::M(Mem::At { base, index, .. }) => (index.map_or(0, |i| (i >> 3) & 1), (base >> 3) & 1),
            Rm::M(Mem::Const(_)) => (0, 0),
        };
        let inv = |bit: u8| (!bit) & 1;
        let p0 = inv((reg >> 3) & 1) << 7 | inv(x) << 6 | inv(b) << 5 | inv((reg >> 4) & 1) << 4 | op.map;
        let p1 = ((!vvvv) & 0xF) << 3 | 0b100 | op.pp;
        let p2 = (mask.zero as u8) << 7 | 0b10 << 5 | (bcst as u8) << 4 | inv((vvvv >> 4) & 1) << 3 | (mask.k & 7);
        self.code.extend_from_slice(&[0x62, p0, p1, p2, op.code]);
        self.modrm(reg, rm, imm);
    }

    /// ModRM (and SIB, displacement, immediate) for register `reg` and operand `rm`.
    fn modrm(&mut self, reg: u8, rm: Rm, imm: Option<u8>) {
        let reg = (reg & 7) << 3;
        let mut fixup = None;
        match rm {
            Rm::Z(r) => self.byte(0xC0 | reg | (r & 7)),
            Rm::M(Mem::Const(i)) => {
                self.byte(reg | 0b101);
                fixup = Some((self.code.len(), i));
                self.dword(0);
            }
            Rm::M(Mem::At { base, index, disp }) => {
                // Always a SIB byte; a zero displacement as disp8 (EVEX scales it: still 0).
                let md = if disp == 0 { 0b01 } else { 0b10 };
                self.byte(md << 6 | reg | 0b100);
                self.byte(index.map_or(0b100, |i| i & 7) << 3 | (base & 7));
                if disp == 0 {
                    self.byte(0);
                } else {
                    self.dword(disp as u32);
                }
            }
        }
        if let Some(imm) = imm {
            self.byte(imm);
        }
        if let Some((pos, i)) = fixup {
            self.fixups.push((pos, self.code.len(), i));
        }
    }

    /// `dst = a op b` (three-operand float or integer op).
    pub fn op3(&mut self, op: Op, dst: u8, a: u8, b: Rm, mask: Mask) {
        let bcst = matches!(b, Rm::M(_));
        self.evex(op, dst, a, b, mask, bcst, None);
    }

    /// `dst = op src` (two-operand: conversions, square root, moves).
    pub fn op2(&mut self, op: Op, dst: u8, src: Rm, mask: Mask) {
        let bcst = matches!(src, Rm::M(_));
        self.evex(op, dst, 0, src, mask, bcst, None);
    }

    /// A full-width load from memory (`vmovups`), masked lanes zeroed when `mask` is given.
    pub fn load(&mut self, dst: u8, at: Mem, mask: Mask) {
        self.evex(VMOVUPS_LOAD, dst, 0, Rm::M(at), mask, false, None);
    }

    pub fn store(&mut self, at: Mem, src: u8, mask: Mask) {
        self.evex(VMOVUPS_STORE, src, 0, Rm::M(at), Mask { zero: false, ..mask }, false, None);
    }

    /// A non-temporal store (to a 64-byte aligned address; no mask).
    pub fn store_nt(&mut self, at: Mem, src: u8) {
        self.evex(VMOVNTPS, src, 0, Rm::M(at), NO_MASK, false, None);
    }

    /// One f32 from memory into every lane.
    pub fn broadcast(&mut self, dst: u8, at: Mem, mask: Mask) {
        self.evex(VBROADCASTSS, dst, 0, Rm::M(at), mask, false, None);
    }

    /// `k = a pred b`, lane by lane.
    pub fn cmp(&mut self, k: u8, a: u8, b: Rm, pred: u8) {
        let bcst = matches!(b, Rm::M(_));
        self.evex(VCMPPS, k, a, b, NO_MASK, bcst, Some(pred));
    }

    /// `vpslld` (`ext` 6), `vpsrld` (2) or `vpsrad` (4) by an immediate.
    pub fn shift(&mut self, ext: u8, dst: u8, src: u8, by: u8) {
        self.evex(VPSHIFT_IMM, ext, dst, Rm::Z(src), NO_MASK, false, Some(by));
    }

    /// A VEX-encoded opmask instruction (map 0F, W0): `reg`, `vvvv`, `rm` as ModRM fields.
    fn vex_k(&mut self, code: u8, l: u8, reg: u8, vvvv: u8, rm: u8) {
        let inv = |bit: u8| (!bit) & 1;
        let b1 = inv((reg >> 3) & 1) << 7 | 1 << 6 | inv((rm >> 3) & 1) << 5 | 0b00001;
        let b2 = ((!vvvv) & 0xF) << 3 | l << 2;
        self.code.extend_from_slice(&[0xC4, b1, b2, code, 0xC0 | (reg & 7) << 3 | (rm & 7)]);
    }

    pub fn korw(&mut self, dst: u8, a: u8, b: u8) {
        self.vex_k(0x45, 1, dst, a, b);
    }

    pub fn kandw(&mut self, dst: u8, a: u8, b: u8) {
        self.vex_k(0x41, 1, dst, a, b);
    }

    /// `kmovw k, r32`.
    pub fn kmovw_from(&mut self, k: u8, r: u8) {
        self.vex_k(0x92, 0, k, 0, r);
    }

    /// `kortestw k, k`: ZF set when every bit of `k` is clear.
    pub fn kortestw(&mut self, k: u8) {
        self.vex_k(0x98, 0, k, 0, k);
    }

    fn rex(&mut self, w: bool, reg: u8, base: u8) {
        let r = 0x40 | (w as u8) << 3 | ((reg >> 3) & 1) << 2 | ((base >> 3) & 1);
        if r != 0x40 {
            self.byte(r);
        }
    }

    pub fn push(&mut self, r: u8) {
        self.rex(false, 0, r);
        self.byte(0x50 | (r & 7));
    }

    pub fn pop(&mut self, r: u8) {
        self.rex(false, 0, r);
        self.byte(0x58 | (r & 7));
    }

    /// `mov dst, [base + disp]` (64-bit).
    pub fn load_gpr(&mut self, dst: u8, base: u8, disp: i32) {
        self.rex(true, dst, base);
        self.byte(0x8B);
        self.byte(0b10 << 6 | (dst & 7) << 3 | 0b100);
        self.byte(0b100 << 3 | (base & 7));
        self.dword(disp as u32);
    }

    /// `mov dst, src` (64-bit).
    pub fn mov(&mut self, dst: u8, src: u8) {
        self.rex(true, src, dst);
        self.byte(0x89);
        self.byte(0xC0 | (src & 7) << 3 | (dst & 7));
    }

    /// `op r64, imm32` of the 0x81 group (`ext`: 0 add, 4 and, 5 sub).
    fn group1(&mut self, ext: u8, r: u8, imm: i32) {
        self.rex(true, 0, r);
        self.byte(0x81);
        self.byte(0xC0 | ext << 3 | (r & 7));
        self.dword(imm as u32);
    }

    pub fn add_imm(&mut self, r: u8, imm: i32) {
        self.group1(0, r, imm);
    }

    pub fn and_imm(&mut self, r: u8, imm: i32) {
        self.group1(4, r, imm);
    }

    /// `op r64, imm8` of the 0xC1 shift group (`ext`: 4 shl, 5 shr).
    fn shift64(&mut self, ext: u8, r: u8, by: u8) {
        self.rex(true, 0, r);
        self.byte(0xC1);
        self.byte(0xC0 | ext << 3 | (r & 7));
        self.byte(by);
    }

    /// `shl r64, imm8`.
    pub fn shl_imm(&mut self, r: u8, by: u8) {
        self.shift64(4, r, by);
    }

    /// `shr r64, imm8`.
    pub fn shr_imm(&mut self, r: u8, by: u8) {
        self.shift64(5, r, by);
    }

    /// `add dst, src` (64-bit).
    pub fn add_gpr(&mut self, dst: u8, src: u8) {
        self.rex(true, src, dst);
        self.byte(0x01);
        self.byte(0xC0 | (src & 7) << 3 | (dst & 7));
    }

    /// `mov r32, imm32`.
    pub fn mov32_imm(&mut self, r: u8, imm: u32) {
        self.rex(false, 0, r);
        self.byte(0xB8 | (r & 7));
        self.dword(imm);
    }

    /// `shl r32, cl`.
    pub fn shl32_cl(&mut self, r: u8) {
        self.rex(false, 0, r);
        self.byte(0xD3);
        self.byte(0xC0 | 4 << 3 | (r & 7));
    }

    /// `sub r32, 1`.
    pub fn dec32(&mut self, r: u8) {
        self.rex(false, 0, r);
        self.byte(0xFF);
        self.byte(0xC0 | 1 << 3 | (r & 7));
    }

    /// `cmp a, b` (64-bit): flags of `a - b`.
    pub fn cmp_gpr(&mut self, a: u8, b: u8) {
        self.rex(true, b, a);
        self.byte(0x39);
        self.byte(0xC0 | (b & 7) << 3 | (a & 7));
    }

    /// `xor eax, eax`.
    pub fn zero_rax(&mut self) {
        self.code.extend_from_slice(&[0x31, 0xC0]);
    }

    /// `jcc rel32` to `target` if known (a backward jump); returns where to patch otherwise.
    pub fn jcc(&mut self, cc: u8, target: Option<usize>) -> usize {
        self.code.extend_from_slice(&[0x0F, 0x80 | cc]);
        self.rel32(target)
    }

    /// `jmp rel32`, patched later.
    pub fn jmp(&mut self) -> usize {
        self.byte(0xE9);
        self.rel32(None)
    }

    fn rel32(&mut self, target: Option<usize>) -> usize {
        let at = self.code.len();
        self.dword(0);
        if let Some(t) = target {
            self.patch(at, t);
        }
        at
    }

    /// Point the rel32 at `at` to `target`.
    pub fn patch(&mut self, at: usize, target: usize) {
        let rel = target as i64 - (at as i64 + 4);
        self.code[at..at + 4].copy_from_slice(&(rel as i32).to_le_bytes());
    }

    pub fn here(&self) -> usize {
        self.code.len()
    }

    pub fn vzeroupper(&mut self) {
        self.code.extend_from_slice(&[0xC5, 0xF8, 0x77]);
    }

    pub fn ret(&mut self) {
        self.byte(0xC3);
    }

    /// The code followed by its constant table (64-byte aligned), rip-relative operands patched.
    pub fn finish(mut self) -> Vec<u8> {
        while self.code.len() % 64 != 0 {
            self.byte(0xCC);
        }
        let table = self.code.len();
        for c in std::mem::take(&mut self.consts) {
            self.dword(c);
        }
        for (pos, end, i) in std::mem::take(&mut self.fixups) {
            let rel = (table + 4 * i as usize) as i64 - end as i64;
            self.code[pos..pos + 4].copy_from_slice(&(rel as i32).to_le_bytes());
        }
        self.code
    }
}
