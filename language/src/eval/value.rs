//! Values of the tracer. Tensors are graph nodes; everything else is known at compile time.

use crate::ir::{Init, NodeId};
use crate::span::Span;
use crate::syntax::ast::{Expr, FnDecl, Ident, ModelDecl};
use crate::types::{DType, Dim, TensorTy};
use std::rc::Rc;

#[derive(Clone, Debug)]
pub enum Value {
    Tensor(NodeId),
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(Rc<str>),
    Auto,
    /// A symbolic size (from `x.shape` of a symbolic tensor).
    Dim(Dim),
    DType(DType),
    Type(TensorTy),
    Tuple(Rc<Vec<Value>>),
    Record(Rc<Vec<(String, Value)>>),
    Func(Rc<Func>),
    Model(Rc<ModelInst>),
    Init(Init),
    Pipeline(Rc<Pipeline>),
    /// Gradients of a loss with respect to a model's parameters (`grad(loss, model)`): the model
    /// as it was when `grad` was called and the loss node; autodiff runs when they are used.
    Grads(Rc<ModelInst>, NodeId),
}

impl Value {
    pub fn unit() -> Value {
        Value::Tuple(Rc::new(vec![]))
    }
    /// What kind of value this is, for "expected X, found Y" messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Tensor(_) => "a tensor",
            Value::Int(_) => "an int",
            Value::Float(_) => "a float",
            Value::Bool(_) => "a bool",
            Value::Str(_) => "a string",
            Value::Auto => "`auto`",
            Value::Dim(_) => "a size",
            Value::DType(_) => "a dtype",
            Value::Type(_) => "a tensor type",
            Value::Tuple(t) if t.is_empty() => "`()`",
            Value::Tuple(_) => "a tuple",
            Value::Record(_) => "a record",
            Value::Func(f) => match **f {
                Func::ModelCtor { .. } => "a model definition",
                _ => "a function",
            },
            Value::Model(_) => "a model",
            Value::Init(_) => "an initialiser",
            Value::Pipeline(_) => "a data pipeline",
            Value::Grads(..) => "gradients",
        }
    }
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Dim(d) => d.as_known(),
            _ => None,
        }
    }
    pub fn as_float(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }
    pub fn field(&self, name: &str) -> Option<Value> {
        match self {
            Value::Record(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()),
            _ => None,
        }
    }
}

/// The lexical context a function body runs in.
#[derive(Clone, Debug)]
pub struct Ctx {
    pub module: usize,
    pub instance: Option<Rc<ModelInst>>,
    pub env: Vec<(String, Value)>,
}

#[derive(Debug)]
pub enum Func {
    User { decl: Rc<FnDecl>, module: usize },
    Builtin(&'static str),
    Lambda { params: Vec<Ident>, body: Rc<Expr>, ctx: Ctx },
    Method { model: Rc<ModelInst>, decl: Rc<FnDecl> },
    ModelCtor { decl: Rc<ModelDecl>, module: usize },
}

impl Func {
    pub fn name(&self) -> String {
        match self {
            Func::User { decl, .. } => decl.name.name.clone(),
            Func::Builtin(n) => n.to_string(),
            Func::Lambda { .. } => "lambda".into(),
            Func::Method { model, decl } => format!("{}.{}", model.decl.name.name, decl.name.name),
            Func::ModelCtor { decl, .. } => decl.name.name.clone(),
        }
    }
}

#[derive(Debug)]
pub struct ModelInst {
    pub decl: Rc<ModelDecl>,
    pub module: usize,
    /// Dotted path of this instance inside its parent (empty at the top).
    pub path: String,
    pub hparams: Vec<(String, Value)>,
    pub fields: Vec<(String, Value)>,
    pub span: Span,
}

impl ModelInst {
    pub fn lookup(&self, name: &str) -> Option<Value> {
        self.fields.iter().chain(self.hparams.iter()).find(|(n, _)| n == name).map(|(_, v)| v.clone())
    }
}

/// A typed data pipeline: everything the runtime needs to execute it.
#[derive(Debug)]
pub struct Pipeline {
    /// The element one iteration yields: a tensor, tuple or record of tensors.
    pub elem: Value,
    pub source: Stage,
    pub stages: Vec<Stage>,
    pub span: Span,
}

/// A source or a stage: its builtin name, its arguments (compile-time values), and the element
/// before and after it. For a source `input` is `()`; for `map` the output tensors are graph
/// nodes computed from the input's input nodes; for `batch` the output's are new input nodes.
#[derive(Debug, Clone)]
pub struct Stage {
    pub kind: &'static str,
    pub args: Vec<(String, Value)>,
    pub input: Value,
    pub output: Value,
    pub span: Span,
}

impl Stage {
    pub fn arg(&self, name: &str) -> Option<&Value> {
        self.args.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
    /// `shuffle(seed: 1)`, `batch(128)`: how the stage reads in messages.
    pub fn describe(&self) -> String {
        let args: Vec<String> = self
            .args
            .iter()
            .filter(|(n, _)| n != "pipeline" && n != "f")
            .map(|(n, v)| match v {
                Value::Int(i) => format!("{n}: {i}"),
                Value::Float(f) => format!("{n}: {f}"),
                Value::Bool(b) => format!("{n}: {b}"),
                Value::Str(s) => format!("{n}: {s:?}"),
                other => format!("{n}: {}", other.kind()),
            })
            .collect();
        format!("{}({})", self.kind, args.join(", "))
    }
}
