//! `dlc bench FILE --data`: the first `train` recipe's data alone, as training reads it: the
//! source read and the epoch-independent stages applied (`prepare_s`), then two epochs' batches
//! made by the feed's workers and taken as fast as the reader can (no step), the PyTorch
//! DataLoader loop `for xb, yb in loader: pass` that `bench/peers/dataloader.py` times.

use dlc::pipeline::{self, Feed};
use dlc_language::eval::recipe::RecipeInfo;
use dlc_language::eval::Value;
use dlc_language::syntax::ast::RecipeKind;
use serde::Serialize;
use std::path::Path;
use std::time::Instant;

#[derive(Serialize)]
pub struct DataBench {
    pub file: String,
    pub what: &'static str,
    /// Reading the source and the stages before the first epoch-dependent one (once a run).
    pub prepare_s: f64,
    /// Each epoch's batches through the feed, after preparation.
    pub epoch_s: Vec<f64>,
    pub batches: usize,
    pub samples: usize,
    pub workers: usize,
    pub ahead: usize,
    pub samples_per_s: f64,
    pub peak_rss_mb: f64,
}

fn time_data(file: &Path, info: &RecipeInfo, p: &dlc::Program, root: &Path) -> Result<DataBench, String> {
    let Some(Value::Pipeline(data)) = info.field("data").cloned() else { return Err("the recipe has no data pipeline".into()) };
    let graph = &p.session.t.graph;
    let mut cache = None;
    let started = Instant::now();
    let first = pipeline::run_cached(&data, root, graph, 0, &mut cache).map_err(|e| e.to_string())?;
    let prepare_s = started.elapsed().as_secs_f64();
    let (mut workers, ahead) = (pipeline::default_workers(), pipeline::prefetch_depth(&data).unwrap_or(pipeline::DEFAULT_AHEAD));
    let (mut epoch_s, mut batches, mut samples) = (vec![], 0, 0);
    let mut next = Some(first);
    for epoch in 0..2u64 {
        let t0 = Instant::now();
        let epoch_batches = match next.take() {
            Some(b) => b,
            None => pipeline::run_cached(&data, root, graph, epoch, &mut cache).map_err(|e| e.to_string())?,
        };
        if epoch > 0 {
            // As training grows the feed: with no step, the reader waits all the time.
            workers = pipeline::next_workers(workers, 1.0);
        }
        for b in Feed::start(epoch_batches, 0, workers, ahead, Default::default(), None) {
            let b = b.map_err(|e| e.to_string())?;
            batches += 1;
            samples += b.first().and_then(|t| t.shape.first().copied()).unwrap_or(1);
        }
        epoch_s.push(t0.elapsed().as_secs_f64());
    }
    let total: f64 = epoch_s.iter().sum();
    Ok(DataBench {
        file: file.display().to_string(),
        what: "data",
        prepare_s,
        epoch_s,
        batches: batches / 2,
        samples: samples / 2,
        workers,
        ahead,
        samples_per_s: samples as f64 / total.max(1e-12),
        peak_rss_mb: crate::reports::peak_rss_mb(),
    })
}

/// Time the data of `file`'s first (or `recipe`'s) `train` recipe; 1 on failure.
pub fn main(file: &Path, recipe: Option<&str>, json: bool) -> i32 {
    let (p, root) = match crate::session::load_quietly(file, "nothing to benchmark") {
        Ok(loaded) => loaded,
        Err(status) => return status,
    };
    let found = p.session.t.recipes.iter().find(|r| r.kind == RecipeKind::Train && recipe.is_none_or(|w| r.name.as_deref() == Some(w)));
    let Some(info) = found.cloned() else {
        eprintln!("error: no `train` recipe{} whose data to time", recipe.map(|r| format!(" named `{r}`")).unwrap_or_default());
        return 1;
    };
    match time_data(file, &info, &p, &root) {
        Ok(r) if json => {
            println!("{}", serde_json::to_string(&r).unwrap_or_default());
            0
        }
        Ok(r) => {
            println!(
                "{}: data: prepared in {:.3} s, then {} batches ({} samples) an epoch in {:.3} s and {:.3} s: {:.0} samples/s; {} worker{}, {} batches ahead; peak RSS {:.0} MiB",
                r.file,
                r.prepare_s,
                r.batches,
                r.samples,
                r.epoch_s[0],
                r.epoch_s[1],
                r.samples_per_s,
                r.workers,
                if r.workers == 1 { "" } else { "s" },
                r.ahead,
                r.peak_rss_mb
            );
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}
