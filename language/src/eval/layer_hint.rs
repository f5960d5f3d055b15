//! A matrix product or a convolution fails because a layer's weight, sized by the layer's
//! hyper-parameters, does not fit the input: the line to change is where the layer is built
//! (`fc2 = Linear(128, 10)`), not the forward pass nor the library line of the product, so the
//! report points there and says the value that fits (`Linear(64, 10)`).

use super::tracer::Tracer;
use super::value::{ModelInst, Value};
use super::Reported;
use crate::diag::Diagnostic;
use crate::ir::{NodeId, Op};
use crate::span::Span;
use crate::syntax::ast::{BinOp, DimExpr, Expr, ExprKind, TypeKind};
use crate::types::rules::RuleError;
use std::rc::Rc;

/// What the failed product needed of its weight operand.
pub struct LayerMismatch {
    /// The weight operand, and its axis whose size must match the input.
    pub weight: NodeId,
    pub axis: usize,
    /// The size that axis must have.
    pub needed: i64,
    /// The input's size as the user counts it, and what it counts (`features`, `channels`).
    pub input: i64,
    pub unit: &'static str,
}

impl Tracer {
    /// Report a shape rule's error, at the layer's construction when the weight is a layer's
    /// parameter whose size came from a hyper-parameter; as the rule says otherwise.
    fn layer_error(&mut self, e: RuleError, span: Span, m: LayerMismatch) -> Reported {
        match self.layer_hint(e.code, &m) {
            Some(d) => self.error(d),
            None => self.rule_error(e, span),
        }
    }

    /// `x @ weight.T` in a layer, `x`'s last size `k`: the layer's `in_features` should be `k`.
    pub fn matmul_error(&mut self, e: RuleError, span: Span, k: i64, weight: NodeId, rank: usize) -> Reported {
        let m = LayerMismatch { weight, axis: rank.saturating_sub(2), needed: k, input: k, unit: "features" };
        self.layer_error(e, span, m)
    }

    /// `conv2d(x, weight)` in a layer, `x` with `channels` channels that the weight's do not fit:
    /// the layer's `in_channels` should be `channels`.
    pub fn conv_error(&mut self, e: RuleError, span: Span, channels: Option<i64>, weight: NodeId, groups: i64) -> Reported {
        let per_group = channels.filter(|c| groups > 0 && c % groups == 0).map(|c| c / groups);
        let weight_channels = self.ty(weight).shape.get(1).and_then(|d| d.as_known());
        match (channels, per_group) {
            (Some(c), Some(needed)) if e.code == "E0306" && weight_channels.is_some_and(|w| w != needed) => {
                self.layer_error(e, span, LayerMismatch { weight, axis: 1, needed, input: c, unit: "channels" })
            }
            _ => self.rule_error(e, span),
        }
    }

    fn layer_hint(&self, code: &'static str, m: &LayerMismatch) -> Option<Diagnostic> {
        let (param, axis) = self.param_axis(m.weight, m.axis)?;
        let inst = self.ctx.instance.clone()?;
        let (owner, field) = find_owner(&inst, param)?;
        // A layer built inside the standard library is not a line the user can change.
        if self.is_std_file(owner.span) {
            return None;
        }
        let decl = owner.decl.fields.iter().find(|f| f.name.name == field)?;
        let dim = param_dim(&decl.value, axis)?;
        let (hparam, value) = resolve(&owner, &dim, m.needed, 0)?;
        let current = owner.hparams.iter().find(|(n, _)| *n == hparam)?.1.as_int()?;
        let layer = &owner.decl.name.name;
        let who = match owner.path.as_str() {
            "" => format!("this `{layer}`"),
            path => format!("`{path}`"),
        };
        // "1 channel", "64 channels".
        let unit = |n: i64| if n == 1 { m.unit.trim_end_matches('s') } else { m.unit };
        let expects = format!("expects {hparam} = {current}, but its input has {} {}", m.input, unit(m.input));
        let fix = match constructor(&owner, &hparam, value) {
            Some(call) => format!("change to `{call}`"),
            None => format!("change `{hparam}` to {value}"),
        };
        Some(
            Diagnostic::error(code, format!("{who} {expects}"), owner.span)
                .with_label(format!("this layer {expects}; {fix}"))
                .with_help(format!("{fix}, or give it an input with {current} {}", unit(current))),
        )
    }

    /// The parameter node under `n` and the axis of it that `axis` of `n` is, through transposes
    /// (`weight.T`) and casts.
    fn param_axis(&self, mut n: NodeId, mut axis: usize) -> Option<(NodeId, usize)> {
        for _ in 0..8 {
            let node = self.graph.node(n);
            match &node.op {
                Op::Param(_) => return Some((n, axis)),
                Op::Permute(perm) => axis = *perm.get(axis)?,
                Op::Cast => {}
                _ => return None,
            }
            n = *node.src.first()?;
        }
        None
    }
}

/// The model instance (this one or one inside it) that holds `param` as a field, and the field.
fn find_owner(inst: &Rc<ModelInst>, param: NodeId) -> Option<(Rc<ModelInst>, String)> {
    for (name, v) in &inst.fields {
        match v {
            Value::Tensor(n) if *n == param => return Some((inst.clone(), name.clone())),
            _ => {
                if let Some(found) = models_in(v).find_map(|m| find_owner(&m, param)) {
                    return Some(found);
                }
            }
        }
    }
    None
}

/// The models a field holds: itself, or those in a tuple or record (`Sequential`'s layers).
fn models_in(v: &Value) -> Box<dyn Iterator<Item = Rc<ModelInst>> + '_> {
    match v {
        Value::Model(m) => Box::new(std::iter::once(m.clone())),
        Value::Tuple(items) => Box::new(items.iter().flat_map(models_in)),
        Value::Record(items) => Box::new(items.iter().flat_map(|(_, x)| models_in(x))),
        _ => Box::new(std::iter::empty()),
    }
}

/// The size name at `axis` of a `param(f32[out_features, in_features], ...)` declaration.
fn param_dim(e: &Expr, axis: usize) -> Option<String> {
    let ExprKind::Call(callee, args) = &e.kind else { return None };
    let ExprKind::Name(f) = &callee.kind else { return None };
    if f != "param" && f != "buffer" {
        return None;
    }
    let ExprKind::Type(ty) = &args.first()?.value.kind else { return None };
    let TypeKind::Tensor { dims: Some(dims), .. } = &ty.kind else { return None };
    match dims.get(axis)? {
        DimExpr::Name(n, _) => Some(n.clone()),
        _ => None,
    }
}

/// The hyper-parameter a size comes from and the value that gives it `needed`: the
/// hyper-parameter itself, or a field computed from it (`cin = in_channels // groups`).
fn resolve(owner: &ModelInst, name: &str, needed: i64, depth: usize) -> Option<(String, i64)> {
    if owner.decl.params.iter().any(|p| p.name.name == name) {
        return Some((name.to_string(), needed));
    }
    if depth > 4 {
        return None;
    }
    let field = owner.decl.fields.iter().find(|f| f.name.name == name)?;
    match &field.value.kind {
        ExprKind::Name(inner) => resolve(owner, inner, needed, depth + 1),
        ExprKind::Binary(BinOp::FloorDiv, a, b) => {
            let ExprKind::Name(inner) = &a.kind else { return None };
            let divisor = match &b.kind {
                ExprKind::Int(v) => *v,
                ExprKind::Name(n) => owner.lookup(n)?.as_int()?,
                _ => return None,
            };
            resolve(owner, inner, needed.checked_mul(divisor)?, depth + 1)
        }
        _ => None,
    }
}

/// The layer's construction with `hparam` changed: its required hyper-parameters in order, and
/// those with defaults only where they differ from a literal default or are the one changed.
fn constructor(owner: &ModelInst, hparam: &str, value: i64) -> Option<String> {
    let mut args = vec![];
    for p in &owner.decl.params {
        let name = p.name.name.as_str();
        // A hyper-parameter that a field of its name replaced (`bias`) may have no value here.
        let current = owner.hparams.iter().find(|(n, _)| n == name).map(|(_, v)| v);
        let shown = if name == hparam { Some(value.to_string()) } else { current.and_then(literal) };
        match &p.default {
            None => args.push(shown?),
            Some(_) if name == hparam => args.push(format!("{name}: {}", shown?)),
            Some(d) => {
                let default = match &d.kind {
                    ExprKind::Int(v) => Some(v.to_string()),
                    ExprKind::Float(v) => Some(format!("{v:?}")),
                    ExprKind::Bool(v) => Some(v.to_string()),
                    _ => None,
                };
                if let (Some(default), Some(shown)) = (default, shown) {
                    if default != shown {
                        args.push(format!("{name}: {shown}"));
                    }
                }
            }
        }
    }
    Some(format!("{}({})", owner.decl.name.name, args.join(", ")))
}

fn literal(v: &Value) -> Option<String> {
    match v {
        Value::Int(i) => Some(i.to_string()),
        Value::Float(f) => Some(format!("{f:?}")),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}
