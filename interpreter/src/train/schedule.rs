//! Learning-rate schedules, as the stdlib's schedule records describe them (PyTorch's formulas).

use dlc_language::eval::Value;

/// The learning rate at 1-based `step` of `total` steps, for a base rate `lr`.
pub fn lr_at(schedule: Option<&Value>, lr: f64, step: usize, total: usize, steps_per_epoch: usize) -> f64 {
    let Some(s) = schedule else { return lr };
    let kind = match s.field("schedule") {
        Some(Value::Str(k)) => k.to_string(),
        _ => return lr,
    };
    let f = |name: &str, d: f64| s.field(name).and_then(|v| v.as_float()).unwrap_or(d);
    let t = step as f64;
    let total = total.max(1) as f64;
    let epoch = ((step - 1) / steps_per_epoch.max(1)) as f64;
    let cosine = |from: f64, progress: f64, min_lr: f64| {
        min_lr + (from - min_lr) * 0.5 * (1.0 + (std::f64::consts::PI * progress.clamp(0.0, 1.0)).cos())
    };
    match kind.as_str() {
        "step" => lr * f("gamma", 0.1).powf((epoch / f("every", 30.0)).floor()),
        "exponential" => lr * f("gamma", 0.99).powf(epoch),
        "cosine" => cosine(lr, (t - 1.0) / total, f("min_lr", 0.0)),
        "warmup_cosine" => {
            let warmup = f("warmup", 100.0).max(1.0);
            if t <= warmup {
                lr * t / warmup
            } else {
                cosine(lr, (t - warmup) / (total - warmup).max(1.0), f("min_lr", 0.0))
            }
        }
        "one_cycle" => {
            // Linear warm-up to max_lr over pct_start of the run, then cosine down.
            let max_lr = f("max_lr", lr);
            let up = (f("pct_start", 0.3) * total).max(1.0);
            if t <= up {
                lr + (max_lr - lr) * t / up
            } else {
                cosine(max_lr, (t - up) / (total - up).max(1.0), lr / 1e4)
            }
        }
        _ => lr,
    }
}
