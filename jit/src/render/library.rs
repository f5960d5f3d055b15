//! The kernels of library ops (kir/library.rs): copies and i64 ops in their storage types,
//! and the CPU's random stream, one element a thread in CUDA, a loop in C.

use super::kinds::{blocks, each};
use super::{strided, Dialect, Launch, BLOCK};
use crate::kir::{ArgMax, Copy, Index, IntBinary, Rand, Ty};
use dlc_language::ir::BinaryOp;

/// Where element `i` of an output of `shape` reads a buffer read at `index`.
fn at(index: &Index, i: &str, shape: &[usize]) -> String {
    match index {
        Index::Linear => i.to_string(),
        Index::Splat => "0".into(),
        Index::Strided(st) => strided(i, shape, st),
    }
}

pub(super) fn copy(c: &Copy, d: Dialect, s: &mut String) -> Launch {
    let n: usize = c.shape.iter().product();
    *s += &format!("  {}", each(d, "i", &format!("{n}LL")));
    *s += &format!("    p1[i] = p0[{}];\n  }}\n", at(&c.index, "i", &c.shape));
    Launch { grid: blocks(n), block: BLOCK, shared_bytes: 0 }
}

/// An i64 op as the interpreter's `int_binop`: comparisons 0/1, add, subtract and multiply
/// wrapping (in unsigned arithmetic, where C's signed overflow is undefined), max and min.
pub(super) fn int_binary(c: &IntBinary, d: Dialect, s: &mut String) -> Launch {
    let n: usize = c.shape.iter().product();
    let (a, b) = (format!("p0[{}]", at(&c.a.1, "i", &c.shape)), format!("p1[{}]", at(&c.b.1, "i", &c.shape)));
    let u = |x: &str| format!("(unsigned long long){x}");
    let value = match c.op {
        BinaryOp::CmpEq => format!("({a} == {b}) ? 1 : 0"),
        BinaryOp::CmpNe => format!("({a} != {b}) ? 1 : 0"),
        BinaryOp::CmpLt => format!("({a} < {b}) ? 1 : 0"),
        BinaryOp::CmpLe => format!("({a} <= {b}) ? 1 : 0"),
        BinaryOp::Add => format!("(long long)({} + {})", u(&a), u(&b)),
        BinaryOp::Sub => format!("(long long)({} - {})", u(&a), u(&b)),
        BinaryOp::Mul => format!("(long long)({} * {})", u(&a), u(&b)),
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
    *s += "    const unsigned long long h = dlc_splitmix(dlc_z ^ ((unsigned long long)i * 0xD1B54A32D192ED03ULL));\n";
    *s += &format!("    p{out}[i] = (float)((double)(h >> 11) * 1.1102230246251565e-16);\n  }}\n");
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
