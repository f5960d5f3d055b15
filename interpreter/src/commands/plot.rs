//! `dlc plot RUN`: draw a run's metrics (its checkpoint directory's metrics.jsonl, or a metrics
//! file) into a PNG beside them.

use std::path::{Path, PathBuf};

pub fn main(run: &Path, out: Option<&Path>) -> i32 {
    let file = if run.is_dir() { run.join("metrics.jsonl") } else { run.to_path_buf() };
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) => {
            let what = if run.is_dir() {
                format!("{} holds no metrics file ({}: {e})", run.display(), file.display())
            } else {
                format!("cannot read {}: {e}", file.display())
            };
            eprintln!("error: {what}\n  note: `dlc run` writes metrics.jsonl into the recipe's checkpoint directory, or where `--metrics FILE` says");
            return 1;
        }
    };
    let (lines, replaced) = match dlc::plot::last_run(&text) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {}: {e}", file.display());
            return 1;
        }
    };
    let panels = dlc::plot::panels(&lines);
    if panels.is_empty() {
        eprintln!("error: {}: no logged steps or evaluations to plot", file.display());
        return 1;
    }
    let out: PathBuf = out.map(Path::to_path_buf).unwrap_or_else(|| file.with_file_name("plot.png"));
    match dlc::plot::draw(&panels, &out) {
        Ok((w, h)) => {
            if replaced > 0 {
                println!("note: {replaced} earlier lines of {} belong to runs that were started again; plotted the last", file.display());
            }
            let titles: Vec<&str> = panels.iter().map(|p| p.title.as_str()).collect();
            println!("plot: wrote {} ({w}x{h}): {}", out.display(), titles.join("; "));
            0
        }
        Err(e) => {
            eprintln!("error: cannot plot {}: {e}", file.display());
            1
        }
    }
}
