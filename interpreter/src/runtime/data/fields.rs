//! One field of a record (a JSON value, a Parquet field) as the tensor its source declares
//! (`jsonl(path, fields: (features: f32[4], label: i64[]))`): a number for a 0-d type, an array
//! of numbers, nested as the shape is (or flat, in row-major order, for a type of two or more
//! known dimensions), for a shaped one. The array's shape must be the declared one (`_` takes
//! any size); integers read into float types; a number that is not an integer, or out of the
//! type's range, into an integer type is an error, as is anything but `true`/`false` for `bool`.
//! The readers (jsonl.rs, parquet.rs) say what each of their values is through `AsCell`.

use crate::runtime::tensor::{Data, Tensor};
use dlc_language::types::{DType, TensorTy};

/// What a value of a record is, as far as a tensor is concerned.
pub enum Cell<'a, C> {
    Num {
        value: f64,
        integral: bool,
    },
    Bool(bool),
    List(&'a [C]),
    Null,
    /// Anything else, in words ("a string", "an object").
    Other(&'static str),
}

/// A reader's values, seen as cells.
pub trait AsCell: Sized {
    fn cell(&self) -> Cell<'_, Self>;
}

/// The declared type in the source's words: `features: f32[4]`.
fn declared(name: &str, ty: &TensorTy) -> String {
    format!("the source declares `{name}: {ty}`")
}

/// `v`, field `name` of a record, as a tensor of `ty`; the error says what is wrong with it (the
/// caller adds the file and the record).
pub fn to_tensor<C: AsCell>(name: &str, ty: &TensorTy, v: &C) -> Result<Tensor, String> {
    // The array's shape, from its first elements; every list is then checked against it.
    let mut shape = vec![];
    let mut first = v;
    while let Cell::List(items) = first.cell() {
        shape.push(items.len());
        match items.first() {
            Some(x) => first = x,
            None => break,
        }
    }
    let mut values = Vec::with_capacity(shape.iter().product());
    fill(name, ty, v, &shape, 0, &mut values)?;
    let flat_fits = shape.len() == 1
        && ty.rank() >= 2
        && ty
            .shape
            .iter()
            .map(|d| d.as_known())
            .collect::<Option<Vec<i64>>>()
            .is_some_and(|k| k.iter().product::<i64>() == shape[0] as i64);
    let fits = shape.len() == ty.rank() && shape.iter().zip(&ty.shape).all(|(n, d)| d.as_known().is_none_or(|k| k == *n as i64));
    let shape = if fits {
        shape
    } else if flat_fits {
        ty.shape.iter().filter_map(|d| d.as_known()).map(|k| k as usize).collect()
    } else {
        let found = if shape.is_empty() { "a number".to_string() } else { format!("an array of shape {shape:?}") };
        return Err(format!("`{name}` is {found}, but {}", declared(name, ty)));
    };
    Ok(Tensor::from_f64(ty.dtype, shape, values))
}

/// The numbers of `v` (at `depth` of an array of `shape`) appended to `out`, each checked
/// against `ty`'s dtype.
fn fill<C: AsCell>(name: &str, ty: &TensorTy, v: &C, shape: &[usize], depth: usize, out: &mut Vec<f64>) -> Result<(), String> {
    let ragged = || format!("`{name}` is a ragged array: not every row has the shape {:?} its first has", &shape[depth.min(shape.len())..]);
    match v.cell() {
        Cell::List(items) => {
            if depth >= shape.len() || items.len() != shape[depth] {
                return Err(ragged());
            }
            items.iter().try_for_each(|x| fill(name, ty, x, shape, depth + 1, out))
        }
        _ if depth != shape.len() => Err(ragged()),
        Cell::Num { value, integral } => {
            out.push(number(name, ty, value, integral)?);
            Ok(())
        }
        Cell::Bool(b) if ty.dtype == DType::Bool => {
            out.push(if b { 1.0 } else { 0.0 });
            Ok(())
        }
        Cell::Bool(_) => Err(format!("`{name}` holds a boolean where a number is expected: {}", declared(name, ty))),
        Cell::Null => Err(format!("`{name}` is null (missing)")),
        Cell::Other(what) => Err(format!("`{name}` holds {what}, not a number")),
    }
}

/// A number read into `ty`'s dtype: any into a float type, an integer in range into an integer
/// type (a float with no fraction counts, as `csv` reads `3.0` as a class 3).
fn number(name: &str, ty: &TensorTy, value: f64, integral: bool) -> Result<f64, String> {
    let range = match ty.dtype {
        DType::Bool => return Err(format!("`{name}` holds the number {value}, where {} (true or false)", declared(name, ty))),
        DType::U8 => (0.0, 255.0),
        DType::I32 => (i32::MIN as f64, i32::MAX as f64),
        DType::I64 => (i64::MIN as f64, i64::MAX as f64),
        DType::F16 | DType::BF16 | DType::F32 | DType::F64 => return Ok(value),
    };
    if !(integral || value.fract() == 0.0) || !value.is_finite() {
        return Err(format!("`{name}` holds {value}, not an integer, but {}", declared(name, ty)));
    }
    if value < range.0 || value > range.1 {
        return Err(format!("`{name}` holds {value}, out of the range of {}", ty.dtype));
    }
    Ok(value)
}

/// The bytes a tensor's values take (what a cache of decoded records counts).
pub fn bytes(t: &Tensor) -> usize {
    let per = match &t.data {
        Data::F32(_) => 4,
        Data::U8(_) => 1,
        Data::F64(_) | Data::I64(_) => 8,
    };
    t.numel() * per
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlc_language::types::Dim;

    /// A value as a test writes it.
    enum V {
        N(f64),
        B(bool),
        L(Vec<V>),
        S,
    }

    impl AsCell for V {
        fn cell(&self) -> Cell<'_, V> {
            match self {
                V::N(x) => Cell::Num { value: *x, integral: x.fract() == 0.0 },
                V::B(b) => Cell::Bool(*b),
                V::L(items) => Cell::List(items),
                V::S => Cell::Other("a string"),
            }
        }
    }

    fn ty(dtype: DType, dims: &[i64]) -> TensorTy {
        TensorTy::new(dtype, dims.iter().map(|d| if *d < 0 { Dim::Any } else { Dim::known(*d) }).collect())
    }

    fn row(xs: &[f64]) -> V {
        V::L(xs.iter().map(|x| V::N(*x)).collect())
    }

    #[test]
    fn numbers_and_arrays_become_tensors_of_the_declared_type() {
        let t = to_tensor("x", &ty(DType::F32, &[3]), &row(&[1.0, 2.5, -3.0])).unwrap();
        assert_eq!((t.shape.clone(), t.to_f64()), (vec![3], vec![1.0, 2.5, -3.0]));
        let t = to_tensor("y", &ty(DType::I64, &[]), &V::N(7.0)).unwrap();
        assert_eq!((t.shape.clone(), t.to_f64()), (vec![], vec![7.0]));
        // Nested as the shape is, or flat in row-major order.
        let nested = V::L(vec![row(&[1.0, 2.0]), row(&[3.0, 4.0])]);
        let t = to_tensor("m", &ty(DType::F32, &[2, 2]), &nested).unwrap();
        assert_eq!((t.shape.clone(), t.to_f64()), (vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]));
        let t = to_tensor("m", &ty(DType::F32, &[2, 2]), &row(&[1.0, 2.0, 3.0, 4.0])).unwrap();
        assert_eq!(t.shape, vec![2, 2]);
        // `_` takes any size.
        assert_eq!(to_tensor("v", &ty(DType::F32, &[-1]), &row(&[1.0; 5])).unwrap().shape, vec![5]);
        let t = to_tensor("b", &ty(DType::Bool, &[2]), &V::L(vec![V::B(true), V::B(false)])).unwrap();
        assert_eq!(t.to_f64(), vec![1.0, 0.0]);
    }

    #[test]
    fn wrong_shapes_kinds_and_numbers_are_named() {
        let e = to_tensor("x", &ty(DType::F32, &[4]), &row(&[1.0, 2.0, 3.0])).unwrap_err();
        assert_eq!(e, "`x` is an array of shape [3], but the source declares `x: f32[4]`");
        let e = to_tensor("x", &ty(DType::F32, &[4]), &V::N(1.0)).unwrap_err();
        assert!(e.contains("is a number"), "{e}");
        let e = to_tensor("y", &ty(DType::I64, &[]), &row(&[1.0])).unwrap_err();
        assert!(e.contains("an array of shape [1]") && e.contains("i64[]"), "{e}");
        let e = to_tensor("y", &ty(DType::I64, &[]), &V::N(2.5)).unwrap_err();
        assert!(e.contains("2.5, not an integer"), "{e}");
        let e = to_tensor("y", &ty(DType::U8, &[]), &V::N(300.0)).unwrap_err();
        assert!(e.contains("out of the range of u8"), "{e}");
        let e = to_tensor("y", &ty(DType::F32, &[2]), &V::L(vec![V::N(1.0), V::S])).unwrap_err();
        assert!(e.contains("holds a string, not a number"), "{e}");
        let ragged = V::L(vec![row(&[1.0, 2.0]), row(&[3.0])]);
        let e = to_tensor("m", &ty(DType::F32, &[2, 2]), &ragged).unwrap_err();
        assert!(e.contains("ragged"), "{e}");
        let e = to_tensor("m", &ty(DType::F32, &[2, 2]), &row(&[1.0, 2.0, 3.0])).unwrap_err();
        assert!(e.contains("shape [3]"), "{e}");
        let e = to_tensor("f", &ty(DType::Bool, &[]), &V::N(1.0)).unwrap_err();
        assert!(e.contains("true or false"), "{e}");
    }
}
