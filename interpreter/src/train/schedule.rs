//! Learning-rate schedules (PyTorch's formulas), over the typed schedule of the recipe's spec.

use dlc_language::eval::spec::Schedule;

/// The learning rate at 1-based `step` of `total` steps, for a base rate `lr`.
pub fn lr_at(schedule: Option<&Schedule>, lr: f64, step: usize, total: usize, steps_per_epoch: usize) -> f64 {
    let Some(s) = schedule else { return lr };
    let t = step as f64;
    let total = total.max(1) as f64;
    let epoch = ((step - 1) / steps_per_epoch.max(1)) as f64;
    let cosine = |from: f64, progress: f64, min_lr: f64| {
        min_lr + (from - min_lr) * 0.5 * (1.0 + (std::f64::consts::PI * progress.clamp(0.0, 1.0)).cos())
    };
    match *s {
        Schedule::Constant => lr,
        Schedule::Step { every, gamma } => lr * gamma.powf((epoch / every).floor()),
        Schedule::Exponential { gamma } => lr * gamma.powf(epoch),
        Schedule::Cosine { min_lr } => cosine(lr, (t - 1.0) / total, min_lr),
        Schedule::WarmupCosine { warmup, min_lr } => {
            let warmup = warmup.max(1.0);
            if t <= warmup {
                lr * t / warmup
            } else {
                cosine(lr, (t - warmup) / (total - warmup).max(1.0), min_lr)
            }
        }
        Schedule::OneCycle { max_lr, pct_start } => {
            // Linear warm-up to max_lr over pct_start of the run, then cosine down.
            let up = (pct_start * total).max(1.0);
            if t <= up {
                lr + (max_lr - lr) * t / up
            } else {
                cosine(max_lr, (t - up) / (total - up).max(1.0), lr / 1e4)
            }
        }
    }
}
