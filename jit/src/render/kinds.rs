//! How each kernel kind walks its index space, per dialect: the entry point's signature, the
//! grid-stride loops, elementwise kernels (four elements a thread where they can) and groups here;
//! row kernels in rows.rs, sums over axes in sums.rs. C: the same bodies in plain loops.

use super::{body, ctype, narrow, strided, widen, Dialect, Launch, RenderError, BLOCK};
use crate::kir::{Buf, Elementwise, Index, Inst, Kernel, Ty};

/// Blocks for `n` work items of one thread each (a grid-stride loop covers the rest).
pub(super) fn blocks(n: usize) -> usize {
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
pub(super) fn each(d: Dialect, i: &str, n: &str) -> String {
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
        Kernel::Rows(r) => super::rows::rows(r, d, &mut s)?,
        Kernel::Sum(sa) => super::sums::sum_axes(sa, d, &mut s),
        Kernel::Copy(c) => super::library::copy(c, d, &mut s),
        Kernel::Unslice(u) => super::library::unslice(u, d, &mut s),
        Kernel::Concat(c) => super::library::concat(c, d, &mut s),
        Kernel::IntBinary(c) => super::library::int_binary(c, d, &mut s),
        Kernel::Rand(r) => super::library::rand(r, d, &mut s),
        Kernel::ArgMax(a) => super::library::argmax(a, d, &mut s),
        Kernel::Pool(p) => super::pool::pool(p, d, &mut s),
        Kernel::Take(t) => super::library::take(t, d, &mut s),
        Kernel::IndexCheck(c) => super::library::index_check(c, d, &mut s),
        Kernel::TakeGrad(t) => super::library::take_grad(t, d, &mut s),
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
