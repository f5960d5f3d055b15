//! Element types and the promotion rules (written down in docs/language.md).

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum DType {
    Bool,
    U8,
    I32,
    I64,
    F16,
    BF16,
    F32,
    F64,
}

impl DType {
    pub const ALL: [DType; 8] = [DType::Bool, DType::U8, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64];

    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }
    pub fn from_name(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == s)
    }
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }
    pub fn is_int(self) -> bool {
        matches!(self, DType::U8 | DType::I32 | DType::I64)
    }
    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool | DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }
    /// Category used by scalar promotion: a Python-like scalar only changes a tensor's dtype when
    /// it is of a higher category (bool < int < float), as in PyTorch.
    fn category(self) -> u8 {
        if self == DType::Bool {
            0
        } else if self.is_int() {
            1
        } else {
            2
        }
    }

    /// The result dtype of a binary op between two tensors (PyTorch's `promote_types`).
    pub fn promote(a: DType, b: DType) -> DType {
        if a == b {
            return a;
        }
        if matches!((a, b), (DType::F16, DType::BF16) | (DType::BF16, DType::F16)) {
            return DType::F32;
        }
        a.max(b)
    }

    /// The result dtype of `tensor op scalar`, where the scalar is an int (`is_float == false`)
    /// or a float literal. Floats go to the default dtype f32 when the tensor is not already float.
    pub fn promote_scalar(t: DType, scalar_is_float: bool, scalar_is_bool: bool) -> DType {
        let cat = if scalar_is_bool {
            0
        } else if scalar_is_float {
            2
        } else {
            1
        };
        if cat <= t.category() {
            t
        } else if cat == 2 {
            DType::F32
        } else {
            DType::I64
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::DType::*;
    use super::*;

    #[test]
    fn promotion_matches_pytorch() {
        assert_eq!(DType::promote(I64, F32), F32);
        assert_eq!(DType::promote(F32, F64), F64);
        assert_eq!(DType::promote(F16, BF16), F32);
        assert_eq!(DType::promote(U8, I32), I32);
        assert_eq!(DType::promote(Bool, U8), U8);
        // Scalars only lift the category: f16 * 2.0 stays f16, i64 * 2.0 is f32, u8 + 1 stays u8.
        assert_eq!(DType::promote_scalar(F16, true, false), F16);
        assert_eq!(DType::promote_scalar(I64, true, false), F32);
        assert_eq!(DType::promote_scalar(U8, false, false), U8);
        assert_eq!(DType::promote_scalar(Bool, false, false), I64);
    }
}
