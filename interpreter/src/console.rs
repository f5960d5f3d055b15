//! The command line's observer of a training run: log lines on stdout, and on a terminal a live
//! progress line on stderr, redrawn at most ten times a second and cleared before other output.

use dlc::train::observer::eta;
use dlc::train::{shown, Event, Observer};
use std::time::Instant;

pub struct Console {
    /// Draw the progress line (stderr is a terminal).
    progress: bool,
    last_draw: Instant,
}

impl Console {
    pub fn new(progress: bool) -> Console {
        Console { progress, last_draw: Instant::now() }
    }

    fn clear_progress(&self) {
        if self.progress {
            eprint!("\r\x1b[2K");
        }
    }

    /// Redraw the progress line, at most ten times a second.
    fn draw(&mut self, e: &Event) {
        if !self.progress || self.last_draw.elapsed().as_millis() < 100 {
            return;
        }
        self.last_draw = Instant::now();
        if let Some(line) = progress_line(e) {
            eprint!("\r\x1b[2K{line}");
        }
    }
}

/// `epoch 2/3 [########          ] step 45/120 loss 0.4321 5210 samples/s ETA 12s` for a step
/// event: the bar and the ETA over the steps the whole run takes, not over the epoch's batches.
fn progress_line(e: &Event) -> Option<String> {
    let Event::Step { epoch, step, total, per_epoch, logged, samples_per_s, eta_s, .. } = *e else { return None };
    let width = 24;
    let filled = (step * width / total.max(1)).min(width);
    let epochs = total.div_ceil(per_epoch.max(1));
    let (name, value) = logged.first().map(|(n, v)| (n.as_str(), *v)).unwrap_or(("loss", f64::NAN));
    Some(format!(
        "epoch {epoch}/{epochs} [{}{}] step {step}/{total} {name} {value:.4} {samples_per_s:.0} samples/s ETA {}",
        "#".repeat(filled),
        " ".repeat(width - filled),
        eta(eta_s)
    ))
}

impl Observer for Console {
    fn event(&mut self, e: &Event) {
        match *e {
            Event::Resumed { dir, step } => println!("resumed from {} at step {step}", dir.display()),
            Event::Step { .. } => self.draw(e),
            Event::Logged { epoch, step, logged, lr, samples_per_s } => {
                self.clear_progress();
                let shown: Vec<String> = logged.iter().map(|(n, v)| format!("{n} {v:.4}")).collect();
                println!("epoch {epoch} step {step}: {}, lr {lr:.3e}, {samples_per_s:.0} samples/s", shown.join(", "));
            }
            Event::EpochDone { epoch, steps, loss_name, mean_loss, secs, data_s, wait_s, loss_scale, .. } => {
                self.clear_progress();
                let wait = 100.0 * wait_s / secs.max(1e-9);
                println!(
                    "epoch {epoch} done: mean {loss_name} {mean_loss:.4} over {steps} steps in {secs:.1} s (data prepared in {data_s:.2} s before; data wait {wait:.0}%){}",
                    loss_scale.map(|(s, k)| format!("; f16 loss scale {s}, {k} steps skipped so far")).unwrap_or_default()
                );
            }
            Event::Evaluated { evaluation: ev, .. } => {
                println!("epoch {} evaluate {}: {} (over {} examples)", ev.epoch, ev.data, shown(&ev.names, &ev.values), ev.examples)
            }
            Event::EvaluatedRecipe { names, values, examples } => println!("evaluate: {} (over {examples} examples)", shown(names, values)),
            Event::CheckpointSaved { dir, step } => println!("checkpoint: {} (step {step})", dir.display()),
            Event::Warning(w) => eprintln!("warning: {w}"),
            Event::FirstStep { .. } | Event::Interrupted { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_counts_the_runs_steps() {
        let logged = [("loss".to_string(), 0.5)];
        let e = Event::Step {
            epoch: 2,
            step: 15,
            total: 120,
            done_in_epoch: 5,
            per_epoch: 10,
            logged: &logged,
            samples_per_s: 100.0,
            eta_s: 21.0,
        };
        assert_eq!(progress_line(&e).unwrap(), "epoch 2/12 [###                     ] step 15/120 loss 0.5000 100 samples/s ETA 21s");
    }
}
