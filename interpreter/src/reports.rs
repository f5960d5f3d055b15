//! Reports more than one command prints: typed (`Serialize`) with a text form each, and the
//! small statistics the timing commands share.

use dlc_language::passes::memory::MemoryPlan;
use serde::{Deserialize, Serialize};

pub const MEMORY_REASON: &str =
    "buffers by liveness: each value is freed after its last reader and its memory reused, so the peak is known before the run";

/// Bytes in MiB, to two decimals.
pub fn mib(b: usize) -> f64 {
    (b as f64 / (1 << 20) as f64 * 100.0).round() / 100.0
}

/// A memory plan in MiB (`dlc check`, `explain`, `bench`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Memory {
    pub parameters_mib: f64,
    pub inputs_mib: f64,
    pub intermediates_peak_mib: f64,
    pub intermediates_without_reuse_mib: f64,
    pub peak_mib: f64,
    pub reason: String,
}

impl Memory {
    pub fn of(m: &MemoryPlan) -> Memory {
        Memory {
            parameters_mib: mib(m.parameters),
            inputs_mib: mib(m.inputs),
            intermediates_peak_mib: mib(m.peak_intermediates),
            intermediates_without_reuse_mib: mib(m.without_reuse),
            peak_mib: mib(m.peak()),
            reason: MEMORY_REASON.into(),
        }
    }
}

impl Memory {
    /// One line for `dlc check` and `dlc explain`.
    pub fn line(&self) -> String {
        // Numbers as JSON writes them (`12.0`), so the line reads as `--json` does.
        let n = |x: f64| serde_json::json!(x);
        format!(
            "memory plan: peak {} MiB = parameters {} + inputs (batch, optimiser state) {} + intermediates {} (without reuse: {})",
            n(self.peak_mib),
            n(self.parameters_mib),
            n(self.inputs_mib),
            n(self.intermediates_peak_mib),
            n(self.intermediates_without_reuse_mib)
        )
    }
}

/// One line on what a runner did: kernels, what ran on the host, bytes copied.
pub fn runner_summary(r: &dlc::runner::Report) -> String {
    let list = |ops: &std::collections::BTreeMap<String, usize>| {
        let v: Vec<String> = ops.iter().map(|(op, n)| format!("{op} x{n}")).collect();
        if v.is_empty() {
            "nothing".to_string()
        } else {
            v.join(", ")
        }
    };
    format!(
        "{} kernel launches from {} compiled plans ({:.1} s compiling) on {}; round trips through the host: {}; computed once on the host and kept: {}; copied {:.1} MB up, {:.1} MB down",
        r.launches,
        r.modules,
        r.compile_s,
        r.device,
        list(&r.host_ops),
        list(&r.once_ops),
        r.bytes_up as f64 / 1e6,
        r.bytes_down as f64 / 1e6
    ) + &arena_summary(r)
        + &if r.graph_replays > 0 { format!("; {} runs replayed as {} graphs", r.graph_replays, r.graphs_captured) } else { String::new() }
        + &if r.uploads_ahead > 0 { format!("; {} batches uploaded ahead on the copy stream", r.uploads_ahead) } else { String::new() }
        + &if r.uploads_pinned_by_workers > 0 {
            format!(", {} from page-locked memory the data workers filled", r.uploads_pinned_by_workers)
        } else {
            String::new()
        }
        + &if r.device_allreduces > 0 { format!("; {} gradient buckets all-reduced on the device", r.device_allreduces) } else { String::new() }
}

/// The plans' arenas: their size against the most their values hold at once, and how many
/// kernel outputs went into them rather than into allocations of their own.
fn arena_summary(r: &dlc::runner::Report) -> String {
    if r.arena_bytes == 0 {
        return String::new();
    }
    let workspace = if r.conv_workspace_bytes > 0 {
        format!(", and {} MiB of convolution workspace", mib(r.conv_workspace_bytes))
    } else {
        String::new()
    };
    format!(
        "; intermediates in plan arenas of {} MiB (their values at most {} MiB at once{workspace}): {} outputs placed, {} allocated (results)",
        mib(r.arena_bytes),
        mib(r.arena_live_peak),
        r.arena_outputs,
        r.allocated_outputs
    )
}

/// `1234567` as `1,234,567`.
pub fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// (median, min, max) of timings.
pub fn stats(mut ms: Vec<f64>) -> (f64, f64, f64) {
    ms.sort_by(|a, b| a.total_cmp(b));
    let n = ms.len();
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let median = if n % 2 == 1 { ms[n / 2] } else { (ms[n / 2 - 1] + ms[n / 2]) / 2.0 };
    (median, ms[0], ms[n - 1])
}

/// The median of `n` timed runs of `f`, in milliseconds.
pub fn median_ms(n: usize, mut f: impl FnMut()) -> f64 {
    let ms: Vec<f64> = (0..n)
        .map(|_| {
            let t0 = std::time::Instant::now();
            f();
            t0.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    stats(ms).0
}

/// Autotuning in a run: the regions measured (native code against the interpreter), what won,
/// the product kernel each product shape runs on, and how many choices came from the tuning
/// file instead.
pub fn tuning(k: &dlc::exec::fused::KernelCache) -> serde_json::Value {
    let tuned = k.tuned();
    let store = k.gemm.store.as_ref().or(k.store.as_ref());
    let mut chosen = std::collections::BTreeMap::<String, usize>::new();
    for (_, kernel) in k.gemm.choices() {
        *chosen.entry(kernel).or_default() += 1;
    }
    serde_json::json!({
        "regions": tuned.len(),
        "native": tuned.iter().filter(|c| **c == Some(true)).count(),
        "interpreter": tuned.iter().filter(|c| **c == Some(false)).count(),
        "undecided": tuned.iter().filter(|c| c.is_none()).count(),
        "from_file": store.map(|s| s.hits.load(std::sync::atomic::Ordering::Relaxed)).unwrap_or(0),
        "measured_now": store.map(|s| s.measured()).unwrap_or(0),
        "file": store.map(|s| s.path.display().to_string()),
        "file_unreadable": store.and_then(|s| s.unreadable.clone()),
        "products": {
            "kernels": k.gemm.candidates().iter().map(|c| c.describe()).collect::<Vec<_>>(),
            "shapes": chosen,
        },
    })
}

/// The products' line: the kernels this machine has and how many product shapes each runs.
pub fn products_line(tuning: &serde_json::Value) -> String {
    let p = &tuning["products"];
    let kernels: Vec<&str> = p["kernels"].as_array().map(|a| a.iter().filter_map(|v| v.as_str()).collect()).unwrap_or_default();
    let shapes: Vec<String> = p["shapes"].as_object().map(|m| m.iter().map(|(k, n)| format!("{k} {n}")).collect()).unwrap_or_default();
    format!(
        "product kernels on this machine: {}; shapes per kernel: {}",
        kernels.join(", "),
        if shapes.is_empty() { "none run".to_string() } else { shapes.join(", ") }
    )
}

/// A step's traffic with the device: `copied 402444 B up (the batch 402432 B and 12 B
/// besides: the step's scalars), 4 B down; 1.00 graph launches and 0.0 calls issued one by one;
/// 1.00 waits for the device`. The scalars are the step and draw counts and each group's
/// learning rate, written into the graph's input buffers.
/// Batches uploaded ahead go up during the step before theirs, so a window of steps can count
/// one batch fewer than it has steps: then the line says so instead of a negative remainder.
pub fn traffic_line(d: &dlc::runner::PerStep, batch_bytes: usize) -> String {
    let what = if d.bytes_up >= batch_bytes as f64 {
        format!("the batch {batch_bytes} B and {:.0} B besides: the step's scalars", d.bytes_up - batch_bytes as f64)
    } else {
        format!("a batch is {batch_bytes} B; each goes up during the step before its own, so the steps counted sent one fewer")
    };
    format!(
        "copied {:.0} B up ({what}), {:.0} B down; {:.2} graph launches and {:.1} calls issued one by one; {:.2} waits for the device",
        d.bytes_up, d.bytes_down, d.graph_launches, d.calls_issued, d.waits
    )
}

/// Peak resident memory of this process so far, in MiB (Linux; 0 elsewhere).
pub fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}
