//! A bf16 matrix-product microkernel for CPUs with AVX512-BF16, written by our own encoder:
//! `vdpbf16ps` multiplies sixteen pairs of bf16 values exactly and adds both products to an f32
//! lane, twice the multiply-adds of an f32 `vfmadd` a vector (oneDNN 2.6's bf16 matmul, the
//! library Debian ships, lost to the f32 kernels on most of the MLP's shapes on a Zen 4).
//!
//! One call computes a tile of up to `MR` rows by `NR` (32) columns over the whole depth, from
//! operands packed as pairs along the depth (the layout `vdpbf16ps` reads; the caller packs,
//! see the interpreter's `exec/bf16_product.rs`):
//! - A, `kp` groups of `MR` 32-bit words: word `p * MR + r` holds row r's bf16 values at depths
//!   2p (low half) and 2p + 1 (high half), rows past the tile's zero;
//! - B, `kp` groups of `NR` words: word `p * NR + c` holds column c's values at 2p and 2p + 1.
//!
//! Each of the tile's rows keeps two accumulators (columns 0-15 and 16-31), so a twelve-row tile
//! holds 24 of the 32 `zmm` registers; each depth pair loads B's two vectors once and reads A's
//! words as broadcast memory operands. The result is stored (not added) under two column masks.

use super::asm::{self, Asm, Mask, Mem, Rm, NO_MASK, R8, R9, RCX, RDI, RDX, RSI};
use super::memory::Code;

/// Rows a tile has at most (two accumulators each, plus two registers for B).
pub const MR: usize = 12;
/// Columns of a tile.
pub const NR: usize = 32;

/// `vdpbf16ps zmm, zmm, zmm/m512/m32bcst`: EVEX.512.F3.0F38.W0 52.
const VDPBF16PS: asm::Op = asm::op(2, 2, 0x52);

type TileFn = unsafe extern "sysv64" fn(*const u32, *const u32, *mut f32, u64, u64, u64);

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

/// The tile kernels, one per row count 1..=MR.
pub struct Bf16Tiles {
    kernels: Vec<Code>,
}

impl Bf16Tiles {
    /// Generate the kernels: an error where the CPU lacks AVX512-BF16.
    pub fn new() -> Result<Bf16Tiles, String> {
        if !available() {
            return Err("this CPU has no AVX512-BF16".into());
        }
        let kernels = (1..=MR).map(|rows| Code::new(&generate(rows))).collect::<Result<_, _>>()?;
        Ok(Bf16Tiles { kernels })
    }

    /// `c[r * ldc + j] = sum over depth of A[r, d] * B[d, j]` for rows `0..rows` and columns
    /// `0..cols`, from packed panels `a` and `b` (see the module's comment) of `kp` depth pairs.
    ///
    /// # Safety
    /// `a` holds `kp * MR` words, `b` `kp * NR` (64-byte aligned), `c` rows of `ldc` f32 with
    /// room for `cols` values each; 1 <= rows <= MR, 1 <= cols <= NR, kp >= 1.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn tile(&self, rows: usize, a: *const u32, b: *const u32, kp: usize, c: *mut f32, ldc: usize, cols: usize) {
        debug_assert!((1..=MR).contains(&rows) && (1..=NR).contains(&cols) && kp >= 1);
        let masks = if cols >= NR { u32::MAX as u64 } else { (1u64 << cols) - 1 };
        // SAFETY: the code was generated for this signature (System V, as `TileFn`).
        let f = unsafe { std::mem::transmute::<*const u8, TileFn>(self.kernels[rows - 1].entry()) };
        unsafe { f(a, b, c, kp as u64, (ldc * 4) as u64, masks) }
    }
}

/// The tile kernel for `rows` rows: `(a: rdi, b: rsi, c: rdx, kp: rcx, ldc in bytes: r8,
/// column masks: r9 — bits 0-15 the first vector's, 16-31 the second's)`.
fn generate(rows: usize) -> Vec<u8> {
    let mut a = Asm::default();
    let (b0, b1) = (30u8, 31u8);
    let acc = |r: usize, half: usize| (2 * r + half) as u8;
    a.kmovw_from(1, R9);
    a.shr_imm(R9, 16);
    a.kmovw_from(2, R9);
    for r in 0..rows {
        for h in 0..2 {
            a.op3(asm::VPXORD, acc(r, h), acc(r, h), Rm::Z(acc(r, h)), NO_MASK);
        }
    }
    let top = a.here();
    a.load(b0, Mem::At { base: RSI, index: None, disp: 0 }, NO_MASK);
    a.load(b1, Mem::At { base: RSI, index: None, disp: 64 }, NO_MASK);
    for r in 0..rows {
        let word = Rm::M(Mem::At { base: RDI, index: None, disp: 4 * r as i32 });
        a.op3(VDPBF16PS, acc(r, 0), b0, word, NO_MASK);
        a.op3(VDPBF16PS, acc(r, 1), b1, word, NO_MASK);
    }
    a.add_imm(RDI, (MR * 4) as i32);
    a.add_imm(RSI, (NR * 4) as i32);
    a.dec32(RCX);
    a.jcc(asm::CC_NZ, Some(top));
    for r in 0..rows {
        a.store(Mem::At { base: RDX, index: None, disp: 0 }, acc(r, 0), Mask { k: 1, zero: false });
        a.store(Mem::At { base: RDX, index: None, disp: 64 }, acc(r, 1), Mask { k: 2, zero: false });
        a.add_gpr(RDX, R8);
    }
    a.vzeroupper();
    a.ret();
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bf16(x: f32) -> u32 {
        half::bf16::from_f32(x).to_bits() as u32
    }

    /// Every row count and a partial last column block, against the exact product of the bf16
    /// values (small integers times powers of two, so every sum is exact in f32 too).
    #[test]
    fn tiles_compute_the_exact_product() {
        if !available() {
            eprintln!("no AVX512-BF16 on this CPU: nothing to run");
            return;
        }
        let tiles = Bf16Tiles::new().expect("generated");
        let kp = 37;
        let value = |i: usize, j: usize, s: usize| ((i * 7 + j * 3 + s) % 17) as f32 * 0.25 - 2.0;
        let (mut a, mut b) = (vec![0u32; kp * MR], Line::zeroed(kp * NR));
        for p in 0..kp {
            for r in 0..MR {
                a[p * MR + r] = bf16(value(r, 2 * p, 1)) | bf16(value(r, 2 * p + 1, 1)) << 16;
            }
            for c in 0..NR {
                b.words_mut()[p * NR + c] = bf16(value(2 * p, c, 5)) | bf16(value(2 * p + 1, c, 5)) << 16;
            }
        }
        for rows in 1..=MR {
            for cols in [1, 15, 16, 17, 31, 32] {
                let ldc = 40;
                let mut c = vec![f32::NAN; MR * ldc];
                // SAFETY: buffers of the sizes `tile` reads and writes.
                unsafe { tiles.tile(rows, a.as_ptr(), b.words().as_ptr(), kp, c.as_mut_ptr(), ldc, cols) };
                for r in 0..MR {
                    for j in 0..ldc {
                        let got = c[r * ldc + j];
                        if r < rows && j < cols {
                            let want: f32 = (0..2 * kp).map(|d| value(r, d, 1) * value(d, j, 5)).sum();
                            assert_eq!(got, want, "rows {rows}, cols {cols}: [{r}, {j}]");
                        } else {
                            assert!(got.is_nan(), "rows {rows}, cols {cols}: [{r}, {j}] written");
                        }
                    }
                }
            }
        }
    }

    /// 64-byte aligned words.
    #[repr(C, align(64))]
    #[derive(Clone, Copy)]
    struct Line([u32; 16]);

    impl Line {
        fn zeroed(words: usize) -> Vec<Line> {
            vec![Line([0; 16]); words.div_ceil(16)]
        }
    }

    trait Words {
        fn words(&self) -> &[u32];
        fn words_mut(&mut self) -> &mut [u32];
    }

    impl Words for Vec<Line> {
        fn words(&self) -> &[u32] {
            // SAFETY: `Line` is 16 u32 with no padding.
            unsafe { std::slice::from_raw_parts(self.as_ptr() as *const u32, self.len() * 16) }
        }
        fn words_mut(&mut self) -> &mut [u32] {
            // SAFETY: as `words`.
            unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr() as *mut u32, self.len() * 16) }
        }
    }
}
