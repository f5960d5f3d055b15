//! Row kernels in CUDA C: one block per row (threads: the row length rounded up to whole warps,
//! at most 256), the row's values in shared memory, each reduction a warp-shuffle tree and then
//! a sum or maximum across the warps, a barrier after every step; in C, loops over the rows.

use super::{body, narrow, strided, widen, Dialect, Launch, RenderError, BLOCK, SHARED_LIMIT};
use crate::kir::{Buf, Index, RowStep, Rows};

/// One block per row; slot `k` of the row lives at `slot_at[k]` in shared memory (C: a local
/// array). Every step ends at a barrier, as the next may read what any thread wrote.
pub(super) fn rows(r: &Rows, d: Dialect, s: &mut String) -> Result<Launch, RenderError> {
    let mut slot_at = vec![];
    let mut total = 0;
    for l in &r.slots {
        slot_at.push(total);
        total += l;
    }
    let shared_bytes = total.max(1) * 4;
    if shared_bytes > SHARED_LIMIT {
        return Err(RenderError(format!(
            "a row kernel over rows of {} keeps {shared_bytes} bytes per row, over the {SHARED_LIMIT} of shared memory",
            r.len
        )));
    }
    let n_rows = r.rows();
    let ins = r.inputs.len();
    let (sync, row_loop, lanes) = match d {
        Dialect::Cuda => {
            *s += "  extern __shared__ float dlc_row[];\n  __shared__ float dlc_warp[32];\n  __shared__ double dlc_warp_sum[32];\n";
            (
                "    __syncthreads();\n",
                format!("  for (long long row = blockIdx.x; row < {n_rows}LL; row += gridDim.x) {{\n"),
                "for (long long j = threadIdx.x; j < {n}LL; j += blockDim.x) {\n",
            )
        }
        Dialect::C => {
            *s += &format!("  float dlc_row[{}];\n", total.max(1));
            ("", format!("  for (long long row = 0; row < {n_rows}LL; row++) {{\n"), "for (long long j = 0; j < {n}LL; j++) {\n")
        }
    };
    let lanes = |n: usize| lanes.replace("{n}", &n.to_string());
    *s += &row_loop;
    let slot =
        |k: usize, j: &str| if r.slots[k] == 1 { format!("dlc_row[{}]", slot_at[k]) } else { format!("dlc_row[{} + {j}]", slot_at[k]) };
    for step in &r.steps {
        match step {
            RowStep::Map { len, body: b, writes } => {
                let shape: Vec<usize> = r.lead.iter().copied().chain(std::iter::once(*len)).collect();
                let flat = format!("(row * {len}LL + j)");
                let load = |from: Buf, index: &Index| -> String {
                    match from {
                        Buf::Param(k) => {
                            let at = match index {
                                Index::Linear => flat.clone(),
                                Index::Splat => "0".into(),
                                Index::Strided(st) => strided(&flat, &shape, st),
                            };
                            widen(r.inputs[k].ty, &format!("p{k}[{at}]"))
                        }
                        Buf::Slot(k) => match index {
                            Index::Splat => slot(k, "0"),
                            Index::Strided(st) if st.last() == Some(&0) => slot(k, "0"),
                            _ => slot(k, "j"),
                        },
                    }
                };
                *s += &format!("    {}", lanes(*len));
                *s += &body(b, "      ", &load);
                for (reg, k) in writes {
                    *s += &format!("      {} = r{reg};\n", slot(*k, "j"));
                }
                *s += "    }\n";
                *s += sync;
            }
            RowStep::Reduce { max, from, to } => {
                let v = match from {
                    Buf::Slot(k) => slot(*k, "j"),
                    Buf::Param(k) => widen(r.inputs[*k].ty, &format!("p{k}[row * {}LL + j]", r.len)),
                };
                let (acc_t, ident, op) = match (max, d) {
                    (true, _) => ("float", "__int_as_float((int)0xff800000)", "acc = dlc_max(acc, v);"),
                    // The CPU sums a row in f64 lanes, and so do both dialects: in f32, the
                    // GPU's other order of summation made layer norm's backward differ from the
                    // CPU wherever the row's terms cancel (the first run on an H200).
                    (false, _) => ("double", "0.0", "acc += v;"),
                };
                *s += &format!("    {{\n      {acc_t} acc = {ident};\n      {}", lanes(r.len));
                *s += &format!("        const float v = {v};\n        {op}\n      }}\n");
                if d == Dialect::Cuda {
                    let (combine, warp) = if *max { ("acc = dlc_max(acc, o);", "dlc_warp") } else { ("acc += o;", "dlc_warp_sum") };
                    *s += &format!(
                        "      for (int w = 16; w > 0; w >>= 1) {{ const {acc_t} o = __shfl_down_sync(0xffffffffu, acc, w); {combine} }}\n"
                    );
                    *s += &format!("      if ((threadIdx.x & 31) == 0) {warp}[threadIdx.x >> 5] = acc;\n      __syncthreads();\n");
                    *s += &format!(
                        "      if (threadIdx.x == 0) {{\n        acc = {warp}[0];\n        for (int w = 1; w < (int)(blockDim.x >> 5); w++) {{ const {acc_t} o = {warp}[w]; {combine} }}\n        {} = (float)acc;\n      }}\n",
                        slot(*to, "0"),
                    );
                } else {
                    *s += &format!("      {} = (float)acc;\n", slot(*to, "0"));
                }
                *s += "    }\n";
                *s += sync;
            }
        }
    }
    for (o, (k, ty)) in r.outputs.iter().enumerate() {
        let n = r.slots[*k];
        *s += &format!("    {}      p{}[row * {n}LL + j] = {};\n    }}\n", lanes(n), ins + o, narrow(*ty, &slot(*k, "j")));
    }
    *s += sync;
    *s += "  }\n";
    // Threads per block: the row length rounded up to whole warps, at most BLOCK.
    let block = r.len.div_ceil(32).clamp(1, BLOCK / 32) * 32;
    Ok(Launch { grid: n_rows.clamp(1, 65_535), block, shared_bytes })
}
