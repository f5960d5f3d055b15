//! Pooling kernels (kir::Pool), written to visit the window in the interpreter's order
//! (exec/pool.rs): ky then kx, padding skipped; the first maximum wins and a NaN replaces it;
//! averages divide the sum by the window's area. The gradient is gathered, a thread an input
//! element, from the outputs whose windows hold it, in row-major output order: the order in which
//! the interpreter adds each output's gradient into the input, so the sums are the same.

use super::kinds::{blocks, each};
use super::math::lit;
use super::{Dialect, Launch, BLOCK};
use crate::kir::Pool;

pub(super) fn pool(p: &Pool, d: Dialect, s: &mut String) -> Launch {
    let Pool { h, w, oh, ow, k, s: st, p: pad, .. } = *p;
    let area = lit((k.0 * k.1) as f32);
    // Where a pixel's value is from its plane's start: channels-last planes interleave, `C`
    // apart, and a thread's element is its image's pixel's channel (channels fastest, as stored).
    let px = p.channels_last.map(|c| format!(" * {c}LL")).unwrap_or_default();
    // Where, in an array of `hw_a` pixels a plane, the plane of element `e` of an array of
    // `hw_e` pixels a plane starts, as C.
    let plane_start = |e: &str, hw_e: usize, hw_a: usize| match p.channels_last {
        None => format!("({e} / {hw_e}LL) * {hw_a}LL"),
        Some(c) => format!("({e} / {}LL) * {}LL + {e} % {c}LL", hw_e * c, hw_a * c),
    };
    // Element `e`'s pixel within its plane.
    let pixel = |e: &str, hw: usize| match p.channels_last {
        None => format!("{e} % {hw}LL"),
        Some(c) => format!("({e} / {c}LL) % {hw}LL"),
    };
    if !p.grad {
        let n = p.planes * oh * ow;
        *s += &format!("  {}", each(d, "o", &format!("{n}LL")));
        *s += &format!(
            "    const long long r = {}, oy = r / {ow}LL, ox = r % {ow}LL;\n    const float* xp = p0 + {};\n",
            pixel("o", oh * ow),
            plane_start("o", oh * ow, h * w)
        );
        *s += &format!("    float acc = {};\n", if p.max { "__int_as_float((int)0xff800000)" } else { "0.0f" });
        *s += &window("oy", "ox", k, st, pad, h, w, "    ");
        *s += &format!("      const float v = xp[(iy * {w}LL + ix){px}];\n");
        *s += if p.max { "      if (v != v || v > acc) acc = v;\n" } else { "      acc += v;\n" };
        *s += "    }\n    }\n";
        *s += &format!("    p1[o] = {};\n  }}\n", if p.max { "acc".to_string() } else { format!("acc / {area}") });
        return Launch { grid: blocks(n), block: BLOCK, shared_bytes: 0 };
    }
    let n = p.planes * h * w;
    *s += &format!("  {}", each(d, "i", &format!("{n}LL")));
    *s += &format!(
        "    const long long at = {}, iy0 = at / {w}LL, ix0 = at % {w}LL;\n    const float* xp = p0 + {};\n    const float* gp = p1 + {};\n    float acc = 0.0f;\n",
        pixel("i", h * w),
        plane_start("i", h * w, h * w),
        plane_start("i", h * w, oh * ow),
    );
    // The outputs whose windows can hold (iy0, ix0): oy * s <= iy0 + pad < oy * s + k.
    let range = |v: &str, pd: usize, kk: usize, ss: usize, n: usize| -> String {
        format!(
            "    const long long {v}_lo = {v}0 + {pd}LL - {kk}LL < 0 ? 0 : ({v}0 + {pd}LL - {kk}LL) / {ss}LL + 1;\n    const long long {v}_hi = ({v}0 + {pd}LL) / {ss}LL < {n}LL ? ({v}0 + {pd}LL) / {ss}LL : {n}LL - 1;\n"
        )
    };
    *s += &range("iy", pad.0, k.0, st.0, oh);
    *s += &range("ix", pad.1, k.1, st.1, ow);
    *s += "    for (long long oy = iy_lo; oy <= iy_hi; oy++) {\n      for (long long ox = ix_lo; ox <= ix_hi; ox++) {\n";
    *s += &format!("        const float g = gp[(oy * {ow}LL + ox){px}];\n");
    if p.max {
        *s += "        long long best = -1;\n        float bv = 0.0f;\n";
        *s += &window("oy", "ox", k, st, pad, h, w, "        ");
        *s += &format!(
            "          const float v = xp[(iy * {w}LL + ix){px}];\n          if (best < 0 || v > bv) {{ best = iy * {w}LL + ix; bv = v; }}\n"
        );
        *s += "        }\n        }\n";
        *s += "        if (best == at) acc += g;\n";
    } else {
        *s += &format!("        acc += g / {area};\n");
    }
    *s += "      }\n    }\n    p2[i] = acc;\n  }\n";
    Launch { grid: blocks(n), block: BLOCK, shared_bytes: 0 }
}

/// The opening of the loops over output (oy, ox)'s window, in-bounds positions only: `iy`, `ix`
/// are in scope inside; the caller closes both loops.
#[allow(clippy::too_many_arguments)]
fn window(oy: &str, ox: &str, k: (usize, usize), s: (usize, usize), p: (usize, usize), h: usize, w: usize, indent: &str) -> String {
    format!(
        "{indent}for (long long ky = 0; ky < {}LL; ky++) {{\n{indent}  const long long iy = {oy} * {}LL + ky - {}LL;\n{indent}  if (iy < 0 || iy >= {h}LL) continue;\n{indent}  for (long long kx = 0; kx < {}LL; kx++) {{\n{indent}    const long long ix = {ox} * {}LL + kx - {}LL;\n{indent}    if (ix < 0 || ix >= {w}LL) continue;\n",
        k.0, s.0, p.0, k.1, s.1, p.1
    )
}
