//! The kernels of library ops (kir/library.rs): copies and i64 ops in their storage types,
//! and the CPU's random stream, one element a thread in CUDA, a loop in C.

use super::kinds::{blocks, each};
use super::{Dialect, Launch, BLOCK};
use crate::kir::{ArgMax, Concat, Copy, IndexCheck, IntBinary, Rand, Take, TakeGrad, Ty, Unslice};
use dlc_language::ir::BinaryOp;

/// Coordinate `d` of element `i` of `shape`, as C.
fn coord(i: &str, shape: &[usize], d: usize) -> String {
    let inner: usize = shape[d + 1..].iter().product();
    format!("(({i} / {inner}LL) % {}LL)", shape[d])
}

pub(super) fn copy(c: &Copy, d: Dialect, s: &mut String) -> Launch {
    let n: usize = c.shape.iter().product();
    let mut at = format!("{}LL", c.offset);
    for (k, st) in c.strides.iter().enumerate() {
        if *st != 0 && c.shape[k] > 1 {
            at += &format!(" + {} * {st}LL", coord("i", &c.shape, k));
        }
    }
    *s += &format!("  {}", each(d, "i", &format!("{n}LL")));
    *s += &format!("    p1[i] = p0[{at}];\n  }}\n");
    Launch { grid: blocks(n), block: BLOCK, shared_bytes: 0 }
}

/// Each output element either the input element whose place it is, or zero; `0 + v` as the
/// interpreter adds the value into its zeros (a -0.0 becomes +0.0 there too).
pub(super) fn unslice(u: &Unslice, d: Dialect, s: &mut String) -> Launch {
    let n: usize = u.shape.iter().product();
    let in_strides = crate::kir::contiguous(&u.input_shape);
    *s += &format!("  {}", each(d, "i", &format!("{n}LL")));
    *s += "    long long src = 0;\n    int hit = 1;\n";
    for (k, ((start, step), (size, stride))) in u.start.iter().zip(&u.step).zip(u.input_shape.iter().zip(&in_strides)).enumerate() {
        *s += &format!(
            "    {{\n      const long long t = {} - {start}LL;\n      if (t < 0 || t % {step}LL != 0 || t / {step}LL >= {size}LL) hit = 0; else src += (t / {step}LL) * {stride}LL;\n    }}\n",
            coord("i", &u.shape, k),
        );
    }
    let zero = if u.input.ty == Ty::I64 { "0LL" } else { "0.0f" };
    *s += &format!("    p1[i] = hit ? {zero} + p0[src] : {zero};\n  }}\n");
    Launch { grid: blocks(n), block: BLOCK, shared_bytes: 0 }
}

/// Each output element from the input whose part of `axis` holds its coordinate there.
pub(super) fn concat(c: &Concat, d: Dialect, s: &mut String) -> Launch {
    let n: usize = c.shape.iter().product();
    let inner: usize = c.shape[c.axis + 1..].iter().product();
    let len = c.shape[c.axis];
    *s += &format!("  {}", each(d, "i", &format!("{n}LL")));
    *s += &format!("    const long long outer = i / {}LL, a = (i / {inner}LL) % {len}LL, r = i % {inner}LL;\n", len * inner);
    let mut from = 0;
    for (k, (_, size)) in c.inputs.iter().enumerate() {
        let cond = if c.inputs.len() == 1 {
            String::new()
        } else if k + 1 == c.inputs.len() {
            "else".to_string()
        } else {
            format!("{}if (a < {}LL)", if k == 0 { "" } else { "else " }, from + size)
        };
        *s += &format!("    {cond} p{}[i] = p{k}[(outer * {size}LL + (a - {from}LL)) * {inner}LL + r];\n", c.inputs.len());
        from += size;
    }
    *s += "  }\n";
    Launch { grid: blocks(n), block: BLOCK, shared_bytes: 0 }
}

/// An i64 op as the interpreter's `int_binop`: comparisons 0/1, add, subtract and multiply
/// wrapping (in unsigned arithmetic, where C's signed overflow is undefined), max and min.
pub(super) fn int_binary(c: &IntBinary, d: Dialect, s: &mut String) -> Launch {
    let n: usize = c.shape.iter().product();
    let (a, b) = ("p0[i]", "p1[i]");
    let u = |x: &str| format!("(unsigned long long){x}");
    let value = match c.op {
        BinaryOp::CmpEq => format!("({a} == {b}) ? 1 : 0"),
        BinaryOp::CmpNe => format!("({a} != {b}) ? 1 : 0"),
        BinaryOp::CmpLt => format!("({a} < {b}) ? 1 : 0"),
        BinaryOp::CmpLe => format!("({a} <= {b}) ? 1 : 0"),
        BinaryOp::Add => format!("(long long)({} + {})", u(a), u(b)),
        BinaryOp::Sub => format!("(long long)({} - {})", u(a), u(b)),
        BinaryOp::Mul => format!("(long long)({} * {})", u(a), u(b)),
        BinaryOp::Max => format!("{a} > {b} ? {a} : {b}"),
        _ => format!("{a} < {b} ? {a} : {b}"),
    };
    *s += &format!("  {}", each(d, "i", &format!("{n}LL")));
    *s += &format!("    p2[i] = {value};\n  }}\n");
    Launch { grid: blocks(n), block: BLOCK, shared_bytes: 0 }
}

/// Element `i` of stream `seed ^ step * golden` as rng::uniform draws it: splitmix64 of
/// splitmix64(stream) ^ i * 0xD1B54A32D192ED03, its top 53 bits times 2^-53, rounded to f32.
/// The step converts to an integer as Rust's `f64 as u64` does (truncated, 0 below zero and for
/// NaN, saturated above).
pub(super) fn rand(r: &Rand, d: Dialect, s: &mut String) -> Launch {
    let out = if r.step.is_some() { 1 } else { 0 };
    match &r.step {
        Some(p) => {
            let v = match p.ty {
                Ty::I64 => "(double)p0[0]".to_string(),
                ty => format!("(double){}", super::widen(ty, "p0[0]")),
            };
            *s += &format!(
                "  const double dlc_step = {v};\n  const unsigned long long dlc_n = dlc_step > 0.0 ? (dlc_step < 18446744073709551616.0 ? (unsigned long long)dlc_step : 0xFFFFFFFFFFFFFFFFULL) : 0ULL;\n"
            );
            *s += &format!("  const unsigned long long dlc_z = dlc_splitmix({}ULL ^ (dlc_n * 0x9E3779B97F4A7C15ULL));\n", r.seed);
        }
        None => *s += &format!("  const unsigned long long dlc_z = dlc_splitmix({}ULL);\n", r.seed),
    }
    *s += &format!("  {}", each(d, "i", &format!("{}LL", r.len)));
    // Uniform j of the stream: its top 53 bits (runtime/rng.rs `uniform`).
    let uniform = |j: &str| {
        format!("(double)(dlc_splitmix(dlc_z ^ ((unsigned long long)({j}) * 0xD1B54A32D192ED03ULL)) >> 11) * 1.1102230246251565e-16")
    };
    if r.normal {
        // rng.rs `normal`: u1 kept above zero, sqrt(-2 ln u1) cos(2 pi u2), in f64.
        *s += &format!("    const double u1 = fmax({}, 2.2250738585072014e-308);\n", uniform("2 * i"));
        *s += &format!("    const double u2 = {};\n", uniform("2 * i + 1"));
        *s += &format!("    p{out}[i] = (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));\n  }}\n");
    } else {
        *s += &format!("    p{out}[i] = (float)({});\n  }}\n", uniform("i"));
    }
    Launch { grid: blocks(r.len), block: BLOCK, shared_bytes: 0 }
}

/// Each row's first maximum, as the interpreter's argmax scans it (a NaN replaces a number).
pub(super) fn argmax(a: &ArgMax, d: Dialect, s: &mut String) -> Launch {
    let v = |j: &str| super::widen(a.input.ty, &format!("p0[row * {}LL + {j}]", a.len));
    *s += &format!("  {}", each(d, "row", &format!("{}LL", a.rows)));
    *s += &format!("    long long best = 0;\n    float bv = {};\n", v("0"));
    *s += &format!("    for (long long j = 1; j < {}LL; j++) {{\n", a.len);
    *s += &format!("      const float x = {};\n      if (x > bv || (x != x && bv == bv)) {{ best = j; bv = x; }}\n    }}\n", v("j"));
    *s += "    p1[row] = best;\n  }\n";
    Launch { grid: blocks(a.rows), block: BLOCK, shared_bytes: 0 }
}

/// `k`, the index `load` reads, wrapped once from the end of `rows` rows as the interpreter's
/// `take` wraps it (the lookup, its check and its gradient agree on it).
fn wrapped_index(indent: &str, load: &str, rows: usize) -> String {
    format!("{indent}long long k = {load};\n{indent}if (k < 0) k += {rows}LL;\n")
}

/// Output element (r, c) of the embedding gradient: the rows of dy whose index is r, added in
/// index order in f64 from zero, rounded once (take_grad in exec/backward.rs).
///
/// C: a loop per output element over the indices. CUDA: a block per output row and tile of
/// `BLOCK` columns, each thread one column's sum. The block reads the indices `BLOCK` at a time,
/// one a thread; the first lane of each warp lists its warp's matches in order (in place, in
/// shared memory), and every thread then adds the matching rows of its column, warp by warp:
/// the index order, so the sums are the interpreter's. Its work is rows x n index reads plus the
/// matching rows, instead of rows x n x row, so a 50,000-token table is made as well as a
/// 65-character one.
pub(super) fn take_grad(t: &TakeGrad, d: Dialect, s: &mut String) -> Launch {
    let total = t.rows * t.row;
    if d == Dialect::C {
        *s += &format!("  {}", each(d, "o", &format!("{total}LL")));
        *s += &format!("    const long long r = o / {}LL, c = o % {}LL;\n    double acc = 0.0;\n", t.row.max(1), t.row.max(1));
        *s += &format!("    for (long long j = 0; j < {}LL; j++) {{\n", t.n);
        *s += &wrapped_index("      ", "p0[j]", t.rows);
        *s += &format!("      if (k == r) acc += (double)p1[j * {}LL + c];\n    }}\n", t.row);
        *s += "    p2[o] = (float)acc;\n  }\n";
        return Launch { grid: blocks(total), block: BLOCK, shared_bytes: 0 };
    }
    let tiles = t.row.div_ceil(BLOCK).max(1);
    let warps = BLOCK / 32;
    *s += &format!("  __shared__ int dlc_hit[{BLOCK}];\n  __shared__ int dlc_hits_in_warp[{warps}];\n");
    *s += &format!("  for (long long bo = blockIdx.x; bo < {}LL; bo += gridDim.x) {{\n", t.rows * tiles);
    *s += &format!("    const long long r = bo / {tiles}LL, c = bo % {tiles}LL * {BLOCK}LL + threadIdx.x;\n    double acc = 0.0;\n");
    *s += &format!("    for (long long from = 0; from < {}LL; from += {BLOCK}LL) {{\n", t.n);
    *s += "      const long long j = from + threadIdx.x;\n      int hit = 0;\n";
    *s += &format!("      if (j < {}LL) {{\n", t.n);
    *s += &wrapped_index("        ", "p0[j]", t.rows);
    *s += "        hit = k == r;\n      }\n      dlc_hit[threadIdx.x] = hit;\n      __syncthreads();\n";
    // A warp's matches listed in order where its flags were (each write at or before the flag
    // being read).
    *s += "      if ((threadIdx.x & 31) == 0) {\n        int m = 0;\n";
    *s += "        for (int l = 0; l < 32; l++) if (dlc_hit[threadIdx.x + l]) dlc_hit[threadIdx.x + m++] = (int)threadIdx.x + l;\n";
    *s += "        dlc_hits_in_warp[threadIdx.x >> 5] = m;\n      }\n      __syncthreads();\n";
    *s += &format!("      if (c < {}LL) {{\n", t.row);
    *s += &format!("        for (int w = 0; w < {warps}; w++) {{\n");
    *s += "          for (int q = 0; q < dlc_hits_in_warp[w]; q++) ";
    *s += &format!("acc += (double)p1[(from + dlc_hit[w * 32 + q]) * {}LL + c];\n        }}\n      }}\n", t.row);
    // Everyone has read the lists before the next chunk's flags overwrite them.
    *s += "      __syncthreads();\n    }\n";
    *s += &format!("    if (c < {}LL) p2[r * {}LL + c] = (float)acc;\n  }}\n", t.row, t.row);
    Launch { grid: (t.rows * tiles).clamp(1, 65_535), block: BLOCK, shared_bytes: 0 }
}

/// The lookup: a thread an output element, its row's index wrapped once from the end; one out
/// of range reads row 0 (the index check reports it).
pub(super) fn take(t: &Take, d: Dialect, s: &mut String) -> Launch {
    let total = t.n * t.row;
    *s += &format!("  {}", each(d, "o", &format!("{total}LL")));
    *s += &format!("    const long long j = o / {row}LL, c = o % {row}LL;\n", row = t.row.max(1));
    *s += &wrapped_index("    ", "p1[j]", t.rows);
    *s += &format!("    if (k < 0 || k >= {}LL) k = 0;\n", t.rows);
    *s += &format!("    p2[o] = p0[k * {}LL + c];\n  }}\n", t.row);
    Launch { grid: blocks(total), block: BLOCK, shared_bytes: 0 }
}

/// Any index out of range (after the wrap, never 0) written to the flag; several writers of
/// one step race, and any one's value is a true report.
pub(super) fn index_check(c: &IndexCheck, d: Dialect, s: &mut String) -> Launch {
    *s += &format!("  {}", each(d, "j", &format!("{}LL", c.n)));
    *s += &wrapped_index("    ", "p0[j]", c.rows);
    *s += &format!("    if (k < 0 || k >= {}LL) p1[0] = k;\n  }}\n", c.rows);
    Launch { grid: blocks(c.n), block: BLOCK, shared_bytes: 0 }
}
