//! Values in words, as hover and inlay hints show them: a tensor by its type (`f32[B, 512]`), a
//! layer by its constructor call and its parameters, a pipeline by its element.

use crate::api::python_float;
use dlc_language::eval::model::collect_params;
use dlc_language::eval::value::{Func, ModelInst};
use dlc_language::eval::{Session, Value};
use dlc_language::ir::Op;

/// One line: the type of a tensor, a pipeline's element, a layer's call.
pub fn short(s: &Session, v: &Value) -> String {
    match v {
        Value::Tensor(n) => s.t.graph.ty(*n).to_string(),
        Value::Pipeline(p) => format!("data of {}", s.describe(&p.elem)),
        Value::Model(m) => call_of(m),
        Value::Float(f) => format!("float = {}", python_float(*f)),
        Value::Int(i) => format!("int = {i}"),
        Value::Bool(b) => format!("bool = {b}"),
        Value::Str(x) => format!("str = {x:?}"),
        Value::Func(f) => match &**f {
            Func::Builtin(n) => format!("builtin {n}"),
            _ => s.describe(v),
        },
        other => s.describe(other),
    }
}

/// `Linear(in_features=784, out_features=512, bias=true)`.
pub fn call_of(m: &ModelInst) -> String {
    let args: Vec<String> = m
        .hparams
        .iter()
        .map(|(k, v)| match v {
            Value::Int(i) => format!("{k}={i}"),
            Value::Float(f) => format!("{k}={}", python_float(*f)),
            Value::Bool(b) => format!("{k}={b}"),
            Value::Str(x) => format!("{k}={x:?}"),
            other => format!("{k}={}", other.kind().trim_start_matches("a ").trim_start_matches("an ")),
        })
        .collect();
    format!("{}({})", m.decl.name.name, args.join(", "))
}

pub struct ParamRow {
    pub path: String,
    pub ty: String,
    pub trainable: bool,
    pub count: Option<u64>,
}

/// A model's parameters and buffers with their types, and the number of trainable values
/// (`None` when a size is symbolic).
pub fn params(s: &Session, m: &Value) -> (Vec<ParamRow>, Option<u64>) {
    let mut found = vec![];
    collect_params(m, "", &mut found);
    let mut rows = vec![];
    let mut total = Some(0u64);
    for (path, v) in found {
        let Value::Tensor(n) = v else { continue };
        let Op::Param(id) = s.t.graph.node(n).op else { continue };
        let ty = s.t.graph.ty(n);
        let count = dlc_language::types::shape::concrete(&ty.shape).map(|d| d.iter().product::<usize>() as u64);
        let trainable = s.t.graph.params.get(id as usize).is_some_and(|p| p.trainable);
        if trainable {
            total = total.zip(count).map(|(a, b)| a + b);
        }
        rows.push(ParamRow { path, ty: ty.to_string(), trainable, count });
    }
    (rows, total)
}

/// `1,234,567`.
pub fn digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A model in markdown: its call, its parameter count and a table of its parameters.
pub fn model_markdown(s: &Session, v: &Value, name: Option<&str>) -> String {
    let Value::Model(m) = v else { return String::new() };
    let (rows, total) = params(s, v);
    let head = match name {
        Some(n) => format!("{n}: {}", call_of(m)),
        None => call_of(m),
    };
    let mut out = format!("```dl\n{head}\n```\n");
    match total {
        Some(t) => out += &format!("\n**{}** trainable parameters\n", digits(t)),
        None => out += "\nparameter count depends on symbolic sizes\n",
    }
    if !rows.is_empty() {
        out += "\n| parameter | type | values |\n| --- | --- | ---: |\n";
        // A large model's table is long; the first rows say what it is.
        for r in rows.iter().take(24) {
            let note = if r.trainable { "" } else { " (buffer)" };
            let count = r.count.map_or("?".to_string(), digits);
            out += &format!("| `{}` | `{}`{note} | {count} |\n", r.path, r.ty);
        }
        if rows.len() > 24 {
            out += &format!("| … | {} more | |\n", rows.len() - 24);
        }
    }
    out
}
