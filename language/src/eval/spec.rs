//! Typed recipe specs: what a checked recipe asks of the runtime, with one enum per choice
//! (precision, device, optimiser, schedule, parallelism, intervals), built once from the
//! checker's `RecipeInfo` so that the runtime never looks a field up by its name.
//!
//! Defaults live in one place each. The stdlib's constructors (`adamw(...)`, `cosine(...)`,
//! `data_parallel(...)` in stdlib/optim.dl) are the only definitions of an optimiser's,
//! a schedule's and data parallelism's defaults: their records always carry every field, and a
//! record written by hand that lacks one is an error here, not a second default. What Rust
//! defines is what no record says: a recipe field left out (`accumulate` is 1, `precision`
//! f32, `device` auto).

use super::recipe::RecipeInfo;
use super::Value;
use crate::syntax::ast::{Expr, ExprKind, RecipeEntry};
use crate::types::DType;

/// A recipe's `precision`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    F32,
    BF16,
    F16,
    /// Accepted, acted on as f32 (the CPU has no tf32 arithmetic).
    TF32,
}

impl Precision {
    pub fn of(field: Option<&Value>) -> Precision {
        match field {
            Some(Value::DType(DType::BF16)) => Precision::BF16,
            Some(Value::DType(DType::F16)) => Precision::F16,
            Some(Value::Str(s)) if &**s == "tf32" => Precision::TF32,
            _ => Precision::F32,
        }
    }

    /// The low precision autocast lowers products to (`None`: f32).
    pub fn low(self) -> Option<DType> {
        match self {
            Precision::BF16 => Some(DType::BF16),
            Precision::F16 => Some(DType::F16),
            Precision::F32 | Precision::TF32 => None,
        }
    }

    /// The dtype products compute in.
    pub fn dtype(self) -> DType {
        self.low().unwrap_or(DType::F32)
    }
}

/// What a recipe's `device` field (or `--device`) asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceRequest {
    /// The GPU when one is present and usable, else the CPU.
    Auto,
    Cpu,
    Cuda,
}

impl DeviceRequest {
    pub const NAMES: [&'static str; 3] = ["auto", "cpu", "cuda"];

    pub fn parse(s: &str) -> Option<DeviceRequest> {
        match s {
            "auto" => Some(DeviceRequest::Auto),
            "cpu" => Some(DeviceRequest::Cpu),
            "cuda" => Some(DeviceRequest::Cuda),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DeviceRequest::Auto => "auto",
            DeviceRequest::Cpu => "cpu",
            DeviceRequest::Cuda => "cuda",
        }
    }

    /// What a recipe asks for, and whether it says so itself (an absent field is `auto`).
    pub fn of(info: &RecipeInfo) -> (DeviceRequest, bool) {
        match info.field("device") {
            Some(Value::Str(s)) => (DeviceRequest::parse(s).unwrap_or(DeviceRequest::Auto), true),
            Some(Value::Auto) => (DeviceRequest::Auto, true),
            _ => (DeviceRequest::Auto, false),
        }
    }
}

/// How often something happens during training (`checkpoint ... every 2 epochs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Every {
    Steps(usize),
    Epochs(usize),
}

impl Every {
    /// A clause's `every N steps|epochs` (the checker accepts `step(s)` and `epoch(s)`; N at
    /// least 1, 1 when left out).
    pub fn of(every: &crate::syntax::ast::Every) -> Every {
        let n = every.count.as_ref().and_then(int_literal).unwrap_or(1);
        if every.unit.name.starts_with("step") {
            Every::Steps(n)
        } else {
            Every::Epochs(n)
        }
    }
}

/// A count written as an integer literal in the recipe (`every 50 steps`, `epochs = 3`), at
/// least 1.
pub fn int_literal(e: &Expr) -> Option<usize> {
    match e.kind {
        ExprKind::Int(n) => Some(n.max(1) as usize),
        _ => None,
    }
}

/// Why a recipe's settings cannot make a spec.
#[derive(Clone, Debug, PartialEq)]
pub enum SpecError {
    /// Checked, but this version does not execute it.
    NotExecutedYet(String),
    /// A record that lacks what its kind needs (written by hand, not by a stdlib constructor).
    Invalid(String),
}

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpecError::NotExecutedYet(m) | SpecError::Invalid(m) => f.write_str(m),
        }
    }
}

impl From<String> for SpecError {
    fn from(m: String) -> Self {
        SpecError::Invalid(m)
    }
}

/// A record's field, required: the stdlib's constructors give every one.
fn number(record: &Value, what: &str, name: &str) -> Result<f64, String> {
    record.field(name).and_then(|v| v.as_float()).ok_or_else(|| format!("the {what} record has no number `{name}`"))
}

/// An optimiser, as its stdlib constructor describes it: which update rule (`{kind}_update`),
/// its base learning rate, the names of the state it keeps per parameter (torch.optim's, for
/// checkpoints), and the record itself, which the update rule reads its hyper-parameters from.
#[derive(Clone, Debug)]
pub struct Optimizer {
    pub kind: String,
    pub lr: f64,
    pub state: Vec<String>,
    pub record: Value,
}

impl Optimizer {
    pub fn of(record: &Value) -> Result<Optimizer, SpecError> {
        let kind = match record.field("optimizer") {
            Some(Value::Str(k)) => k.to_string(),
            _ => return Err(SpecError::Invalid(format!("the optimiser is {}, not an optimiser record", record.kind()))),
        };
        let state = match record.field("state") {
            Some(Value::Tuple(names)) => names
                .iter()
                .map(|n| match n {
                    Value::Str(s) => Ok(s.to_string()),
                    _ => Err(SpecError::Invalid(format!("the `{kind}` optimiser's `state` names are strings"))),
                })
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(SpecError::NotExecutedYet(format!(
                "the `{kind}` optimiser is checked but not executed yet: its record names no `state` (sgd, adam, adamw, lamb and lars run)"
            )))
            }
        };
        let lr = number(record, "optimiser", "lr")?;
        Ok(Optimizer { kind, lr, state, record: record.clone() })
    }
}

/// A learning-rate schedule (PyTorch's formulas; `train::schedule` computes them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Schedule {
    Constant,
    Step { every: f64, gamma: f64 },
    Exponential { gamma: f64 },
    Cosine { min_lr: f64 },
    WarmupCosine { warmup: f64, min_lr: f64 },
    OneCycle { max_lr: f64, pct_start: f64 },
}

impl Schedule {
    pub fn of(record: &Value) -> Result<Schedule, String> {
        let f = |name: &str| number(record, "schedule", name);
        Ok(match record.field("schedule") {
            Some(Value::Str(k)) => match &*k {
                "constant" => Schedule::Constant,
                "step" => Schedule::Step { every: f("every")?, gamma: f("gamma")? },
                "exponential" => Schedule::Exponential { gamma: f("gamma")? },
                "cosine" => Schedule::Cosine { min_lr: f("min_lr")? },
                "warmup_cosine" => Schedule::WarmupCosine { warmup: f("warmup")?, min_lr: f("min_lr")? },
                "one_cycle" => Schedule::OneCycle { max_lr: f("max_lr")?, pct_start: f("pct_start")? },
                other => return Err(format!("unknown schedule `{other}`")),
            },
            _ => return Err("the schedule record has no `schedule` name".into()),
        })
    }
}

/// Data parallelism (`data_parallel(ranks: ..., bucket_mb: ...)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Parallel {
    /// The ranks the recipe asks for (`None`: `auto`, whatever the launcher started).
    pub ranks: Option<usize>,
    /// Gradient buckets' size cap.
    pub bucket_bytes: usize,
}

impl Parallel {
    pub fn of(record: &Value) -> Result<Parallel, String> {
        let ranks = record.field("ranks").and_then(|r| r.as_int()).map(|r| r.max(1) as usize);
        let mb = number(record, "data_parallel", "bucket_mb")?;
        Ok(Parallel { ranks, bucket_bytes: ((mb * 1024.0 * 1024.0) as usize).max(4) })
    }
}

/// A `train` recipe's settings (its model, data, loss and step stay in `RecipeInfo`: the
/// trainer traces them).
#[derive(Clone, Debug)]
pub struct TrainSpec {
    pub epochs: Option<usize>,
    pub steps: Option<usize>,
    /// The schedule's horizon as the source writes it (not as `--set` changes it): `steps`, or
    /// `epochs` in epochs.
    pub declared_steps: Option<usize>,
    pub declared_epochs: Option<usize>,
    /// Micro-batches per optimiser step (1 without `accumulate`).
    pub accumulate: usize,
    pub clip_grad_norm: Option<f64>,
    pub precision: Precision,
    pub schedule: Option<Schedule>,
    /// The recipe's `parallel`, or the stdlib's `data_parallel()` when it has none (`None`
    /// without `use std.optim`, or for an `evaluate` recipe).
    pub parallel: Option<Parallel>,
    /// Whether the recipe itself asks for data parallelism.
    pub parallel_asked: bool,
    pub log_every: Option<usize>,
    /// `checkpoint "DIR" every ...`.
    pub checkpoint: Option<(String, Every)>,
}

impl TrainSpec {
    pub fn of(info: &RecipeInfo) -> Result<TrainSpec, SpecError> {
        let int = |name: &str| info.field(name).and_then(|v| v.as_int()).map(|n| n.max(0) as usize);
        let declared = |name: &str| {
            info.recipe.entries.iter().find_map(|e| match e {
                RecipeEntry::Field(f) if f.name.name == name => int_literal(&f.value),
                _ => None,
            })
        };
        let parallel_record = info.field("parallel").or(info.defaults.iter().find(|(n, _)| n == "parallel").map(|d| &d.1));
        let parallel = parallel_record.map(Parallel::of).transpose()?;
        Ok(TrainSpec {
            epochs: int("epochs"),
            steps: int("steps"),
            declared_steps: declared("steps"),
            declared_epochs: declared("epochs"),
            accumulate: int("accumulate").unwrap_or(1).max(1),
            clip_grad_norm: info.field("clip_grad_norm").and_then(|v| v.as_float()),
            precision: Precision::of(info.field("precision")),
            schedule: info.field("schedule").map(Schedule::of).transpose()?,
            parallel,
            parallel_asked: info.field("parallel").is_some(),
            log_every: info.recipe.entries.iter().find_map(|e| match e {
                RecipeEntry::Log { every, .. } => every.count.as_ref().and_then(int_literal),
                _ => None,
            }),
            checkpoint: info.recipe.entries.iter().find_map(|e| match e {
                RecipeEntry::Checkpoint { dir, every, .. } => match &dir.kind {
                    ExprKind::Str(s) => Some((s.clone(), Every::of(every))),
                    _ => None,
                },
                _ => None,
            }),
        })
    }
}
