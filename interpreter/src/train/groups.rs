//! Optimiser groups: each trained model with its optimiser. A classic recipe has one
//! (`model = ...`, `optimizer = ...`); a recipe with a custom `step` may have several
//! (`models = (g: ..., d: ...)`, `optimizers = (g: adam(...), d: adam(...))`, matched by name).
//! Also: finding each group's parameters and buffers, and tracing the stdlib's update rule.

use crate::runtime::RuntimeError;
use dlc_language::eval::model::collect_params;
use dlc_language::eval::recipe::RecipeInfo;
use dlc_language::eval::spec::{Optimizer, SpecError};
use dlc_language::eval::tracer::Tracer;
use dlc_language::eval::Value;
use dlc_language::ir::{NodeId, Op};
use dlc_language::syntax::ast::Ident;

fn err(msg: impl Into<String>) -> RuntimeError {
    RuntimeError::Unsupported(msg.into())
}

/// One model and the optimiser that updates it.
pub struct Group {
    /// The name a `step` block uses for the model: `model`, or `g` in `models = (g: ...)`.
    pub name: String,
    /// Prefix of its parameters' checkpoint names: empty for `model = ...`, `g.` for `models`.
    pub prefix: String,
    pub model: Value,
    /// The optimiser (`None` for `evaluate` recipes).
    pub opt: Option<Optimizer>,
}

/// A trainable parameter or a buffer.
pub struct Param {
    pub id: u32,
    pub node: NodeId,
    /// `fc1.weight` (or `d.fc1.weight` in a multi-model recipe): the name in checkpoints.
    pub path: String,
    /// Index of its group.
    pub group: usize,
}

impl Group {
    fn optimizer(&self) -> Result<&Optimizer, RuntimeError> {
        self.opt.as_ref().ok_or_else(|| err(format!("the model `{}` has no optimiser", self.name)))
    }

    /// How many state tensors the optimiser keeps per parameter.
    pub fn n_state(&self) -> Result<usize, RuntimeError> {
        Ok(self.optimizer()?.state.len())
    }

    /// Optimiser state names as torch.optim calls them (used in checkpoints).
    pub fn state_names(&self) -> &[String] {
        self.opt.as_ref().map(|o| o.state.as_slice()).unwrap_or_default()
    }

    /// The base learning rate (before any schedule).
    pub fn lr(&self) -> f64 {
        self.opt.as_ref().map(|o| o.lr).unwrap_or(0.0)
    }

    /// Trace `{kind}_update(param, grad, states..., t, lr, opt: record)` from std.optim.
    /// Returns the nodes of the new parameter and the new states, each in the parameter's dtype.
    pub fn trace_update(
        &self,
        t: &mut Tracer,
        param: NodeId,
        grad: NodeId,
        states: &[NodeId],
        step: NodeId,
        lr: NodeId,
    ) -> Result<Vec<NodeId>, RuntimeError> {
        let opt = self.optimizer()?;
        let kind = &opt.kind;
        let optim = t.modules.iter().position(|m| m.name == "std.optim").ok_or_else(|| err("`use std.optim` is needed to train"))?;
        let rule = t.lookup_global(optim, &format!("{kind}_update")).ok_or_else(|| err(format!("no update rule for `{kind}`")))?;
        let dtype = t.ty(param).dtype;
        let mut args = vec![(None, Value::Tensor(param), Default::default()), (None, Value::Tensor(grad), Default::default())];
        args.extend(states.iter().map(|s| (None, Value::Tensor(*s), Default::default())));
        args.push((None, Value::Tensor(step), Default::default()));
        args.push((None, Value::Tensor(lr), Default::default()));
        args.push((Some(Ident { name: "opt".into(), span: Default::default() }), opt.record.clone(), Default::default()));
        let out = t
            .call(&rule, args, Default::default(), Default::default())
            .map_err(|_| err(format!("the {kind} update failed to trace: {:?}", t.diags.last().map(|d| d.message.clone()))))?;
        let mut nodes = vec![];
        crate::pipeline::leaves(&out, &mut nodes);
        // Keep each new value in its parameter's dtype.
        Ok(nodes.into_iter().map(|n| t.cast(n, dtype, Default::default())).collect())
    }
}

fn optimizer(record: &Value) -> Result<Optimizer, RuntimeError> {
    Optimizer::of(record).map_err(|e| match e {
        SpecError::NotExecutedYet(m) => RuntimeError::NotExecutedYet(m),
        SpecError::Invalid(m) => err(m),
    })
}

/// The recipe's groups: `models` + `optimizers` records matched by name, or `model` + `optimizer`.
pub fn groups_of(info: &RecipeInfo) -> Result<Vec<Group>, RuntimeError> {
    if let Some(Value::Record(models)) = info.field("models").cloned() {
        let opts = info.field("optimizers").cloned();
        let single = info.field("optimizer").cloned();
        let mut groups = vec![];
        for (name, model) in models.iter() {
            let opt = match (opts.as_ref().and_then(|o| o.field(name)), &single) {
                (Some(o), _) => o,
                (None, Some(o)) => o.clone(),
                (None, None) => return Err(err(format!("`optimizers` has no entry for the model `{name}`"))),
            };
            groups.push(Group { name: name.clone(), prefix: format!("{name}."), model: model.clone(), opt: Some(optimizer(&opt)?) });
        }
        return Ok(groups);
    }
    let model = info.field("model").cloned().ok_or_else(|| err("the recipe has no model"))?;
    let opt = info.field("optimizer").map(optimizer).transpose()?;
    Ok(vec![Group { name: "model".into(), prefix: String::new(), model, opt }])
}

/// Every distinct parameter and buffer of the groups' models, in field order.
pub fn params_of(t: &Tracer, groups: &[Group]) -> (Vec<Param>, Vec<Param>) {
    let mut params: Vec<Param> = vec![];
    let mut buffers: Vec<Param> = vec![];
    for (gi, g) in groups.iter().enumerate() {
        let mut found = vec![];
        collect_params(&g.model, "", &mut found);
        for (path, v) in found {
            let Value::Tensor(node) = v else { continue };
            let Op::Param(id) = t.graph.node(node).op else { continue };
            if params.iter().chain(buffers.iter()).any(|p| p.id == id) {
                continue;
            }
            let p = Param { id, node, path: format!("{}{path}", g.prefix), group: gi };
            if t.graph.params[id as usize].trainable {
                params.push(p);
            } else {
                buffers.push(p);
            }
        }
    }
    (params, buffers)
}
