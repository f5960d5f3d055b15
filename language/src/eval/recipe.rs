//! `train`, `evaluate` and `infer` recipes: every field validated (unknown names get "did you
//! mean"), the loss and metrics traced with the data element bound, custom `step` blocks checked.

use super::tracer::Tracer;
use super::value::{Pipeline, Value};
use super::R;
use crate::diag::{did_you_mean, Diagnostic};
use crate::span::Span;
use crate::syntax::ast::*;
use std::rc::Rc;

/// A checked recipe: its fields' values, for `dlc check`'s summary (and the trainer, later).
#[derive(Debug, Clone)]
pub struct RecipeInfo {
    pub kind: RecipeKind,
    pub name: Option<String>,
    pub fields: Vec<(String, Value)>,
    /// The source, for the trainer to trace the loss and metrics again at each batch shape.
    pub recipe: Rc<Recipe>,
    pub module: usize,
    /// What the stdlib's constructors give fields the recipe leaves out, so that their defaults
    /// are written once, in DL: `parallel` is `data_parallel()` for a `train` recipe.
    pub defaults: Vec<(String, Value)>,
}

impl RecipeInfo {
    pub fn field(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

/// What a field accepts, for validation and for docs/language.md.
#[derive(Clone, Copy, PartialEq)]
enum Want {
    Model,
    Models,
    Pipeline,
    ScalarTensor,
    Optimizer,
    Optimizers,
    Schedule,
    PositiveInt,
    Int,
    Number,
    Precision,
    Device,
    Parallel,
    Str,
    Any,
    /// A model or a function (what an `infer` block applies).
    Callable,
}

const TRAIN_FIELDS: &[(&str, Want)] = &[
    ("model", Want::Model),
    ("models", Want::Models),
    ("data", Want::Pipeline),
    ("loss", Want::ScalarTensor),
    ("optimizer", Want::Optimizer),
    ("optimizers", Want::Optimizers),
    ("schedule", Want::Schedule),
    ("epochs", Want::PositiveInt),
    ("steps", Want::PositiveInt),
    ("precision", Want::Precision),
    ("device", Want::Device),
    ("parallel", Want::Parallel),
    ("accumulate", Want::PositiveInt),
    ("seed", Want::Int),
    ("clip_grad_norm", Want::Number),
    ("init", Want::Str),
];

const EVAL_FIELDS: &[(&str, Want)] = &[
    ("model", Want::Model),
    ("data", Want::Pipeline),
    ("checkpoint", Want::Str),
    ("metrics", Want::Any),
    ("precision", Want::Precision),
    ("device", Want::Device),
];

const INFER_FIELDS: &[(&str, Want)] = &[
    ("model", Want::Callable),
    ("checkpoint", Want::Str),
    ("input", Want::Any),
    ("output", Want::Str),
    // Autoregressive sampling from a language model: `input` is a text prompt, `vocab` the text
    // file whose characters are the vocabulary (as for the `text` source).
    ("generate", Want::PositiveInt),
    ("vocab", Want::Str),
    ("context", Want::PositiveInt),
    ("temperature", Want::Number),
    ("seed", Want::Int),
    ("precision", Want::Precision),
    ("device", Want::Device),
];

/// The fields a recipe of `kind` accepts, in the table's order (the language server completes
/// them).
pub fn field_names(kind: RecipeKind) -> Vec<&'static str> {
    let table = match kind {
        RecipeKind::Train => TRAIN_FIELDS,
        RecipeKind::Evaluate => EVAL_FIELDS,
        RecipeKind::Infer => INFER_FIELDS,
    };
    table.iter().map(|(n, _)| *n).collect()
}

/// Names a recipe field evaluates to when written as a bare word (`device = cpu`).
const SYMBOLS: &[&str] = &["cpu", "cuda", "tf32"];

/// The order recipe fields are checked in: models, data, the rest, then what reads the data
/// element (loss, metrics, input).
fn field_rank(n: &str) -> u8 {
    match n {
        "model" | "models" => 0,
        "data" => 1,
        "loss" | "metrics" | "input" => 3,
        _ => 2,
    }
}

impl Tracer {
    pub fn check_recipe(&mut self, r: &Rc<Recipe>) -> R<()> {
        let table = match r.kind {
            RecipeKind::Train => TRAIN_FIELDS,
            RecipeKind::Evaluate => EVAL_FIELDS,
            RecipeKind::Infer => INFER_FIELDS,
        };
        let depth = self.ctx.env.len();
        // Fields in a useful order: models first (the loss refers to them), then data, then the rest.
        let (mut fields, mut ok) = self.known_fields(r, table);
        fields.sort_by_key(|f| field_rank(&f.name.name));
        let mut info = RecipeInfo {
            kind: r.kind,
            name: r.name.as_ref().map(|n| n.name.clone()),
            fields: vec![],
            recipe: r.clone(),
            module: self.ctx.module,
            defaults: vec![],
        };
        let mut silenced = vec![];
        let pipeline = self.field_values(&fields, table, &mut info, &mut ok, &mut silenced);
        ok &= self.required_fields(r, table);
        if let Some(p) = &pipeline {
            // Bound already when a field of rank 3 (loss, metrics, input) was checked.
            if !fields.iter().any(|f| field_rank(&f.name.name) == 3) {
                self.bind_element(&p.elem.clone());
            }
        }
        ok &= self.recipe_clauses(r, &pipeline);
        self.ctx.env.truncate(depth);
        for n in &silenced {
            self.poisoned.remove(n);
        }
        if ok && r.kind == RecipeKind::Train {
            if let Some(parallel) = self.stdlib_call("std.optim", "data_parallel") {
                info.defaults.push(("parallel".into(), parallel));
            }
        }
        if ok {
            self.recipes.push(info);
        }
        if ok {
            Ok(())
        } else {
            Err(super::Reported)
        }
    }

    /// The recipe's fields that its kind accepts, each once (E0405 for a second, E0401 for an
    /// unknown one), and whether there were none of those errors.
    fn known_fields<'r>(&mut self, r: &'r Recipe, table: &[(&str, Want)]) -> (Vec<&'r Field>, bool) {
        let kw = r.kind.keyword();
        let mut ok = true;
        let mut fields: Vec<&Field> = vec![];
        for e in &r.entries {
            if let RecipeEntry::Field(f) = e {
                if let Some(prev) = fields.iter().find(|p| p.name.name == f.name.name) {
                    let d = Diagnostic::error("E0405", format!("`{}` is given twice in this `{kw}` recipe", f.name.name), f.name.span)
                        .with_label("given again here")
                        .with_secondary(prev.name.span, "first given here");
                    self.error(d);
                    ok = false;
                    continue;
                }
                if !table.iter().any(|(n, _)| *n == f.name.name) {
                    let names: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
                    let mut d = Diagnostic::error(
                        "E0401",
                        format!(
                            "unknown field `{}` in {} `{kw}` recipe",
                            f.name.name,
                            if kw.starts_with('e') || kw.starts_with('i') { "an" } else { "a" }
                        ),
                        f.name.span,
                    )
                    .with_label("unknown field");
                    d = match did_you_mean(&f.name.name, names.iter().copied()) {
                        Some(s) => d.with_help(format!("did you mean `{s}`?")),
                        None => d.with_note(format!("`{kw}` accepts: {}", names.join(", "))),
                    };
                    self.error(d);
                    ok = false;
                    continue;
                }
                fields.push(f);
            }
        }
        (fields, ok)
    }

    /// Each field's value, checked against what the field wants, into `info`; binds the models
    /// and, before the first field that reads it, the data element. Returns the data pipeline.
    /// Names a failed field would have bound go to `silenced`.
    fn field_values(
        &mut self,
        fields: &[&Field],
        table: &[(&str, Want)],
        info: &mut RecipeInfo,
        ok: &mut bool,
        silenced: &mut Vec<String>,
    ) -> Option<Rc<Pipeline>> {
        let mut pipeline: Option<Rc<Pipeline>> = None;
        let mut elem_bound = false;
        for f in fields {
            let want = table.iter().find(|(n, _)| *n == f.name.name).map(|x| x.1).unwrap_or(Want::Any);
            if field_rank(&f.name.name) == 3 && !elem_bound {
                if let Some(p) = &pipeline {
                    self.bind_element(&p.elem.clone());
                }
                elem_bound = true;
            }
            let v = match self.recipe_value(&f.value) {
                Ok(v) => v,
                Err(_) => {
                    // Its error is reported: the uses of the names it would bind are silent.
                    let names: Vec<String> = match (f.name.name.as_str(), &f.value.kind) {
                        ("model", _) => vec!["model".into()],
                        ("models", ExprKind::Record(items)) => items.iter().map(|(n, _)| n.name.clone()).collect(),
                        _ => vec![],
                    };
                    // Poisoned for this recipe only (the caller lifts it): a later `model` is another's.
                    silenced.extend(names.into_iter().filter(|n| self.poisoned.insert(n.clone())));
                    *ok = false;
                    continue;
                }
            };
            if self.check_want(&f.name.name, want, &v, f.value.span).is_err() {
                *ok = false;
                continue;
            }
            info.fields.push((f.name.name.clone(), v.clone()));
            match f.name.name.as_str() {
                "model" => self.bind("model", v),
                "models" => {
                    if let Value::Record(items) = &v {
                        for (n, m) in items.iter() {
                            self.bind(n, m.clone());
                        }
                    }
                }
                "data" => {
                    if let Value::Pipeline(p) = v {
                        pipeline = Some(p)
                    }
                }
                _ => {}
            }
        }
        pipeline
    }

    /// E0402 for each field the recipe's kind needs and it lacks; true when none is missing.
    fn required_fields(&mut self, r: &Recipe, table: &[(&str, Want)]) -> bool {
        let kw = r.kind.keyword();
        let mut ok = true;
        // A misspelt field (`optimiser`) already got "did you mean `optimizer`?": not missing too.
        let names: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
        let meant = |f: &Field| match names.contains(&f.name.name.as_str()) {
            true => Some(f.name.name.clone()),
            false => did_you_mean(&f.name.name, names.iter().copied()),
        };
        let has = |n: &str| r.entries.iter().any(|e| matches!(e, RecipeEntry::Field(f) if meant(f).as_deref() == Some(n)));
        let has_step = r.entries.iter().any(|e| matches!(e, RecipeEntry::Step { .. }));
        let mut required: Vec<(&str, &str)> = vec![];
        match r.kind {
            RecipeKind::Train => {
                required.push(("data", "the data pipeline to train on"));
                if has_step {
                    if !has("model") && !has("models") {
                        required.push(("models", "the models the step updates"));
                    }
                    if !has("optimizer") && !has("optimizers") {
                        required.push(("optimizers", "an optimiser per model"));
                    }
                } else {
                    required.push(("model", "the model to train"));
                    required.push(("loss", "what to minimise, e.g. `loss = cross_entropy(model(x), y)`"));
                    required.push(("optimizer", "e.g. `optimizer = adamw(lr: 1e-3)`"));
                }
                if !has("epochs") && !has("steps") {
                    required.push(("epochs", "how long to train (`epochs = 3` or `steps = 1000`)"));
                }
            }
            RecipeKind::Evaluate => {
                required.push(("model", "the model to evaluate"));
                required.push(("data", "the data to evaluate on"));
            }
            RecipeKind::Infer => {
                required.push(("model", "the model to run"));
                required.push(("input", "the inputs"));
                if has("generate") {
                    required.push(("vocab", "the text file whose characters are the vocabulary, e.g. the training text"));
                    required.push(("context", "the longest window the model takes, e.g. its `block`"));
                }
            }
        }
        for (n, why) in required {
            if !has(n) {
                let head = r.name.as_ref().map(|n| r.span.to(n.span)).unwrap_or(r.span);
                let head = Span { end: head.start + kw.len() as u32, ..head };
                let d = Diagnostic::error("E0402", format!("this `{kw}` recipe has no `{n}`"), head)
                    .with_label(format!("`{n}` missing"))
                    .with_help(format!("add `{n} = ...`: {why}"));
                self.error(d);
                ok = false;
            }
        }
        ok
    }

    /// The recipe's clauses: evaluations, checkpoints, logging and a custom `step`.
    fn recipe_clauses(&mut self, r: &Recipe, pipeline: &Option<Rc<Pipeline>>) -> bool {
        let mut ok = true;
        for e in &r.entries {
            let res = match e {
                RecipeEntry::Field(_) => Ok(()),
                RecipeEntry::Evaluate { data, every, body, .. } => self.check_evaluate_clause(data, every, body),
                RecipeEntry::Checkpoint { dir, every, .. } => {
                    let v = self.eval(dir);
                    match v {
                        Ok(Value::Str(_)) => self.check_every(every),
                        Ok(other) => self.err(
                            "E0403",
                            format!("`checkpoint` needs a directory string, found {}", other.kind()),
                            dir.span,
                            "expected a string",
                        ),
                        Err(e) => Err(e),
                    }
                }
                RecipeEntry::Log { every, .. } => self.check_every(every),
                RecipeEntry::Step { params, body, span } => self.check_step(params, body, pipeline.clone(), *span),
            };
            if res.is_err() {
                ok = false;
            }
        }
        ok
    }

    /// A stdlib function called with no arguments (its defaults), when its module is loaded.
    fn stdlib_call(&mut self, module: &str, name: &str) -> Option<Value> {
        let m = self.modules.iter().position(|m| m.name == module)?;
        let f = self.lookup_global(m, name)?;
        self.call(&f, vec![], Span::default(), Span::default()).ok()
    }

    /// Bare words like `cpu` or `tf32` in a recipe are symbols, not names.
    fn recipe_value(&mut self, e: &Expr) -> R<Value> {
        if let ExprKind::Name(n) = &e.kind {
            if SYMBOLS.contains(&n.as_str()) && self.lookup(n).is_none() {
                return Ok(Value::Str(n.as_str().into()));
            }
        }
        self.eval(e)
    }

    /// Bind the names a data element provides: `x`, `y` for a pair, the field names of a record,
    /// `x` for a single tensor; `batch` is always the whole element.
    pub fn bind_element(&mut self, elem: &Value) {
        match elem {
            Value::Tuple(items) if items.len() == 2 => {
                self.bind("x", items[0].clone());
                self.bind("y", items[1].clone());
            }
            Value::Record(items) => {
                for (n, v) in items.iter() {
                    self.bind(n, v.clone());
                }
            }
            Value::Tensor(_) => self.bind("x", elem.clone()),
            _ => {}
        }
        self.bind("batch", elem.clone());
    }

    fn check_want(&mut self, field: &str, want: Want, v: &Value, span: Span) -> R<()> {
        let bad = |t: &mut Tracer, what: &str| -> R<()> {
            t.err("E0403", format!("`{field}` should be {what}, found {}", v.kind()), span, format!("this is {}", v.kind()))
        };
        let has_key = |k: &str| v.field(k).is_some();
        match want {
            Want::Model => {
                if matches!(v, Value::Model(_)) {
                    Ok(())
                } else {
                    bad(self, "a model, like `Mlp()`")
                }
            }
            Want::Callable => {
                if matches!(v, Value::Model(_) | Value::Func(_)) {
                    Ok(())
                } else {
                    bad(self, "a model or a function, like `Mlp()` or `gelu`")
                }
            }
            Want::Models => match v {
                Value::Record(items) if items.iter().all(|(_, m)| matches!(m, Value::Model(_))) => Ok(()),
                _ => bad(self, "a record of models, like `(g: Generator(), d: Discriminator())`"),
            },
            Want::Pipeline => {
                if matches!(v, Value::Pipeline(_)) {
                    Ok(())
                } else {
                    bad(self, "a data pipeline")
                }
            }
            Want::ScalarTensor => match v {
                Value::Tensor(n) => {
                    let ty = self.ty(*n);
                    if ty.rank() == 0 && ty.dtype.is_float() {
                        Ok(())
                    } else {
                        Err(self.error(
                            Diagnostic::error("E0303", format!("`{field}` must be a float scalar (a 0-d tensor), found {ty}"), span)
                                .with_label(format!("this is {ty}"))
                                .with_help("reduce it, e.g. with `mean(...)`"),
                        ))
                    }
                }
                _ => bad(self, "a scalar tensor expression"),
            },
            Want::Optimizer => {
                if has_key("optimizer") {
                    Ok(())
                } else {
                    bad(self, "an optimiser, like `adamw(lr: 1e-3)`")
                }
            }
            Want::Optimizers => match v {
                Value::Record(items) if items.iter().all(|(_, o)| o.field("optimizer").is_some()) => Ok(()),
                _ => bad(self, "a record of optimisers, like `(g: adam(), d: adam())`"),
            },
            Want::Schedule => {
                if has_key("schedule") {
                    Ok(())
                } else {
                    bad(self, "a schedule, like `cosine()`")
                }
            }
            Want::Parallel => {
                if has_key("parallel") {
                    Ok(())
                } else {
                    bad(self, "a parallelism plan, like `data_parallel(ranks: auto)`")
                }
            }
            Want::PositiveInt => match v.as_int() {
                Some(i) if i >= 1 => Ok(()),
                Some(i) => self.err("E0403", format!("`{field}` must be at least 1, found {i}"), span, "too small"),
                None => bad(self, "a positive int"),
            },
            Want::Int => {
                if v.as_int().is_some() {
                    Ok(())
                } else {
                    bad(self, "an int")
                }
            }
            Want::Number => {
                if v.as_float().is_some() {
                    Ok(())
                } else {
                    bad(self, "a number")
                }
            }
            Want::Str => {
                if matches!(v, Value::Str(_)) {
                    Ok(())
                } else {
                    bad(self, "a string")
                }
            }
            Want::Precision => match v {
                Value::DType(crate::types::DType::F32 | crate::types::DType::BF16 | crate::types::DType::F16) => Ok(()),
                Value::Str(s) if &**s == "tf32" => Ok(()),
                _ => bad(self, "one of `f32`, `bf16`, `f16`, `tf32`"),
            },
            Want::Device => match v {
                Value::Auto => Ok(()),
                Value::Str(s) if &**s == "cpu" || &**s == "cuda" => Ok(()),
                _ => bad(self, "one of `auto`, `cpu`, `cuda`"),
            },
            Want::Any => Ok(()),
        }
    }

    fn check_every(&mut self, every: &Every) -> R<()> {
        let units = ["epoch", "epochs", "step", "steps"];
        if !units.contains(&every.unit.name.as_str()) {
            let mut d = Diagnostic::error("E0403", format!("unknown unit `{}` after `every`", every.unit.name), every.unit.span)
                .with_label("expected `epoch` or `steps`");
            if let Some(s) = did_you_mean(&every.unit.name, units) {
                d = d.with_help(format!("did you mean `{s}`?"));
            }
            return Err(self.error(d));
        }
        if let Some(c) = &every.count {
            if let ExprKind::Int(n) = c.kind {
                if n < 1 {
                    return self.err("E0403", format!("`every` needs a count of at least 1, found {n}"), c.span, "too small");
                }
            }
        }
        Ok(())
    }

    fn check_evaluate_clause(&mut self, data: &Expr, every: &Every, body: &Expr) -> R<()> {
        self.check_every(every)?;
        let v = self.eval(data)?;
        let Value::Pipeline(p) = v else {
            return self.err("E0403", format!("`evaluate` needs a data pipeline, found {}", v.kind()), data.span, "not a pipeline");
        };
        let depth = self.ctx.env.len();
        self.bind_element(&p.elem.clone());
        let r = self.eval(body).map(|_| ());
        self.ctx.env.truncate(depth);
        r
    }

    fn check_step(&mut self, params: &[Param], body: &[Stmt], pipeline: Option<Rc<Pipeline>>, span: Span) -> R<()> {
        let depth = self.ctx.env.len();
        if let (Some(p), Some(first)) = (&pipeline, params.first()) {
            self.bind(&first.name.name, p.elem.clone());
        } else if let Some(first) = params.first() {
            return self.err("E0402", "a `step` block needs `data` in its recipe to know its input", first.span, "no data");
        }
        let r = (|| -> R<()> {
            for s in body {
                match s {
                    Stmt::Let(n, e) => {
                        let v = self.eval(e)?;
                        self.bind(&n.name, v);
                    }
                    Stmt::Expr(e) => {
                        self.eval(e)?;
                    }
                    Stmt::Log(e, _) => {
                        self.eval(e)?;
                    }
                    Stmt::Update { target, grads, span } => {
                        let t = self.eval(target)?;
                        let g = self.eval(grads)?;
                        match (&t, &g) {
                            (Value::Model(m), Value::Grads(gm, _)) if Rc::ptr_eq(m, gm) => {}
                            (Value::Model(_), Value::Grads(..)) => {
                                return self.err(
                                    "E0403",
                                    "these gradients are for a different model",
                                    grads.span,
                                    "gradients of another model",
                                );
                            }
                            (Value::Model(_), other) => {
                                return self.err(
                                    "E0403",
                                    format!("`update ... by` needs gradients from `grad(loss, model)`, found {}", other.kind()),
                                    grads.span,
                                    "not gradients",
                                );
                            }
                            (other, _) => {
                                return self.err("E0403", format!("`update` needs a model, found {}", other.kind()), *span, "not a model");
                            }
                        }
                    }
                }
            }
            Ok(())
        })();
        self.ctx.env.truncate(depth);
        let _ = span;
        r
    }
}
