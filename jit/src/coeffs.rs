//! Coefficients of the f32 math functions, shared by the interpreter's kernels
//! (interpreter/src/exec/math32.rs) and the compiled ones (cranelift/math.rs and render/math.rs
//! here), which must compute the same bits. Minimax fits made by `scripts/fit_math.py`; lowest degree first.

#[allow(clippy::approx_constant)] // P[0] is fitted (it comes out one ulp from 2/sqrt(pi))
pub const ERF_P: [f32; 7] = [1.128_379_1, 0.198_179_47, 0.050_344_553, 0.003_632_172_2, 0.000_140_596_73, -1.963_202e-6, 2.014_837_7e-8];

pub const ERF_Q: [f32; 5] = [1.0, 0.508_963_7, 0.114_279_74, 0.014_207_63, 0.000_940_554_9];

/// Beyond this erf is within 4e-8 of ±1.
pub const ERF_CLAMP: f32 = 3.9;

pub const TANH_P: [f32; 7] = [1.0, 0.130_797_25, 0.003_099_162_8, 1.110_393_4e-5, -2.001_916_3e-8, 5.177_697e-11, -8.228_480_6e-14];

pub const TANH_Q: [f32; 4] = [1.0, 0.464_130_52, 0.024_476_11, 0.000_253_915_18];

/// Beyond this tanh rounds to ±1 in f32.
pub const TANH_CLAMP: f32 = 9.1;

/// log(1 + f) = f - f^2/2 + f^3 R(f) on [sqrt(1/2) - 1, sqrt(2) - 1].
pub const LOG_R: [f32; 7] = [0.333_341_66, -0.250_017, 0.199_548_77, -0.165_644_26, 0.149_779_9, -0.143_790_1, 0.086_721_98];

/// ln 2 split so that e * LN2_HI is exact for every exponent e.
#[allow(clippy::excessive_precision)] // 355/512, exactly: written out so that it reads as exact
pub const LN2_HI: f32 = 0.693_359_375;

pub const LN2_LO: f32 = -2.121_944_4e-4;
