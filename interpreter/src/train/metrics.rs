//! Training metrics as JSON lines.

use crate::runtime::RuntimeError;
use std::path::PathBuf;

/// Appends one JSON object a line, for tools (pandas.read_json(lines=True), jq).
pub(super) struct Metrics(Option<std::fs::File>);

impl Metrics {
    pub(super) fn open(path: Option<PathBuf>) -> Result<Metrics, RuntimeError> {
        let Some(p) = path else { return Ok(Metrics(None)) };
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).map_err(|e| RuntimeError::Io(format!("cannot create {}: {e}", dir.display())))?;
        }
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .map_err(|e| RuntimeError::Io(format!("cannot open {}: {e}", p.display())))?;
        Ok(Metrics(Some(f)))
    }
    pub(super) fn write(&mut self, v: serde_json::Value) {
        use std::io::Write;
        if let Some(f) = &mut self.0 {
            let _ = writeln!(f, "{v}");
        }
    }
}
