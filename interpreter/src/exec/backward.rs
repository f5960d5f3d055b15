//! Kernels of the ops only backward passes build: the transposes of slice, conv2d, pooling and
//! take. They favour clarity (f64 accumulation) over speed; the compiler milestone replaces them.

use super::contract::{gemm_f64, ConvGeom};
use crate::runtime::tensor::{strides, Data, Tensor};
use crate::runtime::RuntimeError;
use dlc_language::ir::PoolKind;
use dlc_language::types::rules::Conv2dAttrs;

/// Zeros of `shape` with `src` placed at `start + i*step` along each axis.
pub fn unslice(src: &Tensor, start: &[i64], step: &[i64], shape: Vec<usize>) -> Tensor {
    let out_st = strides(&shape);
    let n: usize = shape.iter().product();
    let mut out = vec![0f64; n];
    let vals = src.to_f64();
    let rank = src.shape.len();
    let mut idx = vec![0usize; rank];
    for v in vals {
        let off: isize = (0..rank).map(|k| (start[k] as isize + idx[k] as isize * step[k] as isize) * out_st[k]).sum();
        out[off as usize] += v;
        for k in (0..rank).rev() {
            idx[k] += 1;
            if idx[k] < src.shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Tensor::from_f64(src.dtype, shape, out)
}

/// dx = col2im(Wᵀ · dy), per image and group.
pub fn conv2d_grad_input(dy: &Tensor, w: &Tensor, a: &Conv2dAttrs, shape: Vec<usize>) -> Tensor {
    let geo = ConvGeom::new(&shape, &w.shape, &dy.shape, a);
    let (k, cols, og) = (geo.k(), geo.cols(), geo.o / geo.g);
    let wv = w.to_f64();
    let gv = dy.to_f64();
    let mut dx = vec![0f64; shape.iter().product()];
    let mut dcol = vec![0f64; k * cols];
    for b in 0..geo.nb {
        for gi in 0..geo.g {
            // Wᵀ of this group: [k, og] from the row-major [og, k] block.
            let wg = &wv[gi * og * k..(gi + 1) * og * k];
            let mut wt = vec![0f64; k * og];
            for r in 0..og {
                for c in 0..k {
                    wt[c * og + r] = wg[r * k + c];
                }
            }
            let g = &gv[(b * geo.o + gi * og) * cols..(b * geo.o + (gi + 1) * og) * cols];
            gemm_f64(k, cols, og, &wt, g, &mut dcol);
            geo.for_each(b, gi, |i, off| {
                if let Some(o) = off {
                    dx[o] += dcol[i];
                }
            });
        }
    }
    Tensor::from_f64(dy.dtype, shape, dx)
}

/// dW = Σ_images dy · im2col(x)ᵀ, per group.
pub fn conv2d_grad_weight(x: &Tensor, dy: &Tensor, a: &Conv2dAttrs, shape: Vec<usize>) -> Tensor {
    let geo = ConvGeom::new(&x.shape, &shape, &dy.shape, a);
    let (k, cols, og) = (geo.k(), geo.cols(), geo.o / geo.g);
    let xv = x.to_f64();
    let gv = dy.to_f64();
    let mut dw = vec![0f64; shape.iter().product()];
    let mut col = vec![0f64; k * cols];
    let mut colt = vec![0f64; cols * k];
    let mut part = vec![0f64; og * k];
    for b in 0..geo.nb {
        for gi in 0..geo.g {
            geo.im2col(&xv, b, gi, &mut col);
            for r in 0..k {
                for c in 0..cols {
                    colt[c * k + r] = col[r * cols + c];
                }
            }
            let g = &gv[(b * geo.o + gi * og) * cols..(b * geo.o + (gi + 1) * og) * cols];
            gemm_f64(og, k, cols, g, &colt, &mut part);
            for (d, p) in dw[gi * og * k..(gi + 1) * og * k].iter_mut().zip(&part) {
                *d += p;
            }
        }
    }
    Tensor::from_f64(dy.dtype, shape, dw)
}

/// Max pooling sends each output's gradient to the first maximum of its window; average pooling
/// spreads it over the window (padding included in the count, as the forward pass divides).
pub fn pool2d_grad(x: &Tensor, dy: &Tensor, kind: PoolKind, k: (i64, i64), s: (i64, i64), p: (i64, i64)) -> Tensor {
    let r = x.shape.len();
    let (h, w) = (x.shape[r - 2], x.shape[r - 1]);
    let (oh, ow) = (dy.shape[r - 2], dy.shape[r - 1]);
    let planes: usize = x.shape[..r - 2].iter().product();
    let xv = x.to_f64();
    let gv = dy.to_f64();
    let mut dx = vec![0f64; xv.len()];
    for pl in 0..planes {
        for oy in 0..oh {
            for ox in 0..ow {
                let g = gv[(pl * oh + oy) * ow + ox];
                let mut best: Option<(usize, f64)> = None;
                for ky in 0..k.0 {
                    for kx in 0..k.1 {
                        let iy = oy as i64 * s.0 + ky - p.0;
                        let ix = ox as i64 * s.1 + kx - p.1;
                        if iy < 0 || ix < 0 || iy as usize >= h || ix as usize >= w {
                            continue;
                        }
                        let off = (pl * h + iy as usize) * w + ix as usize;
                        match kind {
                            PoolKind::Avg => dx[off] += g / (k.0 * k.1) as f64,
                            PoolKind::Max => {
                                if best.map(|(_, v)| xv[off] > v).unwrap_or(true) {
                                    best = Some((off, xv[off]));
                                }
                            }
                        }
                    }
                }
                if let Some((off, _)) = best {
                    dx[off] += g;
                }
            }
        }
    }
    Tensor::from_f64(dy.dtype, x.shape.clone(), dx)
}

/// Rows of `dy` added into zeros at the rows `idx` names (embedding backward).
pub fn take_grad(idx: &Tensor, dy: &Tensor, shape: Vec<usize>) -> Result<Tensor, RuntimeError> {
    let rows = shape[0];
    let row: usize = shape[1..].iter().product();
    let Data::I64(ids) = &idx.data else {
        return Err(RuntimeError::Unsupported("take_grad needs integer indices".into()));
    };
    let gv = dy.to_f64();
    let mut out = vec![0f64; rows * row];
    for (j, &i) in ids.iter().enumerate() {
        let i = if i < 0 { i + rows as i64 } else { i } as usize;
        if i >= rows {
            return Err(RuntimeError::Unsupported(format!("index {i} is out of range for {rows} rows")));
        }
        for c in 0..row {
            out[i * row + c] += gv[j * row + c];
        }
    }
    Ok(Tensor::from_f64(dy.dtype, shape, out))
}
