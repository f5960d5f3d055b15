//! What `dlc bench` reports: one typed record (its JSON is `--json`'s line, read by
//! bench/compare.py) and its text form.

use dlc::runner::Report;
use serde::Serialize;

/// A timed workload: its step (or `infer` run) times and what it ran.
#[derive(Serialize)]
pub struct Bench {
    /// `train` or `infer`.
    pub what: &'static str,
    pub steps: usize,
    pub warmup: usize,
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub samples_per_s: f64,
    pub compile_ms: f64,
    /// Kernels a step, and as many as the eager interpreter would run.
    pub kernels: usize,
    pub eager_kernels: usize,
    pub device: &'static str,
    /// What a GPU's runner did (launches, host round trips, bytes copied).
    pub device_report: Option<Report>,
    #[serde(flatten)]
    pub detail: Detail,
    pub file: String,
    pub fuse: bool,
    pub remat: bool,
    pub jit: bool,
    pub threads: usize,
    pub peak_rss_mb: f64,
    pub total_s: f64,
}

#[derive(Serialize)]
#[serde(untagged)]
pub enum Detail {
    Train(Train),
    Infer(Infer),
}

/// A training step's extra figures.
#[derive(Serialize)]
pub struct Train {
    /// Time a step by kernel kind (`--profile`).
    pub profile: Vec<Profile>,
    pub batch: usize,
    pub page_faults_per_step: f64,
    pub planned_peak_mib: Option<f64>,
    pub tuning: serde_json::Value,
    pub ranks: usize,
    pub rank: usize,
    pub allreduce_ms_per_step: f64,
    pub allreduce_share: f64,
    /// The timed steps' wait for the data feed's batches, per step and as a share of the steps.
    pub data_wait_ms_per_step: f64,
    pub data_wait_share: f64,
    /// On a GPU: what a timed step copied, issued and waited for, on average, and the bytes of
    /// one batch as the data gives it (what a step has to upload).
    pub device_per_step: Option<dlc::runner::PerStep>,
    pub batch_bytes: usize,
    /// `--one-batch`: every timed step ran on the first batch again (no feed, no fresh batch).
    pub one_batch: bool,
}

#[derive(Serialize)]
pub struct Profile {
    pub kind: String,
    pub ms_per_step: f64,
    pub count_per_step: f64,
}

/// An `infer` run's extra figures.
#[derive(Serialize)]
pub struct Infer {
    pub elements: usize,
    /// Reading the input and writing the output once, 4 bytes each: the memory traffic a fused
    /// kernel needs.
    pub gb_per_s: f64,
    pub folded_batch_norms: usize,
}

impl Bench {
    /// Rank 0 reports for a data-parallel job.
    pub fn reports(&self) -> bool {
        !matches!(&self.detail, Detail::Train(t) if t.rank != 0)
    }

    pub fn print_text(&self) {
        if let Some(r) = &self.device_report {
            println!("device: {}", crate::reports::runner_summary(r));
        }
        let how = match (self.fuse, self.jit) {
            (false, _) => "eager, --no-fuse".to_string(),
            (true, false) => "fused".to_string(),
            // (The back end native code comes from on this machine: a kernel it declines is
            // compiled by Cranelift.)
            (true, true) => format!("fused, native JIT: {}", dlc_jit::native::Backend::preferred().name()),
        };
        let memory = match &self.detail {
            Detail::Train(Train { planned_peak_mib: Some(plan), page_faults_per_step, .. }) => {
                format!(" (step planned at {plan} MiB); {page_faults_per_step:.0} page faults a step")
            }
            _ => String::new(),
        };
        println!(
            "{}: {} {} steps after {} warm-up ({how}): median {:.3} ms, min {:.3} ms, max {:.3} ms; {:.0} samples/s; {} kernels a step (eager {}); compiled in {:.1} ms; peak RSS {:.0} MiB{memory}",
            self.file, self.what, self.steps, self.warmup, self.median_ms, self.min_ms, self.max_ms, self.samples_per_s, self.kernels,
            self.eager_kernels, self.compile_ms, self.peak_rss_mb,
        );
        if let Detail::Train(t) = &self.detail {
            if t.tuning["products"].is_object() {
                println!("  {}", crate::reports::products_line(&t.tuning));
            }
            if t.one_batch {
                println!("  data: the first batch, stepped on again and again (--one-batch)");
            } else {
                println!("  data wait: {:.3} ms a step, {:.1}% of the step", t.data_wait_ms_per_step, t.data_wait_share * 100.0);
            }
            if let Some(d) = &t.device_per_step {
                println!("  a timed step on the device: {}", crate::reports::traffic_line(d, t.batch_bytes));
            }
            if t.ranks > 1 {
                println!(
                    "  {} ranks: gradient all-reduce {:.3} ms a step, {:.1}% of the step",
                    t.ranks,
                    t.allreduce_ms_per_step,
                    t.allreduce_share * 100.0
                );
            }
        }
    }
}
