//! Compiled kernels kept on disk between runs: NVRTC's PTX for a translation unit, keyed by a
//! hash of the source, the architecture, and the NVRTC and driver versions, so a change to any
//! of them misses. Entries carry a hash of their own contents and are written to a temporary
//! file and renamed into place, so a torn or corrupt entry is detected and compiled again,
//! never loaded.

use std::path::{Path, PathBuf};

/// FNV-1a, 64 bits: stable across builds and platforms (std's hasher is not).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Where compiled kernels are kept: `$DLC_CACHE_DIR`, else `$XDG_CACHE_HOME/dlc`, else
/// `~/.cache/dlc`; `kernels/` under it.
pub fn default_dir() -> Option<PathBuf> {
    let base = std::env::var_os("DLC_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|x| PathBuf::from(x).join("dlc")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/dlc")))?;
    Some(base.join("kernels"))
}

/// The key of a translation unit compiled for `arch` by NVRTC `nvrtc` on driver `driver`, with
/// the options of `nvrtc_options`.
pub fn key(source: &str, arch: &str, nvrtc: (i32, i32), driver: i32) -> String {
    let mut text = format!("{arch}\n{}.{}\n{driver}\n{}\n", nvrtc.0, nvrtc.1, super::nvrtc_options::SIGNATURE);
    text += source;
    format!("{:016x}", fnv1a(text.as_bytes()))
}

const HEADER: &str = "// dlc-ptx ";

/// The cached PTX for `key`, if an intact entry is there.
pub fn load(dir: &Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(format!("{key}.ptx"))).ok()?;
    let (first, ptx) = text.split_once('\n')?;
    let want = first.strip_prefix(HEADER)?;
    (want == format!("{:016x}", fnv1a(ptx.as_bytes()))).then(|| ptx.to_string())
}

/// Keep `ptx` for `key`: written beside its place and renamed over it, so readers see the old
/// entry or the new one, never part of one.
pub fn store(dir: &Path, key: &str, ptx: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{key}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, format!("{HEADER}{:016x}\n{ptx}", fnv1a(ptx.as_bytes())))?;
    std::fs::rename(&tmp, dir.join(format!("{key}.ptx")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_round_trips_and_a_damaged_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("dlc-ptx-cache-{}", std::process::id()));
        let k = key("extern \"C\" __global__ void k() {}", "sm_90", (12, 9), 13000);
        assert_ne!(k, key("extern \"C\" __global__ void k() {}", "sm_80", (12, 9), 13000), "the architecture is in the key");
        assert_ne!(k, key("extern \"C\" __global__ void k() {}", "sm_90", (12, 9), 12080), "the driver is in the key");
        assert_eq!(load(&dir, &k), None);
        store(&dir, &k, ".version 8.8\n.target sm_90\n").expect("writable");
        assert_eq!(load(&dir, &k).as_deref(), Some(".version 8.8\n.target sm_90\n"));
        // A torn write: the contents no longer match their hash.
        let path = dir.join(format!("{k}.ptx"));
        let text = std::fs::read_to_string(&path).expect("readable");
        std::fs::write(&path, &text[..text.len() - 5]).expect("writable");
        assert_eq!(load(&dir, &k), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
