//! `dlc explain`'s text form: the report (report.rs) as lines a person reads.

use super::report::{Device, Item, Lowered, PlanReport, Report};
use super::{AUTO_REMAT_REASON, BIAS_REASON, CHECKPOINT_REASON, FOLD_REASON, PROLOGUE_REASON, REMAT_REASON, ROWS_REASON};

pub fn print(r: &Report) {
    println!("{}", r.file);
    println!("  threads: {}; why: {}", r.threads.count, r.threads.reason);
    if let Some(l) = &r.layout {
        println!("  layout: {}; why: {}", l.layout, l.reason);
    }
    for item in &r.items {
        let Some(plan) = summary(item) else { continue };
        placement(item);
        fusion(plan);
        rewrites(item, plan);
        memory_and_precision(item);
    }
}

/// The item's first line: what it is and its kernels; `None` when it was not compiled.
fn summary(item: &Item) -> Option<&PlanReport> {
    let name = item.name.as_deref().unwrap_or("");
    let batch = || serde_json::json!(item.batch).to_string();
    let what = match item.what {
        "print" => item.at.clone().unwrap_or_else(|| "print".into()),
        "infer" => format!("infer `{name}`"),
        "evaluate" => format!("evaluate `{name}`, per batch {}", batch()),
        _ => format!("train `{name}`, step for batch {}", batch()),
    };
    if let Some(e) = &item.error {
        println!("  {what}: not compiled: {e}");
        return None;
    }
    let plan = item.plan.as_ref()?;
    println!(
        "  {what}: {} kernels (eager interpreter: {}); {} elementwise ops fused into {} kernel(s), {} row kernel(s), {} library kernel(s){}",
        plan.kernels,
        plan.eager_kernels,
        plan.fused_ops,
        plan.fused_regions,
        plan.row_kernels.len(),
        plan.library_kernels,
        item.compile_ms.map(|m| format!("; compiled in {m} ms")).unwrap_or_default()
    );
    Some(plan)
}

/// Where it runs: the device, the data-parallel split, the GPU's share of the kernels.
fn placement(item: &Item) {
    match &item.device {
        Some(Device::Chosen { device, reason, .. }) => println!("    device {device}: {reason}"),
        Some(Device::Unavailable { error, .. }) => println!("    device: {error}"),
        None => {}
    }
    if let Some(p) = &item.parallel {
        println!(
            "    data parallel over {} ranks: backward half {} kernels, update half {} kernels",
            p.ranks.as_str().map(String::from).unwrap_or_else(|| p.ranks.to_string()),
            p.backward_kernels,
            p.update_kernels
        );
        for (i, b) in p.buckets.iter().enumerate() {
            println!(
                "      bucket {i}: {:.2} MB ({}), all-reduce starts after kernel #{}, overlapping {} backward kernels",
                b.bytes as f64 / 1e6,
                b.params.join(", "),
                b.ready_after,
                b.overlaps_kernels
            );
        }
        println!("      why: {}", p.reason);
    }
    if let Some(d) = &item.device_plan {
        let list = |m: &std::collections::BTreeMap<String, usize>| {
            let parts: Vec<String> = m.iter().map(|(k, n)| format!("{n} {k}")).collect();
            if parts.is_empty() {
                "none".to_string()
            } else {
                parts.join(", ")
            }
        };
        println!(
            "    on the GPU: generated kernels {}; {} products on cuBLAS; {} convolutions on cuDNN; computed once on the host and kept: {}; through the host every run: {}",
            list(&d.placement.generated),
            d.placement.gemm,
            d.placement.conv,
            list(&d.placement.once),
            list(&d.placement.host)
        );
        if d.placement.arena_bytes > 0 {
            println!(
                "    intermediates in one arena of {:.2} MiB, allocated once; their values hold at most {:.2} MiB at once",
                crate::reports::mib(d.placement.arena_bytes),
                crate::reports::mib(d.placement.arena_live_peak)
            );
        }
        println!("      why: {}", d.reason);
    }
    if let Some(r) = &item.roofline {
        let g = &r.gpu;
        println!(
            "    on paper, on an {} ({:.0} GB/s, {:.1} TFLOP/s f32, {:.0} bf16): {} launches moving {}, {:.2} GFLOP: {:.3} ms; PyTorch eager's {} launches moving {}: {:.3} ms ({:.1}x)",
            g.long_name,
            g.bandwidth_gbs,
            g.f32_tflops,
            g.bf16_tflops,
            r.launches,
            size(r.megabytes),
            r.gflops,
            r.predicted_ms,
            r.eager_launches,
            size(r.eager_megabytes),
            r.eager_predicted_ms,
            r.eager_predicted_ms / r.predicted_ms.max(1e-12)
        );
        let largest: Vec<String> = r.largest.iter().map(|(k, us)| format!("{k} {us:.1} µs")).collect();
        println!("      largest: {}", largest.join(", "));
        println!("      why: each kernel max(bytes / bandwidth, flops / peak) + {} µs, one after another; a bound, not a measurement (docs/gpu.md)", dlc::roofline::LAUNCH_US);
    }
}

/// What fusion made: fused regions, row kernels, sums with their prologue.
fn fusion(plan: &PlanReport) {
    for reg in plan.regions.iter().filter(|r| r.ops > 1) {
        println!("    {} ops (+{} broadcasts) -> 1 kernel, {} ({})", reg.ops, reg.broadcasts, reg.output, reg.lines.join(", "));
    }
    println!("    why: {}", plan.reason);
    for row in &plan.row_kernels {
        println!(
            "    {} + {} elementwise ops -> 1 row kernel over rows of {} ({})",
            row.reductions.join(", "),
            row.elementwise_ops,
            row.rows,
            row.lines.join(", ")
        );
        println!("      why: {ROWS_REASON}");
    }
    for red in &plan.prologue_reductions {
        println!(
            "    {} over axes {} of {} elementwise op(s) -> 1 kernel; its input {} is never written ({})",
            red.reduction,
            serde_json::json!(red.axes),
            red.prologue_ops,
            red.input,
            red.lines.join(", ")
        );
    }
    if !plan.prologue_reductions.is_empty() {
        println!("      why: {PROLOGUE_REASON}");
    }
}

/// The rewrites before fusion: biases removed, batch norms folded, work hoisted, values
/// recomputed.
fn rewrites(item: &Item, plan: &PlanReport) {
    if let Some(n) = item.removed_biases.as_ref().map(|r| r.count).filter(|n| *n > 0) {
        println!("    {n} convolution bias(es) before batch norm removed");
        println!("      why: {BIAS_REASON}");
    }
    if let Some(folds) = item.folded_batch_norms.as_ref().filter(|f| f.count > 0) {
        let at: Vec<String> = folds.folds.iter().map(|f| format!("{} into {}", f.affine, f.product)).collect();
        println!("    {} batch norm(s) folded into the product before them ({})", folds.count, at.join("; "));
        println!("      why: {FOLD_REASON}");
    }
    if let Some(r) = item.eval_reason {
        println!("    {} kernel(s) run once per evaluation instead of per batch", serde_json::json!(item.hoisted_kernels));
        println!("      why: {r}");
    }
    let (b, o) = (plan.rematerialised.broadcasts, plan.rematerialised.other_values);
    if b + o > 0 {
        println!("    {b} broadcast(s) and {o} other value(s) (masks) recomputed in each kernel that reads them");
        println!("      why: {REMAT_REASON}");
    }
    let Some(ck) = &item.checkpoints else { return };
    for block in &ck.blocks {
        println!(
            "    checkpoint ({}): {} forward op(s) recomputed in backward, {} of them library kernels",
            block.at, block.recomputed_ops, block.recomputed_library_ops
        );
    }
    if !ck.blocks.is_empty() {
        println!("      why: {CHECKPOINT_REASON}");
    }
    if ck.automatic_ops > 0 {
        println!("    {} elementwise op(s) recomputed in backward instead of their values kept", ck.automatic_ops);
        println!("      why: {AUTO_REMAT_REASON}");
    }
}

/// The memory plan, and what autocast lowered.
fn memory_and_precision(item: &Item) {
    if let Some(m) = &item.memory {
        println!("    {}", m.line());
        println!("      why: {}", crate::reports::MEMORY_REASON);
    }
    let Some(prec) = &item.precision else { return };
    // Each product once, with its precision when a block chose it.
    let places = |list: &[Lowered]| {
        let mut at: Vec<String> = vec![];
        for l in list {
            let block = if l.by_block { format!(", {} by its block", l.dtype) } else { String::new() };
            let s = format!("{} ({}{block})", l.op, l.at);
            if !at.contains(&s) {
                at.push(s);
            }
        }
        at.join(", ")
    };
    if !prec.lowered.is_empty() {
        println!("    precision {}: {} op(s) lowered: {}", prec.precision, prec.lowered.len(), places(&prec.lowered));
        if let Some(kept) = prec.kept_f32_by_block.as_ref().filter(|l| !l.is_empty()) {
            println!("      kept in f32 by `precision f32` blocks: {}", places(kept));
        }
        println!("      kept in f32: {}", prec.kept_f32.unwrap_or(""));
        println!("      why: {}", prec.reason);
        if let Some(c) = &prec.casts_in_products {
            println!("      {} cast(s) made by the products that read them: {}", c.count, c.reason);
        }
    }
}

/// Megabytes as MB, or as kB below one MB (a small model's step moves kilobytes).
fn size(mb: f64) -> String {
    if mb >= 1.0 {
        format!("{mb:.1} MB")
    } else {
        format!("{:.1} kB", mb * 1e3)
    }
}
