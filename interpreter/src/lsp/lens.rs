//! Code lenses on each `train` recipe: one that runs it (`dlc.run`, which the editor's plugin
//! or the server itself carries out), its model's parameter count (read from the analysis), and
//! the training step's planned peak memory and kernel count. The plan needs the step compiled
//! through the driver (tens of milliseconds, more for large models), so that lens is resolved
//! lazily (`codeLens/resolve`), and only for a file without errors.

use super::analysis::{display_name, Analysis};
use super::describe::{digits, params};
use dlc_language::eval::Value;
use dlc_language::syntax::ast::{ItemKind, RecipeKind};
use lsp_types::{CodeLens, Command, Uri};

/// The command a run lens carries: arguments `[file, recipe name or null]`.
pub const RUN: &str = "dlc.run";

pub fn lenses(a: &Analysis, uri: &Uri) -> Vec<CodeLens> {
    let mut out = vec![];
    let file = display_name(a.path.as_deref());
    let trains = a.program.items.iter().filter_map(|i| match &i.kind {
        ItemKind::Recipe(r) if r.kind == RecipeKind::Train => Some(r),
        _ => None,
    });
    for (index, r) in trains.enumerate() {
        let range = a.range(dlc_language::Span { end: r.span.start, ..r.span });
        let name = r.name.as_ref().map(|n| n.name.clone());
        let label = name.as_ref().map_or("train".to_string(), |n| format!("train {n}"));
        let args = vec![serde_json::json!(file), serde_json::json!(name)];
        out.push(CodeLens {
            range,
            command: Some(Command { title: format!("▶ Run {label}"), command: RUN.into(), arguments: Some(args) }),
            data: None,
        });
        let checked = a.session.t.recipes.iter().find(|info| info.recipe.span == r.span);
        let title = match checked {
            Some(info) => {
                let models: Vec<&Value> = match (info.field("model"), info.field("models")) {
                    (Some(m), _) => vec![m],
                    (None, Some(Value::Record(items))) => items.iter().map(|(_, v)| v).collect(),
                    _ => vec![],
                };
                let total: Option<u64> = models.iter().map(|m| params(&a.session, m).1).sum();
                match total {
                    Some(t) => format!("{} parameters", digits(t)),
                    None => "parameters: sizes are symbolic".into(),
                }
            }
            None => "parameters: the recipe has errors".into(),
        };
        out.push(CodeLens { range, command: Some(Command { title, command: String::new(), arguments: None }), data: None });
        let data = serde_json::json!({ "uri": uri.as_str(), "version": a.version, "train": index });
        out.push(CodeLens { range, command: None, data: Some(data) });
    }
    out
}

/// The plan lens's title: `peak 18.3 MiB · 7 kernels per step`, or why there is none.
pub fn plan_title(a: &Analysis, index: usize) -> String {
    if a.session.t.has_errors() {
        return "no step plan: the file has errors".into();
    }
    let name = display_name(a.path.as_deref());
    let root = a.path.as_deref().map(crate::paths::program_root).unwrap_or_else(|| std::path::PathBuf::from("."));
    let mut p = crate::Program::check(&name, &a.text, Some(&root));
    let Some(info) = p.session.t.recipes.iter().filter(|r| r.kind == RecipeKind::Train).nth(index).cloned() else {
        return "no step plan: the recipe did not check".into();
    };
    let t = crate::compile::train(&mut p, info, &crate::compile::Options::new(root));
    match t.step {
        Ok(step) => format!(
            "step: peak {:.1} MiB · {} kernels (batch {})",
            step.memory.peak() as f64 / (1024.0 * 1024.0),
            step.plan.kernel_count(),
            crate::compile::shapes_text(&step.shapes)
        ),
        Err(e) => format!("no step plan before the run: {e}"),
    }
}
