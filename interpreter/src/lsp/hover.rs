//! Hover: what the checker knows about the thing under the cursor. A recipe field's
//! documentation and value; a name's definition (a function's or layer's signature and the
//! comments above it, a builtin's signature and documentation, a layer instance's parameter
//! count and shapes, a tensor's type); for any other expression, its inferred type
//! (`f32[B, 512]`). Every answer is read from the analysis: nothing is checked again.

use super::analysis::Analysis;
use super::describe::{model_markdown, short};
use super::resolve::{signature_of_value, target_at, value_of, Target};
use super::scopes::{DefKind, Hit};
use dlc_language::eval::Value;
use dlc_language::syntax::ast::{ItemKind, RecipeEntry};
use dlc_language::syntax::trivia::TriviaKind;
use dlc_language::Span;
use lsp_types::{Hover, HoverContents, MarkupContent, MarkupKind};

pub fn hover(a: &Analysis, offset: usize) -> Option<Hover> {
    let (span, text) = recipe_field(a, offset).or_else(|| name(a, offset)).or_else(|| expression(a, offset))?;
    Some(Hover { contents: HoverContents::Markup(MarkupContent { kind: MarkupKind::Markdown, value: text }), range: Some(a.range(span)) })
}

fn code(s: &str) -> String {
    format!("```dl\n{s}\n```\n")
}

fn recipe_field(a: &Analysis, offset: usize) -> Option<(Span, String)> {
    let o = offset as u32;
    for item in &a.program.items {
        let ItemKind::Recipe(r) = &item.kind else { continue };
        for e in &r.entries {
            let RecipeEntry::Field(f) = e else { continue };
            if !(f.name.span.start <= o && o <= f.name.span.end) {
                continue;
            }
            let kw = r.kind.keyword();
            let mut out = match a.value_at_span(f.value.span) {
                Some(v) => code(&format!("{}: {}", f.name.name, short(&a.session, v))),
                None => code(&f.name.name),
            };
            out += &format!("\n`{kw}` recipe field");
            if let Some(doc) = super::docs::recipe_field(r.kind, &f.name.name) {
                out += &format!(": {doc}");
            }
            if crate::train::SETTABLE.iter().any(|(n, _)| n.split('.').next() == Some(f.name.name.as_str())) && kw == "train" {
                out += &format!("\n\n`dlc run --set {}=...` overrides it.", f.name.name);
            }
            return Some((f.name.span, out));
        }
    }
    None
}

fn name(a: &Analysis, offset: usize) -> Option<(Span, String)> {
    let (hit, target) = target_at(a, offset)?;
    let span = a.index.span_of(hit);
    let label = a.index.name_of(hit).to_string();
    // At a use, the value traced there (a model's field inside its forward is that layer).
    let here = match hit {
        Hit::Ref(r) => a.value_at_span(a.index.refs[r].span).cloned(),
        Hit::Def(_) => None,
    };
    let value = here.or_else(|| value_of(a, &target).map(|v| v.into_owned()));
    let what = match &target {
        Target::Local(d) => describe_def(a, *d),
        Target::Item { module, .. } => format!("defined in `{}`", a.session.t.modules[*module].name),
        Target::Builtin(_) => "builtin".to_string(),
    };
    let mut out = match &value {
        Some(v @ Value::Func(_)) => match signature_of_value(&a.session, v) {
            Some(sig) => {
                let mut s = code(&sig.label);
                if let Some(doc) = sig.doc {
                    s += &format!("\n{doc}\n");
                }
                s
            }
            None => code(&label),
        },
        Some(v @ Value::Model(_)) => model_markdown(&a.session, v, Some(&label)),
        Some(v) => code(&format!("{label}: {}", short(&a.session, v))),
        None => code(&label),
    };
    out += &format!("\n{what}");
    Some((span, out))
}

fn describe_def(a: &Analysis, d: usize) -> String {
    let def = &a.index.defs[d];
    let owner = a.slice(def.owner).split(['(', '=', '{', '\n']).next().unwrap_or("").trim().to_string();
    match def.kind {
        DefKind::Fn => "function".into(),
        DefKind::Model => "model".into(),
        DefKind::Let => "top-level `let`".into(),
        DefKind::Data => "data pipeline".into(),
        DefKind::Param => format!("parameter of `{owner}`"),
        DefKind::HParam => "hyper-parameter".into(),
        DefKind::Field => "model field".into(),
        DefKind::Method => "method".into(),
        DefKind::Local => "local `let`".into(),
        DefKind::LambdaParam => "lambda parameter".into(),
        DefKind::Dim => format!("size named in the signature of `{owner}`"),
        DefKind::RecipeBinding => "bound by the recipe".into(),
    }
}

fn expression(a: &Analysis, offset: usize) -> Option<(Span, String)> {
    // A comment inside an expression is not that expression.
    let o = offset as u32;
    if a.program.trivia.iter().any(|t| t.kind == TriviaKind::Comment && t.span.start <= o && o <= t.span.end) {
        return None;
    }
    let (span, v) = a.value_around(offset)?;
    let text = match v {
        Value::Model(_) => model_markdown(&a.session, v, None),
        Value::Func(_) => code(&signature_of_value(&a.session, v).map(|s| s.label).unwrap_or_else(|| short(&a.session, v))),
        _ => code(&short(&a.session, v)),
    };
    Some((span, text))
}
