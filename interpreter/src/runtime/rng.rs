//! Counter-based random numbers: element `i` of a stream with seed `s` is a pure function of
//! (s, i), so results do not depend on thread count or evaluation order.

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform in [0, 1) with 53 random bits.
pub fn uniform(seed: u64, i: u64) -> f64 {
    let h = splitmix64(splitmix64(seed) ^ i.wrapping_mul(0xD1B5_4A32_D192_ED03));
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Standard normal by Box–Muller on two independent uniforms.
pub fn normal(seed: u64, i: u64) -> f64 {
    let u1 = uniform(seed, 2 * i).max(f64::MIN_POSITIVE);
    let u2 = uniform(seed, 2 * i + 1);
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

#[cfg(test)]
mod tests {
    #[test]
    fn uniform_moments() {
        let n = 100_000;
        let m: f64 = (0..n).map(|i| super::uniform(7, i)).sum::<f64>() / n as f64;
        assert!((m - 0.5).abs() < 0.01, "{m}");
        let v: f64 = (0..n).map(|i| super::normal(7, i).powi(2)).sum::<f64>() / n as f64;
        assert!((v - 1.0).abs() < 0.02, "{v}");
    }
}
