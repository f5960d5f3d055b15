//! Rename of a local name: a `let` in a block, a parameter of a function, method or step, a
//! lambda's parameter, a size an annotation names. Its definition and every use `scopes` links
//! to it change; nothing else can see it. Items, fields and hyper-parameters are refused: other
//! files, named arguments and checkpoints' parameter names (`fc1.weight`) refer to them by name.

use super::analysis::Analysis;
use super::scopes::DefKind;
use dlc_language::syntax::ast::ExprKind;
use dlc_language::syntax::token::Kw;
use dlc_language::types::DType;
use lsp_types::{Range, TextEdit};

/// The range of the name that can be renamed at `offset`, or why not.
pub fn prepare(a: &Analysis, offset: usize) -> Result<Range, String> {
    let hit = a.index.at(offset).ok_or("no name here")?;
    let name = a.index.name_of(hit);
    let Some(def) = a.index.def_of(hit) else {
        return Err(format!("`{name}` is defined outside this file (the standard library, a module or a builtin)"));
    };
    let d = &a.index.defs[def];
    if !d.kind.is_local() {
        return Err(format!("only local names can be renamed; `{name}` is {}", what(d.kind)));
    }
    if d.kind == DefKind::Param && named_argument(a, name) {
        return Err(format!("`{name}` is also written as a named argument (`{name}: ...`) in this file; rename by hand"));
    }
    Ok(a.range(a.index.span_of(hit)))
}

fn what(k: DefKind) -> &'static str {
    match k {
        DefKind::Fn | DefKind::Model | DefKind::Let | DefKind::Data => "a top-level item, which other files may use",
        DefKind::HParam => "a hyper-parameter, which calls may name (`Mlp(hidden: 512)`)",
        DefKind::Field | DefKind::Method => "a model's field, which parameter names and checkpoints use",
        DefKind::RecipeBinding => "bound by the recipe",
        _ => "local",
    }
}

/// Whether any call of the file names an argument `name`.
fn named_argument(a: &Analysis, name: &str) -> bool {
    let mut found = false;
    super::walk::program(&a.program, &mut |n| {
        if let super::walk::Node::Expr(e) = n {
            if let ExprKind::Call(_, args) = &e.kind {
                found |= args.iter().any(|x| x.name.as_ref().is_some_and(|n| n.name == name));
            }
        }
    });
    found
}

pub fn rename(a: &Analysis, offset: usize, new_name: &str) -> Result<Vec<TextEdit>, String> {
    prepare(a, offset)?;
    let valid =
        new_name.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_') && new_name.chars().all(|c| c.is_alphanumeric() || c == '_');
    if !valid || Kw::lookup(new_name).is_some() || DType::from_name(new_name).is_some() {
        return Err(format!("`{new_name}` is not a name DL allows here"));
    }
    let def = a.index.at(offset).and_then(|h| a.index.def_of(h)).ok_or("no name here")?;
    let d = &a.index.defs[def];
    // A name already visible where the renamed one is used would be captured or shadow it.
    let taken = std::iter::once(d.span)
        .chain(a.index.uses(def).map(|r| r.span))
        .any(|s| a.index.visible(s.start as usize).iter().any(|&i| i != def && a.index.defs[i].name == new_name));
    if taken {
        return Err(format!("`{new_name}` is already a name where `{}` is used", d.name));
    }
    let mut edits = vec![TextEdit { range: a.range(d.span), new_text: new_name.to_string() }];
    edits.extend(a.index.uses(def).map(|r| TextEdit { range: a.range(r.span), new_text: new_name.to_string() }));
    Ok(edits)
}
