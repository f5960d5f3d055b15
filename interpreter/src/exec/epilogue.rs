//! A product's epilogue on the CPU (`Kernel::Gemm`, passes::epilogue): the bias added to every
//! row of the product, then the relu (or a relu's backward mask): applied by dlc's bf16 tiles
//! in the registers that hold the sums (jit's `bf16_gemm::Finish`), else in one pass over the
//! result in place, in parallel (contract.rs, gemm_select.rs). Each element gets the ops the
//! fused region gave it before (an f32 add, then `where(0 < x, x, 0)`), so a plan with the
//! epilogue and one without agree bit for bit. A bf16 product's values are f32s rounded to
//! bf16, so its widening to f32 (`GemmKernel::widens`) only renames the dtype.

use rayon::prelude::*;

/// Values a parallel task takes at least: enough work to pay for handing it out.
const TASK_VALUES: usize = 16_384;

/// Rows of `n` values per parallel task.
fn rows_per_task(n: usize) -> usize {
    (TASK_VALUES / n.max(1)).max(1)
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

crate::runtime::cpu::widest! {
    /// Each value kept where its `y` is positive, else 0 (`where(0 < y, x, 0)`), in place.
    fn mask_values(values: &mut [f32], y: &[f32]) {
        for (x, y) in values.iter_mut().zip(y) {
            *x = if 0.0 < *y { *x } else { 0.0 };
        }
    }
}

/// A product's epilogue on the CPU: `bias` (one value per column of the result) added to every
/// row, then the relu when `relu`; or the result kept where `mask` (shaped as it) is positive,
/// else 0 (a relu's backward). Applied to a product's result as a pass over its rows (`rows`),
/// or by dlc's bf16 tiles to their sums in registers before they store them (so that the sum
/// is never written and read back).
#[derive(Clone, Copy, Debug)]
pub struct Epilogue<'a> {
    pub bias: Option<&'a [f32]>,
    pub relu: bool,
    pub mask: Option<&'a [f32]>,
}

impl Epilogue<'_> {
    /// On `values`, the whole result, in parallel.
    pub fn rows(&self, values: &mut [f32]) {
        if let Some(bias) = self.bias {
            let n = bias.len();
            values.par_chunks_mut(n * rows_per_task(n)).for_each(|rows| add_rows(rows, bias, self.relu));
        }
        if let Some(y) = self.mask {
            values.par_chunks_mut(TASK_VALUES).zip(y.par_chunks(TASK_VALUES)).for_each(|(v, y)| mask_values(v, y));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_the_bias_to_every_row_then_relu() {
        let p = vec![1.0, -2.0, 0.5, -1.0, 4.0, f32::NAN];
        let b = [0.5, 1.0, -0.5];
        let mut sum = p.clone();
        Epilogue { bias: Some(&b), relu: false, mask: None }.rows(&mut sum);
        assert_eq!(&sum[..5], &[1.5, -1.0, 0.0, -0.5, 5.0]);
        assert!(sum[5].is_nan());
        let mut r = p.clone();
        Epilogue { bias: Some(&b), relu: true, mask: None }.rows(&mut r);
        // relu(NaN) is 0, as `where(0 < x, x, 0)` gives it.
        assert_eq!(&r[..], &[1.5, 0.0, 0.0, 0.0, 5.0, 0.0]);
    }

    #[test]
    fn a_mask_keeps_the_values_where_y_is_positive() {
        let mut v = vec![1.0, -2.0, 0.5, f32::NAN, 4.0, 3.0];
        let y = [0.5, 1.0, -0.0, 2.0, f32::NAN, 0.0];
        Epilogue { bias: None, relu: false, mask: Some(&y) }.rows(&mut v);
        assert_eq!(v[..3], [1.0, -2.0, 0.0]);
        assert!(v[3].is_nan(), "a NaN gradient where y is positive stays");
        assert_eq!(v[4..].iter().map(|x| x.to_bits()).collect::<Vec<_>>(), [0, 0], "+0 where y is NaN or zero");
    }
}
