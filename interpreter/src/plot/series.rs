//! What `dlc plot` draws, read from a metrics file (train/metrics.rs writes its vocabulary):
//! the values a step logs and the epochs' means against the step, the learning rate, and each
//! evaluation metric with a line per data set.

use serde_json::Value;

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// One chart: a title and its lines, against the step.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub title: String,
    pub series: Vec<Series>,
}

/// Step lines' values that are not what the step logs.
const NOT_LOGGED: &[&str] = &["lr", "samples_per_s"];

/// The metrics file's lines as one run: a line at step `s` written after lines at a step `s` or
/// later starts again from `s` (a fresh run appended to the file starts again from step 1, a
/// run resumed from an older checkpoint from that checkpoint's step), so it replaces them.
/// Returns the lines kept and how many earlier lines were replaced.
pub fn last_run(text: &str) -> Result<(Vec<Value>, usize), String> {
    let mut lines: Vec<Value> = vec![];
    let mut replaced = 0;
    for (i, l) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(l).map_err(|e| format!("line {}: not JSON: {e}", i + 1))?;
        let Some(step) = v["step"].as_u64() else { return Err(format!("line {}: no `step`", i + 1)) };
        let before = lines.len();
        // Only a step earlier than the last line's starts again: lines of one step (its log,
        // its epoch summary, its evaluation) are written in a row.
        if lines.last().and_then(|l| l["step"].as_u64()).is_some_and(|last| step < last) {
            lines.retain(|l| l["step"].as_u64().is_some_and(|s| s < step));
        }
        replaced += before - lines.len();
        lines.push(v);
    }
    Ok((lines, replaced))
}

/// The panels of a run's lines: what the steps log (and the epochs' means of it), the learning
/// rate, then one panel per evaluation metric. Empty when there is nothing to draw.
pub fn panels(lines: &[Value]) -> Vec<Panel> {
    let mut logged = Panel { title: "training (logged steps; epoch means)".into(), series: vec![] };
    let mut lr = Panel { title: "learning rate".into(), series: vec![] };
    let mut evals: Vec<Panel> = vec![];
    for l in lines {
        let Some(obj) = l.as_object() else { continue };
        let step = l["step"].as_f64().unwrap_or(0.0);
        let values = obj
            .iter()
            .filter(|(k, _)| !crate::train::metrics::NOT_VALUES.contains(&k.as_str()))
            .filter_map(|(k, v)| Some((k, v.as_f64()?)));
        match l["kind"].as_str() {
            Some("train") => {
                for (k, v) in values {
                    match k.as_str() {
                        "lr" => push(&mut lr, "lr", step, v),
                        k if NOT_LOGGED.contains(&k) => {}
                        k => push(&mut logged, k, step, v),
                    }
                }
            }
            Some("epoch") => {
                for (k, v) in values.filter(|(k, _)| !k.ends_with("_s")) {
                    push(&mut logged, &format!("{k} (epoch mean)"), step, v);
                }
            }
            Some("eval") => {
                let data = l["data"].as_str().unwrap_or("eval");
                for (k, v) in values {
                    let title = format!("evaluation: {k}");
                    let at = match evals.iter().position(|p| p.title == title) {
                        Some(i) => i,
                        None => {
                            evals.push(Panel { title, series: vec![] });
                            evals.len() - 1
                        }
                    };
                    push(&mut evals[at], data, step, v);
                }
            }
            _ => {}
        }
    }
    [logged, lr].into_iter().chain(evals).filter(|p| !p.series.is_empty()).collect()
}

fn push(panel: &mut Panel, label: &str, step: f64, v: f64) {
    if !v.is_finite() {
        return;
    }
    match panel.series.iter_mut().find(|s| s.label == label) {
        Some(s) => s.points.push((step, v)),
        None => panel.series.push(Series { label: label.into(), points: vec![(step, v)] }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_run_appended_replaces_the_earlier_one_and_a_resume_keeps_what_precedes_it() {
        let text = r#"{"kind":"train","step":10,"loss":2.0,"lr":0.1}
{"kind":"train","step":20,"loss":1.5,"lr":0.1}
{"kind":"train","step":30,"loss":1.0,"lr":0.1}
{"kind":"train","step":20,"loss":1.4,"lr":0.1}
{"kind":"eval","step":20,"data":"va","accuracy":0.5,"examples":10}
{"kind":"train","step":30,"loss":0.9,"lr":0.1}
"#;
        let (lines, replaced) = last_run(text).unwrap();
        assert_eq!(replaced, 2, "steps 20 and 30 of the first attempt");
        let p = panels(&lines);
        assert_eq!(
            p.iter().map(|p| p.title.as_str()).collect::<Vec<_>>(),
            ["training (logged steps; epoch means)", "learning rate", "evaluation: accuracy"]
        );
        assert_eq!(p[0].series[0].points, [(10.0, 2.0), (20.0, 1.4), (30.0, 0.9)]);
        assert_eq!(p[2].series[0].label, "va");
        assert!(last_run("{\"loss\": 1}").is_err(), "a line without a step");
    }
}
