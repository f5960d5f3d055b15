//! Host tensors to the bytes a device buffer holds and back: each dtype in its kernel-IR storage
//! (`dlc_jit::kir::Ty`: f32, bf16 and f16 in two bytes, i64, bool in one byte), the layout the
//! generated kernels read and write. bf16 and f16 values are exact both ways: the host keeps
//! them rounded to their dtype in f32.

use crate::runtime::tensor::{Data, Tensor};
use dlc_jit::kir::{self, Ty};
use dlc_language::types::DType;
use std::sync::Arc;

/// The device storage of `dtype`, or `None` for what stays on the host (f64, u8 data).
pub fn device_type(dtype: DType) -> Option<Ty> {
    kir::lower_storage(dtype)
}

/// `t`'s own memory as the bytes of storage `ty`, where the two agree (f32 and i64 on a
/// little-endian host): an upload then reads the tensor itself, without a converted copy.
pub fn as_bytes(t: &Tensor, ty: Ty) -> Option<&[u8]> {
    if cfg!(target_endian = "big") {
        return None;
    }
    match (&t.data, ty) {
        (Data::F32(v), Ty::F32) => Some(bytemuck::cast_slice(v.as_slice())),
        (Data::I64(v), Ty::I64) => Some(bytemuck::cast_slice(v.as_slice())),
        _ => None,
    }
}

/// `f` on the bytes `t` is stored as on the device, and that storage: the tensor's own memory
/// where it already is that storage (`as_bytes`), a converted copy otherwise (u8 data widened
/// first); `None`, without calling `f`, for a dtype that stays on the host.
pub fn with_device_bytes<R>(t: &Tensor, f: impl FnOnce(&[u8], Ty) -> R) -> Option<R> {
    let ty = device_type(t.dtype)?;
    let t = t.clone().widened();
    Some(match as_bytes(&t, ty) {
        Some(own) => f(own, ty),
        None => f(&to_bytes(&t, ty), ty),
    })
}

/// `t` in storage `ty`.
pub fn to_bytes(t: &Tensor, ty: Ty) -> Vec<u8> {
    match (&t.data, ty) {
        (Data::F32(v), Ty::F32) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        (Data::F32(v), Ty::BF16) => v.iter().flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes()).collect(),
        (Data::F32(v), Ty::F16) => v.iter().flat_map(|x| kir::f32_to_f16(*x).to_le_bytes()).collect(),
        (Data::I64(v), Ty::I64) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        (Data::I64(v), Ty::Bool) => v.iter().map(|x| (*x != 0) as u8).collect(),
        _ => t.to_f64().iter().flat_map(|v| scalar_bytes(*v, ty)).collect(),
    }
}

fn scalar_bytes(v: f64, ty: Ty) -> Vec<u8> {
    match ty {
        Ty::F32 => (v as f32).to_le_bytes().to_vec(),
        Ty::BF16 => (((v as f32).to_bits() >> 16) as u16).to_le_bytes().to_vec(),
        Ty::F16 => kir::f32_to_f16(v as f32).to_le_bytes().to_vec(),
        Ty::I64 => (v as i64).to_le_bytes().to_vec(),
        Ty::Bool => vec![(v != 0.0) as u8],
    }
}

/// A tensor of `dtype` and `shape` from bytes in storage `ty`.
pub fn from_bytes(dtype: DType, shape: Vec<usize>, ty: Ty, bytes: &[u8]) -> Tensor {
    let data = match ty {
        Ty::F32 => Data::F32(Arc::new(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())),
        Ty::BF16 => {
            Data::F32(Arc::new(bytes.chunks_exact(2).map(|b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16)).collect()))
        }
        Ty::F16 => Data::F32(Arc::new(bytes.chunks_exact(2).map(|b| kir::f16_to_f32(u16::from_le_bytes([b[0], b[1]]))).collect())),
        Ty::I64 => Data::I64(Arc::new(bytes.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes"))).collect())),
        Ty::Bool => Data::I64(Arc::new(bytes.iter().map(|b| (*b != 0) as i64).collect())),
    };
    Tensor { dtype, shape, data }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_device_dtype_round_trips_exactly() {
        for (dtype, vals) in [
            (DType::F32, vec![1.5, -0.1, 3.0e-39, f64::INFINITY]),
            (DType::BF16, vec![1.5, -0.1, 1e30, -2.0]),
            (DType::F16, vec![1.5, -0.1, 65504.0, 6.0e-8]),
            (DType::I64, vec![0.0, -3.0, 1e12, 7.0]),
            (DType::Bool, vec![0.0, 1.0, 1.0, 0.0]),
        ] {
            let t = Tensor::from_f64(dtype, vec![2, 2], vals);
            let ty = device_type(dtype).expect("a device dtype");
            let bytes = to_bytes(&t, ty);
            assert_eq!(bytes.len(), 4 * ty.bytes(), "{dtype}");
            if let Some(own) = as_bytes(&t, ty) {
                assert_eq!(own, &bytes[..], "{dtype}: the tensor's own bytes are its storage");
            }
            let back = from_bytes(dtype, vec![2, 2], ty, &bytes);
            let (a, b) = (t.to_f64(), back.to_f64());
            assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()), "{dtype}: {a:?} -> {b:?}");
        }
    }
}
