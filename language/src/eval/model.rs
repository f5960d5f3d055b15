//! Model instantiation: hyper-parameters are bound like function arguments, then fields are
//! evaluated in order (each sees the hyper-parameters and the fields before it). Parameters created
//! by `param(...)` are named by the path of fields that leads to them (`fc1.weight`), the names
//! PyTorch's `state_dict()` gives the same modules: a field may replace a hyper-parameter of its
//! name (`Linear`'s `bias`), and a spread field (`...layers = seq`) names its items directly under
//! the model (`0.weight`, as `torch.nn.Sequential`).

use super::call::Args;
use super::tracer::Tracer;
use super::value::{Ctx, ModelInst, Value};
use super::R;
use crate::diag::Diagnostic;
use crate::ir::NodeId;
use crate::span::Span;
use crate::syntax::ast::{Field, ModelDecl};
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
                // A field may replace a hyper-parameter of its name (its own expression still
                // reads the hyper-parameter), as PyTorch's `self.bias = Parameter(...) if bias`.
                if fields.iter().any(|(n, _): &(String, Value)| *n == f.name.name) {
                    return Err(t.error(
                        Diagnostic::error("E0203", format!("`{}` is defined twice in model `{name}`", f.name.name), f.name.span)
                            .with_label("defined again here"),
                    ));
                }
                t.path.push(f.name.name.clone());
                let v = t.eval(&f.value);
                t.path.pop();
                let v = v?;
                if f.spread {
                    t.check_spread(&decl, f, &v, &fields)?;
                }
                t.bind(&f.name.name, v.clone());
                fields.push((f.name.name.clone(), v));
            }
            Ok(Value::Model(Rc::new(ModelInst { decl: decl.clone(), module, path: t.path.join("."), hparams, fields, span })))
        });
        self.call_stack.pop();
        r
    }

    /// A spread field holds a tuple or a record, and a record's names are not other fields'.
    fn check_spread(&mut self, decl: &ModelDecl, f: &Field, v: &Value, fields: &[(String, Value)]) -> R<()> {
        let names: Vec<String> = match v {
            Value::Tuple(items) => (0..items.len()).map(|i| i.to_string()).collect(),
            Value::Record(items) => items.iter().map(|(n, _)| n.clone()).collect(),
            other => {
                let msg = format!("a spread field `...{}` holds a tuple or a record of layers, found {}", f.name.name, other.kind());
                return Err(self.error(Diagnostic::error("E0310", msg, f.value.span).with_label("not a tuple or a record")));
            }
        };
        let others = fields.iter().map(|(n, _)| n).chain(decl.fields.iter().skip(fields.len() + 1).map(|g| &g.name.name));
        for other in others {
            if names.contains(other) {
                let msg = format!("`{other}` is defined twice in model `{}`: a field and an item of `...{}`", decl.name.name, f.name.name);
                return Err(self.error(Diagnostic::error("E0203", msg, f.name.span).with_label("spread here")));
            }
        }
        Ok(())
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// Every parameter tensor reachable from a model value, with its path, depth-first in field order.
pub fn collect_params(v: &Value, prefix: &str, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Model(m) => {
            for (n, f) in &m.fields {
                let spread = m.decl.fields.iter().any(|d| d.spread && d.name.name == *n);
                collect_params(f, &if spread { prefix.to_string() } else { join(prefix, n) }, out);
            }
        }
        Value::Tensor(_) => out.push((prefix.to_string(), v.clone())),
        Value::Tuple(items) => {
            for (i, x) in items.iter().enumerate() {
                collect_params(x, &join(prefix, &i.to_string()), out);
            }
        }
        Value::Record(items) => {
            for (n, x) in items.iter() {
                collect_params(x, &join(prefix, n), out);
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
