//! Autotuning choices kept between runs. The first run of a fused region of `AUTOTUNE_MIN`
//! elements or more times its native code against the chunk interpreter (`fused::Tune`); the
//! winner is stored here, keyed by the machine and the build, and later runs (or `dlc tune FILE`
//! ahead of time) take it without measuring again, and without compiling native code that
//! lost. PyTorch's `cudnn.benchmark` forgets its choices at exit.
//!
//! The file (`tune.json` in the cache directory: `$DLC_CACHE_DIR`, else `$XDG_CACHE_HOME/dlc`,
//! else `~/.cache/dlc`) maps a machine key to kernel keys. The machine key names the CPU model
//! with its family and model numbers, its vector extensions, the thread count and this build
//! (its executable's size and time), so another machine's, another thread count's or an older
//! build's choice is never used. A file that does not parse is ignored (and replaced on the next
//! save); saves re-read the file, merge, and replace it atomically (written aside, then renamed).

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One measured choice, with each side's fastest launch of the trials.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    pub native: bool,
    pub interp_ns: u64,
    pub native_ns: u64,
}

/// One measured choice among named kernels (a product's: `avx2`, `avx512`, `onednn`), with
/// each candidate's best time.
#[derive(Clone, Debug, PartialEq)]
pub struct Pick {
    pub name: String,
    pub ns: Vec<(String, u64)>,
}

pub struct TuneStore {
    pub path: PathBuf,
    pub machine: String,
    /// This machine's entries, as read plus as measured in this run.
    entries: Mutex<BTreeMap<String, Choice>>,
    /// Entries measured in this run (what a save adds).
    fresh: Mutex<BTreeMap<String, Choice>>,
    /// Choices among named kernels, as read plus as measured (`pick` entries in the file).
    picks: Mutex<BTreeMap<String, Pick>>,
    fresh_picks: Mutex<BTreeMap<String, Pick>>,
    /// Kernels whose choice came from the file.
    pub hits: std::sync::atomic::AtomicUsize,
    /// Why the file was not read, when it was there and could not be.
    pub unreadable: Option<String>,
}

/// The default file, if there is a home or cache directory.
pub fn default_path() -> Option<PathBuf> {
    dlc_jit::cuda::ptx_cache::default_dir().and_then(|d| d.parent().map(|p| p.join("tune.json")))
}

/// The CPU model with its family and model numbers, its vector extensions, the thread count and
/// this build. The numbers because a VM names its CPU "AMD EPYC" whatever the host: the same
/// image ran on a Zen 4 and on a Zen 5, whose AVX-512 kernels differ in speed, and their choices
/// must not be shared.
pub fn machine_key() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field =
        |name: &str| cpuinfo.lines().find_map(|l| l.split_once(':').filter(|(k, _)| k.trim() == name).map(|(_, v)| v.trim().to_string()));
    let mut model = field("model name").unwrap_or_else(|| std::env::consts::ARCH.to_string());
    if let (Some(family), Some(number)) = (field("cpu family"), field("model")) {
        model += &format!(" family {family} model {number}");
    }
    let flags = field("flags").unwrap_or_default();
    let features: Vec<&str> =
        ["avx512f", "avx2", "fma", "avx512_bf16", "amx_bf16"].into_iter().filter(|f| flags.split_whitespace().any(|g| g == *f)).collect();
    format!("{model} [{}] threads={} build={}", features.join(","), rayon::current_num_threads(), build_id())
}

/// This build: its executable's size and modification time (a rebuilt binary measures again).
pub fn build_id() -> String {
    std::env::current_exe()
        .and_then(std::fs::metadata)
        .map(|m| {
            format!(
                "{}@{}",
                m.len(),
                m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_secs()).unwrap_or(0)
            )
        })
        .unwrap_or_default()
}

fn read(path: &Path) -> Result<Value, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str::<Value>(&text).map_err(|e| format!("{}: {e}", path.display())).and_then(|v| {
            if v["format"] == json!(1) && v["machines"].is_object() {
                Ok(v)
            } else {
                Err(format!("{}: not a dlc tuning file", path.display()))
            }
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(json!({"format": 1, "machines": {}})),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

fn parse_pick(v: &Value) -> Option<Pick> {
    let ns = v["ns"].as_object()?.iter().filter_map(|(k, t)| Some((k.clone(), t.as_u64()?))).collect();
    Some(Pick { name: v["pick"].as_str()?.to_string(), ns })
}

fn parse_entry(v: &Value) -> Option<Choice> {
    Some(Choice { native: v["native"].as_bool()?, interp_ns: v["interp_ns"].as_u64()?, native_ns: v["native_ns"].as_u64()? })
}

impl TuneStore {
    /// The store at `path` for this machine (`machine_key`).
    pub fn open(path: PathBuf, machine: String) -> TuneStore {
        let (doc, unreadable) = match read(&path) {
            Ok(v) => (v, None),
            Err(e) => (json!({}), Some(e)),
        };
        let entries = doc["machines"][&machine]
            .as_object()
            .map(|m| m.iter().filter_map(|(k, v)| parse_entry(v).map(|c| (k.clone(), c))).collect())
            .unwrap_or_default();
        let picks = doc["machines"][&machine]
            .as_object()
            .map(|m| m.iter().filter_map(|(k, v)| parse_pick(v).map(|c| (k.clone(), c))).collect())
            .unwrap_or_default();
        TuneStore {
            path,
            machine,
            entries: Mutex::new(entries),
            fresh: Default::default(),
            picks: Mutex::new(picks),
            fresh_picks: Default::default(),
            hits: Default::default(),
            unreadable,
        }
    }

    /// The stored choice for a kernel key.
    pub fn get(&self, key: &str) -> Option<Choice> {
        let c = self.entries.lock().expect("tune store").get(key).copied();
        if c.is_some() {
            self.hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        c
    }

    /// Record a choice measured in this run.
    pub fn put(&self, key: String, c: Choice) {
        self.entries.lock().expect("tune store").insert(key.clone(), c);
        self.fresh.lock().expect("tune store").insert(key, c);
    }

    /// The stored choice among named kernels for a key.
    pub fn pick(&self, key: &str) -> Option<Pick> {
        let p = self.picks.lock().expect("tune store").get(key).cloned();
        if p.is_some() {
            self.hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        p
    }

    /// Record a choice among named kernels measured in this run.
    pub fn put_pick(&self, key: String, p: Pick) {
        self.picks.lock().expect("tune store").insert(key.clone(), p.clone());
        self.fresh_picks.lock().expect("tune store").insert(key, p);
    }

    /// How many choices this run measured.
    pub fn measured(&self) -> usize {
        self.fresh.lock().expect("tune store").len() + self.fresh_picks.lock().expect("tune store").len()
    }

    /// Merge this run's choices into the file, atomically. Nothing to add writes nothing.
    pub fn save(&self) -> Result<usize, String> {
        let fresh = self.fresh.lock().expect("tune store").clone();
        let fresh_picks = self.fresh_picks.lock().expect("tune store").clone();
        if fresh.is_empty() && fresh_picks.is_empty() {
            return Ok(0);
        }
        // Another run may have saved since this one read: merge into what is there now (a
        // file that does not parse is replaced).
        let mut doc = read(&self.path).unwrap_or_else(|_| json!({"format": 1, "machines": {}}));
        let machine = doc["machines"].as_object_mut().expect("checked by read").entry(self.machine.clone()).or_insert_with(|| json!({}));
        if !machine.is_object() {
            *machine = json!({});
        }
        for (k, c) in &fresh {
            machine[k] = json!({"native": c.native, "interp_ns": c.interp_ns, "native_ns": c.native_ns});
        }
        for (k, p) in &fresh_picks {
            // The first measurement saved is the one every later run takes (another run may
            // have saved this shape since this one read the file): one shape, one kernel.
            if machine.get(k).is_some_and(|v| v["pick"].is_string()) {
                continue;
            }
            let ns: serde_json::Map<String, Value> = p.ns.iter().map(|(n, t)| (n.clone(), json!(t))).collect();
            machine[k] = json!({"pick": p.name, "ns": ns});
        }
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let tmp = dir.join(format!(".tune.json.{}.tmp", std::process::id()));
        std::fs::write(&tmp, serde_json::to_string_pretty(&doc).unwrap_or_default()).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| format!("{}: {e}", self.path.display()))?;
        Ok(fresh.len() + fresh_picks.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_persist_per_machine_and_a_corrupt_file_is_ignored_then_replaced() {
        let dir = std::env::temp_dir().join(format!("dlc-tune-store-{}", std::process::id()));
        let path = dir.join("tune.json");
        let a = TuneStore::open(path.clone(), "cpu A".into());
        assert!(a.unreadable.is_none() && a.get("k1").is_none());
        a.put("k1".into(), Choice { native: true, interp_ns: 9, native_ns: 5 });
        assert_eq!(a.save(), Ok(1));
        let again = TuneStore::open(path.clone(), "cpu A".into());
        assert_eq!(again.get("k1"), Some(Choice { native: true, interp_ns: 9, native_ns: 5 }));
        assert_eq!(again.hits.load(std::sync::atomic::Ordering::Relaxed), 1);
        // Another machine (or build, or thread count) never sees it.
        assert!(TuneStore::open(path.clone(), "cpu B".into()).get("k1").is_none());
        // A torn file is not used, and the next save replaces it.
        std::fs::write(&path, "{\"format\": 1, \"machines\": {\"cpu A\": {\"k1\": ").expect("writable");
        let torn = TuneStore::open(path.clone(), "cpu A".into());
        assert!(torn.unreadable.is_some() && torn.get("k1").is_none());
        torn.put("k2".into(), Choice { native: false, interp_ns: 3, native_ns: 4 });
        assert_eq!(torn.save(), Ok(1));
        let fixed = TuneStore::open(path.clone(), "cpu A".into());
        assert!(fixed.unreadable.is_none() && fixed.get("k2").is_some());
        // A choice among named kernels (a product's) persists beside them.
        let pick = Pick { name: "avx512".into(), ns: vec![("avx2".into(), 9), ("avx512".into(), 5)] };
        fixed.put_pick("gemm:f32:8x8x8:nn:p1".into(), pick.clone());
        assert_eq!(fixed.save(), Ok(1));
        let read = TuneStore::open(path, "cpu A".into());
        assert_eq!(read.pick("gemm:f32:8x8x8:nn:p1"), Some(pick));
        assert!(read.get("k2").is_some() && read.pick("k2").is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
