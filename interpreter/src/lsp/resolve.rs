//! What a name refers to, beyond one file: the checker's session knows the modules a file
//! imports (in the order its lookups try them), their items and where they were defined, and the
//! builtins; the stdlib's files are `Stdlib`'s. Signatures come from the declarations
//! themselves, with the comments written above them.

use super::analysis::Analysis;
use super::scopes::{DefKind, Hit};
use super::stdlib::{doc_above, Stdlib};
use dlc_language::eval::builtins;
use dlc_language::eval::value::Func;
use dlc_language::eval::{Session, Value};
use dlc_language::syntax::ast::{FnDecl, Param};
use dlc_language::Span;
use lsp_types::{Location, Uri};

/// Where a name's definition is.
#[derive(Clone, Debug)]
pub enum Target {
    /// A definition in this file (an index into its `Index`).
    Local(usize),
    /// An item of another module the session loaded: the module's index and the item's span.
    Item { module: usize, name: String, span: Span },
    /// A builtin (no DL source).
    Builtin(&'static str),
}

/// The definition behind the name at `offset`.
pub fn target_at(a: &Analysis, offset: usize) -> Option<(Hit, Target)> {
    let hit = a.index.at(offset)?;
    match a.index.def_of(hit) {
        Some(d) => Some((hit, Target::Local(d))),
        None => global(&a.session, a.index.name_of(hit)).map(|t| (hit, t)),
    }
}

/// A name no definition of the file binds, as the checker looks it up from the main module:
/// each imported module's items and builtins in import order, then the prelude's builtins.
pub fn global(s: &Session, name: &str) -> Option<Target> {
    let main = s.t.modules.get(s.main)?;
    for &imp in &main.imports {
        let m = &s.t.modules[imp];
        if let Some(span) = m.item_spans.get(name) {
            return Some(Target::Item { module: imp, name: name.to_string(), span: *span });
        }
        if builtins::lookup(name, &m.name).is_some() {
            return builtin_name(name).map(Target::Builtin);
        }
    }
    builtins::lookup(name, "").and(builtin_name(name)).map(Target::Builtin)
}

fn builtin_name(name: &str) -> Option<&'static str> {
    builtins::TABLE.iter().find(|(n, _, _)| *n == name).map(|(n, _, _)| *n)
}

/// The value a target has: an item's value in its module, a builtin's function, a local's
/// recorded value.
pub fn value_of<'a>(a: &'a Analysis, t: &Target) -> Option<std::borrow::Cow<'a, Value>> {
    use std::borrow::Cow;
    match t {
        Target::Local(d) => a.def_value(*d).map(Cow::Borrowed).or_else(|| {
            // Items of the file are in the session even when nothing traced a use of them.
            let def = &a.index.defs[*d];
            matches!(def.kind, DefKind::Fn | DefKind::Model | DefKind::Let | DefKind::Data)
                .then(|| a.session.t.modules[a.session.main].items.get(&def.name))
                .flatten()
                .map(Cow::Borrowed)
        }),
        Target::Item { module, name, .. } => a.session.t.modules[*module].items.get(name).map(Cow::Borrowed),
        Target::Builtin(n) => builtins::TABLE.iter().find(|(x, _, _)| x == n).and_then(|(n, m, _)| builtins::lookup(n, m)).map(Cow::Owned),
    }
}

/// Where a target is defined: this file, a user module's file, or the stdlib's.
pub fn location(a: &Analysis, std: &Stdlib, uri: &Uri, t: &Target) -> Option<Location> {
    match t {
        Target::Local(d) => Some(Location { uri: uri.clone(), range: a.range(a.index.defs[*d].span) }),
        Target::Item { module, name, span } => {
            let m = &a.session.t.modules[*module];
            if m.is_std {
                return std.location(std.find(&m.name, name)?);
            }
            span_location(&a.session, *span)
        }
        Target::Builtin(_) => None,
    }
}

/// A span of a file the session read from disk (a user module).
pub fn span_location(s: &Session, span: Span) -> Option<Location> {
    let file = s.t.sources.files.get(span.file.0 as usize)?;
    let path = std::path::Path::new(&file.name);
    let lines = super::line_index::LineIndex::new(&file.text);
    Some(Location { uri: super::uri::from_path(path)?, range: lines.range(&file.text, span.start as usize, span.end as usize) })
}

/// A callable's signature: its label, each parameter's label and its documentation.
#[derive(Clone, Debug)]
pub struct Signature {
    pub label: String,
    pub params: Vec<String>,
    pub doc: Option<String>,
    /// Whether the first parameter is the value a pipe passes (every parameterised call can be
    /// a pipe's right side; this marks those whose first parameter is meant for it).
    pub takes_input: bool,
}

pub fn builtin_signature(name: &str) -> Option<Signature> {
    let (n, _, params) = builtins::TABLE.iter().find(|(n, _, _)| *n == name)?;
    let params: Vec<String> = params
        .iter()
        .map(|p| match (p.strip_suffix('='), *p) {
            (Some(named), _) => format!("{named}:"),
            (None, "*") => "...".to_string(),
            (None, p) => p.to_string(),
        })
        .collect();
    Some(Signature {
        label: format!("{n}({})", params.join(", ")),
        takes_input: !params.is_empty(),
        params,
        doc: super::docs::builtin(n).map(str::to_string),
    })
}

/// The signature of a function value (a function, a model's constructor or forward, a method,
/// a lambda, a builtin), read from its declaration's source.
pub fn signature_of_value(s: &Session, v: &Value) -> Option<Signature> {
    let text = |span: Span| -> String {
        let src = s.t.sources.files.get(span.file.0 as usize).map(|f| f.text.as_str()).unwrap_or("");
        src.get(span.range()).unwrap_or("").split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let doc = |span: Span| {
        let src = s.t.sources.files.get(span.file.0 as usize).map(|f| f.text.as_str()).unwrap_or("");
        Some(doc_above(src, span.start as usize)).filter(|d| !d.is_empty())
    };
    let params = |ps: &[Param]| ps.iter().map(|p| text(p.span)).collect::<Vec<_>>();
    let function = |prefix: String, d: &FnDecl| {
        let ps = params(&d.params);
        let ret = d.ret.as_ref().map(|r| format!(" -> {}", text(r.span))).unwrap_or_default();
        Signature { label: format!("{prefix}({}){ret}", ps.join(", ")), takes_input: !ps.is_empty(), params: ps, doc: doc(d.span) }
    };
    match v {
        Value::Func(f) => match &**f {
            Func::User { decl, .. } => Some(function(format!("fn {}", decl.name.name), decl)),
            Func::Method { model, decl } => Some(function(format!("{}.{}", model.decl.name.name, decl.name.name), decl)),
            Func::ModelCtor { decl, .. } => {
                let ps = params(&decl.params);
                Some(Signature {
                    label: format!("model {}({})", decl.name.name, ps.join(", ")),
                    params: ps,
                    doc: doc(decl.span),
                    takes_input: false,
                })
            }
            Func::Lambda { params, .. } => {
                let ps: Vec<String> = params.iter().map(|p| p.name.clone()).collect();
                Some(Signature { label: format!("({}) => ...", ps.join(", ")), takes_input: !ps.is_empty(), params: ps, doc: None })
            }
            Func::Builtin(n) => builtin_signature(n),
        },
        Value::Model(m) => {
            let fwd = m.decl.methods.iter().find(|d| d.name.name == "forward")?;
            let mut sig = function(format!("{}.forward", m.decl.name.name), fwd);
            sig.doc = doc(m.decl.span);
            Some(sig)
        }
        _ => None,
    }
}
