//! `dlc explain`'s text form: the JSON report (see `mod.rs`) as lines a person reads.

use super::{AUTO_REMAT_REASON, BIAS_REASON, CHECKPOINT_REASON, FOLD_REASON, PROLOGUE_REASON, REMAT_REASON, ROWS_REASON};
use serde_json::Value as Json;

pub fn print(r: &Json) {
    println!("{}", r["file"].as_str().unwrap_or(""));
    println!("  threads: {}; why: {}", r["threads"]["count"], r["threads"]["reason"].as_str().unwrap_or(""));
    println!("  layout: {}; why: {}", r["layout"]["layout"].as_str().unwrap_or(""), r["layout"]["reason"].as_str().unwrap_or(""));
    for item in r["items"].as_array().into_iter().flatten() {
        if !summary(item) {
            continue;
        }
        placement(item);
        fusion(item);
        rewrites(item);
        memory_and_precision(item);
    }
}

/// The item's first line: what it is and its kernels; false when it was not compiled.
fn summary(item: &Json) -> bool {
    let what = match item["what"].as_str() {
        Some("print") => item["at"].as_str().unwrap_or("print").to_string(),
        Some("infer") => format!("infer `{}`", item["name"].as_str().unwrap_or("")),
        Some("evaluate") => format!("evaluate `{}`, per batch {}", item["name"].as_str().unwrap_or(""), item["batch"]),
        _ => format!("train `{}`, step for batch {}", item["name"].as_str().unwrap_or(""), item["batch"]),
    };
    if let Some(e) = item["error"].as_str() {
        println!("  {what}: not compiled: {e}");
        return false;
    }
    println!(
        "  {what}: {} kernels (eager interpreter: {}); {} elementwise ops fused into {} kernel(s), {} row kernel(s), {} library kernel(s){}",
        item["kernels"],
        item["eager_kernels"],
        item["fused_ops"],
        item["fused_regions"],
        item["row_kernels"].as_array().map_or(0, |r| r.len()),
        item["library_kernels"],
        item["compile_ms"].as_f64().map(|m| format!("; compiled in {m} ms")).unwrap_or_default()
    );
    true
}

/// Where it runs: the device, the data-parallel split, the GPU's share of the kernels.
fn placement(item: &Json) {
    if let Some(d) = item.get("device") {
        match d["device"].as_str() {
            Some(dev) => println!("    device {dev}: {}", d["reason"].as_str().unwrap_or("")),
            None => println!("    device: {}", d["error"].as_str().unwrap_or("")),
        }
    }
    if let Some(p) = item.get("parallel") {
        println!(
            "    data parallel over {} ranks: backward half {} kernels, update half {} kernels",
            p["ranks"].as_str().map(String::from).unwrap_or_else(|| p["ranks"].to_string()),
            p["backward_kernels"],
            p["update_kernels"]
        );
        for (i, b) in p["buckets"].as_array().into_iter().flatten().enumerate() {
            let params: Vec<&str> = b["params"].as_array().into_iter().flatten().filter_map(|x| x.as_str()).collect();
            println!(
                "      bucket {i}: {:.2} MB ({}), all-reduce starts after kernel #{}, overlapping {} backward kernels",
                b["bytes"].as_f64().unwrap_or(0.0) / 1e6,
                params.join(", "),
                b["ready_after"],
                b["overlaps_kernels"]
            );
        }
        println!("      why: {}", p["reason"].as_str().unwrap_or(""));
    }
    if let Some(d) = item.get("device_plan") {
        let list = |v: &serde_json::Value| {
            let parts: Vec<String> = v.as_object().into_iter().flatten().map(|(k, n)| format!("{n} {k}")).collect();
            if parts.is_empty() {
                "none".to_string()
            } else {
                parts.join(", ")
            }
        };
        println!(
            "    on the GPU: generated kernels {}; {} products on cuBLAS; through the host: {}",
            list(&d["generated"]),
            d["gemm"],
            list(&d["host"])
        );
        println!("      why: {}", d["reason"].as_str().unwrap_or(""));
    }
}

/// What fusion made: fused regions, row kernels, sums with their prologue.
fn fusion(item: &Json) {
    for reg in item["regions"].as_array().into_iter().flatten().filter(|r| r["ops"].as_u64().unwrap_or(0) > 1) {
        let lines: Vec<&str> = reg["lines"].as_array().into_iter().flatten().filter_map(|l| l.as_str()).collect();
        println!(
            "    {} ops (+{} broadcasts) -> 1 kernel, {} ({})",
            reg["ops"],
            reg["broadcasts"],
            reg["output"].as_str().unwrap_or(""),
            lines.join(", ")
        );
    }
    println!("    why: {}", item["reason"].as_str().unwrap_or(""));
    for row in item["row_kernels"].as_array().into_iter().flatten() {
        let names: Vec<&str> = row["reductions"].as_array().into_iter().flatten().filter_map(|l| l.as_str()).collect();
        let lines: Vec<&str> = row["lines"].as_array().into_iter().flatten().filter_map(|l| l.as_str()).collect();
        println!(
            "    {} + {} elementwise ops -> 1 row kernel over rows of {} ({})",
            names.join(", "),
            row["elementwise_ops"],
            row["rows"].as_str().unwrap_or(""),
            lines.join(", ")
        );
        println!("      why: {ROWS_REASON}");
    }
    let reductions = item["prologue_reductions"].as_array().cloned().unwrap_or_default();
    for red in &reductions {
        let lines: Vec<&str> = red["lines"].as_array().into_iter().flatten().filter_map(|l| l.as_str()).collect();
        println!(
            "    {} over axes {} of {} elementwise op(s) -> 1 kernel; its input {} is never written ({})",
            red["reduction"].as_str().unwrap_or(""),
            red["axes"],
            red["prologue_ops"],
            red["input"].as_str().unwrap_or(""),
            lines.join(", ")
        );
    }
    if !reductions.is_empty() {
        println!("      why: {PROLOGUE_REASON}");
    }
}

/// The rewrites before fusion: biases removed, batch norms folded, work hoisted, values
/// recomputed.
fn rewrites(item: &Json) {
    if let Some(n) = item["removed_biases"]["count"].as_u64().filter(|n| *n > 0) {
        println!("    {n} convolution bias(es) before batch norm removed");
        println!("      why: {BIAS_REASON}");
    }
    if let Some(n) = item["folded_batch_norms"]["count"].as_u64().filter(|n| *n > 0) {
        let at: Vec<String> = item["folded_batch_norms"]["folds"]
            .as_array()
            .map(|f| {
                f.iter().map(|f| format!("{} into {}", f["affine"].as_str().unwrap_or("?"), f["product"].as_str().unwrap_or("?"))).collect()
            })
            .unwrap_or_default();
        println!("    {n} batch norm(s) folded into the product before them ({})", at.join("; "));
        println!("      why: {FOLD_REASON}");
    }
    if let Some(r) = item["eval_reason"].as_str() {
        println!("    {} kernel(s) run once per evaluation instead of per batch", item["hoisted_kernels"]);
        println!("      why: {r}");
    }
    let remat = &item["rematerialised"];
    let (b, o) = (remat["broadcasts"].as_u64().unwrap_or(0), remat["other_values"].as_u64().unwrap_or(0));
    if b + o > 0 {
        println!("    {b} broadcast(s) and {o} other value(s) (masks) recomputed in each kernel that reads them");
        println!("      why: {REMAT_REASON}");
    }
    let blocks = item["checkpoints"]["blocks"].as_array().cloned().unwrap_or_default();
    for block in &blocks {
        println!(
            "    checkpoint ({}): {} forward op(s) recomputed in backward, {} of them library kernels",
            block["at"].as_str().unwrap_or(""),
            block["recomputed_ops"],
            block["recomputed_library_ops"]
        );
    }
    if !blocks.is_empty() {
        println!("      why: {CHECKPOINT_REASON}");
    }
    if let Some(n) = item["checkpoints"]["automatic_ops"].as_u64().filter(|n| *n > 0) {
        println!("    {n} elementwise op(s) recomputed in backward instead of their values kept");
        println!("      why: {AUTO_REMAT_REASON}");
    }
}

/// The memory plan, and what autocast lowered.
fn memory_and_precision(item: &Json) {
    if item["memory"].is_object() {
        println!("    {}", serde_json::from_value::<crate::reports::Memory>(item["memory"].clone()).map(|m| m.line()).unwrap_or_default());
        println!("      why: {}", crate::reports::MEMORY_REASON);
    }
    let prec = &item["precision"];
    // Each product once, with its precision when a block chose it.
    let places = |list: &[serde_json::Value]| {
        let mut at: Vec<String> = vec![];
        for l in list {
            let block = if l["by_block"].as_bool() == Some(true) {
                format!(", {} by its block", l["dtype"].as_str().unwrap_or(""))
            } else {
                String::new()
            };
            let s = format!("{} ({}{block})", l["op"].as_str().unwrap_or(""), l["at"].as_str().unwrap_or(""));
            if !at.contains(&s) {
                at.push(s);
            }
        }
        at.join(", ")
    };
    if let Some(lowered) = prec["lowered"].as_array().filter(|l| !l.is_empty()) {
        println!("    precision {}: {} op(s) lowered: {}", prec["precision"].as_str().unwrap_or(""), lowered.len(), places(lowered));
        if let Some(kept) = prec["kept_f32_by_block"].as_array().filter(|l| !l.is_empty()) {
            println!("      kept in f32 by `precision f32` blocks: {}", places(kept));
        }
        println!("      kept in f32: {}", prec["kept_f32"].as_str().unwrap_or(""));
        println!("      why: {}", prec["reason"].as_str().unwrap_or(""));
    }
}
