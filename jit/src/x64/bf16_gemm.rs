//! A bf16 matrix-product microkernel for CPUs with AVX512-BF16, written by our own encoder:
//! `vdpbf16ps` multiplies sixteen pairs of bf16 values exactly and adds both products to an f32
//! lane, twice the multiply-adds of an f32 `vfmadd` a vector (oneDNN 2.6's bf16 matmul, the
//! library Debian ships, lost to the f32 kernels on most of the MLP's shapes on a Zen 4).
//!
//! One call computes a tile of up to `MR` rows by `NR` (32) columns over the whole depth, from
//! operands converted to pairs along the depth (the layout `vdpbf16ps` reads; the caller
//! converts, see the interpreter's `exec/bf16_product.rs`): a 32-bit word holds two bf16 values,
//! the even depth's in its low half, and each operand is a matrix of words with one row per depth
//! pair:
//! - A: row p holds the tile's rows' words at depth pair p, `lda` bytes from row p - 1;
//! - B: row p holds the tile's 32 columns' words at depth pair p, `ldb` bytes apart.
//!
//! Each of the tile's rows keeps two accumulators (columns 0-15 and 16-31), so a twelve-row tile
//! holds 24 of the 32 `zmm` registers; each depth pair loads B's two vectors once and broadcasts
//! each of A's words into a register once (six of them in turn) for the row's two products. The
//! result is stored (not added) under two column masks.
//! B's 32 words of a row are read whole even where fewer columns are stored (the caller pads).
//! A second set of kernels rounds the sums to bf16 before storing them (a bf16 product's
//! result, rounded in registers rather than by a pass over the stored product), on the bits as
//! the interpreter's `round_bf16` and the AVX-512 back end's (codegen.rs) round. Each set has
//! kernels that then add a bias to every row (one value a column), and a relu after it: a
//! `Linear`'s epilogue in the registers that hold its sums; and kernels that keep each sum only
//! where a relu's output is positive, else 0 (the relu's backward) (`Finish`).

use super::asm::{self, Asm, Mask, Mem, Rm, NO_MASK, R10, R11, R8, R9, RAX, RCX, RDI, RDX, RSI, RSP};
use super::memory::Code;

/// Rows a tile has at most (two accumulators each, plus two registers for B).
pub const MR: usize = 12;
/// Columns of a tile.
pub const NR: usize = 32;

/// Registers A's words are broadcast into (the accumulators end at zmm23, B is in zmm30-31).
const BROADCASTS: [u8; 6] = [24, 25, 26, 27, 28, 29];

/// `vdpbf16ps zmm, zmm, zmm/m512/m32bcst`: EVEX.512.F3.0F38.W0 52.
const VDPBF16PS: asm::Op = asm::op(2, 2, 0x52);

type TileFn = unsafe extern "sysv64" fn(*const u32, *const u32, *mut f32, u64, u64, u64, u64, u64, *const f32);

/// What a tile does to its sums before it stores them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Finish {
    /// Round each sum to bf16.
    pub round: bool,
    /// Then add the bias of each column (the tile's first column's at the pointer; columns past
    /// the tile's are not read), and with `true` the relu after it, `0 < s ? s : 0` (a NaN
    /// becomes 0, as the fused region's `where` makes it).
    pub bias: Option<(*const f32, bool)>,
    /// Else the tile's first value of `y`, shaped as the result (rows `ldc` apart): each sum
    /// kept where its `y` is positive, else 0, `where(0 < y, s, 0)` (0 for a NaN `y`).
    pub mask: Option<*const f32>,
}

impl Finish {
    /// Which of the kernels of a layout and rounding: none, a bias, a bias and relu, a mask;
    /// and the pointer it reads.
    fn epilogue(&self) -> (usize, *const f32) {
        match (self.bias, self.mask) {
            (Some((b, false)), _) => (1, b),
            (Some((b, true)), _) => (2, b),
            (None, Some(y)) => (3, y),
            (None, None) => (0, std::ptr::null()),
        }
    }
}

/// Epilogues a kernel set has (`Finish::epilogue`).
const EPILOGUES: usize = 4;

/// Whether this CPU (and OS) runs the kernel: AVX-512F with its state saved by the OS, and
/// AVX512-BF16 (CPUID leaf 7, sub-leaf 1, EAX bit 5).
pub fn available() -> bool {
    if !super::available() {
        return false;
    }
    // SAFETY: CPUID is always present on x86-64; leaf 7 exists where AVX-512F was detected.
    // (`unsafe` until Rust 1.87, the MSRV is older.)
    #[allow(unused_unsafe)]
    let leaf = unsafe { std::arch::x86_64::__cpuid_count(7, 1) };
    leaf.eax & (1 << 5) != 0
}

/// The tile kernels, one per row count 1..=MR, storing the sums as they are, then the same
/// rounding them to bf16; each with no epilogue, a bias, a bias and relu, and a mask.
pub struct Bf16Tiles {
    kernels: Vec<Code>,
}

impl Bf16Tiles {
    /// Generate the kernels: an error where the CPU lacks AVX512-BF16.
    pub fn new() -> Result<Bf16Tiles, String> {
        if !available() {
            return Err("this CPU has no AVX512-BF16".into());
        }
        let kernels = [ALayout::Blocks, ALayout::Rows]
            .into_iter()
            .flat_map(|layout| [false, true].into_iter().map(move |round| (layout, round)))
            .flat_map(|(layout, round)| (0..EPILOGUES).map(move |epilogue| (layout, round, epilogue)))
            .flat_map(|(layout, round, epilogue)| (1..=MR).map(move |rows| Code::new(&generate(rows, round, epilogue, layout))))
            .collect::<Result<_, _>>()?;
        Ok(Bf16Tiles { kernels })
    }

    /// `c[r * ldc + j] = sum over depth of A[r, d] * B[d, j]` for rows `0..rows` and columns
    /// `0..cols`, from word matrices `a` (row stride `lda` words) and `b` (row stride `ldb`) of
    /// `kp` depth pairs (see the module's comment); each sum finished as `finish` says.
    ///
    /// # Safety
    /// `a` holds `kp` rows of `rows` words, `b` `kp` rows of NR words, `c` rows of `ldc` f32
    /// with room for `cols` values each, a bias `cols` values; 1 <= rows <= MR, 1 <= cols <= NR,
    /// kp >= 1.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn tile(
        &self,
        rows: usize,
        a: (*const u32, usize),
        b: (*const u32, usize),
        kp: usize,
        c: (*mut f32, usize),
        cols: usize,
        finish: Finish,
    ) {
        unsafe { self.call(ALayout::Blocks, rows, a, b, kp, c, cols, finish) }
    }

    /// As `tile`, from A's rows as they are converted: row r's words (its depth pairs in order)
    /// at `a.0 + r * a.1` (`a.1` words apart), and B's rows NR words apart. The tile reads A's
    /// rows as twelve streams, so the rows need no transpose into blocks first.
    ///
    /// # Safety
    /// `a` holds `rows` rows of `kp` words `a.1` apart, `b` `kp` rows of NR words, `c` rows of
    /// `ldc` f32 with room for `cols` values each, a bias `cols` values; 1 <= rows <= MR,
    /// 1 <= cols <= NR, kp >= 1.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn tile_from_rows(
        &self,
        rows: usize,
        a: (*const u32, usize),
        b: *const u32,
        kp: usize,
        c: (*mut f32, usize),
        cols: usize,
        finish: Finish,
    ) {
        unsafe { self.call(ALayout::Rows, rows, a, (b, NR), kp, c, cols, finish) }
    }

    /// The kernel for `rows` rows of A laid out as `layout` (finishing as `finish` says) called
    /// on these operands (strides in words; the kernels take bytes).
    ///
    /// # Safety
    /// As `tile` or `tile_from_rows`, whichever `layout` stands for.
    #[allow(clippy::too_many_arguments)]
    unsafe fn call(
        &self,
        layout: ALayout,
        rows: usize,
        a: (*const u32, usize),
        b: (*const u32, usize),
        kp: usize,
        c: (*mut f32, usize),
        cols: usize,
        finish: Finish,
    ) {
        debug_assert!((1..=MR).contains(&rows) && (1..=NR).contains(&cols) && kp >= 1);
        let (epilogue, operand) = finish.epilogue();
        let set = (layout as usize * 2 + finish.round as usize) * EPILOGUES + epilogue;
        let kernel = &self.kernels[set * MR + rows - 1];
        // SAFETY: the code was generated for this signature (System V, as `TileFn`).
        let f = unsafe { std::mem::transmute::<*const u8, TileFn>(kernel.entry()) };
        unsafe { f(a.0, b.0, c.0, kp as u64, (a.1 * 4) as u64, (b.1 * 4) as u64, (c.1 * 4) as u64, masks(cols), operand) }
    }
}

/// The store masks for `cols` columns: bits 0-15 the first vector's, 16-31 the second's.
fn masks(cols: usize) -> u64 {
    if cols >= NR {
        u32::MAX as u64
    } else {
        (1u64 << cols) - 1
    }
}

/// How a tile kernel finds A's words at depth pair p.
#[derive(Clone, Copy)]
enum ALayout {
    /// Row p of a block: the tile's rows' words one after another, blocks' rows `lda` apart.
    Blocks = 0,
    /// Word p of each of the tile's rows, the rows `lda` apart (A's rows as converted).
    Rows = 1,
}

/// The tile kernel for `rows` rows: `(a: rdi, b: rsi, c: rdx, kp: rcx, lda: r8, ldb: r9, then
/// on the stack ldc, the column masks — bits 0-15 the first vector's, 16-31 the second's — and
/// the epilogue's operand)`, strides in bytes; the sums rounded to bf16 before they are stored
/// when `round`, then given the bias (`epilogue` 1), the bias and relu (2) or the mask (3), as
/// `Finish` says.
///
/// With `ALayout::Rows`, `lda` is the distance between A's rows, and B's rows are NR words
/// apart (`ldb` unused): rows 0-3, 4-7 and 8-11 are read from three pointers (rdi, r11, r9), each
/// plus 0, lda (r8), 2·lda (rax) or 3·lda (r10), all advancing one word a depth pair; ldc is
/// read from the stack again after the loop.
fn generate(rows: usize, round: bool, epilogue: usize, layout: ALayout) -> Vec<u8> {
    let mut a = Asm::default();
    let (b0, b1) = (30u8, 31u8);
    let acc = |r: usize, half: usize| (2 * r + half) as u8;
    // The stack arguments, above the return address.
    a.load_gpr(R10, RSP, 8);
    a.load_gpr(R11, RSP, 16);
    a.kmovw_from(1, R11);
    a.shr_imm(R11, 16);
    a.kmovw_from(2, R11);
    let by_rows = matches!(layout, ALayout::Rows);
    if by_rows {
        a.mov(RAX, R8);
        a.add_gpr(RAX, R8);
        a.mov(R10, RAX);
        a.add_gpr(R10, R8);
        a.mov(R11, RDI);
        a.add_gpr(R11, RAX);
        a.add_gpr(R11, RAX);
        a.mov(R9, R11);
        a.add_gpr(R9, RAX);
        a.add_gpr(R9, RAX);
    }
    // Where row r's word at the current depth pair is.
    let word_at = |r: usize| match layout {
        ALayout::Blocks => Mem::At { base: RDI, index: None, disp: 4 * r as i32 },
        ALayout::Rows => Mem::At { base: [RDI, R11, R9][r / 4], index: [None, Some(R8), Some(RAX), Some(R10)][r % 4], disp: 0 },
    };
    for r in 0..rows {
        for h in 0..2 {
            a.op3(asm::VPXORD, acc(r, h), acc(r, h), Rm::Z(acc(r, h)), NO_MASK);
        }
    }
    let top = a.here();
    a.load(b0, Mem::At { base: RSI, index: None, disp: 0 }, NO_MASK);
    a.load(b1, Mem::At { base: RSI, index: None, disp: 64 }, NO_MASK);
    for r in 0..rows {
        // A's word broadcast into a register once (rotating over six), then read by both
        // products: as a broadcast memory operand of each it was loaded twice, and the tile ran
        // at 223 GMAC/s a core on a Zen 5 against 250 this way (1008×576 by 784, one thread).
        let word = BROADCASTS[r % BROADCASTS.len()];
        a.broadcast(word, word_at(r), NO_MASK);
        a.op3(VDPBF16PS, acc(r, 0), b0, Rm::Z(word), NO_MASK);
        a.op3(VDPBF16PS, acc(r, 1), b1, Rm::Z(word), NO_MASK);
    }
    if by_rows {
        for p in [RDI, R11, R9] {
            a.add_imm(p, 4);
        }
        a.add_imm(RSI, (NR * 4) as i32);
    } else {
        a.add_gpr(RDI, R8);
        a.add_gpr(RSI, R9);
    }
    a.dec32(RCX);
    a.jcc(asm::CC_NZ, Some(top));
    if by_rows {
        a.load_gpr(R10, RSP, 8);
    }
    if round {
        for r in 0..rows {
            for h in 0..2 {
                round_bf16(&mut a, acc(r, h));
            }
        }
    }
    if epilogue == 3 {
        // Row r's `y` into B's registers (free after the loop), lanes past the tile's columns
        // not read (and not stored); each sum kept where `0 < y` (false for a NaN), else +0.
        let zero = 24u8;
        a.load_gpr(R11, RSP, 24);
        a.op3(asm::VPXORD, zero, zero, Rm::Z(zero), NO_MASK);
        for r in 0..rows {
            for (h, y) in [b0, b1].into_iter().enumerate() {
                a.load(y, Mem::At { base: R11, index: None, disp: 64 * h as i32 }, Mask { k: (h + 1) as u8, zero: true });
                a.cmp(3, zero, Rm::Z(y), asm::CMP_LT_OS);
                a.op2(asm::VMOVAPS, acc(r, h), Rm::Z(acc(r, h)), Mask { k: 3, zero: true });
            }
            a.add_gpr(R11, R10);
        }
    } else if epilogue > 0 {
        // The bias's two vectors into B's registers (free after the loop), lanes past the
        // tile's columns not read; with the relu, zeros in zmm24 (free after the rounding).
        // `vmaxps s, s, 0` gives its second operand, 0, for a NaN and for -0.0, as the
        // region's `0 < s ? s : 0` does.
        a.load_gpr(R11, RSP, 24);
        a.load(b0, Mem::At { base: R11, index: None, disp: 0 }, Mask { k: 1, zero: true });
        a.load(b1, Mem::At { base: R11, index: None, disp: 64 }, Mask { k: 2, zero: true });
        let zero = 24u8;
        if epilogue == 2 {
            a.op3(asm::VPXORD, zero, zero, Rm::Z(zero), NO_MASK);
        }
        for r in 0..rows {
            for (h, bias) in [b0, b1].into_iter().enumerate() {
                a.op3(asm::VADDPS, acc(r, h), acc(r, h), Rm::Z(bias), NO_MASK);
                if epilogue == 2 {
                    a.op3(asm::VMAXPS, acc(r, h), acc(r, h), Rm::Z(zero), NO_MASK);
                }
            }
        }
    }
    for r in 0..rows {
        a.store(Mem::At { base: RDX, index: None, disp: 0 }, acc(r, 0), Mask { k: 1, zero: false });
        a.store(Mem::At { base: RDX, index: None, disp: 64 }, acc(r, 1), Mask { k: 2, zero: false });
        a.add_gpr(RDX, R10);
    }
    a.vzeroupper();
    a.ret();
    a.finish()
}

/// Register `x` rounded to bf16 in place, as codegen.rs's `round_bf16`: `b + 0x7fff + lsb`
/// with the low half cleared; a NaN kept, made quiet. Uses zmm24 (after the loop, free: the
/// accumulators end at zmm23, B is in zmm30-31) and k3.
fn round_bf16(a: &mut Asm, x: u8) {
    let d = 24u8;
    let (one, half_ulp, quiet, high) = (a.constant(1), a.constant(0x7fff), a.constant(0x0040_0000), a.constant(0xffff_0000));
    a.shift(2, d, x, 16);
    a.op3(asm::VPANDD, d, d, Rm::M(one), NO_MASK);
    a.op3(asm::VPADDD, d, d, Rm::M(half_ulp), NO_MASK);
    a.op3(asm::VPADDD, d, d, Rm::Z(x), NO_MASK);
    a.cmp(3, x, Rm::Z(x), asm::CMP_UNORD_Q);
    a.op3(asm::VPORD, d, x, Rm::M(quiet), Mask { k: 3, zero: false });
    a.op3(asm::VPANDD, x, d, Rm::M(high), NO_MASK);
}

#[cfg(test)]
mod tests;
