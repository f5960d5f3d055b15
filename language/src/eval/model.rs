//! Model instantiation: hyper-parameters are bound like function arguments, then fields are
//! evaluated in order (each sees the hyper-parameters and the fields before it). Parameters created
//! by `param(...)` are named by the path of fields that leads to them (`fc1.weight`).

use super::call::Args;
use super::tracer::Tracer;
use super::value::{Ctx, ModelInst, Value};
use super::R;
use crate::diag::Diagnostic;
use crate::ir::NodeId;
use crate::span::Span;
use crate::syntax::ast::ModelDecl;
use std::collections::HashMap;
use std::rc::Rc;

impl Tracer {
    pub fn instantiate(&mut self, decl: Rc<ModelDecl>, module: usize, args: Args, span: Span) -> R<Value> {
        let name = decl.name.name.clone();
        self.call_stack.push((name.clone(), span));
        let ctx = Ctx { module, instance: None, env: vec![] };
        let r = self.in_frame(ctx, |t| {
            let mut dims = super::annot::DimEnv::default();
            let hparams = t.bind_params(&decl.params, args, &name, span, &mut dims)?;
            let mut fields = vec![];
            for f in &decl.fields {
                if decl.params.iter().any(|p| p.name.name == f.name.name) || fields.iter().any(|(n, _): &(String, Value)| *n == f.name.name)
                {
                    return Err(t.error(
                        Diagnostic::error("E0203", format!("`{}` is defined twice in model `{name}`", f.name.name), f.name.span)
                            .with_label("defined again here"),
                    ));
                }
                t.path.push(f.name.name.clone());
                let v = t.eval(&f.value);
                t.path.pop();
                let v = v?;
                t.bind(&f.name.name, v.clone());
                fields.push((f.name.name.clone(), v));
            }
            Ok(Value::Model(Rc::new(ModelInst { decl: decl.clone(), module, path: t.path.join("."), hparams, fields, span })))
        });
        self.call_stack.pop();
        r
    }
}

/// Every parameter tensor reachable from a model value, with its path, depth-first in field order.
pub fn collect_params(v: &Value, prefix: &str, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Model(m) => {
            for (n, f) in &m.fields {
                let p = if prefix.is_empty() { n.clone() } else { format!("{prefix}.{n}") };
                collect_params(f, &p, out);
            }
        }
        Value::Tensor(_) => out.push((prefix.to_string(), v.clone())),
        Value::Tuple(items) => {
            for (i, x) in items.iter().enumerate() {
                collect_params(x, &format!("{prefix}.{i}"), out);
            }
        }
        Value::Record(items) => {
            for (n, x) in items.iter() {
                collect_params(x, &format!("{prefix}.{n}"), out);
            }
        }
        _ => {}
    }
}

/// The same model with some tensors replaced (`map`: old node to new node), sub-models rebuilt
/// as needed. A custom `step` uses it after `update m by ...`, so that later uses of `m` in the
/// step see the updated parameters, as they would after `optimizer.step()` in PyTorch.
pub fn substitute(v: &Value, map: &HashMap<NodeId, NodeId>) -> Value {
    match v {
        Value::Tensor(n) => Value::Tensor(*map.get(n).unwrap_or(n)),
        Value::Model(m) => Value::Model(Rc::new(ModelInst {
            decl: m.decl.clone(),
            module: m.module,
            path: m.path.clone(),
            hparams: m.hparams.clone(),
            fields: m.fields.iter().map(|(n, f)| (n.clone(), substitute(f, map))).collect(),
            span: m.span,
        })),
        Value::Tuple(items) => Value::Tuple(Rc::new(items.iter().map(|x| substitute(x, map)).collect())),
        Value::Record(items) => Value::Record(Rc::new(items.iter().map(|(n, x)| (n.clone(), substitute(x, map))).collect())),
        other => other.clone(),
    }
}
