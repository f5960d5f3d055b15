//! Completion, by what the text before the cursor says is wanted: a module after `use`; a
//! value's fields after `.` (a tensor's `shape`, a model's layers); in a recipe, the fields its
//! kind accepts and its clauses at the start of a line, and after `field =` the values that
//! field takes (optimisers, schedules, precisions, devices, the file's models and data);
//! otherwise every name in scope, with layers and functions by signature, and the stdlib's
//! items not imported yet with the `use` they need.

use super::analysis::Analysis;
use super::describe::short;
use super::docs;
use super::resolve::{builtin_signature, signature_of_value, target_at, value_of};
use super::scopes::{DefKind, Hit};
use super::stdlib::{Builds, StdKind, Stdlib};
use dlc_language::eval::builtins;
use dlc_language::eval::Value;
use dlc_language::syntax::ast::RecipeKind;
use lsp_types::{
    CompletionItem, CompletionItemKind as Kind, CompletionTextEdit, Documentation, MarkupContent, MarkupKind, Position, Range, TextEdit,
};

pub fn complete(a: &Analysis, std: &Stdlib, offset: usize) -> Vec<CompletionItem> {
    let text = &a.text;
    let offset = offset.min(text.len());
    let word_start = text[..offset].trim_end_matches(|c: char| c.is_alphanumeric() || c == '_').len();
    let line_start = text[..word_start].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[line_start..word_start];
    let range = a.lines.range(text, word_start, offset);
    let mut c = Out { items: vec![], range };
    if before.trim_start().starts_with("use ") || before.trim() == "use" {
        modules(a, std, before.trim_start().trim_start_matches("use").trim(), &mut c);
    } else if let Some(receiver) = before.strip_suffix('.') {
        members(a, receiver, line_start, &mut c);
    } else if before.trim_end().ends_with("every") {
        for u in ["epoch", "epochs", "step", "steps"] {
            c.add(u, Kind::UNIT, None, None, "0");
        }
    } else if let Some(kind) = recipe_at(text, line_start) {
        match field_being_set(before) {
            Some(field) => {
                field_values(a, std, &field, &mut c);
                names(a, std, offset, &mut c);
            }
            None if before.trim().is_empty() => recipe_fields(text, line_start, kind, &mut c),
            None => names(a, std, offset, &mut c),
        }
    } else {
        names(a, std, offset, &mut c);
    }
    c.items
}

struct Out {
    items: Vec<CompletionItem>,
    range: Range,
}

impl Out {
    fn add(&mut self, label: &str, kind: Kind, detail: Option<String>, doc: Option<String>, rank: &str) -> &mut CompletionItem {
        self.items.push(CompletionItem {
            label: label.to_string(),
            kind: Some(kind),
            detail,
            documentation: doc
                .filter(|d| !d.is_empty())
                .map(|d| Documentation::MarkupContent(MarkupContent { kind: MarkupKind::Markdown, value: d })),
            sort_text: Some(format!("{rank}{label}")),
            text_edit: Some(CompletionTextEdit::Edit(TextEdit { range: self.range, new_text: label.to_string() })),
            ..Default::default()
        });
        self.items.last_mut().expect("just pushed")
    }

    fn has(&self, label: &str) -> bool {
        self.items.iter().any(|i| i.label == label)
    }
}

/// The recipe whose body holds the line starting at `line_start`, directly (not inside one of
/// its blocks): the last line at column 0 above it begins the item, and one brace is open.
fn recipe_at(text: &str, line_start: usize) -> Option<RecipeKind> {
    let above = &text[..line_start];
    let mut head_at = None;
    for (i, line) in line_starts(above) {
        let first = line.chars().next();
        if first.is_some_and(|c| !c.is_whitespace() && c != '#') {
            head_at = Some(i);
        }
    }
    let head_at = head_at?;
    let head = &text[head_at..];
    let kind = match head.split(|c: char| !c.is_alphanumeric() && c != '_').next()? {
        "train" => RecipeKind::Train,
        "evaluate" => RecipeKind::Evaluate,
        "infer" => RecipeKind::Infer,
        _ => return None,
    };
    let body = &text[head_at..line_start];
    let depth = body
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .map(|l| l.matches('{').count() as i64 - l.matches('}').count() as i64)
        .sum::<i64>();
    (depth == 1).then_some(kind)
}

fn line_starts(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut at = 0;
    text.split_inclusive('\n').map(move |l| {
        let start = at;
        at += l.len();
        (start, l)
    })
}

/// `  optimizer = ad`: the field whose value is being written.
fn field_being_set(before: &str) -> Option<String> {
    let (name, rest) = before.split_once('=')?;
    let name = name.trim();
    let ok = !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_') && rest.trim().is_empty();
    ok.then(|| name.to_string())
}

fn recipe_fields(text: &str, line_start: usize, kind: RecipeKind, c: &mut Out) {
    // The fields the recipe already gives, above and below the cursor.
    let body_end = text[line_start..].find("\n}").map_or(text.len(), |i| line_start + i);
    let body_start = text[..line_start].rfind("\n}").map_or(0, |i| i + 2);
    let given: Vec<&str> = text[body_start..body_end]
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(n, _)| n.trim())
        .filter(|n| n.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .collect();
    for field in dlc_language::eval::recipe::field_names(kind) {
        if given.contains(&field) {
            continue;
        }
        let settable = kind == RecipeKind::Train && crate::train::SETTABLE.iter().any(|(n, _)| n.split('.').next() == Some(field));
        let detail = format!("{} field{}", kind.keyword(), if settable { " (`--set` overrides it)" } else { "" });
        let doc = docs::recipe_field(kind, field).map(str::to_string);
        let item = c.add(field, Kind::PROPERTY, Some(detail), doc, "0");
        if let Some(CompletionTextEdit::Edit(e)) = &mut item.text_edit {
            e.new_text = format!("{field} = ");
        }
    }
    let clauses: &[&str] = match kind {
        RecipeKind::Train => &["evaluate", "checkpoint", "log", "step"],
        _ => &[],
    };
    for (name, doc) in docs::CLAUSES.iter().filter(|(n, _)| clauses.contains(n)) {
        c.add(name, Kind::KEYWORD, Some("recipe clause".into()), Some(doc.to_string()), "1");
    }
}

fn field_values(a: &Analysis, std: &Stdlib, field: &str, c: &mut Out) {
    for w in docs::field_words(field) {
        c.add(w, Kind::ENUM_MEMBER, Some(format!("`{field}`")), None, "0");
    }
    let builds = match field {
        "optimizer" => Some(Builds::Optimizer),
        "schedule" => Some(Builds::Schedule),
        "parallel" => Some(Builds::Parallel),
        _ => None,
    };
    if let Some(b) = builds {
        for item in std.items.iter().filter(|i| i.builds == b) {
            c.add(&item.name, Kind::FUNCTION, Some(item.signature.clone()), Some(item.doc.clone()), "0");
        }
    }
    let want = match field {
        "model" => Some(DefKind::Model),
        "data" => Some(DefKind::Data),
        _ => None,
    };
    for d in a.index.defs.iter().filter(|d| Some(d.kind) == want) {
        let kind = if d.kind == DefKind::Model { Kind::CLASS } else { Kind::VARIABLE };
        c.add(&d.name, kind, None, None, "0");
    }
    if field == "loss" || field == "metrics" {
        for item in std.items.iter().filter(|i| i.module == "std.nn" && i.kind == StdKind::Fn) {
            c.add(&item.name, Kind::FUNCTION, Some(item.signature.clone()), Some(item.doc.clone()), "0");
        }
    }
}

fn modules(a: &Analysis, std: &Stdlib, typed: &str, c: &mut Out) {
    let mut mods: Vec<String> = dlc_language::stdlib::MODULES.iter().map(|(m, _)| m.to_string()).collect();
    // The program's own modules: `.dl` files beside it.
    if let Some(dir) = a.path.as_ref().and_then(|p| p.parent()) {
        let mut own: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".dl").map(str::to_string))
            .filter(|m| a.path.as_ref().and_then(|p| p.file_stem()).and_then(|s| s.to_str()) != Some(m.as_str()))
            .collect();
        own.sort();
        mods.extend(own);
    }
    let prefix = typed.rsplit_once('.').map_or("", |(p, _)| p);
    for m in mods {
        let rest = if prefix.is_empty() { m.as_str() } else { m.strip_prefix(prefix).and_then(|r| r.strip_prefix('.')).unwrap_or("") };
        if rest.is_empty() {
            continue;
        }
        let doc = std.items.iter().filter(|i| i.module == m).map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ");
        c.add(rest, Kind::MODULE, Some(m.clone()), Some(doc), "0");
    }
}

/// `x.` completes `x`'s fields: a tensor's, a model's layers and hyper-parameters, a record's.
fn members(a: &Analysis, receiver: &str, line_start: usize, c: &mut Out) {
    let end = line_start + receiver.len();
    let value = match target_at(a, end) {
        Some((hit, target)) => match hit {
            Hit::Ref(r) => a.value_at_span(a.index.refs[r].span).cloned(),
            Hit::Def(_) => None,
        }
        .or_else(|| value_of(a, &target).map(|v| v.into_owned())),
        // `h.` does not parse, so `h` is no use in the tree: the name visible here is meant.
        None => {
            let name = &receiver[receiver.trim_end_matches(|c: char| c.is_alphanumeric() || c == '_').len()..];
            let def = a.index.visible(end).into_iter().find(|&i| a.index.defs[i].name == name);
            match def {
                Some(d) => value_of(a, &super::resolve::Target::Local(d)).map(|v| v.into_owned()),
                None => super::resolve::global(&a.session, name).and_then(|t| value_of(a, &t).map(|v| v.into_owned())),
            }
        }
    };
    match value {
        Some(Value::Tensor(n)) => {
            let ty = a.session.t.graph.ty(n);
            c.add("shape", Kind::FIELD, Some(format!("the sizes of {ty}")), None, "0");
            c.add("dtype", Kind::FIELD, Some(ty.dtype.to_string()), None, "0");
            c.add("ndim", Kind::FIELD, Some(format!("int = {}", ty.shape.len())), None, "0");
            c.add("T", Kind::FIELD, Some("the last two axes swapped".into()), None, "0");
        }
        Some(Value::Model(m)) => {
            for (name, v) in m.fields.iter().chain(m.hparams.iter()) {
                if !c.has(name) {
                    c.add(name, Kind::FIELD, Some(short(&a.session, v)), None, "0");
                }
            }
            for method in &m.decl.methods {
                c.add(&method.name.name, Kind::METHOD, None, None, "1");
            }
        }
        Some(Value::Record(items)) => {
            for (name, v) in items.iter() {
                c.add(name, Kind::FIELD, Some(short(&a.session, v)), None, "0");
            }
        }
        _ => {}
    }
}

/// Every name visible at `offset`: the file's, the imported modules', the builtins, keywords;
/// then the stdlib's other items, each with the `use` that imports it.
fn names(a: &Analysis, std: &Stdlib, offset: usize, c: &mut Out) {
    for i in a.index.visible(offset) {
        let d = &a.index.defs[i];
        let value = value_of(a, &super::resolve::Target::Local(i));
        let (kind, detail) = match (d.kind, value.as_deref()) {
            (_, Some(v @ Value::Func(_))) => (Kind::FUNCTION, signature_of_value(&a.session, v).map(|s| s.label)),
            (DefKind::Model, _) => (Kind::CLASS, None),
            (DefKind::Field, Some(v)) => (Kind::FIELD, Some(short(&a.session, v))),
            (DefKind::Dim, _) => (Kind::TYPE_PARAMETER, Some("size".into())),
            (_, Some(v)) => (Kind::VARIABLE, Some(short(&a.session, v))),
            (_, None) => (Kind::VARIABLE, None),
        };
        c.add(&d.name, kind, detail, None, "0");
    }
    let s = &a.session;
    let imports: Vec<usize> = s.t.modules.get(s.main).map(|m| m.imports.clone()).unwrap_or_default();
    for &imp in &imports {
        let m = &s.t.modules[imp];
        let mut names: Vec<&String> = m.items.keys().collect();
        names.sort();
        for name in names {
            if c.has(name) {
                continue;
            }
            let v = &m.items[name];
            let sig = signature_of_value(s, v);
            let kind = match v {
                Value::Func(f) if matches!(**f, dlc_language::eval::value::Func::ModelCtor { .. }) => Kind::CLASS,
                Value::Func(_) => Kind::FUNCTION,
                _ => Kind::VARIABLE,
            };
            let detail = sig.as_ref().map(|s| s.label.clone()).or_else(|| Some(short(s, v)));
            c.add(name, kind, detail, sig.and_then(|s| s.doc), "1");
        }
        for b in builtins::names_in(&m.name) {
            add_builtin(b, c);
        }
    }
    for b in builtins::names_in("") {
        add_builtin(b, c);
    }
    for w in docs::WORDS {
        if !c.has(w) {
            c.add(w, Kind::KEYWORD, None, None, "3");
        }
    }
    not_imported(a, std, &imports, c);
}

fn add_builtin(name: &str, c: &mut Out) {
    if c.has(name) {
        return;
    }
    let sig = builtin_signature(name);
    c.add(name, Kind::FUNCTION, sig.as_ref().map(|s| s.label.clone()), sig.and_then(|s| s.doc), "1");
}

/// The stdlib's items in modules the file does not import, with the `use` line added.
fn not_imported(a: &Analysis, std: &Stdlib, imports: &[usize], c: &mut Out) {
    let imported: Vec<&str> = imports.iter().map(|&i| a.session.t.modules[i].name.as_str()).collect();
    for m in dlc_language::stdlib::MODULES.iter().map(|(m, _)| *m).filter(|m| !imported.contains(m)) {
        let mut add = |name: &str, kind: Kind, detail: Option<String>, doc: Option<String>| {
            if c.has(name) {
                return;
            }
            let detail = Some(format!("{} (adds `use {m}`)", detail.unwrap_or_default()));
            let item = c.add(name, kind, detail, doc, "2");
            item.additional_text_edits = Some(vec![use_edit(a, m)]);
        };
        for item in std.items.iter().filter(|i| i.module == m) {
            let kind = if item.kind == StdKind::Model { Kind::CLASS } else { Kind::FUNCTION };
            add(&item.name, kind, Some(item.signature.clone()), Some(item.doc.clone()));
        }
        for b in builtins::names_in(m) {
            let sig = builtin_signature(b);
            add(b, Kind::FUNCTION, sig.as_ref().map(|s| s.label.clone()), sig.and_then(|s| s.doc));
        }
    }
}

/// The edit that adds `use module`: after the file's last `use`, else before its first item.
pub fn use_edit(a: &Analysis, module: &str) -> TextEdit {
    use dlc_language::syntax::ast::ItemKind;
    let last_use = a.program.items.iter().filter(|i| matches!(i.kind, ItemKind::Use(_))).map(|i| i.span.end).max();
    let line = match last_use {
        Some(end) => a.lines.position(&a.text, end as usize).line + 1,
        None => a.program.items.first().map_or(0, |i| a.lines.position(&a.text, i.span.start as usize).line),
    };
    if line as usize >= a.lines.line_count() {
        // The last `use` ends the file without a line break.
        let end = a.lines.position(&a.text, a.text.len());
        return TextEdit { range: Range { start: end, end }, new_text: format!("\nuse {module}\n") };
    }
    let at = Position { line, character: 0 };
    TextEdit { range: Range { start: at, end: at }, new_text: format!("use {module}\n") }
}
