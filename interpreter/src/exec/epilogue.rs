//! A product's epilogue on the CPU (`Kernel::Gemm`, passes::epilogue): the bias added to every
//! row of the product, then the relu, in one pass over its rows in place, in parallel. Each
//! element gets the ops the fused region gave it before (an f32 add, then `where(0 < x, x, 0)`),
//! so a plan with the epilogue and one without agree bit for bit. A bf16 product's values are
//! f32s rounded to bf16, so its widening to f32 (`GemmKernel::widens`) only renames the dtype.

use crate::runtime::tensor::{Data, Tensor};
use crate::runtime::RuntimeError;
use dlc_language::types::DType;
use rayon::prelude::*;
use std::sync::Arc;

/// Rows per parallel task: enough work per task (at least 16K elements) to pay for handing it out.
fn rows_per_task(n: usize) -> usize {
    (16_384 / n.max(1)).max(1)
}

crate::runtime::cpu::widest! {
    /// Each row of `rows` plus `bias`, then the relu, in place; built for AVX-512 and AVX2 as
    /// well and the widest the CPU has taken (as the fused kernels are).
    fn add_rows(rows: &mut [f32], bias: &[f32], relu: bool) {
        for row in rows.chunks_mut(bias.len()) {
            for (x, b) in row.iter_mut().zip(bias) {
                let s = *x + *b;
                *x = if !relu || 0.0 < s { s } else { 0.0 };
            }
        }
    }
}

/// `product + bias` (bias one value per column), then `relu` when asked, reusing the product's
/// buffer, as a tensor of `dtype` (the epilogue's output: f32, whatever the product computed in).
pub fn apply(product: Tensor, bias: &Tensor, relu: bool, dtype: DType) -> Result<Tensor, RuntimeError> {
    let n = *product.shape.last().ok_or_else(|| RuntimeError::Unsupported("an epilogue on a 0-d product".into()))?;
    let (Data::F32(values), Data::F32(b)) = (product.data, &bias.data) else {
        return Err(RuntimeError::Unsupported("a product's epilogue outside f32".into()));
    };
    if b.len() != n {
        return Err(RuntimeError::Unsupported(format!("a bias of {} values for rows of {n}", b.len())));
    }
    let mut values = values;
    // The product was just computed, so its buffer is not shared and this does not copy.
    let v = Arc::make_mut(&mut values);
    v.par_chunks_mut(n * rows_per_task(n)).for_each(|rows| add_rows(rows, b, relu));
    Ok(Tensor { dtype, shape: product.shape, data: Data::F32(values) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(shape: &[usize], v: Vec<f32>) -> Tensor {
        Tensor { dtype: DType::F32, shape: shape.to_vec(), data: Data::F32(Arc::new(v)) }
    }

    #[test]
    fn adds_the_bias_to_every_row_then_relu() {
        let p = tensor(&[2, 3], vec![1.0, -2.0, 0.5, -1.0, 4.0, f32::NAN]);
        let b = tensor(&[1, 3], vec![0.5, 1.0, -0.5]);
        let Data::F32(sum) = apply(p.clone(), &b, false, DType::F32).unwrap().data else { panic!("f32") };
        assert_eq!(&sum[..5], &[1.5, -1.0, 0.0, -0.5, 5.0]);
        assert!(sum[5].is_nan());
        let Data::F32(r) = apply(p, &b, true, DType::F32).unwrap().data else { panic!("f32") };
        // relu(NaN) is 0, as `where(0 < x, x, 0)` gives it.
        assert_eq!(&r[..], &[1.5, 0.0, 0.0, 0.0, 5.0, 0.0]);
    }
}
