//! Dense, contiguous, row-major tensors. Floats of every width compute in f32 or f64 storage
//! (f16/bf16 values are rounded to their type after each op, as PyTorch's CPU kernels do);
//! integers and bools are stored as i64 and wrapped to their width. Data sets keep u8 values in
//! their stored width (`Data::U8`: MNIST's images are 47 MB as bytes, 376 MB as i64) until they
//! reach the executor, which widens them as it reads an input (`Tensor::widened`).

use dlc_language::types::DType;
use std::sync::Arc;

#[derive(Clone, Debug)]
pub enum Data {
    F32(Arc<Vec<f32>>),
    F64(Arc<Vec<f64>>),
    I64(Arc<Vec<i64>>),
    /// u8 values as read from a data set; only a data pipeline holds these.
    U8(Arc<Vec<u8>>),
}

#[derive(Clone, Debug)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Data,
}

/// Storage class of a dtype.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Storage {
    F32,
    F64,
    I64,
}

pub fn storage(d: DType) -> Storage {
    match d {
        DType::F64 => Storage::F64,
        DType::F32 | DType::F16 | DType::BF16 => Storage::F32,
        _ => Storage::I64,
    }
}

/// Round a float to what `d` can hold (f16/bf16), or wrap an integer to its width.
#[inline]
pub fn round_f32(d: DType, v: f32) -> f32 {
    match d {
        DType::F16 => half::f16::from_f32(v).to_f32(),
        DType::BF16 => round_bf16(v),
        _ => v,
    }
}

/// f32 to bf16 and back: round to nearest, ties to even (as `half` and PyTorch round), written
/// on the bits so that loops over slices vectorise. A NaN stays a (quiet) NaN.
/// Both outcomes are computed and one selected, so that the loop has no branch to stop it
/// vectorising.
#[inline(always)]
pub fn round_bf16(v: f32) -> f32 {
    let b = v.to_bits();
    let quiet = (b | 0x0040_0000) & 0xFFFF_0000;
    let rounded = b.wrapping_add(0x7FFF + ((b >> 16) & 1)) & 0xFFFF_0000;
    f32::from_bits(if b & 0x7FFF_FFFF > 0x7F80_0000 { quiet } else { rounded })
}

super::cpu::widest! {
    /// `round_bf16` over a slice, built for AVX-512 and AVX2 as well and the widest the CPU has
    /// taken (the fused kernels round every bf16 op's result: built for the baseline x86-64,
    /// this loop was the bf16 MLP step's largest cost, 11% of its samples).
    fn round_bf16_slice(v: &mut [f32]) {
        v.iter_mut().for_each(|x| *x = round_bf16(*x));
    }
}

super::cpu::widest! {
    /// `dst[i] = round_bf16(src[i])`, in the widest vectors the CPU has (a product's operand
    /// rounded into a copy for the f32 kernels, exec/gemm_select.rs).
    pub fn round_bf16_into(dst: &mut [f32], src: &[f32]) {
        dst.iter_mut().zip(src).for_each(|(d, s)| *d = round_bf16(*s));
    }
}

/// `round_f32` over a slice, in place: bf16 on the bits, f16 with the CPU's F16C conversions
/// where it has them (the same rounding as `half`, eight values per instruction).
pub fn round_slice(d: DType, v: &mut [f32]) {
    match d {
        DType::BF16 => round_bf16_slice(v),
        DType::F16 => {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("f16c") && std::arch::is_x86_feature_detected!("avx") {
                // SAFETY: the features were just detected.
                unsafe { round_f16_f16c(v) };
                return;
            }
            v.iter_mut().for_each(|x| *x = half::f16::from_f32(*x).to_f32());
        }
        _ => {}
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "f16c,avx")]
unsafe fn round_f16_f16c(v: &mut [f32]) {
    use std::arch::x86_64::*;
    let mut chunks = v.chunks_exact_mut(8);
    for c in &mut chunks {
        let x = _mm256_loadu_ps(c.as_ptr());
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x);
        _mm256_storeu_ps(c.as_mut_ptr(), _mm256_cvtph_ps(h));
    }
    for x in chunks.into_remainder() {
        *x = half::f16::from_f32(*x).to_f32();
    }
}

pub fn wrap_i64(d: DType, v: i64) -> i64 {
    match d {
        DType::Bool => (v != 0) as i64,
        DType::U8 => v as u8 as i64,
        DType::I32 => v as i32 as i64,
        _ => v,
    }
}

impl Tensor {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Build from f64 values, converting to the dtype's storage.
    pub fn from_f64(dtype: DType, shape: Vec<usize>, vals: impl IntoIterator<Item = f64>) -> Tensor {
        let data = match storage(dtype) {
            Storage::F32 => {
                let mut v: Vec<f32> = vals.into_iter().map(|v| v as f32).collect();
                round_slice(dtype, &mut v);
                Data::F32(Arc::new(v))
            }
            Storage::F64 => Data::F64(Arc::new(vals.into_iter().collect())),
            Storage::I64 => Data::I64(Arc::new(vals.into_iter().map(|v| float_to_int(dtype, v)).collect())),
        };
        Tensor { dtype, shape, data }
    }

    pub fn f32(shape: Vec<usize>, v: Vec<f32>) -> Tensor {
        Tensor { dtype: DType::F32, shape, data: Data::F32(Arc::new(v)) }
    }

    /// Values as f64 (for printing, tests and slow paths).
    pub fn to_f64(&self) -> Vec<f64> {
        match &self.data {
            Data::F32(v) => v.iter().map(|x| *x as f64).collect(),
            Data::F64(v) => v.to_vec(),
            Data::I64(v) => v.iter().map(|x| *x as f64).collect(),
            Data::U8(v) => v.iter().map(|x| *x as f64).collect(),
        }
    }

    /// u8 values in their stored width (a data set's images).
    pub fn u8(shape: Vec<usize>, v: Vec<u8>) -> Tensor {
        Tensor { dtype: DType::U8, shape, data: Data::U8(Arc::new(v)) }
    }

    /// The tensor in its dtype's compute storage: `Data::U8` widened to i64, anything else as
    /// it is (shared, not copied). The executor reads every input through this.
    pub fn widened(self) -> Tensor {
        match &self.data {
            Data::U8(v) => {
                Tensor { dtype: self.dtype, shape: self.shape, data: Data::I64(Arc::new(v.iter().map(|b| *b as i64).collect())) }
            }
            _ => self,
        }
    }

    pub fn with_shape(&self, shape: Vec<usize>) -> Tensor {
        Tensor { dtype: self.dtype, shape, data: self.data.clone() }
    }

    /// Convert to another dtype with PyTorch's rules (float to int truncates toward zero).
    pub fn cast(&self, to: DType) -> Tensor {
        if to == self.dtype {
            return self.clone();
        }
        if let Data::U8(v) = &self.data {
            // Bytes to f32 in one vectorised pass (to_unit on a batch of images); to anything
            // else through the i64 they stand for.
            if to == DType::F32 {
                return Tensor { dtype: to, shape: self.shape.clone(), data: Data::F32(Arc::new(v.iter().map(|b| *b as f32).collect())) };
            }
            return self.clone().widened().cast(to);
        }
        let data = match (&self.data, storage(to)) {
            (Data::F32(v), Storage::F32) => {
                let mut out = v.to_vec();
                round_slice(to, &mut out);
                Data::F32(Arc::new(out))
            }
            (Data::F32(v), Storage::F64) => Data::F64(Arc::new(v.iter().map(|x| *x as f64).collect())),
            // Converted, then rounded to f16/bf16 in one pass over the slice (vectorised).
            (Data::F64(v), Storage::F32) => Data::F32(Arc::new(rounded(to, v.iter().map(|x| *x as f32).collect()))),
            (Data::F64(v), Storage::F64) => Data::F64(v.clone()),
            (Data::I64(v), Storage::F32) => Data::F32(Arc::new(rounded(to, v.iter().map(|x| *x as f32).collect()))),
            (Data::I64(v), Storage::F64) => Data::F64(Arc::new(v.iter().map(|x| *x as f64).collect())),
            (Data::F32(v), Storage::I64) => Data::I64(Arc::new(v.iter().map(|x| float_to_int(to, *x as f64)).collect())),
            (Data::F64(v), Storage::I64) => Data::I64(Arc::new(v.iter().map(|x| float_to_int(to, *x)).collect())),
            (Data::I64(v), Storage::I64) => Data::I64(Arc::new(v.iter().map(|x| wrap_i64(to, *x)).collect())),
            (Data::U8(_), _) => unreachable!("widened above"),
        };
        Tensor { dtype: to, shape: self.shape.clone(), data }
    }
}

fn rounded(d: DType, mut v: Vec<f32>) -> Vec<f32> {
    round_slice(d, &mut v);
    v
}

fn float_to_int(to: DType, x: f64) -> i64 {
    if to == DType::Bool {
        return (x != 0.0) as i64;
    }
    wrap_i64(to, if x.is_nan() { 0 } else { x.trunc() as i64 })
}

/// Row-major strides of a shape.
pub fn strides(shape: &[usize]) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for i in (0..shape.len()).rev() {
        s[i] = acc;
        acc *= shape[i] as isize;
    }
    s
}

#[cfg(test)]
mod rounding_tests {
    use super::*;

    /// Bit patterns covering every exponent, the rounding boundaries, infinities and NaNs.
    fn samples() -> Vec<f32> {
        let mut out = vec![];
        let mut x: u32 = 0x1234_5678;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            out.push(f32::from_bits(x));
        }
        for e in 0..=255u32 {
            for m in [0u32, 1, 0x7FFF, 0x8000, 0x8001, 0x1_8000, 0x7F_FFFF, 0x1000, 0x2000, 0x3FFF] {
                out.push(f32::from_bits((e << 23) | m));
                out.push(f32::from_bits(0x8000_0000 | (e << 23) | m));
            }
        }
        out
    }

    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    #[test]
    fn bf16_rounding_on_the_bits_matches_half() {
        for v in samples() {
            let want = half::bf16::from_f32(v).to_f32();
            assert!(same(round_bf16(v), want), "{v:e} ({:#x}): {:e} vs {want:e}", v.to_bits(), round_bf16(v));
        }
    }

    #[test]
    fn slice_rounding_matches_half_for_both_precisions() {
        let v = samples();
        for d in [DType::BF16, DType::F16] {
            let mut got = v.clone();
            round_slice(d, &mut got);
            for (x, g) in v.iter().zip(&got) {
                let want = if d == DType::F16 { half::f16::from_f32(*x).to_f32() } else { half::bf16::from_f32(*x).to_f32() };
                assert!(same(*g, want), "{d}: {x:e} ({:#x}) gave {g:e}, half gives {want:e}", x.to_bits());
            }
        }
    }
}
