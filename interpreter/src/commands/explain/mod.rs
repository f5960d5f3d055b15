//! `dlc explain FILE [--json]`: what the compiler did to each training step and each printed
//! value, and why, in the tuning guide's terms. Today: the kernels after fusion against the
//! eager interpreter's one-kernel-per-op, each fused region with its size, shape and the source
//! lines it came from.

use crate::reports::Memory;
use dlc::compile;
use dlc::Program;
use dlc_language::ir::{Graph, NodeId, Op};
use dlc_language::passes::autocast::Decision;
use dlc_language::passes::fusion::{Kernel, Plan};
use dlc_language::syntax::ast::RecipeKind;
use dlc_language::types::DType;
use serde_json::{json, Value as Json};
use std::path::Path;

mod dump;
mod text;

pub use dump::DumpPass;

const FUSE_REASON: &str =
    "fuse pointwise operations: the chain reads its inputs and writes its result once, instead of one memory pass per op";

/// `file:line` of every distinct source line the nodes came from, in first-seen order.
fn lines(p: &Program, g: &Graph, nodes: &[NodeId]) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for &n in nodes {
        // (Nodes the trainer built, an update's bookkeeping, have no source line.)
        let Some(s) = span_line(p, g.span(n)) else { continue };
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

fn op_name(g: &Graph, n: NodeId) -> String {
    match &g.node(n).op {
        Op::Unary(u) => format!("{u:?}").to_lowercase(),
        Op::Binary(b) => format!("{b:?}").to_lowercase(),
        Op::Expand => "broadcast".into(),
        Op::Reduce(r, _) => format!("{r:?}").to_lowercase(),
        other => other.kind_name(),
    }
}

/// The report of one plan.
fn describe(p: &Program, g: &Graph, plan: &Plan) -> Json {
    let mut regions = vec![];
    // Standalone regions; those inside row kernels are reported with them.
    let standalone = plan.kernels.iter().flat_map(|k| match k {
        Kernel::Fused(r) => std::slice::from_ref(r),
        Kernel::Group(rs) => rs.as_slice(),
        _ => &[],
    });
    for r in standalone {
        {
            let node = g.node(r.output());
            let broadcasts = r.nodes.iter().filter(|n| matches!(g.node(**n).op, Op::Expand)).count();
            regions.push(json!({
                "ops": r.nodes.len() - broadcasts,
                "broadcasts": broadcasts,
                "kernels": 1,
                "output": format!("{}", node.ty()),
                "inputs": r.inputs.len(),
                "op_names": r.nodes.iter().map(|n| op_name(g, *n)).collect::<Vec<_>>(),
                "lines": lines(p, g, &r.nodes),
            }));
        }
    }
    // Row kernels: last-axis reductions fused with the elementwise work around them.
    let rows: Vec<Json> = plan
        .kernels
        .iter()
        .filter_map(|k| if let Kernel::Rows(rg) = k { Some(rg) } else { None })
        .map(|rg| {
            let members = rg.members();
            let ops = members.iter().filter(|n| !matches!(g.node(**n).op, Op::Expand) && !rg.reductions().any(|r| r == **n)).count();
            let dims: Vec<String> = rg.lead.iter().chain([&rg.len]).map(|d| d.to_string()).collect();
            json!({
                "reductions": rg.reductions().map(|n| op_name(g, n)).collect::<Vec<_>>(),
                "elementwise_ops": ops,
                "rows": format!("[{}]", dims.join(", ")),
                "intermediates_kept_per_row": members.len() - rg.outputs.len(),
                "lines": lines(p, g, &members),
            })
        })
        .collect();
    // Sums over any axes computed from their elementwise prologue, which is never written out.
    let reductions: Vec<Json> = plan
        .kernels
        .iter()
        .filter_map(|k| if let Kernel::Reduce(rk) = k { Some(rk) } else { None })
        .map(|rk| {
            let r = &rk.prologue;
            let broadcasts = r.nodes.iter().filter(|n| matches!(g.node(**n).op, Op::Expand)).count();
            let axes = if let Op::Reduce(_, axes) = &g.node(rk.node).op { axes.clone() } else { vec![] };
            let mut nodes = r.nodes.clone();
            nodes.push(rk.node);
            json!({
                "reduction": op_name(g, rk.node),
                "axes": axes,
                "prologue_ops": r.nodes.len() - broadcasts,
                "input": format!("{}", g.node(r.output()).ty()),
                "lines": lines(p, g, &nodes),
            })
        })
        .collect();
    let library: Vec<String> =
        plan.kernels.iter().filter_map(|k| if let Kernel::Library(n) = k { Some(op_name(g, *n)) } else { None }).collect();
    // The launch order, for readers who want to see the schedule.
    let sequence: Vec<String> = plan
        .kernels
        .iter()
        .filter_map(|k| match k {
            Kernel::Fused(r) => Some(format!("fused({})", r.nodes.len())),
            Kernel::Group(rs) => Some(format!("group({} regions)", rs.len())),
            Kernel::Rows(rg) => Some(format!("rows({} regions, {} reductions)", rg.regions().count(), rg.reductions().count())),
            Kernel::Reduce(rk) => Some(format!("{}(prologue {})", op_name(g, rk.node), rk.prologue.nodes.len())),
            Kernel::Library(n) => Some(op_name(g, *n)),
            Kernel::Free(_) | Kernel::View(_) => None,
        })
        .collect();
    // Values computed again in every kernel that reads them instead of written once and read
    // back: a node that is a member of several regions.
    let mut seen: std::collections::HashMap<NodeId, usize> = Default::default();
    for r in plan.regions() {
        for n in &r.nodes {
            *seen.entry(*n).or_default() += 1;
        }
    }
    let again: Vec<NodeId> = seen.into_iter().filter(|(_, c)| *c > 1).map(|(n, _)| n).collect();
    let broadcasts_again = again.iter().filter(|n| matches!(g.node(**n).op, Op::Expand)).count();
    let fused_ops: usize = regions.iter().map(|r| r["ops"].as_u64().unwrap_or(0) as usize).sum();
    json!({
        "kernels": plan.kernel_count(),
        "eager_kernels": plan.eager_count(),
        "fused_regions": regions.len(),
        "fused_ops": fused_ops,
        "library_kernels": library.len(),
        "library_ops": library,
        "row_kernels": rows,
        "prologue_reductions": reductions,
        "rematerialised": {
            "broadcasts": broadcasts_again,
            "other_values": again.len() - broadcasts_again,
            "reason": REMAT_REASON,
        },
        "sequence": sequence,
        "regions": regions,
        "reason": FUSE_REASON,
    })
}

pub fn main(file: &Path, as_json: bool, dump: Option<DumpPass>) -> i32 {
    // The top-level statements run (quietly) to know what each `print` computes.
    let (mut p, root) = match crate::session::load_quietly(file, "nothing to explain") {
        Ok(loaded) => loaded,
        Err(status) => return status,
    };
    let mut opts = compile::Options::new(root);
    // A recipe that asks for data parallelism (or a run under mpirun) gets its bucket plan.
    opts.plan_parallel = dlc::parallel::world::launched_by_mpi()
        || p.session.t.recipes.iter().any(|r| r.kind == RecipeKind::Train && r.field("parallel").is_some());
    let c = compile::program(&mut p, &opts);
    if let Some(pass) = dump {
        return dump::main(&c, pass.0);
    }
    let mut items = vec![];
    for pr in &c.prints {
        let at = format!("print #{}", pr.index);
        items.push(match &pr.planned {
            Ok(planned) => merge(describe(&p, &c.graph, &planned.plan), json!({"what": "print", "at": at})),
            Err(e) => json!({"what": "print", "at": at, "error": e}),
        });
    }
    for inf in &c.infers {
        items.push(match &inf.compiled {
            Ok(ic) => merge(describe(&p, &c.graph, &ic.planned.plan), json!({"what": "infer", "name": inf.name})),
            Err(e) => json!({"what": "infer", "name": inf.name, "error": e}),
        });
    }
    for t in &c.trains {
        match &t.step {
            Ok(step) => items.extend(train_items(&p, &c.graph, t, step)),
            Err(e) => items.push(json!({"what": "train", "name": t.name, "error": e})),
        }
    }
    let threads = rayon::current_num_threads();
    let report = json!({
        "file": file.display().to_string(),
        "items": items,
        "threads": {
            "count": threads,
            "reason": format!("intra-op parallelism on all {threads} cores (RAYON_NUM_THREADS to change): fused kernels split into chunks of {} elements, row kernels into blocks of rows, convolutions and pooling by image, large matrix products by gemm", dlc::exec::fused::CHUNK),
        },
        "layout": {
            "layout": "NCHW",
            "reason": "convolutions run NCHW as im2col + gemm; channels-last is not implemented: for this im2col + gemm it measured 6-11% faster on the MNIST CNN's second convolution forward (`cargo run --release -p dlc --example conv_layout`), about 2 ms of that 90 ms step, less than PyTorch gets from its blocked oneDNN kernels",
        },
    });
    if as_json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        text::print(&report);
    }
    0
}

/// The device a recipe runs on, as the report says it.
fn device_report(info: &dlc_language::eval::recipe::RecipeInfo) -> Json {
    match dlc::device::for_recipe(info, None) {
        Ok((c, _)) => {
            json!({"device": c.device.name(), "requested": c.requested.name(), "reason": c.reason, "gpu": c.gpu.map(|g| g.to_string())})
        }
        Err(e) => json!({"device": null, "error": e}),
    }
}

/// A training step's item and its evaluations' items.
fn train_items(p: &Program, g: &Graph, t: &compile::Train, step: &compile::Step) -> Vec<Json> {
    let device = device_report(&t.info);
    let on_gpu = device["device"] == "cuda";
    let mut item = describe(p, g, &step.plan);
    item["what"] = json!("train");
    item["name"] = json!(t.name);
    if on_gpu {
        item["device_plan"] = device_plan(g, &step.plan);
    }
    item["device"] = device;
    if let Some(par) = &step.parallel {
        let ranks = t.info.field("parallel").and_then(|p| p.field("ranks")).and_then(|r| r.as_int());
        item["parallel"] = json!({
            "ranks": ranks.map(|r| json!(r)).unwrap_or(json!("auto")),
            "backward_kernels": par.backward_kernels,
            "update_kernels": par.update_kernels,
            "buckets": par.buckets.iter().map(|(b, params)| json!({
                "params": params,
                "bytes": b.bytes,
                "ready_after": b.ready_after,
                "overlaps_kernels": par.backward_kernels.saturating_sub(b.ready_after + 1),
            })).collect::<Vec<_>>(),
            "reason": PARALLEL_REASON,
        });
    }
    item["batch"] = json!(step.shapes.iter().map(|(d, s)| format!("{d}{s:?}")).collect::<Vec<_>>());
    item["graph_nodes"] = json!(step.graph_nodes);
    item["compile_ms"] = json!((step.compile_s * 1e4).round() / 10.0);
    item["precision"] = precision_report(p, step.autocast.clone());
    item["removed_biases"] = json!({
        "count": step.removed_biases.len(),
        "at": step.removed_biases.iter().map(|s| span_line(p, *s).unwrap_or_default()).collect::<Vec<_>>(),
        "reason": BIAS_REASON,
    });
    item["memory"] = Memory::json(&step.memory);
    item["checkpoints"] = checkpoint_report(p, g, &step.plan);
    let mut items = vec![item];
    for (data, r) in &step.evaluations {
        items.push(match r {
            Ok((shapes, eg)) => evaluation_item(p, g, data, shapes, eg, on_gpu),
            Err(err) => json!({"what": "evaluate", "name": data, "error": err}),
        });
    }
    items
}

fn evaluation_item(p: &Program, g: &Graph, data: &str, shapes: &compile::Shapes, eg: &dlc::train::EvalGraph, on_gpu: bool) -> Json {
    let mut e = describe(p, g, &eg.plan);
    e["what"] = json!("evaluate");
    e["name"] = json!(data);
    e["batch"] = json!(shapes.iter().map(|(d, s)| format!("{d}{s:?}")).collect::<Vec<_>>());
    e["hoisted_kernels"] = json!(eg.once);
    if on_gpu {
        e["device_plan"] = device_plan(g, &eg.plan);
    }
    e["memory"] = Memory::json(&eg.memory);
    e["eval_reason"] = json!(EVAL_REASON);
    e["folded_batch_norms"] = json!({
        "count": eg.folded.len(),
        "folds": eg.folded.iter().map(|f| json!({
            "product": span_line(p, f.product).unwrap_or_default(),
            "affine": span_line(p, f.chain).unwrap_or_default(),
            "ops": f.ops,
        })).collect::<Vec<_>>(),
        "reason": FOLD_REASON,
    });
    e
}

/// Autocast's decisions: the precision, each lowered op with its source line, and what stays f32.
fn precision_report(p: &Program, autocast: Option<(DType, Vec<Decision>, bool)>) -> Json {
    let Some((low, decisions, scaled)) = autocast else {
        return json!({"precision": "f32", "lowered": [], "reason": "f32 throughout (`precision = bf16` or `f16` runs matrix products in low precision)"});
    };
    let entry = |d: &Decision| {
        let at = span_line(p, d.span).unwrap_or_else(|| "(built by the trainer)".into());
        json!({"op": d.op, "at": at, "dtype": d.dtype.to_string(), "by_block": d.by_block})
    };
    let lowered: Vec<Json> = decisions.iter().filter(|d| d.dtype != DType::F32).map(entry).collect();
    let kept: Vec<Json> = decisions.iter().filter(|d| d.dtype == DType::F32).map(entry).collect();
    json!({
        "precision": low.to_string(),
        "lowered": lowered,
        "kept_f32_by_block": kept,
        "kept_f32": "reductions, softmax/log_softmax, normalisation statistics, losses, the optimiser update, master weights",
        "loss_scaling": scaled,
        "reason": if scaled {
            "autocast: matrix products in f16 with f32 accumulation; dynamic loss scaling keeps small f16 gradients from flushing to zero (GradScaler)"
        } else {
            "autocast: matrix products in low precision with f32 accumulation, numerically sensitive ops in f32 (docs/precision.md)"
        },
    })
}

pub(super) const CHECKPOINT_REASON: &str = "activation checkpointing (`checkpoint { ... }`): the block's values are recomputed from its inputs when backward reaches it instead of kept from the forward pass, trading the recomputation for a lower peak";

/// Each `checkpoint` block of a step: how many of its forward ops backward runs again, and how
/// many of those are library kernels (matrix products, convolutions, reductions).
fn checkpoint_report(p: &Program, g: &Graph, plan: &Plan) -> Json {
    let mut per_block: Vec<(usize, usize)> = vec![(0, 0); g.checkpoints.len()];
    // Recomputed without a hint (automatic rematerialisation): ops.
    let mut automatic = 0;
    for n in g.topo(&plan.roots) {
        let Some(original) = g.recomputed.get(&n) else { continue };
        let op = &g.node(n).op;
        if dlc_language::passes::fusion::is_free(op) || matches!(op, Op::Expand) {
            continue;
        }
        let Some(block) = g.checkpoint_of(*original) else {
            automatic += 1;
            continue;
        };
        per_block[block].0 += 1;
        if !dlc_language::passes::fusion::is_fusible(g, n) {
            per_block[block].1 += 1;
        }
    }
    let blocks: Vec<Json> = per_block
        .iter()
        .enumerate()
        .filter(|(_, c)| c.0 > 0)
        .map(|(b, (ops, library))| {
            json!({"at": span_line_col(p, g.checkpoints[b]).unwrap_or_default(), "recomputed_ops": ops, "recomputed_library_ops": library})
        })
        .collect();
    json!({
        "blocks": blocks,
        "reason": CHECKPOINT_REASON,
        "automatic_ops": automatic,
        "automatic_reason": AUTO_REMAT_REASON,
    })
}

pub(super) const EVAL_REASON: &str = "no_grad + eval(): no backward pass and no saved activations; what depends on the parameters alone (batch norm's scale and shift, transposed weights) is computed once per evaluation, not per batch";

/// Why last-axis reductions run with their neighbours as one row kernel.
pub(super) const ROWS_REASON: &str = "fuse a reduction with its elementwise prologue and epilogue (softmax, log_softmax, layer norm): each row is read once and its intermediates stay in a row-sized buffer in cache instead of full-size tensors written and read back";

pub(super) const AUTO_REMAT_REASON: &str = "automatic rematerialisation: elementwise values backward would keep (gelu's output for the next layer's weight gradient) are recomputed from values it keeps anyway, because the step's planned peak is lower that way";

pub(super) const REMAT_REASON: &str = "rematerialisation: broadcasts and comparison masks are recomputed inside each kernel that reads them (a compare or a broadcast load costs less than a tensor written out and read back; a bool mask is stored as i64)";

pub(super) const PROLOGUE_REASON: &str = "fuse a reduction with the elementwise work that computes its input (batch-norm statistics, bias gradients, a loss's squared error): the input is computed chunk by chunk as it is summed, never written out and read back";

pub(super) const FOLD_REASON: &str = "in evaluation batch norm is a per-channel affine map of constants: folded into the preceding convolution's or linear layer's weight (scaled per output channel) and a shift, computed once per evaluation, as PyTorch's fuse_conv_bn_eval";

pub(super) const BIAS_REASON: &str = "a convolution's bias before batch norm is subtracted again with the batch mean: its add and its gradient are dead work (bias=False before BatchNorm); the running mean still includes it";

/// The memory plan of a step, in MiB.
/// Where a plan's kernels run on the GPU: generated kernels, products on cuBLAS, and the ops that
/// go through the host for want of a device kernel (each a download, the interpreter, an upload).
fn device_plan(g: &dlc_language::ir::Graph, plan: &dlc_language::passes::fusion::Plan) -> Json {
    let p = dlc::runner::device_executor::placement(g, plan);
    json!({
        "generated": p.generated,
        "gemm": p.gemm,
        "host": p.host,
        "reason": DEVICE_REASON,
    })
}

const PARALLEL_REASON: &str = "data parallel (DDP): the step runs in two halves; after each bucket's last gradient is written its all-reduce starts while the rest of backward runs, and the optimiser's update reads the averages";

const DEVICE_REASON: &str = "on a GPU each generated kernel is one launch on device-resident buffers and each matrix product one cuBLAS call; an op with no device kernel yet is computed by the interpreter, its inputs copied to the host and its output back";

/// `file:line` of a span, when it points into a source file.
fn span_line(p: &Program, span: dlc_language::span::Span) -> Option<String> {
    if span.start == 0 && span.end == 0 {
        return None;
    }
    let name = p.sources().files.get(span.file.0 as usize).map(|f| f.name.as_str())?;
    let (line, _) = p.sources().line_col(span.file, span.start);
    Some(format!("{}:{line}", name.rsplit('/').next().unwrap_or(name)))
}

/// `file:line:column` of a span (several blocks can share a line).
fn span_line_col(p: &Program, span: dlc_language::span::Span) -> Option<String> {
    let at = span_line(p, span)?;
    Some(format!("{at}:{}", p.sources().line_col(span.file, span.start).1))
}

fn merge(mut a: Json, b: Json) -> Json {
    if let (Some(a), Json::Object(b)) = (a.as_object_mut(), b) {
        a.extend(b);
    }
    a
}
