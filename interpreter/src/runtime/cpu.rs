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
