//! How each kernel kind walks its index space, per dialect. CUDA: elementwise kernels and
//! groups in grid-stride loops of one thread per element; row kernels one block per row, the
//! row's values in shared memory, reductions by warp shuffles and then across warps; sums over
//! axes one thread per output element. C: the same bodies in plain loops.

use super::{body, ctype, narrow, strided, widen, Dialect, Launch, RenderError, BLOCK, SHARED_LIMIT};
use crate::kir::{Buf, Elementwise, Index, Inst, Kernel, RowStep, Rows, SumAxes, Ty};

/// Blocks for `n` work items of one thread each (a grid-stride loop covers the rest).
fn blocks(n: usize) -> usize {
    n.div_ceil(BLOCK).clamp(1, 65_535)
}

/// The entry point's signature and, in C, the unpacking of its `params` array.
fn signature(k: &Kernel, name: &str, d: Dialect) -> String {
    let params = k.params();
    match d {
        Dialect::Cuda => {
            let list: Vec<String> = params
                .iter()
                .enumerate()
                .map(|(i, (p, out))| format!("{}{}* DLC_RESTRICT p{i}", if *out { "" } else { "const " }, ctype(p.ty)))
                .collect();
            format!("extern \"C\" __global__ void __launch_bounds__({BLOCK}) {name}({}) {{\n", list.join(", "))
        }
        Dialect::C => {
            let mut s = format!("void {name}(void **params) {{\n");
            for (i, (p, out)) in params.iter().enumerate() {
                let c = if *out { "" } else { "const " };
                s += &format!("  {c}{t}* DLC_RESTRICT p{i} = ({c}{t}*)params[{i}];\n", t = ctype(p.ty));
            }
            s
        }
    }
}

/// A loop of `i` over `0..n`: grid-stride on the GPU, plain in C.
fn each(d: Dialect, i: &str, n: &str) -> String {
    match d {
        Dialect::Cuda => format!("for (long long {i} = blockIdx.x * (long long)blockDim.x + threadIdx.x; {i} < {n}; {i} += (long long)gridDim.x * blockDim.x) {{\n"),
        Dialect::C => format!("for (long long {i} = 0; {i} < {n}; {i}++) {{\n"),
    }
}

/// The loads and stores of one elementwise member at element `i`, its parameters from `base`.
fn member(e: &Elementwise, base: usize, i: &str, indent: &str) -> String {
    let load = |from: Buf, index: &Index| -> String {
        let Buf::Param(k) = from else { unreachable!("an elementwise kernel has no row buffers") };
        let at = match index {
            Index::Linear => i.to_string(),
            Index::Splat => "0".into(),
            Index::Strided(s) => strided(i, &e.shape, s),
        };
        widen(e.inputs[k].ty, &format!("p{}[{at}]", base + k))
    };
    let mut s = body(&e.body, indent, &load);
    for (o, (reg, ty)) in e.outputs.iter().enumerate() {
        s += &format!("{indent}p{}[{i}] = {};\n", base + e.inputs.len() + o, narrow(*ty, &format!("r{reg}")));
    }
    s
}

pub(super) fn kernel(k: &Kernel, name: &str, d: Dialect) -> Result<(String, Launch), RenderError> {
    let mut s = signature(k, name, d);
    let launch = match k {
        Kernel::Elementwise(e) if d == Dialect::Cuda && vectorisable(e) => {
            s += &vectorised(e);
            Launch { grid: blocks(e.numel() / 4), block: BLOCK, shared_bytes: 0 }
        }
        Kernel::Elementwise(e) => {
            s += &format!("  {}", each(d, "i", &format!("{}LL", e.numel())));
            s += &member(e, 0, "i", "    ");
            s += "  }\n";
            Launch { grid: blocks(e.numel()), block: BLOCK, shared_bytes: 0 }
        }
        Kernel::Group(es) => group(es, d, &mut s),
        Kernel::Rows(r) => rows(r, d, &mut s)?,
        Kernel::Sum(sa) => sum_axes(sa, d, &mut s),
    };
    s += "}\n";
    Ok((s, launch))
}

/// Whether an elementwise kernel can move four f32 values per load and store: every output is
/// f32, the element count a multiple of four, and some f32 input is read at the output's index.
/// (Buffers must be 16-byte aligned, as `cuMemAlloc` returns them; the device executor's memory
/// plan keeps every buffer at such an offset.)
fn vectorisable(e: &Elementwise) -> bool {
    let linear_f32 =
        e.body.iter().any(|i| matches!(i, Inst::Load { from: Buf::Param(k), index: Index::Linear } if e.inputs[*k].ty == Ty::F32));
    // Four IEEE divisions' slow paths in one thread spilled on sm_90 (ptxas: 4 bytes, the MNIST
    // CNN's `x / s * m`): bodies that divide stay one element per thread.
    let divides = e.body.iter().any(|i| {
        matches!(
            i,
            Inst::Binary(dlc_language::ir::BinaryOp::Div | dlc_language::ir::BinaryOp::Mod | dlc_language::ir::BinaryOp::Pow, ..)
                | Inst::Unary(dlc_language::ir::UnaryOp::Recip, _)
        )
    });
    e.numel() % 4 == 0 && e.numel() >= 4 && linear_f32 && !divides && e.outputs.iter().all(|(_, t)| *t == Ty::F32)
}

/// An elementwise kernel four elements per thread: each f32 input read at the output's index is
/// one `float4` load, each output one `float4` store; the body runs once per component, other
/// loads (broadcasts, other storage types) at that component's index.
fn vectorised(e: &Elementwise) -> String {
    let n4 = e.numel() / 4;
    let mut s = format!("  {}", each(Dialect::Cuda, "q", &format!("{n4}LL")));
    let wide: Vec<usize> = (0..e.inputs.len())
        .filter(|k| {
            e.inputs[*k].ty == Ty::F32
                && e.body.iter().any(|i| matches!(i, Inst::Load { from: Buf::Param(j), index: Index::Linear } if j == k))
        })
        .collect();
    for k in &wide {
        s += &format!("    const float4 v{k} = reinterpret_cast<const float4*>(p{k})[q];\n");
    }
    for o in 0..e.outputs.len() {
        s += &format!("    float4 w{o};\n");
    }
    for (c, lane) in ["x", "y", "z", "w"].iter().enumerate() {
        s += &format!("    {{\n      const long long i = q * 4LL + {c}LL;\n");
        let load = |from: Buf, index: &Index| -> String {
            let Buf::Param(k) = from else { unreachable!("an elementwise kernel has no row buffers") };
            match index {
                Index::Linear if wide.contains(&k) => format!("v{k}.{lane}"),
                Index::Linear => widen(e.inputs[k].ty, &format!("p{k}[i]")),
                Index::Splat => widen(e.inputs[k].ty, &format!("p{k}[0]")),
                Index::Strided(st) => widen(e.inputs[k].ty, &format!("p{k}[{}]", strided("i", &e.shape, st))),
            }
        };
        s += &body(&e.body, "      ", &load);
        for (o, (reg, _)) in e.outputs.iter().enumerate() {
            s += &format!("      w{o}.{lane} = r{reg};\n");
        }
        s += "    }\n";
    }
    for o in 0..e.outputs.len() {
        s += &format!("    reinterpret_cast<float4*>(p{})[q] = w{o};\n", e.inputs.len() + o);
    }
    s += "  }\n";
    s
}

/// Every member in one launch: on the GPU one grid-stride loop over all members' elements,
/// each thread finding its member by range; in C one loop per member.
fn group(es: &[Elementwise], d: Dialect, s: &mut String) -> Launch {
    let total: usize = es.iter().map(Elementwise::numel).sum();
    let mut base = 0;
    let mut start = 0;
    if d == Dialect::Cuda {
        *s += &format!("  {}", each(d, "t", &format!("{total}LL")));
    }
    for (m, e) in es.iter().enumerate() {
        let end = start + e.numel();
        match d {
            Dialect::Cuda => {
                *s += &format!("    {}if (t < {end}LL) {{\n      const long long i = t - {start}LL;\n", if m == 0 { "" } else { "else " });
                *s += &member(e, base, "i", "      ");
                *s += "    }\n";
            }
            Dialect::C => {
                *s += &format!("  {}", each(d, "i", &format!("{}LL", e.numel())));
                *s += &member(e, base, "i", "    ");
                *s += "  }\n";
            }
        }
        base += e.inputs.len() + e.outputs.len();
        start = end;
    }
    if d == Dialect::Cuda {
        *s += "  }\n";
    }
    Launch { grid: blocks(total), block: BLOCK, shared_bytes: 0 }
}

/// One block per row; slot `k` of the row lives at `slot_at[k]` in shared memory (C: a local
/// array). Every step ends at a barrier, as the next may read what any thread wrote.
fn rows(r: &Rows, d: Dialect, s: &mut String) -> Result<Launch, RenderError> {
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
            *s += "  extern __shared__ float dlc_row[];\n  __shared__ float dlc_warp[32];\n";
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
                    // The CPU sums a row in f64 lanes; the C check does too.
                    (false, Dialect::C) => ("double", "0.0", "acc += v;"),
                    (false, Dialect::Cuda) => ("float", "0.0f", "acc += v;"),
                };
                *s += &format!("    {{\n      {acc_t} acc = {ident};\n      {}", lanes(r.len));
                *s += &format!("        const float v = {v};\n        {op}\n      }}\n");
                if d == Dialect::Cuda {
                    let combine = if *max { "acc = dlc_max(acc, o);" } else { "acc += o;" };
                    *s += &format!(
                        "      for (int w = 16; w > 0; w >>= 1) {{ const float o = __shfl_down_sync(0xffffffffu, acc, w); {combine} }}\n"
                    );
                    *s += "      if ((threadIdx.x & 31) == 0) dlc_warp[threadIdx.x >> 5] = acc;\n      __syncthreads();\n";
                    *s += &format!(
                        "      if (threadIdx.x == 0) {{\n        acc = dlc_warp[0];\n        for (int w = 1; w < (int)(blockDim.x >> 5); w++) {{ const float o = dlc_warp[w]; {combine} }}\n        {} = acc;\n      }}\n",
                        slot(*to, "0")
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

/// A sum over axes. Few outputs over long sums (bias gradients, batch-norm statistics: a value
/// per channel over batch × height × width) take a block per output, its threads striding over
/// the summed elements (consecutive threads read consecutive addresses) and adding up by warp
/// shuffles and then across warps; otherwise a thread per output walks its summed elements.
/// Either way in f64, as the CPU sums, and the prologue's other outputs are written at every
/// element visited (the sums' index sets partition the prologue's elements).
fn sum_axes(sa: &SumAxes, d: Dialect, s: &mut String) -> Launch {
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
