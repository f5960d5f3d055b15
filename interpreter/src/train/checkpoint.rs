//! Checkpoints in safetensors (the format PyTorch, JAX and the Hugging Face tools read):
//! `model.safetensors` (parameters by path, e.g. `fc1.weight`) and `optimizer.safetensors` (state
//! by parameter path and slot, e.g. `fc1.weight.exp_avg`) in a directory per step
//! (`DIR/step-00000468/`), and `DIR/manifest.json` naming the current one with the step, epoch
//! and seed. The step's files are complete and synced before the manifest is replaced (written
//! aside and renamed), so a crash at any moment leaves the previous checkpoint whole and
//! consistent; older step directories are removed afterwards.

use crate::runtime::tensor::{Data, Tensor};
use dlc_language::types::DType;
use safetensors::tensor::{Dtype, TensorView};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

#[derive(Debug, Clone)]
pub struct Checkpoint {
    pub params: Vec<(String, Tensor)>,
    pub optimizer: Vec<(String, Tensor)>,
    pub step: usize,
    pub epoch: usize,
    pub seed: u64,
}

fn bytes_of(t: &Tensor) -> (Dtype, Vec<u8>) {
    let v = t.to_f64();
    match t.dtype {
        DType::F32 => (
            Dtype::F32,
            match &t.data {
                Data::F32(x) => x.iter().flat_map(|f| f.to_le_bytes()).collect(),
                _ => v.iter().flat_map(|f| (*f as f32).to_le_bytes()).collect(),
            },
        ),
        DType::F64 => (Dtype::F64, v.iter().flat_map(|f| f.to_le_bytes()).collect()),
        DType::F16 => (Dtype::F16, v.iter().flat_map(|f| half::f16::from_f64(*f).to_le_bytes()).collect()),
        DType::BF16 => (Dtype::BF16, v.iter().flat_map(|f| half::bf16::from_f64(*f).to_le_bytes()).collect()),
        DType::I64 => (Dtype::I64, v.iter().flat_map(|f| (*f as i64).to_le_bytes()).collect()),
        DType::I32 => (Dtype::I32, v.iter().flat_map(|f| (*f as i32).to_le_bytes()).collect()),
        DType::U8 => (Dtype::U8, v.iter().map(|f| *f as u8).collect()),
        DType::Bool => (Dtype::BOOL, v.iter().map(|f| (*f != 0.0) as u8).collect()),
    }
}

fn tensor_of(view: &TensorView) -> Result<Tensor, String> {
    let d = view.data();
    let shape = view.shape().to_vec();
    let (dtype, vals): (DType, Vec<f64>) = match view.dtype() {
        Dtype::F32 => (DType::F32, d.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect()),
        Dtype::F64 => (DType::F64, d.chunks(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect()),
        Dtype::F16 => (DType::F16, d.chunks(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64()).collect()),
        Dtype::BF16 => (DType::BF16, d.chunks(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64()).collect()),
        Dtype::I64 => (DType::I64, d.chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64).collect()),
        Dtype::I32 => (DType::I32, d.chunks(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect()),
        Dtype::U8 => (DType::U8, d.iter().map(|b| *b as f64).collect()),
        Dtype::BOOL => (DType::Bool, d.iter().map(|b| *b as f64).collect()),
        other => return Err(format!("unsupported dtype {other:?} in checkpoint")),
    };
    Ok(Tensor::from_f64(dtype, shape, vals))
}

fn serialize(tensors: &[(String, Tensor)], meta: HashMap<String, String>) -> Result<Vec<u8>, String> {
    let raw: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(n, t)| {
            let (dt, b) = bytes_of(t);
            (n.clone(), dt, t.shape.clone(), b)
        })
        .collect();
    let views: Vec<(String, TensorView)> = raw
        .iter()
        .map(|(n, dt, s, b)| TensorView::new(*dt, s.clone(), b).map(|v| (n.clone(), v)).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    safetensors::serialize(views, Some(meta)).map_err(|e| e.to_string())
}

/// Write `bytes` to `path` atomically: a temporary file in the same directory, synced, renamed.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        // Make the rename itself durable.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

pub fn save(dir: &Path, ck: &Checkpoint) -> Result<(), String> {
    save_run(dir, ck, &super::manifest::RunRecord::default())
}

/// [`save`], the manifest recording how the run was started (`--resume` reads it back).
pub fn save_run(dir: &Path, ck: &Checkpoint, run: &super::manifest::RunRecord) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // One metadata key, so the header (a hash map in the crate) is byte-for-byte reproducible;
    // the step and the rest live in the manifest.
    let meta: HashMap<String, String> = [("format".to_string(), "dlc-checkpoint-1".to_string())].into_iter().collect();
    let io = |e: std::io::Error| format!("cannot write a checkpoint in {}: {e}", dir.display());
    let name = format!("step-{:08}", ck.step);
    let step_dir = dir.join(&name);
    std::fs::create_dir_all(&step_dir).map_err(io)?;
    write_atomic(&step_dir.join("model.safetensors"), &serialize(&ck.params, meta.clone())?).map_err(io)?;
    write_atomic(&step_dir.join("optimizer.safetensors"), &serialize(&ck.optimizer, meta)?).map_err(io)?;
    let manifest = super::manifest::json(ck.step, ck.epoch, ck.seed, &name, run);
    write_atomic(&dir.join("manifest.json"), serde_json::to_string_pretty(&manifest).unwrap_or_default().as_bytes()).map_err(io)?;
    // Only now is the previous checkpoint unreferenced.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            if n.starts_with("step-") && n != name {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    Ok(())
}

/// Every tensor of one safetensors file (from dlc or from PyTorch's `safetensors.torch.save_file`),
/// sorted by name.
pub fn read_safetensors(path: &Path) -> Result<Vec<(String, Tensor)>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut names: Vec<&str> = st.names();
    names.sort();
    names.into_iter().map(|n| st.tensor(n).map_err(|e| e.to_string()).and_then(|v| tensor_of(&v)).map(|t| (n.to_string(), t))).collect()
}

pub fn load(dir: &Path) -> Result<Checkpoint, String> {
    let read = |name: &str| std::fs::read(dir.join(name)).map_err(|e| format!("cannot read {}: {e}", dir.join(name).display()));
    let manifest: serde_json::Value =
        serde_json::from_slice(&read("manifest.json")?).map_err(|e| format!("{}: corrupt manifest: {e}", dir.display()))?;
    let files = dir.join(manifest["dir"].as_str().unwrap_or("."));
    let tensors = |name: &str| read_safetensors(&files.join(name));
    Ok(Checkpoint {
        params: tensors("model.safetensors")?,
        optimizer: tensors("optimizer.safetensors")?,
        step: manifest["step"].as_u64().unwrap_or(0) as usize,
        epoch: manifest["epoch"].as_u64().unwrap_or(0) as usize,
        seed: manifest["seed"].as_u64().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_every_dtype() {
        let dir = std::env::temp_dir().join(format!("dlc-ck-{}", std::process::id()));
        let ts: Vec<(String, Tensor)> = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8, DType::Bool]
            .iter()
            .map(|d| (format!("t.{d}"), Tensor::from_f64(*d, vec![2, 3], [0.0, 1.0, 2.5, -3.0, 4.0, 250.0])))
            .collect();
        let ck = Checkpoint { params: ts.clone(), optimizer: vec![], step: 7, epoch: 1, seed: 3 };
        save(&dir, &ck).unwrap();
        let back = load(&dir).unwrap();
        assert_eq!((back.step, back.epoch, back.seed), (7, 1, 3));
        for (n, t) in &ts {
            let b = &back.params.iter().find(|(m, _)| m == n).unwrap().1;
            assert_eq!((b.dtype, &b.shape), (t.dtype, &t.shape));
            assert_eq!(b.to_f64(), t.to_f64(), "{n}");
        }
        assert!(!dir.join("step-00000007/model.tmp").exists(), "no temporary file is left behind");
        // A later checkpoint replaces the earlier one's directory.
        save(&dir, &Checkpoint { step: 9, ..ck }).unwrap();
        assert!(dir.join("step-00000009/model.safetensors").exists() && !dir.join("step-00000007").exists());
        assert_eq!(load(&dir).unwrap().step, 9);
    }
}
