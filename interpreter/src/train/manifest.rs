//! A checkpoint directory's `manifest.json`: which step directory is current, and how the run
//! that wrote it was started (the program's path and SHA-256, its seed, every `--set`), so that
//! `--resume` continues the same run: it applies the recorded overrides and says what changed.

use serde_json::json;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// How a run was started, as its checkpoints record it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunRecord {
    /// The program file, absolute.
    pub program: Option<PathBuf>,
    /// The SHA-256 of the program's text, in hex (what `sha256sum FILE` prints).
    pub program_sha256: Option<String>,
    /// Every `--set FIELD=VALUE` in effect, in the order applied.
    pub set: Vec<(String, String)>,
}

impl RunRecord {
    /// The record of a run of `file` (whose text is `text`) with these overrides.
    pub fn of(file: &Path, text: &str, set: &[(String, String)]) -> RunRecord {
        RunRecord { program: Some(crate::paths::absolute(file)), program_sha256: Some(sha256_hex(text.as_bytes())), set: set.to_vec() }
    }
}

/// What a manifest says.
#[derive(Clone, Debug, Default)]
pub struct Manifest {
    pub step: usize,
    pub epoch: usize,
    pub seed: u64,
    /// The current step directory, relative to the checkpoint directory.
    pub dir: String,
    pub run: RunRecord,
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The manifest's JSON (the step directory's files are written before it).
pub(super) fn json(step: usize, epoch: usize, seed: u64, dir: &str, run: &RunRecord) -> serde_json::Value {
    let mut m = json!({
        "format": "dlc-checkpoint-1", "step": step, "epoch": epoch, "seed": seed,
        "dir": dir, "files": ["model.safetensors", "optimizer.safetensors"],
    });
    if let Some(p) = &run.program {
        m["program"] = json!(p.display().to_string());
    }
    if let Some(h) = &run.program_sha256 {
        m["program_sha256"] = json!(h);
    }
    m["set"] = json!(run.set.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>());
    m
}

/// Read `DIR/manifest.json`. Manifests written before the run record existed read with an
/// empty one.
pub fn read(dir: &Path) -> Result<Manifest, String> {
    let path = dir.join("manifest.json");
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let m: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| format!("{}: corrupt manifest: {e}", path.display()))?;
    let set = m["set"]
        .as_array()
        .map(|items| items.iter().filter_map(|s| s.as_str()?.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect())
        .unwrap_or_default();
    Ok(Manifest {
        step: m["step"].as_u64().unwrap_or(0) as usize,
        epoch: m["epoch"].as_u64().unwrap_or(0) as usize,
        seed: m["seed"].as_u64().unwrap_or(0),
        dir: m["dir"].as_str().unwrap_or(".").to_string(),
        run: RunRecord {
            program: m["program"].as_str().map(PathBuf::from),
            program_sha256: m["program_sha256"].as_str().map(str::to_string),
            set,
        },
    })
}

/// Whether two overrides set the same thing: the same field, or `epochs` and `steps` (setting
/// one drops the other).
fn same_setting(a: &str, b: &str) -> bool {
    a == b || (matches!(a, "epochs" | "steps") && matches!(b, "epochs" | "steps"))
}

/// The overrides a resumed run applies: the recorded ones, each replaced by a setting of the same
/// field given now, then the new ones. Returns them with one line per recorded override said
/// out loud (kept, or replaced by what).
pub fn merge_overrides(recorded: &[(String, String)], given: &[(String, String)]) -> (Vec<(String, String)>, Vec<String>) {
    let mut merged = vec![];
    let mut said = vec![];
    for (k, v) in recorded {
        match given.iter().find(|(g, _)| same_setting(g, k)) {
            Some((g, gv)) if g == k && gv == v => {}
            Some((g, gv)) => said.push(format!("`--set {g}={gv}` replaces `{k}={v}`, recorded with the checkpoint")),
            None => {
                said.push(format!("`--set {k}={v}`, recorded with the checkpoint, applies again"));
                merged.push((k.clone(), v.clone()));
            }
        }
    }
    merged.extend(given.iter().cloned());
    (merged, said)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn recorded_overrides_apply_unless_given_again() {
        let recorded = kv(&[("steps", "600"), ("optimizer.lr", "0.1")]);
        let (merged, said) = merge_overrides(&recorded, &[]);
        assert_eq!(merged, recorded);
        assert_eq!(said.len(), 2, "{said:?}");
        let (merged, said) = merge_overrides(&recorded, &kv(&[("epochs", "3"), ("optimizer.lr", "0.1")]));
        assert_eq!(merged, kv(&[("epochs", "3"), ("optimizer.lr", "0.1")]), "`epochs` replaces `steps`; an equal value is silent");
        assert_eq!(said, vec!["`--set epochs=3` replaces `steps=600`, recorded with the checkpoint".to_string()]);
    }

    #[test]
    fn the_record_round_trips_and_old_manifests_read() {
        let dir = std::env::temp_dir().join(format!("dlc-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let run = RunRecord::of(Path::new("/p/prog.dl"), "let x = 1\n", &kv(&[("steps", "600")]));
        std::fs::write(dir.join("manifest.json"), json(217, 1, 3, "step-00000217", &run).to_string()).unwrap();
        let m = read(&dir).unwrap();
        assert_eq!((m.step, m.epoch, m.seed, m.dir.as_str()), (217, 1, 3, "step-00000217"));
        assert_eq!(m.run, run);
        // `printf 'let x = 1\n' | sha256sum`
        assert_eq!(run.program_sha256.as_deref(), Some(sha256_hex(b"let x = 1\n").as_str()));
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        std::fs::write(
            dir.join("manifest.json"),
            r#"{"format": "dlc-checkpoint-1", "step": 5, "epoch": 0, "seed": 0, "dir": "step-00000005"}"#,
        )
        .unwrap();
        assert_eq!(read(&dir).unwrap().run, RunRecord::default());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
