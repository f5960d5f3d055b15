//! Training metrics as JSON lines, with TensorBoard event files beside them: an observer of the
//! run's events.
//!
//! One vocabulary: every line has a `kind` (`train` a logged step, `epoch` an epoch's summary,
//! `eval` an evaluation, `first_step`, `interrupted`), the `step` it was written after, and its
//! values under their own names (`loss`, `lr`, `accuracy`, ...): the loss is `loss` in step and
//! epoch lines alike. TensorBoard's tags are the same names under the kind, `train/loss`,
//! `epoch/loss`, `eval/test_set/accuracy`; `dlc plot` reads the same lines.

use super::observer::{Event, Observer};
use super::tensorboard::EventWriter;
use crate::runtime::RuntimeError;
use serde_json::{json, Value};
use std::path::PathBuf;

/// The keys of a line that are not values to plot.
pub const NOT_VALUES: &[&str] = &["kind", "step", "epoch", "data", "examples", "steps"];

/// Appends one JSON object a line, for tools (pandas.read_json(lines=True), jq), and the same
/// values as TensorBoard scalars.
#[derive(Default)]
pub(super) struct Metrics {
    file: Option<std::fs::File>,
    events: Option<EventWriter>,
}

impl Metrics {
    pub(super) fn open(path: Option<PathBuf>) -> Result<Metrics, RuntimeError> {
        let Some(p) = path else { return Ok(Metrics::default()) };
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| RuntimeError::Io(format!("cannot create {}: {e}", dir.display())))?;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .map_err(|e| RuntimeError::Io(format!("cannot open {}: {e}", p.display())))?;
        // `tensorboard --logdir` finds the event file in the metrics file's directory.
        let events =
            EventWriter::create(dir).map_err(|e| RuntimeError::Io(format!("cannot write TensorBoard events in {}: {e}", dir.display())))?;
        Ok(Metrics { file: Some(f), events: Some(events) })
    }

    fn write(&mut self, v: &Value) {
        use std::io::Write;
        if let Some(f) = &mut self.file {
            // One write a line: a run killed mid-write leaves at most one torn line, which a
            // resumed run ends before appending (run_dir.rs).
            let _ = f.write_all(format!("{v}\n").as_bytes());
        }
        if let Some(w) = &mut self.events {
            let scalars = scalars(v);
            if !scalars.is_empty() {
                // Losing TensorBoard's copy must not stop training; the JSON lines have it all.
                let _ = w.scalars(v["step"].as_u64().unwrap_or(0) as i64, &scalars);
            }
        }
    }
}

/// A line's values as TensorBoard scalars: `train/loss`, `epoch/loss`, `eval/DATA/NAME`.
pub fn scalars(line: &Value) -> Vec<(String, f32)> {
    let Some(obj) = line.as_object() else { return vec![] };
    let prefix = match (line["kind"].as_str(), line["data"].as_str()) {
        (Some("eval"), Some(data)) => format!("eval/{data}"),
        (Some(k @ ("train" | "epoch")), _) => k.to_string(),
        _ => return vec![],
    };
    obj.iter()
        .filter(|(k, _)| !NOT_VALUES.contains(&k.as_str()))
        .filter_map(|(k, v)| Some((format!("{prefix}/{k}"), v.as_f64()? as f32)))
        .collect()
}

/// The step's values under their names.
fn with_values(mut line: Value, values: &[(String, f64)]) -> Value {
    for (n, v) in values {
        line[n.as_str()] = json!(v);
    }
    line
}

impl Observer for Metrics {
    fn event(&mut self, e: &Event) {
        let line = match *e {
            Event::FirstStep { step, data_s, since_start_s } => {
                let mut line = json!({"kind": "first_step", "step": step, "data_s": data_s});
                if let Some(s) = since_start_s {
                    line["since_start_s"] = json!(s);
                }
                line
            }
            Event::Logged { epoch, step, logged, lr, samples_per_s } => {
                with_values(json!({"kind": "train", "step": step, "epoch": epoch, "lr": lr, "samples_per_s": samples_per_s}), logged)
            }
            Event::EpochDone { epoch, step, steps, loss_name, mean_loss, secs, data_s, wait_s, .. } => {
                let mut line = json!({"kind": "epoch", "step": step, "epoch": epoch, "steps": steps, "epoch_s": secs, "data_s": data_s, "data_wait_s": wait_s});
                line[loss_name] = json!(mean_loss);
                line
            }
            Event::Evaluated { step, evaluation } => evaluation.json(step),
            Event::Interrupted { step } => json!({"kind": "interrupted", "step": step}),
            Event::Resumed { step, .. } => json!({"kind": "resumed", "step": step}),
            _ => return,
        };
        self.write(&line);
    }
}
