//! What the CPU can do, detected once: the vector extensions the slice kernels and the
//! conversions choose their builds by.

/// Whether the slice kernels may use their AVX-512 builds: 16 f32 lanes a vector instead of 8.
/// `DLC_NO_AVX512=1` keeps the AVX2 builds (to compare the two on one machine).
#[cfg(target_arch = "x86_64")]
pub fn has_avx512() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("fma")
            && std::env::var_os("DLC_NO_AVX512").is_none()
    })
}

/// Whether the CPU has fused multiply-add.
#[cfg(target_arch = "x86_64")]
pub fn has_fma() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| std::arch::is_x86_feature_detected!("fma"))
}

/// `widest!(fn name(args) { body })` defines `name` with `body` built three times, for AVX-512
/// (F/VL with AVX2), for AVX2 and for the baseline, and calling the widest the CPU has: for loops
/// the compiler vectorises, in a binary built for the baseline x86-64.
macro_rules! widest {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($a:ident: $t:ty),* $(,)?) $body:block) => {
        $(#[$m])*
        $vis fn $name($($a: $t),*) {
            #[inline(always)]
            fn each($($a: $t),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512vl,avx2")]
                unsafe fn wide($($a: $t),*) {
                    each($($a),*)
                }
                #[target_feature(enable = "avx2")]
                unsafe fn avx2($($a: $t),*) {
                    each($($a),*)
                }
                if $crate::runtime::cpu::has_avx512() {
                    // SAFETY: the CPU has AVX-512 F/VL and AVX2.
                    return unsafe { wide($($a),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2.
                    return unsafe { avx2($($a),*) };
                }
            }
            each($($a),*)
        }
    };
}
pub(crate) use widest;
