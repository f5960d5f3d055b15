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
use report::{Item, PlanReport, Report};
use serde_json::json;
use std::path::Path;

mod dump;
mod report;
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

/// A product with its epilogue, as the schedule names it: `matmul+bias`, `matmul+bias+relu` or
/// `matmul+mask` (a relu's backward).
fn epilogue_name(g: &Graph, gk: &dlc_language::ir::plan::GemmKernel) -> String {
    let what = if gk.mask.is_some() {
        "+mask"
    } else if gk.relu() {
        "+bias+relu"
    } else {
        "+bias"
    };
    format!("{}{what}", op_name(g, gk.product))
}

/// The report of one plan.
fn describe(p: &Program, g: &Graph, plan: &Plan) -> PlanReport {
    // Standalone regions; those inside row kernels are reported with them.
    let standalone = plan.kernels.iter().flat_map(|k| match k {
        Kernel::Fused(r) => std::slice::from_ref(r),
        Kernel::Group(rs) => rs.as_slice(),
        _ => &[],
    });
    let regions: Vec<report::Region> = standalone
        .map(|r| {
            let broadcasts = r.nodes.iter().filter(|n| matches!(g.node(**n).op, Op::Expand)).count();
            report::Region {
                ops: r.nodes.len() - broadcasts,
                broadcasts,
                kernels: 1,
                output: format!("{}", g.node(r.output()).ty()),
                inputs: r.inputs.len(),
                op_names: r.nodes.iter().map(|n| op_name(g, *n)).collect(),
                lines: lines(p, g, &r.nodes),
            }
        })
        .collect();
    // Row kernels: last-axis reductions fused with the elementwise work around them.
    let row_kernels = plan
        .kernels
        .iter()
        .filter_map(|k| if let Kernel::Rows(rg) = k { Some(rg) } else { None })
        .map(|rg| {
            let members = rg.members();
            let ops = members.iter().filter(|n| !matches!(g.node(**n).op, Op::Expand) && !rg.reductions().any(|r| r == **n)).count();
            let dims: Vec<String> = rg.lead.iter().chain([&rg.len]).map(|d| d.to_string()).collect();
            report::RowKernel {
                reductions: rg.reductions().map(|n| op_name(g, n)).collect(),
                elementwise_ops: ops,
                rows: format!("[{}]", dims.join(", ")),
                intermediates_kept_per_row: members.len() - rg.outputs.len(),
                lines: lines(p, g, &members),
            }
        })
        .collect();
    // Sums over any axes computed from their elementwise prologue, which is never written out.
    let prologue_reductions = plan
        .kernels
        .iter()
        .filter_map(|k| if let Kernel::Reduce(rk) = k { Some(rk) } else { None })
        .map(|rk| {
            let r = &rk.prologue;
            let broadcasts = r.nodes.iter().filter(|n| matches!(g.node(**n).op, Op::Expand)).count();
            let axes = if let Op::Reduce(_, axes) = &g.node(rk.node).op { axes.clone() } else { vec![] };
            let mut nodes = r.nodes.clone();
            nodes.push(rk.node);
            report::PrologueReduction {
                reduction: op_name(g, rk.node),
                axes,
                prologue_ops: r.nodes.len() - broadcasts,
                input: format!("{}", g.node(r.output()).ty()),
                lines: lines(p, g, &nodes),
            }
        })
        .collect();
    let library: Vec<String> = plan
        .kernels
        .iter()
        .filter_map(|k| match k {
            Kernel::Library(n) => Some(op_name(g, *n)),
            Kernel::Gemm(gk) => Some(epilogue_name(g, gk)),
            _ => None,
        })
        .collect();
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
            Kernel::Gemm(gk) => Some(epilogue_name(g, gk)),
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
    PlanReport {
        kernels: plan.kernel_count(),
        eager_kernels: plan.eager_count(),
        fused_regions: regions.len(),
        fused_ops: regions.iter().map(|r| r.ops).sum(),
        library_kernels: library.len(),
        library_ops: library,
        row_kernels,
        prologue_reductions,
        rematerialised: report::Rematerialised {
            broadcasts: broadcasts_again,
            other_values: again.len() - broadcasts_again,
            reason: REMAT_REASON,
        },
        sequence,
        regions,
        reason: FUSE_REASON,
    }
}

/// An item for a computation that was planned, or one that could not be.
fn item(what: &'static str, name: Option<String>, at: Option<String>, planned: Result<PlanReport, String>) -> Item {
    let (plan, error) = match planned {
        Ok(p) => (Some(p), None),
        Err(e) => (None, Some(e)),
    };
    Item { what, name, at, plan, error, ..Default::default() }
}

/// The convolutions' layout and why, for a program with convolutions (`None` without).
fn layout_note(g: &Graph) -> Option<report::Layout> {
    let convs: Vec<_> = (0..g.len() as u32)
        .filter_map(|i| match g.node(NodeId(i)).op {
            Op::Conv2d(a) => Some(a.channels_last),
            _ => None,
        })
        .collect();
    if convs.is_empty() {
        return None;
    }
    Some(if convs.contains(&true) {
        report::Layout {
            layout: "channels-last",
            reason: "convolutions run channels-last where the device's kernels want them: on the CPU with oneDNN every float one (its NHWC kernels read them as stored, where NCHW costs a reorder in and out of its blocked layout each call), on a GPU the bf16/f16 ones (cuDNN's tensor-core kernels would transpose NCHW operands on every call); batch norm, casts, activations, bias adds and pooling between them stay channels-last, so the step transposes only where the region meets reshapes and products (the layout pass: `--dump=layout`; `DLC_CONV_LAYOUT=nchw` to compare)",
        }
    } else {
        report::Layout {
            layout: "NCHW",
            reason: "on the CPU without oneDNN (or with `DLC_CONV=im2col`) convolutions run NCHW as im2col + gemm: channels-last im2col measured 6-11% faster on the MNIST CNN's second convolution forward (`cargo run --release -p dlc --example conv_layout`), less than the transposes around it would cost; on a GPU f32 convolutions stay NCHW and bf16/f16 ones go channels-last",
        }
    })
}

pub fn main(file: &Path, as_json: bool, dump: Option<DumpPass>, gpu: Option<&str>) -> i32 {
    let roofline_gpu = match gpu.map(dlc::roofline::gpu).transpose() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: --gpu: {e}");
            return 2;
        }
    };
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
        let planned = pr.planned.as_ref().map(|planned| describe(&p, &c.graph, &planned.plan)).map_err(|e| e.clone());
        items.push(item("print", None, Some(format!("print #{}", pr.index)), planned));
    }
    // An `infer` block runs where `--device` puts it: on a GPU, where each kernel would run.
    let gpu = dlc::runner::registry::probe_gpu().is_ok();
    for inf in &c.infers {
        let planned = inf.compiled.as_ref().map(|ic| describe(&p, &c.graph, &ic.planned.plan)).map_err(|e| e.clone());
        let mut it = item("infer", Some(inf.name.clone()), None, planned);
        if let (true, Ok(ic)) = (gpu, &inf.compiled) {
            it.device_plan = Some(device_plan(&c.graph, &ic.planned.plan));
        }
        if let (Some(spec), Ok(ic)) = (roofline_gpu, &inf.compiled) {
            it.roofline = Some(dlc::roofline::estimate(&c.graph, &ic.planned.plan, spec));
        }
        items.push(it);
    }
    for t in &c.trains {
        match &t.step {
            Ok(step) => {
                let mut its = train_items(&p, &c.graph, t, step);
                if let Some(spec) = roofline_gpu {
                    // The step, then its evaluations, in train_items's order.
                    let plans = std::iter::once(Some(&step.plan))
                        .chain(step.evaluations.iter().map(|(_, r)| r.as_ref().ok().map(|(_, eg)| &eg.plan)));
                    for (it, plan) in its.iter_mut().zip(plans) {
                        it.roofline = plan.map(|pl| dlc::roofline::estimate(&c.graph, pl, spec));
                    }
                }
                items.extend(its)
            }
            Err(e) => items.push(item("train", Some(t.name.clone()), None, Err(e.clone()))),
        }
    }
    let threads = rayon::current_num_threads();
    let report = Report {
        file: file.display().to_string(),
        items,
        threads: report::Threads {
            count: threads,
            reason: format!("intra-op parallelism on all {threads} cores (RAYON_NUM_THREADS to change): fused kernels split into chunks of {} elements, row kernels into blocks of rows, convolutions and pooling by image, large matrix products by gemm", dlc::exec::fused::CHUNK),
        },
        // The convolution layout note, for programs with convolutions only.
        layout: layout_note(&c.graph),
    };
    if as_json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        text::print(&report);
    }
    0
}

/// The device a recipe runs on, as the report says it.
fn device_report(info: &dlc_language::eval::recipe::RecipeInfo) -> report::Device {
    match dlc::device::for_recipe(info, None) {
        Ok((c, _)) => report::Device::Chosen {
            device: c.device.name(),
            requested: c.requested.name(),
            reason: c.reason,
            gpu: c.gpu.map(|g| g.to_string()),
        },
        Err(error) => report::Device::Unavailable { device: (), error },
    }
}

/// A training step's item and its evaluations' items.
fn train_items(p: &Program, g: &Graph, t: &compile::Train, step: &compile::Step) -> Vec<Item> {
    let device = device_report(&t.info);
    let on_gpu = matches!(device, report::Device::Chosen { device: "cuda", .. });
    let parallel = step.parallel.as_ref().map(|par| {
        let ranks = t.info.field("parallel").and_then(|p| p.field("ranks")).and_then(|r| r.as_int());
        report::Parallel {
            ranks: ranks.map(|r| json!(r)).unwrap_or(json!("auto")),
            backward_kernels: par.backward_kernels,
            update_kernels: par.update_kernels,
            buckets: par
                .buckets
                .iter()
                .map(|(b, params)| report::Bucket {
                    params: params.clone(),
                    bytes: b.bytes,
                    ready_after: b.ready_after,
                    overlaps_kernels: par.backward_kernels.saturating_sub(b.ready_after + 1),
                })
                .collect(),
            reason: PARALLEL_REASON,
        }
    });
    let mut items = vec![Item {
        what: "train",
        name: Some(t.name.clone()),
        plan: Some(describe(p, g, &step.plan)),
        device_plan: on_gpu.then(|| device_plan(g, &step.plan)),
        device: Some(device),
        parallel,
        batch: Some(batch_names(&step.shapes)),
        graph_nodes: Some(step.graph_nodes),
        compile_ms: Some((step.compile_s * 1e4).round() / 10.0),
        precision: Some(precision_report(p, step.autocast.clone(), dlc_language::passes::fusion::folded_casts(g, &step.plan))),
        removed_biases: Some(report::RemovedBiases {
            count: step.removed_biases.len(),
            at: step.removed_biases.iter().map(|s| span_line(p, *s).unwrap_or_default()).collect(),
            reason: BIAS_REASON,
        }),
        memory: Some(Memory::of(&step.memory)),
        checkpoints: Some(checkpoint_report(p, g, &step.plan)),
        ..Default::default()
    }];
    for (data, r) in &step.evaluations {
        items.push(match r {
            Ok((shapes, eg)) => evaluation_item(p, g, data, shapes, eg, on_gpu),
            Err(err) => item("evaluate", Some(data.clone()), None, Err(err.clone())),
        });
    }
    items
}

fn batch_names(shapes: &compile::Shapes) -> Vec<String> {
    shapes.iter().map(|(d, s)| format!("{d}{s:?}")).collect()
}

fn evaluation_item(p: &Program, g: &Graph, data: &str, shapes: &compile::Shapes, eg: &dlc::train::EvalGraph, on_gpu: bool) -> Item {
    Item {
        what: "evaluate",
        name: Some(data.to_string()),
        plan: Some(describe(p, g, &eg.plan)),
        batch: Some(batch_names(shapes)),
        hoisted_kernels: Some(eg.once),
        device_plan: on_gpu.then(|| device_plan(g, &eg.plan)),
        memory: Some(Memory::of(&eg.memory)),
        eval_reason: Some(EVAL_REASON),
        folded_batch_norms: Some(report::Folds {
            count: eg.folded.len(),
            folds: eg
                .folded
                .iter()
                .map(|f| report::Fold {
                    product: span_line(p, f.product).unwrap_or_default(),
                    affine: span_line(p, f.chain).unwrap_or_default(),
                    ops: f.ops,
                })
                .collect(),
            reason: FOLD_REASON,
        }),
        ..Default::default()
    }
}

pub(super) const FOLDED_CASTS_REASON: &str = "on the CPU a cast to bf16 read only by bf16 matrix products is left to them: their kernels round each operand as they convert it to their own layout, so the cast needs no pass over memory of its own (a read and a write of every value)";

/// Autocast's decisions: the precision, each lowered op with its source line, what stays f32,
/// and the casts the products make themselves.
fn precision_report(p: &Program, autocast: Option<(DType, Vec<Decision>, bool)>, folded: usize) -> report::Precision {
    let Some((low, decisions, scaled)) = autocast else {
        return report::Precision {
            precision: "f32".into(),
            lowered: vec![],
            kept_f32_by_block: None,
            kept_f32: None,
            loss_scaling: None,
            reason: "f32 throughout (`precision = bf16` or `f16` runs matrix products in low precision)",
            casts_in_products: None,
        };
    };
    let entry = |d: &Decision| report::Lowered {
        op: d.op,
        at: span_line(p, d.span).unwrap_or_else(|| "(built by the trainer)".into()),
        dtype: d.dtype.to_string(),
        by_block: d.by_block,
    };
    report::Precision {
        precision: low.to_string(),
        lowered: decisions.iter().filter(|d| d.dtype != DType::F32).map(entry).collect(),
        kept_f32_by_block: Some(decisions.iter().filter(|d| d.dtype == DType::F32).map(entry).collect()),
        kept_f32: Some("reductions, softmax/log_softmax, normalisation statistics, losses, the optimiser update, master weights"),
        loss_scaling: Some(scaled),
        reason: if scaled {
            "autocast: matrix products in f16 with f32 accumulation; dynamic loss scaling keeps small f16 gradients from flushing to zero (GradScaler)"
        } else {
            "autocast: matrix products in low precision with f32 accumulation, numerically sensitive ops in f32 (docs/precision.md)"
        },
        casts_in_products: (folded > 0).then_some(report::Counted { count: folded, reason: FOLDED_CASTS_REASON }),
    }
}

pub(super) const CHECKPOINT_REASON: &str = "activation checkpointing (`checkpoint { ... }`): the block's values are recomputed from its inputs when backward reaches it instead of kept from the forward pass, trading the recomputation for a lower peak";

/// Each `checkpoint` block of a step: how many of its forward ops backward runs again, and how
/// many of those are library kernels (matrix products, convolutions, reductions).
fn checkpoint_report(p: &Program, g: &Graph, plan: &Plan) -> report::Checkpoints {
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
    let blocks = per_block
        .iter()
        .enumerate()
        .filter(|(_, c)| c.0 > 0)
        .map(|(b, (ops, library))| report::CheckpointBlock {
            at: span_line_col(p, g.checkpoints[b]).unwrap_or_default(),
            recomputed_ops: *ops,
            recomputed_library_ops: *library,
        })
        .collect();
    report::Checkpoints { blocks, reason: CHECKPOINT_REASON, automatic_ops: automatic, automatic_reason: AUTO_REMAT_REASON }
}

pub(super) const EVAL_REASON: &str = "no_grad + eval(): no backward pass and no saved activations; what depends on the parameters alone (batch norm's scale and shift, transposed weights) is computed once per evaluation, not per batch";

/// Why last-axis reductions run with their neighbours as one row kernel.
pub(super) const ROWS_REASON: &str = "fuse a reduction with its elementwise prologue and epilogue (softmax, log_softmax, layer norm): each row is read once and its intermediates stay in a row-sized buffer in cache instead of full-size tensors written and read back";

pub(super) const AUTO_REMAT_REASON: &str = "automatic rematerialisation: elementwise values backward would keep (gelu's output for the next layer's weight gradient) are recomputed from values it keeps anyway, because the step's planned peak is lower that way";

pub(super) const REMAT_REASON: &str = "rematerialisation: broadcasts and comparison masks are recomputed inside each kernel that reads them (a compare or a broadcast load costs less than a tensor written out and read back; a bool mask is stored as i64)";

pub(super) const PROLOGUE_REASON: &str = "fuse a reduction with the elementwise work that computes its input (batch-norm statistics, bias gradients, a loss's squared error): the input is computed chunk by chunk as it is summed, never written out and read back";

pub(super) const FOLD_REASON: &str = "in evaluation batch norm is a per-channel affine map of constants: folded into the preceding convolution's or linear layer's weight (scaled per output channel) and a shift, computed once per evaluation, as PyTorch's fuse_conv_bn_eval";

pub(super) const BIAS_REASON: &str = "a convolution's bias before batch norm is subtracted again with the batch mean: its add and its gradient are dead work (bias=False before BatchNorm); the running mean still includes it";

/// Where a plan's kernels run on the GPU: generated kernels, products on cuBLAS, and the ops that
/// go through the host for want of a device kernel (each a download, the interpreter, an upload).
fn device_plan(g: &Graph, plan: &Plan) -> report::DevicePlan {
    report::DevicePlan { placement: dlc::runner::device_executor::placement(g, plan), reason: DEVICE_REASON }
}

const PARALLEL_REASON: &str = "data parallel (DDP): the step runs in two halves; after each bucket's last gradient is written its all-reduce starts while the rest of backward runs, and the optimiser's update reads the averages";

const DEVICE_REASON: &str = "on a GPU each generated kernel is one launch on device-resident buffers and each matrix product one cuBLAS call, each convolution (and gradient, in f32, bf16 or f16) one cuDNN call; an op with no device kernel yet is computed by the interpreter, its inputs copied to the host and its output back; the plan's intermediate values sit at offsets planned before the run in one allocation made once (two values share bytes only when one is dead before the other is written), so a step allocates only its results and every value has the same address in every step";

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
