//! The element types the native kernels are generic over: f32 (also the storage of bf16 and
//! f16) and f64.

pub(super) trait Elem:
    Copy
    + Send
    + Sync
    + PartialOrd
    + std::ops::AddAssign
    + std::ops::Add<Output = Self>
    + std::ops::Div<Output = Self>
    + super::gemm_kernels::GemmElem
    + 'static
{
    const ZERO: Self;
    const NEG_INFINITY: Self;
    fn from_usize(n: usize) -> Self;
    fn is_nan(self) -> bool;
}

impl Elem for f32 {
    const ZERO: f32 = 0.0;
    const NEG_INFINITY: f32 = f32::NEG_INFINITY;
    fn from_usize(n: usize) -> f32 {
        n as f32
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
}

impl Elem for f64 {
    const ZERO: f64 = 0.0;
    const NEG_INFINITY: f64 = f64::NEG_INFINITY;
    fn from_usize(n: usize) -> f64 {
        n as f64
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}
