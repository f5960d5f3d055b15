//! `dlc explain`'s report, typed: what `--json` prints, and what the text form (text.rs) reads.
//! Optional parts are left out of the JSON when an item has none of them.

use crate::reports::Memory;
use serde::Serialize;

#[derive(Serialize)]
pub struct Report {
    pub file: String,
    pub items: Vec<Item>,
    pub threads: Threads,
    /// Only for a program with convolutions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout: Option<Layout>,
}

#[derive(Serialize)]
pub struct Threads {
    pub count: usize,
    pub reason: String,
}

#[derive(Serialize)]
pub struct Layout {
    pub layout: &'static str,
    pub reason: &'static str,
}

/// One computation: a `print`, an `infer` block, a training step or one of its evaluations.
#[derive(Serialize, Default)]
pub struct Item {
    /// `print`, `infer`, `train` or `evaluate`.
    pub what: &'static str,
    /// A print's place (`print #1`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Why it could not be compiled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(flatten)]
    pub plan: Option<PlanReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_plan: Option<DevicePlan>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<Device>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel: Option<Parallel>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph_nodes: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed_biases: Option<RemovedBiases>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<Checkpoints>,
    /// Evaluations: kernels run once per evaluation instead of per batch, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hoisted_kernels: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folded_batch_norms: Option<Folds>,
    /// `--gpu`: the plan's estimate on that GPU, and PyTorch eager's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roofline: Option<dlc::roofline::Estimate>,
}

/// What fusion made of one plan.
#[derive(Serialize)]
pub struct PlanReport {
    pub kernels: usize,
    pub eager_kernels: usize,
    pub fused_regions: usize,
    pub fused_ops: usize,
    pub library_kernels: usize,
    pub library_ops: Vec<String>,
    pub row_kernels: Vec<RowKernel>,
    pub prologue_reductions: Vec<PrologueReduction>,
    pub rematerialised: Rematerialised,
    /// The launch order.
    pub sequence: Vec<String>,
    pub regions: Vec<Region>,
    pub reason: &'static str,
}

#[derive(Serialize)]
pub struct Region {
    pub ops: usize,
    pub broadcasts: usize,
    pub kernels: usize,
    pub output: String,
    pub inputs: usize,
    pub op_names: Vec<String>,
    pub lines: Vec<String>,
}

#[derive(Serialize)]
pub struct RowKernel {
    pub reductions: Vec<String>,
    pub elementwise_ops: usize,
    pub rows: String,
    pub intermediates_kept_per_row: usize,
    pub lines: Vec<String>,
}

#[derive(Serialize)]
pub struct PrologueReduction {
    pub reduction: String,
    pub axes: Vec<usize>,
    pub prologue_ops: usize,
    pub input: String,
    pub lines: Vec<String>,
}

#[derive(Serialize)]
pub struct Rematerialised {
    pub broadcasts: usize,
    pub other_values: usize,
    pub reason: &'static str,
}

/// Where a plan's kernels run on a GPU (the device executor's placement), and why.
#[derive(Serialize)]
pub struct DevicePlan {
    #[serde(flatten)]
    pub placement: dlc::runner::device_executor::Placement,
    pub reason: &'static str,
}

/// The device a recipe runs on, and why; or, when none can be had, `device` null and the error.
#[derive(Serialize)]
#[serde(untagged)]
pub enum Device {
    Chosen { device: &'static str, requested: &'static str, reason: String, gpu: Option<String> },
    Unavailable { device: (), error: String },
}

#[derive(Serialize)]
pub struct Parallel {
    /// A rank count, or `"auto"`.
    pub ranks: serde_json::Value,
    pub backward_kernels: usize,
    pub update_kernels: usize,
    pub buckets: Vec<Bucket>,
    pub reason: &'static str,
}

#[derive(Serialize)]
pub struct Bucket {
    pub params: Vec<String>,
    pub bytes: usize,
    pub ready_after: usize,
    pub overlaps_kernels: usize,
}

/// What autocast did.
#[derive(Serialize)]
pub struct Precision {
    pub precision: String,
    pub lowered: Vec<Lowered>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_f32_by_block: Option<Vec<Lowered>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_f32: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_scaling: Option<bool>,
    pub reason: &'static str,
    /// Casts to bf16 the step's plan left to the products that read them, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub casts_in_products: Option<Counted>,
}

/// How many times the compiler did something, and why.
#[derive(Serialize)]
pub struct Counted {
    pub count: usize,
    pub reason: &'static str,
}

#[derive(Serialize, Clone)]
pub struct Lowered {
    pub op: &'static str,
    pub at: String,
    pub dtype: String,
    pub by_block: bool,
}

#[derive(Serialize)]
pub struct RemovedBiases {
    pub count: usize,
    pub at: Vec<String>,
    pub reason: &'static str,
}

#[derive(Serialize)]
pub struct Checkpoints {
    pub blocks: Vec<CheckpointBlock>,
    pub reason: &'static str,
    pub automatic_ops: usize,
    pub automatic_reason: &'static str,
}

#[derive(Serialize)]
pub struct CheckpointBlock {
    pub at: String,
    pub recomputed_ops: usize,
    pub recomputed_library_ops: usize,
}

#[derive(Serialize)]
pub struct Folds {
    pub count: usize,
    pub folds: Vec<Fold>,
    pub reason: &'static str,
}

#[derive(Serialize)]
pub struct Fold {
    pub product: String,
    pub affine: String,
    pub ops: usize,
}
