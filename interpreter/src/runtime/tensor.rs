//! Dense, contiguous, row-major tensors. Floats of every width compute in f32 or f64 storage
//! (f16/bf16 values are rounded to their type after each op, as PyTorch's CPU kernels do);
//! integers and bools are stored as i64 and wrapped to their width.

use dlc_language::types::DType;
use std::sync::Arc;

#[derive(Clone, Debug)]
pub enum Data {
    F32(Arc<Vec<f32>>),
    F64(Arc<Vec<f64>>),
    I64(Arc<Vec<i64>>),
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
pub fn round_f32(d: DType, v: f32) -> f32 {
    match d {
        DType::F16 => half::f16::from_f32(v).to_f32(),
        DType::BF16 => half::bf16::from_f32(v).to_f32(),
        _ => v,
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
            Storage::F32 => Data::F32(Arc::new(vals.into_iter().map(|v| round_f32(dtype, v as f32)).collect())),
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
        let data = match (&self.data, storage(to)) {
            (Data::F32(v), Storage::F32) => Data::F32(Arc::new(v.iter().map(|x| round_f32(to, *x)).collect())),
            (Data::F32(v), Storage::F64) => Data::F64(Arc::new(v.iter().map(|x| *x as f64).collect())),
            (Data::F64(v), Storage::F32) => Data::F32(Arc::new(v.iter().map(|x| round_f32(to, *x as f32)).collect())),
            (Data::F64(v), Storage::F64) => Data::F64(v.clone()),
            (Data::I64(v), Storage::F32) => Data::F32(Arc::new(v.iter().map(|x| round_f32(to, *x as f32)).collect())),
            (Data::I64(v), Storage::F64) => Data::F64(Arc::new(v.iter().map(|x| *x as f64).collect())),
            (Data::F32(v), Storage::I64) => Data::I64(Arc::new(v.iter().map(|x| float_to_int(to, *x as f64)).collect())),
            (Data::F64(v), Storage::I64) => Data::I64(Arc::new(v.iter().map(|x| float_to_int(to, *x)).collect())),
            (Data::I64(v), Storage::I64) => Data::I64(Arc::new(v.iter().map(|x| wrap_i64(to, *x)).collect())),
        };
        Tensor { dtype: to, shape: self.shape.clone(), data }
    }
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
