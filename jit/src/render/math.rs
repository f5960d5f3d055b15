//! The math functions of a kernel body, rendered once for both C dialects from the coefficients
//! the CPU kernels use (`crate::coeffs`), operation for operation as
//! interpreter/src/exec/math32.rs computes them: the same clamps, the same reductions, a fused
//! multiply-add (`fmaf`) exactly where the CPU calls `mul_add`, and plain multiplies and adds
//! elsewhere (C is compiled without contraction so that the CPU check is exact).

use super::Dialect;
use crate::coeffs::*;

/// A float literal that parses back to exactly `v`.
pub fn lit(v: f32) -> String {
    if v.is_nan() {
        "__int_as_float(0x7fc00000)".into()
    } else if v.is_infinite() {
        if v > 0.0 { "__int_as_float(0x7f800000)" } else { "__int_as_float((int)0xff800000)" }.into()
    } else {
        let s = format!("{v:?}");
        if s.contains('.') || s.contains('e') {
            format!("{s}f")
        } else {
            format!("{s}.0f")
        }
    }
}

/// Horner's rule with fused multiply-adds over `c` (lowest degree first) at `z`, into `var`.
fn horner(var: &str, c: &[f32], z: &str) -> String {
    let mut s = format!("  float {var} = {};\n", lit(c[c.len() - 1]));
    for k in c[..c.len() - 1].iter().rev() {
        s += &format!("  {var} = fmaf({var}, {z}, {});\n", lit(*k));
    }
    s
}

/// The helpers every kernel may call: bit casts, clamps, exp, log, erf, tanh, the binary ops
/// with the CPU's NaN and sign rules, and bf16/f16 conversions.
pub fn prelude(d: Dialect) -> String {
    let f = match d {
        Dialect::Cuda => "static __device__ __forceinline__",
        Dialect::C => "static inline",
    };
    let mut s = String::new();
    match d {
        Dialect::Cuda => {
            s += "typedef unsigned short dlc_bf16;\ntypedef unsigned short dlc_f16;\n";
            s += "#define DLC_RESTRICT __restrict__\n";
        }
        Dialect::C => {
            s += "#include <math.h>\n#include <string.h>\n#include <stdint.h>\n#include <stdlib.h>\n";
            s += "typedef unsigned short dlc_bf16;\ntypedef unsigned short dlc_f16;\n";
            s += "#define DLC_RESTRICT restrict\n";
            s += "static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }\n";
            s += "static inline float __uint_as_float(unsigned int i) { float f; memcpy(&f, &i, 4); return f; }\n";
            s += "static inline unsigned int __float_as_uint(float f) { unsigned int i; memcpy(&i, &f, 4); return i; }\n";
        }
    }
    s += &format!("{f} float dlc_clamp(float x, float a, float b) {{ return x < a ? a : (x > b ? b : x); }}\n");
    // The CPU's random stream (runtime/rng.rs: splitmix64), in unsigned arithmetic that wraps.
    s += &format!(
        "{f} unsigned long long dlc_splitmix(unsigned long long z) {{\n  z += 0x9E3779B97F4A7C15ULL;\n  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;\n  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;\n  return z ^ (z >> 31);\n}}\n"
    );
    // e^x (math32::exp32).
    s += &format!(
        "{f} float dlc_exp(float x0) {{\n  float x = dlc_clamp(x0, -87.3f, 88.7f);\n  float n = (x * {} + 12582912.0f) - 12582912.0f;\n  float r = x - n * 0.69314575f - n * 1.4286068e-6f;\n  float p = 1.0f + r * (1.0f + r * (0.5f + r * ({} + r * ({} + r * ({} + r * {})))));\n  int e = (int)n;\n  float y = p * __uint_as_float((unsigned int)(e + 127) << 23);\n  return x0 < -87.3f ? 0.0f : (x0 > 88.7f ? __int_as_float(0x7f800000) : y);\n}}\n",
        lit(std::f32::consts::LOG2_E),
        lit(1.0 / 6.0),
        lit(1.0 / 24.0),
        lit(1.0 / 120.0),
        lit(1.0 / 720.0)
    );
    // x P(x^2) / Q(x^2), clamped to [-1, 1] (math32::odd_rational).
    for (name, p, q, clamp) in [("erf", &ERF_P[..], &ERF_Q[..], ERF_CLAMP), ("tanh", &TANH_P[..], &TANH_Q[..], TANH_CLAMP)] {
        s += &format!("{f} float dlc_{name}(float x) {{\n  x = dlc_clamp(x, {}, {});\n  float z = x * x;\n", lit(-clamp), lit(clamp));
        s += &horner("pz", p, "z");
        s += &horner("qz", q, "z");
        s += "  return dlc_clamp(x * pz / qz, -1.0f, 1.0f);\n}\n";
    }
    // Natural log (math32::log32).
    s += &format!("{f} float dlc_log(float x) {{\n  int tiny = x < 1.17549435e-38f;\n  float xs = tiny ? x * 8388608.0f : x;\n  int bits = (int)__float_as_uint(xs);\n");
    s += &format!(
        "  float m = __uint_as_float((unsigned int)((bits & 0x007fffff) | 0x3f800000));\n  int big = m > {};\n  m = big ? m * 0.5f : m;\n",
        lit(std::f32::consts::SQRT_2)
    );
    s += "  int e = ((bits >> 23) & 0xff) - 127 + big - (tiny ? 23 : 0);\n  float fr = m - 1.0f;\n";
    s += &horner("r", &LOG_R, "fr");
    s += &format!(
        "  float f2 = fr * fr;\n  float y = fmaf(f2 * fr, r, fmaf(-0.5f, f2, fr));\n  float ef = (float)e;\n  float v = fmaf(ef, {}, fmaf(ef, {}, y));\n",
        lit(LN2_HI),
        lit(LN2_LO)
    );
    s += "  if (x == 0.0f) return __int_as_float((int)0xff800000);\n  if (x != x || x < 0.0f) return __int_as_float(0x7fc00000);\n  if (x == __int_as_float(0x7f800000)) return x;\n  return v;\n}\n";
    // Binary ops with the CPU's rules: NaN on the left wins max/min, Python's remainder.
    s += &format!("{f} float dlc_max(float x, float y) {{ return (x != x || x > y) ? x : y; }}\n");
    s += &format!("{f} float dlc_min(float x, float y) {{ return (x != x || x < y) ? x : y; }}\n");
    s += &format!(
        "{f} float dlc_mod(float x, float y) {{ float r = fmodf(x, y); return (r != 0.0f && ((r < 0.0f) != (y < 0.0f))) ? r + y : r; }}\n"
    );
    // bf16: round to nearest even on the bits; a NaN stays a quiet NaN (tensor::round_bf16).
    s += &format!("{f} unsigned short dlc_to_bf16(float v) {{\n  unsigned int b = __float_as_uint(v);\n  if ((b & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((b | 0x00400000u) >> 16);\n  return (unsigned short)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);\n}}\n");
    s += &format!("{f} float dlc_from_bf16(unsigned short h) {{ return __uint_as_float((unsigned int)h << 16); }}\n");
    match d {
        Dialect::Cuda => {
            // On the device, the PTX conversions; compiled for the host (the CPU emulation of
            // the CUDA kernels, kernels/emu_check.rs), the software ones.
            s += "#ifdef __CUDA_ARCH__\n";
            s += &format!("{f} unsigned short dlc_to_f16(float v) {{ unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(v)); return h; }}\n");
            s += &format!(
                "{f} float dlc_from_f16(unsigned short h) {{ float v; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(v) : \"h\"(h)); return v; }}\n"
            );
            s += "#else\n";
            s += &SOFT_F16.replace("static inline", f);
            s += "#endif\n";
        }
        Dialect::C => s += SOFT_F16,
    }
    s
}

/// IEEE binary16 conversions in software, round to nearest even (kir::lower::f32_to_f16, as
/// `half` rounds): the C dialect's, and the CUDA dialect's when compiled for the host.
const SOFT_F16: &str = concat!(
    "static inline unsigned short dlc_to_f16(float v) {\n  unsigned int b = __float_as_uint(v);\n  unsigned short sign = (unsigned short)((b >> 16) & 0x8000u);\n  int exp = (int)((b >> 23) & 0xff);\n  unsigned int man = b & 0x7fffffu;\n  if (exp == 0xff) return sign | 0x7c00 | (man ? 0x200 : 0);\n  int e = exp - 127 + 15;\n  if (e >= 0x1f) return sign | 0x7c00;\n  if (e <= 0) {\n    if (e < -10) return sign;\n    unsigned int m = man | 0x800000u;\n    unsigned int shift = (unsigned int)(14 - e);\n    unsigned int half = 1u << (shift - 1);\n    unsigned int rem = m & ((1u << shift) - 1);\n    unsigned int h = m >> shift;\n    if (rem > half || (rem == half && (h & 1))) h += 1;\n    return sign | (unsigned short)h;\n  }\n  unsigned int h = ((unsigned int)e << 10) | (man >> 13);\n  unsigned int rem = man & 0x1fffu;\n  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h += 1;\n  return sign | (unsigned short)h;\n}\n",
    "static inline float dlc_from_f16(unsigned short h) {\n  unsigned int sign = (unsigned int)(h & 0x8000) << 16;\n  unsigned int exp = (h >> 10) & 0x1f, man = h & 0x3ff;\n  if (exp == 0) {\n    if (man == 0) return __uint_as_float(sign);\n    int e = 127 - 15 + 1;\n    while (!(man & 0x400)) { man <<= 1; e -= 1; }\n    return __uint_as_float(sign | ((unsigned int)e << 23) | ((man & 0x3ff) << 13));\n  }\n  if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (man << 13));\n  return __uint_as_float(sign | ((exp + 127 - 15) << 23) | (man << 13));\n}\n",
);
