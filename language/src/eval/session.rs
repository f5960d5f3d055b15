//! A session: the modules of one program (or one REPL), loaded, registered and traced item by
//! item. The CLI, the REPL, the tests and embedders all drive the front end through this.

use super::host::Host;
use super::model::collect_params;
use super::tracer::{Mode, Module, Tracer};
use super::value::{Func, Value};
use crate::diag::{did_you_mean, Diagnostic};
use crate::span::{FileId, Span};
use crate::syntax::ast::*;
use crate::syntax::parse;
use crate::types::TensorTy;
use std::collections::HashMap;
use std::rc::Rc;

/// A model of the program instantiated with its default hyper-parameters, for `dlc check`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ModelSummary {
    pub name: String,
    pub params: Vec<(String, TensorTy)>,
    pub total: u64,
}

pub struct Session {
    pub t: Tracer,
    /// The module user input goes into.
    pub main: usize,
    pub summaries: Vec<ModelSummary>,
}

/// The value of the last expression of a REPL input, with its type when it is a tensor.
pub struct Evaluated {
    pub value: Option<Value>,
    pub diags: Vec<Diagnostic>,
}

impl Session {
    pub fn new(mode: Mode) -> Session {
        let mut t = Tracer::new(mode);
        // The prelude is module 0; the user's main module is 1 and imports it.
        t.modules.push(Module {
            name: "std.prelude".into(),
            is_std: true,
            items: HashMap::new(),
            item_spans: HashMap::new(),
            imports: vec![],
        });
        let mut s = Session { t, main: 1, summaries: vec![] };
        s.t.modules.push(Module {
            name: "main".into(),
            is_std: false,
            items: HashMap::new(),
            item_spans: HashMap::new(),
            imports: vec![0],
        });
        let src = crate::stdlib::source("std.prelude").unwrap_or("");
        let file = s.t.sources.add("<std.prelude>", src);
        let (prog, diags) = parse(file, src);
        s.t.diags.extend(diags);
        s.register(0, &prog);
        s
    }

    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.t.diags
    }

    /// Load a file as the main module and trace it. Returns whether it had no errors.
    pub fn run_source(&mut self, name: &str, text: &str, host: &mut dyn Host) -> bool {
        let file = self.t.sources.add(name, text);
        let (prog, diags) = parse(file, text);
        let had_syntax = diags.iter().any(|d| d.is_error());
        self.t.diags.extend(diags);
        if had_syntax {
            return false;
        }
        self.load_program(self.main, &prog, host, None);
        !self.t.has_errors()
    }

    /// Check a file that may have syntax errors, for what did parse: the items the parser
    /// recovered are checked (in check mode, whatever this session's mode: nothing runs), so
    /// their names and types can be asked for afterwards (`type_of`), as an editor needs while a
    /// file is being typed. Definitions whose value did not parse are known by name with no
    /// type, and their uses report nothing. Returns whether there were no errors at all.
    ///
    /// `run_source` stops after syntax errors instead: its reports stay free of errors that a
    /// lost line causes further on.
    pub fn check_partial(&mut self, name: &str, text: &str, host: &mut dyn Host) -> bool {
        let file = self.t.sources.add(name, text);
        let (prog, diags) = parse(file, text);
        self.t.diags.extend(diags);
        let saved = self.t.mode;
        self.t.mode = Mode::Check;
        self.load_program(self.main, &prog, host, None);
        self.t.mode = saved;
        !self.t.has_errors()
    }

    /// Trace one REPL input in the main module; returns the value of a trailing expression.
    pub fn eval_input(&mut self, text: &str, host: &mut dyn Host) -> Evaluated {
        let before = self.t.diags.len();
        let n = self.t.sources.files.len();
        let file = self.t.sources.add(format!("<repl {n}>"), text);
        let (prog, diags) = parse(file, text);
        if diags.iter().any(|d| d.is_error()) {
            return Evaluated { value: None, diags };
        }
        let mut last = None;
        self.load_program(self.main, &prog, host, Some(&mut last));
        let diags = self.t.diags.split_off(before);
        Evaluated { value: if diags.iter().any(|d| d.is_error()) { None } else { last }, diags }
    }

    /// The type of an expression, without running it (`:type` in the REPL).
    pub fn type_of(&mut self, text: &str) -> Result<String, Vec<Diagnostic>> {
        let before = self.t.diags.len();
        let n = self.t.sources.files.len();
        let file = self.t.sources.add(format!("<repl {n}>"), text);
        let (prog, diags) = parse(file, text);
        if diags.iter().any(|d| d.is_error()) {
            return Err(diags);
        }
        let Some(Item { kind: ItemKind::Expr(e), .. }) = prog.items.first() else {
            return Err(vec![Diagnostic::error("E0101", "`:type` takes an expression", Span::new(file, 0, text.len()))]);
        };
        let saved = self.t.mode;
        self.t.mode = Mode::Check;
        self.t.ctx.module = self.main;
        let r = self.t.eval(e);
        self.t.mode = saved;
        let diags = self.t.diags.split_off(before);
        match r {
            Ok(v) => Ok(self.describe(&v)),
            Err(_) => Err(diags),
        }
    }

    /// A value's type as the REPL and `:type` show it.
    pub fn describe(&self, v: &Value) -> String {
        match v {
            Value::Tensor(n) => self.t.graph.ty(*n).to_string(),
            Value::Int(_) => "int".into(),
            Value::Float(_) => "float".into(),
            Value::Bool(_) => "bool".into(),
            Value::Str(_) => "str".into(),
            Value::Tuple(items) => format!("({})", items.iter().map(|x| self.describe(x)).collect::<Vec<_>>().join(", ")),
            Value::Record(items) => {
                format!("({})", items.iter().map(|(k, x)| format!("{k}: {}", self.describe(x))).collect::<Vec<_>>().join(", "))
            }
            Value::Model(m) => format!("model {}", m.decl.name.name),
            Value::Pipeline(p) => format!("data pipeline of {}", self.describe(&p.elem)),
            Value::Func(f) => match &**f {
                Func::User { decl, .. } => {
                    format!("fn {}({})", decl.name.name, decl.params.iter().map(|p| p.name.name.clone()).collect::<Vec<_>>().join(", "))
                }
                other => format!("fn {}", other.name()),
            },
            other => other.kind().to_string(),
        }
    }

    fn register(&mut self, module: usize, prog: &Program) {
        for it in &prog.items {
            let (name, span, v) = match &it.kind {
                ItemKind::Fn(f) => (f.name.clone(), f.name.span, Value::Func(Rc::new(Func::User { decl: f.clone(), module }))),
                ItemKind::Model(m) => (m.name.clone(), m.name.span, Value::Func(Rc::new(Func::ModelCtor { decl: m.clone(), module }))),
                _ => continue,
            };
            let (name, span) = (name.name, span);
            let m = &mut self.t.modules[module];
            if let Some(prev) = m.item_spans.get(&name).copied() {
                // The REPL may redefine; a file may not.
                if prev.file == span.file {
                    let d = Diagnostic::error("E0203", format!("`{name}` is defined twice"), span)
                        .with_label("defined again here")
                        .with_secondary(prev, "first defined here");
                    self.t.error(d);
                    continue;
                }
            }
            m.items.insert(name.clone(), v);
            m.item_spans.insert(name, span);
        }
    }

    fn load_program(&mut self, module: usize, prog: &Program, host: &mut dyn Host, mut last: Option<&mut Option<Value>>) {
        // `use` first, so definitions can refer to imported names regardless of order.
        for it in &prog.items {
            if let ItemKind::Use(path) = &it.kind {
                self.use_module(module, path, it.span, host);
            }
        }
        self.register(module, prog);
        if self.t.mode == Mode::Check {
            self.check_definitions(module, prog);
        }
        for it in &prog.items {
            self.t.ctx = super::value::Ctx { module, instance: None, env: vec![] };
            let r = match &it.kind {
                ItemKind::Let(name, e) | ItemKind::Data(name, e) => {
                    // One namespace per module; only the REPL (a new input each time) may redefine.
                    if let Some(prev) = self.t.modules[module].item_spans.get(&name.name).copied() {
                        if prev.file == name.span.file && prev != name.span {
                            let d = Diagnostic::error("E0203", format!("`{}` is defined twice", name.name), name.span)
                                .with_label("defined again here")
                                .with_secondary(prev, "first defined here");
                            self.t.error(d);
                            continue;
                        }
                    }
                    self.t.path.push(name.name.clone());
                    let r = self.t.eval(e);
                    self.t.path.pop();
                    match r {
                        Ok(v) => {
                            let m = &mut self.t.modules[module];
                            m.items.insert(name.name.clone(), v);
                            m.item_spans.insert(name.name.clone(), name.span);
                            self.t.poisoned.remove(&name.name);
                            Ok(())
                        }
                        Err(e) => {
                            self.t.poisoned.insert(name.name.clone());
                            Err(e)
                        }
                    }
                }
                ItemKind::Expr(e) => {
                    let r = self.t.eval(e);
                    if let (Ok(v), Some(slot)) = (&r, last.as_deref_mut()) {
                        *slot = Some(v.clone());
                    }
                    r.map(|_| ())
                }
                ItemKind::Recipe(r) => self.t.check_recipe(r),
                _ => Ok(()),
            };
            let _ = r;
            // A failure at run time ends the program, as in Python; check errors do not.
            if !self.flush_effects(host) {
                break;
            }
        }
    }

    fn flush_effects(&mut self, host: &mut dyn Host) -> bool {
        for (vals, span) in std::mem::take(&mut self.t.effects) {
            if let Err(msg) = host.print(&self.t.graph, &vals) {
                let d = Diagnostic::error("E0501", format!("evaluation failed: {msg}"), span).with_label("while evaluating this");
                self.t.diags.push(d);
                self.t.effects.clear();
                return false;
            }
        }
        true
    }

    fn use_module(&mut self, module: usize, path: &[Ident], span: Span, host: &mut dyn Host) {
        let name = path.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(".");
        if let Some(i) = self.t.modules.iter().position(|m| m.name == name) {
            if !self.t.modules[module].imports.contains(&i) {
                self.t.modules[module].imports.push(i);
            }
            return;
        }
        let (display, text, is_std) = if let Some(src) = crate::stdlib::source(&name) {
            (format!("<{name}>"), src.to_string(), true)
        } else if path[0].name == "std" {
            let names: Vec<&str> = crate::stdlib::MODULES.iter().map(|m| m.0).collect();
            let mut d = Diagnostic::error("E0202", format!("there is no module `{name}` in the standard library"), span)
                .with_label("unknown module");
            d = match did_you_mean(&name, names.iter().copied()) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None => d.with_note(format!("modules: {}", names.join(", "))),
            };
            self.t.error(d);
            return;
        } else {
            let parts: Vec<String> = path.iter().map(|p| p.name.clone()).collect();
            match host.load_module(&parts) {
                Some((display, text)) => (display, text, false),
                None => {
                    let d = Diagnostic::error("E0202", format!("cannot find module `{name}`"), span)
                        .with_label("no such module")
                        .with_help(format!("a module `{name}` is the file `{}.dl` next to this one", parts.join("/")));
                    self.t.error(d);
                    return;
                }
            }
        };
        let file: FileId = self.t.sources.add(display, text.clone());
        let (prog, diags) = parse(file, &text);
        let bad = diags.iter().any(|d| d.is_error());
        self.t.diags.extend(diags);
        let idx = self.t.modules.len();
        self.t.modules.push(Module { name: name.clone(), is_std, items: HashMap::new(), item_spans: HashMap::new(), imports: vec![0] });
        self.t.modules[module].imports.push(idx);
        if bad {
            return;
        }
        let saved_ctx = self.t.ctx.clone();
        let saved_mode = self.t.mode;
        if is_std {
            // The stdlib is checked by its own tests; do not re-check it for every user program.
            self.t.mode = Mode::Run;
        }
        self.load_program(idx, &prog, host, None);
        self.t.mode = saved_mode;
        self.t.ctx = saved_ctx;
    }

    /// Check functions and models on their own, with symbolic inputs from their annotations, so
    /// errors surface even when nothing calls them.
    fn check_definitions(&mut self, module: usize, prog: &Program) {
        for it in &prog.items {
            self.t.ctx = super::value::Ctx { module, instance: None, env: vec![] };
            match &it.kind {
                ItemKind::Fn(f) => {
                    let Some(args) = self.symbolic_args(&f.params) else { continue };
                    let fv = Value::Func(Rc::new(Func::User { decl: f.clone(), module }));
                    self.t.generic_site = Some(f.name.span);
                    let _ = self.t.call(&fv, args, f.name.span, f.name.span);
                    self.t.generic_site = None;
                }
                ItemKind::Model(m) => {
                    if m.params.iter().any(|p| p.default.is_none()) {
                        continue;
                    }
                    let first_param = self.t.graph.params.len();
                    let ctor = Value::Func(Rc::new(Func::ModelCtor { decl: m.clone(), module }));
                    self.t.generic_site = Some(m.name.span);
                    let inst = self.t.call(&ctor, vec![], m.name.span, m.name.span);
                    self.t.generic_site = None;
                    let Ok(inst) = inst else { continue };
                    let mut params = vec![];
                    collect_params(&inst, "", &mut params);
                    let params: Vec<(String, TensorTy)> = params
                        .into_iter()
                        .filter_map(|(p, v)| match v {
                            Value::Tensor(n) if matches!(self.t.graph.node(n).op, crate::ir::Op::Param(_)) => Some((p, self.t.graph.ty(n))),
                            _ => None,
                        })
                        .collect();
                    let total = self.t.graph.params[first_param..]
                        .iter()
                        .filter(|p| p.trainable)
                        .map(|p| crate::types::shape::concrete(&p.ty.shape).map(|s| s.iter().product::<usize>() as u64).unwrap_or(0))
                        .sum();
                    self.summaries.push(ModelSummary { name: m.name.name.clone(), params, total });
                    let Value::Model(inst) = inst else { continue };
                    for method in &m.methods {
                        if method.params.iter().any(|p| p.ty.is_none() && p.default.is_none()) {
                            continue;
                        }
                        self.t.ctx = super::value::Ctx { module, instance: Some(inst.clone()), env: vec![] };
                        let Some(args) = self.symbolic_args(&method.params) else { continue };
                        let f = Value::Func(Rc::new(Func::Method { model: inst.clone(), decl: method.clone() }));
                        self.t.generic_site = Some(method.name.span);
                        let _ = self.t.call(&f, args, method.name.span, method.name.span);
                        self.t.generic_site = None;
                    }
                }
                _ => {}
            }
        }
    }

    fn symbolic_args(&mut self, params: &[Param]) -> Option<super::call::Args> {
        let mut args = vec![];
        for p in params {
            match (&p.ty, &p.default) {
                (_, Some(_)) => continue,
                (Some(t), None) => {
                    let v = self.t.symbolic_arg(&p.name.name, t)?;
                    args.push((Some(p.name.clone()), v, p.span));
                }
                (None, None) => return None,
            }
        }
        Some(args)
    }

    /// Every parameter the program's top-level values hold (for summaries and checkpoints).
    pub fn graph(&self) -> &crate::ir::Graph {
        &self.t.graph
    }
}
