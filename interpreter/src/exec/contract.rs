//! Matrix products (on the kernel gemm_select.rs chose for each shape) and `take`. Convolutions are in conv.rs, pooling in pool.rs.

use super::elem::Elem;
use super::epilogue::Epilogue;
use super::gemm_select::GemmSelect;
use crate::runtime::tensor::{Data, Tensor};
use crate::runtime::RuntimeError;
use dlc_language::types::DType;
use gemm_common::Parallelism;
use std::sync::Arc;

/// Threads for a product of this many multiply-adds: only products of some size pay for them.
/// (Convolutions run images in parallel instead, each product on one core.)
fn parallelism(flops: usize) -> Parallelism {
    if flops >= 1 << 20 {
        Parallelism::Rayon(rayon::current_num_threads())
    } else {
        Parallelism::None
    }
}

/// dst[m×n] = op(lhs)[m×k] @ op(rhs)[k×n], row-major, in f32 or f64, on the kernel chosen for
/// the shape (gemm_select.rs). `lhs_t`: lhs is stored k×m; `rhs_t`: rhs is stored n×k; they are
/// read through strides, so no transposed copy is made.
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm<T: Elem>(
    sel: &GemmSelect,
    m: usize,
    n: usize,
    k: usize,
    lhs: &[T],
    lhs_t: bool,
    rhs: &[T],
    rhs_t: bool,
    dst: &mut [T],
    par: Parallelism,
) {
    // SAFETY: `[T]` is `[MaybeUninit<T>]` with every element initialised.
    let dst = unsafe { &mut *(dst as *mut [T] as *mut [std::mem::MaybeUninit<T>]) };
    sel.gemm(m, n, k, lhs, lhs_t, rhs, rhs_t, dst, par)
}

/// `batch` products dst[m×n] = op(x)[m×k] @ op(y)[k×n], one after the other, each with the
/// threads its size earns.
#[allow(clippy::too_many_arguments)]
fn batched<T: Elem>(sel: &GemmSelect, batch: usize, m: usize, n: usize, k: usize, x: &[T], x_t: bool, y: &[T], y_t: bool) -> Vec<T> {
    let total = batch * m * n;
    // Written once, by the products: not zeroed first.
    let mut out: Vec<T> = Vec::with_capacity(total);
    let dst = &mut out.spare_capacity_mut()[..total];
    for i in 0..batch {
        sel.gemm(
            m,
            n,
            k,
            &x[i * m * k..(i + 1) * m * k],
            x_t,
            &y[i * k * n..(i + 1) * k * n],
            y_t,
            &mut dst[i * m * n..(i + 1) * m * n],
            parallelism(m * n * k),
        );
    }
    // SAFETY: each product wrote its m*n elements (zeros when k is 0).
    unsafe { out.set_len(total) };
    out
}

/// f32 products of f32-stored operands; bf16/f16 operands (autocast) are summed in f32 and the
/// result rounded. bf16 products may run on the CPU's bf16 units instead (`gemm_bf16`, which
/// writes its result rounded), and only they take operands still to be rounded (`round`: a
/// folded cast's f32 source). With an `epilogue`, the result is given it: a bf16 product's by
/// `gemm_bf16` (dlc's tiles apply it in their registers), an f32 product's in a pass of its own.
#[allow(clippy::too_many_arguments)]
fn batched_f32(
    sel: &GemmSelect,
    dtype: DType,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    x: &[f32],
    x_t: bool,
    y: &[f32],
    y_t: bool,
    round: [bool; 2],
    epilogue: Option<Epilogue>,
) -> Result<Data, RuntimeError> {
    let mut out = vec![];
    if dtype == DType::BF16 {
        let total = batch * m * n;
        out.reserve_exact(total);
        let dst = &mut out.spare_capacity_mut()[..total];
        // Each product of the batch gets the epilogue: the same bias, its own part of the mask.
        for i in 0..batch {
            let (xs, ys) = (&x[i * m * k..(i + 1) * m * k], &y[i * k * n..(i + 1) * k * n]);
            let dst = &mut dst[i * m * n..(i + 1) * m * n];
            let e = epilogue.map(|e| Epilogue { mask: e.mask.map(|y| &y[i * m * n..(i + 1) * m * n]), ..e });
            sel.gemm_bf16(m, n, k, xs, x_t, ys, y_t, round, dst, parallelism(m * n * k), e.as_ref());
        }
        // SAFETY: each product wrote its m*n elements.
        unsafe { out.set_len(total) };
    } else if round != [false; 2] {
        return Err(RuntimeError::Unsupported(format!("a {dtype} product given operands to round to bf16")));
    } else {
        out = batched(sel, batch, m, n, k, x, x_t, y, y_t);
        crate::runtime::tensor::round_slice(dtype, &mut out);
        if let Some(e) = epilogue {
            e.rows(&mut out);
        }
    }
    Ok(Data::F32(Arc::new(out)))
}

/// A matrix product's operand as the executor found it.
pub struct Operand {
    pub value: Tensor,
    /// `value` holds [.., K, M] and the product uses its transpose (a transpose read in place).
    pub transposed: bool,
    /// `value` is the f32 source of a cast to bf16 the plan left to the product (fusion.rs
    /// `fold_casts`): the bf16 product rounds it as it reads it.
    pub rounded: bool,
}

/// Product `dtype`[shape] = op(a) @ op(b), each operand read in place through a transpose and
/// rounded by the product as `Operand` says, then given `epilogue` when there is one (only
/// to floats stored as f32). Floats stored as f32 (f32, bf16, f16) are read through strides;
/// other dtypes transpose first.
pub fn matmul_t(
    sel: &GemmSelect,
    dtype: DType,
    a: &Operand,
    b: &Operand,
    shape: Vec<usize>,
    epilogue: Option<Epilogue>,
) -> Result<Tensor, RuntimeError> {
    let (a_t, b_t) = (a.transposed, b.transposed);
    let round = [a.rounded, b.rounded];
    let (a, b) = (&a.value, &b.value);
    if !a_t && !b_t && round == [false; 2] && epilogue.is_none() {
        return matmul(sel, a, b, shape);
    }
    let swap = |t: &Tensor| {
        let r = t.shape.len();
        let mut p: Vec<usize> = (0..r).collect();
        p.swap(r - 2, r - 1);
        super::movement::permute(t, &p)
    };
    match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => {
            let r = shape.len();
            let (m, n) = (shape[r - 2], shape[r - 1]);
            let k = if a_t { a.shape[a.shape.len() - 2] } else { a.shape[a.shape.len() - 1] };
            let batch: usize = shape[..r - 2].iter().product();
            let data = batched_f32(sel, dtype, batch, m, n, k, x, a_t, y, b_t, round, epilogue)?;
            Ok(Tensor { dtype, shape, data })
        }
        _ if round != [false; 2] => Err(RuntimeError::Unsupported("a product's operands to round are not stored as f32".into())),
        _ if epilogue.is_some() => Err(RuntimeError::Unsupported("a product's epilogue outside f32".into())),
        _ => {
            let a = if a_t { swap(a) } else { a.clone() };
            let b = if b_t { swap(b) } else { b.clone() };
            matmul(sel, &a, &b, shape)
        }
    }
}

/// Batched [.., M, K] @ [.., K, N] with identical batch dims.
pub fn matmul(sel: &GemmSelect, a: &Tensor, b: &Tensor, shape: Vec<usize>) -> Result<Tensor, RuntimeError> {
    let r = a.shape.len();
    let (m, k, n) = (a.shape[r - 2], a.shape[r - 1], b.shape[r - 1]);
    let batch: usize = a.shape[..r - 2].iter().product();
    let data = match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => batched_f32(sel, a.dtype, batch, m, n, k, x, false, y, false, [false; 2], None)?,
        (Data::F64(x), Data::F64(y)) => Data::F64(Arc::new(batched(sel, batch, m, n, k, x, false, y, false))),
        (Data::I64(x), Data::I64(y)) => {
            let mut out = vec![0i64; batch * m * n];
            for bi in 0..batch {
                for i in 0..m {
                    for p in 0..k {
                        let av = x[bi * m * k + i * k + p];
                        for j in 0..n {
                            out[bi * m * n + i * n + j] =
                                out[bi * m * n + i * n + j].wrapping_add(av.wrapping_mul(y[bi * k * n + p * n + j]));
                        }
                    }
                }
            }
            Data::I64(Arc::new(out))
        }
        _ => return Err(RuntimeError::Unsupported("matmul on mixed storage".into())),
    };
    Ok(Tensor { dtype: a.dtype, shape, data })
}

/// Rows of `x` picked by `idx` (any shape): out[i.., :] = x[idx[i..], :].
pub fn take(x: &Tensor, idx: &Tensor, shape: Vec<usize>) -> Result<Tensor, RuntimeError> {
    let rows = x.shape[0];
    let row: usize = x.shape[1..].iter().product();
    let Data::I64(ids) = &idx.data else {
        return Err(RuntimeError::Unsupported("take needs integer indices".into()));
    };
    let xv = x.to_f64();
    let mut out = Vec::with_capacity(ids.len() * row);
    for &i in ids.iter() {
        let i = if i < 0 { i + rows as i64 } else { i };
        if i < 0 || i as usize >= rows {
            return Err(RuntimeError::Unsupported(format!("index {i} is out of range for {rows} rows")));
        }
        out.extend_from_slice(&xv[i as usize * row..(i as usize + 1) * row]);
    }
    Ok(Tensor::from_f64(x.dtype, shape, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(dtype: DType, shape: &[usize], f: impl Fn(usize) -> f32) -> Tensor {
        let n = shape.iter().product();
        Tensor { dtype, shape: shape.to_vec(), data: Data::F32(Arc::new((0..n).map(f).collect())) }
    }

    /// A batched bf16 product with a relu's backward mask: each product of the batch zeroed by
    /// its own part of the mask, on whichever kernel the shape is given (small: the f32 kernels
    /// and a pass; large: measured, dlc's tiles in their registers where they win).
    #[test]
    fn each_product_of_a_batch_gets_its_part_of_the_mask() {
        let sel = GemmSelect::new(None);
        let bf = |v: f32| crate::runtime::tensor::round_bf16(v);
        for (batch, m, n, k) in [(3, 5, 7, 4), (3, 96, 128, 96)] {
            let a = tensor(DType::BF16, &[batch, m, k], |i| bf(((i * 7) % 13) as f32 * 0.25 - 1.5));
            let b = tensor(DType::BF16, &[batch, k, n], |i| bf(((i * 5) % 11) as f32 * 0.5 - 2.5));
            let y: Vec<f32> = (0..batch * m * n).map(|i| ((i * 3) % 7) as f32 - 3.0).collect();
            let operand = |t: &Tensor| Operand { value: t.clone(), transposed: false, rounded: false };
            let shape = vec![batch, m, n];
            let plain = matmul_t(&sel, DType::BF16, &operand(&a), &operand(&b), shape.clone(), None).unwrap();
            let e = Epilogue { bias: None, relu: false, mask: Some(&y) };
            let masked = matmul_t(&sel, DType::BF16, &operand(&a), &operand(&b), shape, Some(e)).unwrap();
            let (Data::F32(p), Data::F32(q)) = (&plain.data, &masked.data) else { panic!("f32 storage") };
            for i in 0..batch * m * n {
                let want = if 0.0 < y[i] { p[i] } else { 0.0 };
                assert_eq!(q[i].to_bits(), want.to_bits(), "{batch}x{m}x{n}x{k} at {i}");
            }
        }
    }
}
