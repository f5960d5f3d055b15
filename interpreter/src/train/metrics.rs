//! Training metrics as JSON lines: an observer of the run's events.

use super::observer::{Event, Observer};
use crate::runtime::RuntimeError;
use serde_json::json;
use std::path::PathBuf;

/// Appends one JSON object a line, for tools (pandas.read_json(lines=True), jq).
#[derive(Default)]
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
    fn write(&mut self, v: serde_json::Value) {
        use std::io::Write;
        if let Some(f) = &mut self.0 {
            // One write a line: a run killed mid-write leaves at most one torn line, which a
            // resumed run ends before appending (run_dir.rs).
            let _ = f.write_all(format!("{v}\n").as_bytes());
        }
    }
}

/// Each line names the step (and the epoch, from 1) it was written after.
fn with_values(mut line: serde_json::Value, values: &[(String, f64)]) -> serde_json::Value {
    for (n, v) in values {
        line[n.as_str()] = json!(v);
    }
    line
}

impl Observer for Metrics {
    fn event(&mut self, e: &Event) {
        let line = match *e {
            Event::FirstStep { step, data_s, since_start_s } => {
                let mut line = json!({"step": step, "event": "first_step", "data_s": data_s});
                if let Some(s) = since_start_s {
                    line["since_start_s"] = json!(s);
                }
                line
            }
            Event::Logged { epoch, step, logged, lr, samples_per_s } => {
                with_values(json!({"step": step, "epoch": epoch, "lr": lr, "samples_per_s": samples_per_s}), logged)
            }
            Event::EpochDone { epoch, step, mean_loss, secs, data_s, .. } => {
                json!({"step": step, "epoch": epoch, "mean_loss": mean_loss, "epoch_s": secs, "data_s": data_s})
            }
            Event::Evaluated { step, evaluation } => evaluation.json(step),
            Event::Interrupted { step } => json!({"step": step, "event": "interrupted"}),
            Event::Resumed { step, .. } => json!({"step": step, "event": "resumed"}),
            _ => return,
        };
        self.write(line);
    }
}
