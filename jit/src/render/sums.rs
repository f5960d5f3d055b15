//! Sums over any axes with their prologue in CUDA C: a block per output for long sums with few
//! outputs, a thread per output otherwise, in f64; in C, loops.

use super::kinds::{blocks, each};
use super::{body, narrow, strided, widen, Dialect, Launch, BLOCK};
use crate::kir::{Buf, Index, SumAxes};

/// A sum over axes. Few outputs over long sums (bias gradients, batch-norm statistics: a value
/// per channel over batch × height × width) take a block per output, its threads striding over
/// the summed elements (consecutive threads read consecutive addresses) and adding up by warp
/// shuffles and then across warps; otherwise a thread per output walks its summed elements.
/// Either way in f64, as the CPU sums, and the prologue's other outputs are written at every
/// element visited (the sums' index sets partition the prologue's elements).
pub(super) fn sum_axes(sa: &SumAxes, d: Dialect, s: &mut String) -> Launch {
    let p = &sa.prologue;
    let mut contiguous = vec![1usize; p.shape.len()];
    for dim in (0..p.shape.len().saturating_sub(1)).rev() {
        contiguous[dim] = contiguous[dim + 1] * p.shape[dim + 1];
    }
    let pick = |summed: bool| -> (Vec<usize>, Vec<usize>) {
        (0..p.shape.len()).filter(|dim| sa.axes.contains(dim) == summed).map(|dim| (p.shape[dim], contiguous[dim])).unzip()
    };
    let (kept_shape, kept_strides) = pick(false);
    let (red_shape, red_strides) = pick(true);
    let out_len: usize = kept_shape.iter().product();
    let red_len: usize = red_shape.iter().product();
    let at = format!("{} + {}", strided("o", &kept_shape, &kept_strides), strided("k", &red_shape, &red_strides));
    let ins = p.inputs.len();
    // In f64, as the CPU sums (f32 over a batch-norm's 32K values per channel was 1e-5 to 7e-5
    // off; the kernel is bound by memory, not by the adds).
    let acc_t = "double";
    let per_block = d == Dialect::Cuda && red_len >= BLOCK && out_len <= 1 << 14;
    if per_block {
        *s += "  __shared__ double dlc_warp_sum[32];\n";
        *s += &format!("  for (long long o = blockIdx.x; o < {out_len}LL; o += gridDim.x) {{\n");
        *s += &format!("    {acc_t} acc = 0;\n    for (long long k = threadIdx.x; k < {red_len}LL; k += blockDim.x) {{\n      const long long i = {at};\n");
    } else {
        *s += &format!("  {}", each(d, "o", &format!("{out_len}LL")));
        *s += &format!("    {acc_t} acc = 0;\n    for (long long k = 0; k < {red_len}LL; k++) {{\n      const long long i = {at};\n");
    }
    let load = |from: Buf, index: &Index| -> String {
        let Buf::Param(k) = from else { unreachable!("a prologue has no row buffers") };
        let at = match index {
            Index::Linear => "i".to_string(),
            Index::Splat => "0".into(),
            Index::Strided(st) => strided("i", &p.shape, st),
        };
        widen(p.inputs[k].ty, &format!("p{k}[{at}]"))
    };
    *s += &body(&p.body, "      ", &load);
    *s += &format!("      acc += r{};\n", sa.summed);
    let mut o = 1;
    for (reg, ty) in &p.outputs {
        if *reg != sa.summed {
            *s += &format!("      p{}[i] = {};\n", ins + o, narrow(*ty, &format!("r{reg}")));
            o += 1;
        }
    }
    if per_block {
        *s += "    }\n";
        *s += "    for (int w = 16; w > 0; w >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, w);\n";
        *s += "    if ((threadIdx.x & 31) == 0) dlc_warp_sum[threadIdx.x >> 5] = acc;\n    __syncthreads();\n";
        *s += &format!("    if (threadIdx.x == 0) {{\n      double t = 0;\n      for (int w = 0; w < (int)(blockDim.x >> 5); w++) t += dlc_warp_sum[w];\n      p{ins}[o] = (float)t;\n    }}\n    __syncthreads();\n  }}\n");
        return Launch { grid: out_len.clamp(1, 65_535), block: BLOCK, shared_bytes: 0 };
    }
    *s += &format!("    }}\n    p{ins}[o] = (float)acc;\n  }}\n");
    Launch { grid: blocks(out_len), block: BLOCK, shared_bytes: 0 }
}
