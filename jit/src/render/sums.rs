//! Sums over any axes with their prologue in CUDA C: blocks per output for long sums with few
//! outputs, a thread per output otherwise, in f64; in C, loops.

use super::kinds::{blocks, each};
use super::{body, narrow, strided, widen, Dialect, Launch, BLOCK};
use crate::kir::{Buf, Index, SumAxes};

/// About how many blocks a sum over few outputs is spread over (several per multiprocessor of
/// an H100's 132).
const SPLIT_TARGET: usize = 1024;

/// A sum over axes. Few outputs over long sums (bias gradients, batch-norm statistics: a value
/// per channel over batch × height × width) take blocks per output, their threads striding over
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
    // Few outputs (32 channels' statistics) would leave most of the GPU idle with a block each,
    // its threads waiting on one load after another: each output's elements are split across
    // `splits` blocks instead, so that about SPLIT_TARGET blocks run, each summing at least four
    // elements a thread.
    let splits = if per_block { (SPLIT_TARGET / out_len).clamp(1, (red_len / (BLOCK * 4)).max(1)) } else { 1 };
    let chunk = red_len.div_ceil(splits);
    if per_block {
        *s += "  __shared__ double dlc_warp_sum[32];\n";
        if splits > 1 {
            // In global memory, zero at module load: each block's partial sum, and per output
            // how many of its blocks are done (reset by the block that finishes the output, so
            // the next launch finds zeros).
            *s += &format!("  static double dlc_part[{}];\n  static unsigned int dlc_done[{out_len}];\n", out_len * splits);
        }
        *s += &format!("  for (long long bo = blockIdx.x; bo < {}LL; bo += gridDim.x) {{\n", out_len * splits);
        *s += &format!("    const long long o = bo / {splits}LL, k_from = bo % {splits}LL * {chunk}LL;\n");
        *s += &format!("    const long long k_end = k_from + {chunk}LL < {red_len}LL ? k_from + {chunk}LL : {red_len}LL;\n");
        *s += &format!("    {acc_t} acc = 0;\n    for (long long k = k_from + threadIdx.x; k < k_end; k += blockDim.x) {{\n      const long long i = {at};\n");
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
        *s += "    if (threadIdx.x == 0) {\n      double t = 0;\n      for (int w = 0; w < (int)(blockDim.x >> 5); w++) t += dlc_warp_sum[w];\n";
        if splits > 1 {
            // The last of an output's blocks to finish adds the partial sums in split order,
            // whichever block that is: the result does not depend on the blocks' timing.
            *s += "      dlc_part[bo] = t;\n      __threadfence();\n";
            *s += &format!(
                "      if (atomicAdd(&dlc_done[o], 1u) == {}u) {{\n        __threadfence();\n        double total = 0;\n",
                splits - 1
            );
            *s += &format!("        for (int j = 0; j < {splits}; j++) total += ((volatile double*)dlc_part)[o * {splits}LL + j];\n");
            *s += &format!("        p{ins}[o] = (float)total;\n        dlc_done[o] = 0u;\n      }}\n");
        } else {
            *s += &format!("      p{ins}[o] = (float)t;\n");
        }
        *s += "    }\n    __syncthreads();\n  }\n";
        return Launch { grid: (out_len * splits).clamp(1, 65_535), block: BLOCK, shared_bytes: 0 };
    }
    *s += &format!("    }}\n    p{ins}[o] = (float)acc;\n  }}\n");
    Launch { grid: blocks(out_len), block: BLOCK, shared_bytes: 0 }
}
