//! The tracer's state: modules, the graph being built, the current lexical frame, diagnostics.

use super::value::{Ctx, Func, Value};
use super::{Reported, R};
use crate::diag::{did_you_mean, Diagnostic};
use crate::ir::Graph;
use crate::span::{SourceMap, Span};
use std::collections::HashMap;
use std::rc::Rc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Check every item, including functions and models nobody calls; execute nothing.
    Check,
    /// Trace top-level statements for execution; `print` effects are queued for the host.
    Run,
}

#[derive(Debug)]
pub struct Module {
    pub name: String,
    pub is_std: bool,
    /// Functions, models, `let` and `data` bindings, in one namespace.
    pub items: HashMap<String, Value>,
    /// Where each item was defined (for "defined twice" and for the language server later).
    pub item_spans: HashMap<String, Span>,
    pub imports: Vec<usize>,
}

pub struct Tracer {
    pub mode: Mode,
    pub graph: Graph,
    pub diags: Vec<Diagnostic>,
    pub sources: SourceMap,
    pub modules: Vec<Module>,
    pub ctx: Ctx,
    /// Calls being traced (callee name and call-site span), innermost last.
    pub call_stack: Vec<(String, Span)>,
    /// Path of the model field being built, e.g. ["encoder", "fc1"], for parameter names.
    pub path: Vec<String>,
    /// `print` requests waiting for the host.
    pub effects: Vec<(Vec<Value>, Span)>,
    pub seed_counter: u64,
    /// Whether a model method being traced is in training (dropout active, batch statistics).
    pub training: bool,
    /// Addresses of the function declarations being traced, to reject recursion.
    pub active_fns: Vec<usize>,
    /// The step-number input of a training step being traced: random ops draw per step.
    pub step_input: Option<crate::ir::NodeId>,
    /// `assign(buffer, value)` calls of a training step: (buffer's parameter id, new value).
    pub buffer_updates: Vec<(u32, crate::ir::NodeId)>,
    /// Recipes that checked cleanly, in source order.
    pub recipes: Vec<super::recipe::RecipeInfo>,
    /// The definition being checked on its own (`dlc check` of code nothing calls), by name span.
    pub generic_site: Option<Span>,
    /// Top-level names whose definition failed: uses are silent, to avoid cascades.
    pub poisoned: std::collections::HashSet<String>,
    /// When an editor asks (`Some`), the value of every expression traced outside the standard
    /// library, by span, the first trace of a span kept: definitions are checked on their own
    /// before anything calls them, so a function body's types are its symbolic ones
    /// (`f32[B, 512]`). The language server's hover and inlay hints read it.
    pub recorded: Option<HashMap<Span, Value>>,
}

impl Tracer {
    pub fn new(mode: Mode) -> Tracer {
        Tracer {
            mode,
            graph: Graph::default(),
            diags: vec![],
            sources: SourceMap::default(),
            modules: vec![],
            ctx: Ctx { module: 0, instance: None, env: vec![] },
            call_stack: vec![],
            path: vec![],
            effects: vec![],
            seed_counter: 0,
            training: false,
            active_fns: vec![],
            poisoned: Default::default(),
            recorded: None,
            generic_site: None,
            recipes: vec![],
            step_input: None,
            buffer_updates: vec![],
        }
    }

    /// Report a diagnostic and return the marker to unwind with. Errors located inside the
    /// standard library are re-pointed at the user's call that led there, with the stdlib
    /// location kept as a note, since that is the line the user can change.
    pub fn error(&mut self, mut d: Diagnostic) -> Reported {
        let primary = d.primary_span();
        if self.is_std_file(primary) {
            if let Some((name, site)) = self.call_stack.iter().rev().find(|(_, s)| !self.is_std_file(*s)).cloned() {
                for l in d.labels.iter_mut() {
                    if l.primary {
                        // The label's text described the stdlib line; here it is the call.
                        l.span = site;
                        l.message = format!("in this call to `{name}`");
                    }
                }
                d.labels.retain(|l| l.primary || !self.is_std_file(l.span));
                let (line, _) = self.sources.line_col(primary.file, primary.start);
                let file = self.sources.get(primary.file).name.clone();
                d.notes.push(format!("the failing operation is in the standard library ({file}, line {line})"));
            }
        } else if let (Some((name, site)), false) =
            (self.call_stack.iter().rev().find(|(_, s)| !self.is_std_file(*s)).cloned(), d.code.starts_with("E02"))
        {
            // The innermost call the user wrote: a library line inside it is not where they look.
            // Name errors do not depend on the call; shape and type errors do, so say which call.
            if site.file != primary.file || !(site.start <= primary.start && primary.end <= site.end) {
                let text = if self.generic_site == Some(site) {
                    format!("while checking `{name}` on its own (default hyper-parameters, symbolic shapes)")
                } else {
                    format!("while checking this call to `{name}`")
                };
                d = d.with_secondary(site, text);
            }
        }
        let dup = self.diags.iter().any(|x| x.code == d.code && x.primary_span() == d.primary_span());
        if !dup {
            self.diags.push(d);
        }
        Reported
    }

    pub fn is_std_file(&self, span: Span) -> bool {
        self.sources.files.get(span.file.0 as usize).map(|f| f.name.starts_with("<std")).unwrap_or(false)
    }

    pub fn err<T>(&mut self, code: &'static str, msg: impl Into<String>, span: Span, label: impl Into<String>) -> R<T> {
        Err(self.error(Diagnostic::error(code, msg, span).with_label(label)))
    }

    pub fn has_errors(&self) -> bool {
        self.diags.iter().any(|d| d.is_error())
    }

    /// Resolve a name in the current frame: locals, then the model instance (fields,
    /// hyper-parameters, methods), then the module, its imports and the prelude.
    pub fn lookup(&self, name: &str) -> Option<Value> {
        if let Some((_, v)) = self.ctx.env.iter().rev().find(|(n, _)| n == name) {
            return Some(v.clone());
        }
        if let Some(inst) = &self.ctx.instance {
            if let Some(v) = inst.lookup(name) {
                return Some(v);
            }
            if let Some(m) = inst.decl.methods.iter().find(|m| m.name.name == name) {
                return Some(Value::Func(Rc::new(Func::Method { model: inst.clone(), decl: m.clone() })));
            }
        }
        self.lookup_global(self.ctx.module, name)
    }

    pub fn lookup_global(&self, module: usize, name: &str) -> Option<Value> {
        let m = &self.modules[module];
        if let Some(v) = m.items.get(name) {
            return Some(v.clone());
        }
        for &imp in &m.imports {
            if let Some(v) = self.modules[imp].items.get(name) {
                return Some(v.clone());
            }
            if let Some(b) = super::builtins::lookup(name, &self.modules[imp].name) {
                return Some(b);
            }
        }
        super::builtins::lookup(name, "")
    }

    /// Every name visible here, for "did you mean" and REPL completion.
    pub fn visible_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.ctx.env.iter().map(|(n, _)| n.clone()).collect();
        if let Some(inst) = &self.ctx.instance {
            names.extend(inst.fields.iter().chain(inst.hparams.iter()).map(|(n, _)| n.clone()));
            names.extend(inst.decl.methods.iter().map(|m| m.name.name.clone()));
        }
        let m = &self.modules[self.ctx.module];
        names.extend(m.items.keys().cloned());
        for &imp in &m.imports {
            names.extend(self.modules[imp].items.keys().cloned());
            names.extend(super::builtins::names_in(&self.modules[imp].name).map(String::from));
        }
        names.extend(super::builtins::names_in("").map(String::from));
        names.sort();
        names.dedup();
        names
    }

    pub fn unknown_name(&mut self, name: &str, span: Span) -> Reported {
        let mut d = Diagnostic::error("E0201", format!("cannot find `{name}` in this scope"), span).with_label("not found");
        let names = self.visible_names();
        if let Some(help) = self.element_name_help(name) {
            d = d.with_note("`x` and `y` are bound from a data element that is an `(x, y)` pair".to_string()).with_help(help);
        } else if let Some(s) = did_you_mean(name, names.iter().map(|s| s.as_str())) {
            d = d.with_help(format!("did you mean `{s}`?"));
        } else if let Some(module) = self.std_module_defining(name) {
            d = d.with_help(format!("`{name}` is defined in `{module}`: add `use {module}` at the top of the file"));
        }
        self.error(d)
    }

    /// In a recipe whose data elements are not `(x, y)` pairs (a source's records, say), `x` or
    /// `y` is unknown: the help names what the element does bind and the `map` that makes a pair,
    /// instead of a "did you mean" to some unrelated one-letter name.
    fn element_name_help(&self, name: &str) -> Option<String> {
        if name != "x" && name != "y" {
            return None;
        }
        let fields: Vec<String> = match self.lookup("batch")? {
            Value::Record(items) => items.iter().map(|(n, _)| n.clone()).collect(),
            Value::Tuple(items) => {
                return Some(format!(
                    "these elements are {}-tuples, not pairs: `map` them to an `(input, target)` pair in the pipeline",
                    items.len()
                ))
            }
            _ => return None,
        };
        let shown: Vec<String> = fields.iter().map(|f| format!("`{f}`")).collect();
        let (a, b) = match fields.as_slice() {
            [a, b, ..] => (a.as_str(), b.as_str()),
            [a] => (a.as_str(), a.as_str()),
            [] => return None,
        };
        Some(format!(
            "these elements are records with fields {}: use the fields by name, or make pairs in the pipeline with `|> map(r => (r.{a}, r.{b}))`",
            shown.join(", ")
        ))
    }

    /// A standard-library module that defines `name` but is not imported here.
    fn std_module_defining(&self, name: &str) -> Option<String> {
        for m in &self.modules {
            if m.is_std && m.items.contains_key(name) {
                return Some(m.name.clone());
            }
        }
        for module in crate::stdlib::MODULES {
            if super::builtins::names_in(module.0).any(|n| n == name) {
                return Some(module.0.to_string());
            }
        }
        crate::stdlib::MODULES
            .iter()
            .find(|(_, src)| src.contains(&format!("model {name}(")) || src.contains(&format!("fn {name}(")))
            .map(|(n, _)| n.to_string())
    }

    /// Run `f` in another frame, restoring the current one afterwards (also on error).
    pub fn in_frame<T>(&mut self, ctx: Ctx, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        let saved = std::mem::replace(&mut self.ctx, ctx);
        let r = f(self);
        self.ctx = saved;
        r
    }

    pub fn bind(&mut self, name: &str, v: Value) {
        self.ctx.env.push((name.to_string(), v));
    }

    pub fn next_seed(&mut self) -> u64 {
        self.seed_counter += 1;
        0x5EED_0000 + self.seed_counter
    }
}
