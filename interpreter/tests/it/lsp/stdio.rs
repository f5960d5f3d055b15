//! The real `dlc lsp` over stdio, as an editor drives it: a file with an error opened, the
//! diagnostic compared with `dlc check --json`'s, its quick fix, the fix typed (diagnostics
//! cleared), then hover, inlay hints, definition into the stdlib, completion in a recipe,
//! signature help, formatting, code lenses, references, symbols, rename, and shutdown.

use super::client::{position, Client};
use crate::common::{dlc_in, scratch, text};
use serde_json::{json, Value};

/// `é≥𝑥` before the error: 4 UTF-16 units but 3 characters and 9 bytes, so a column counted in
/// the wrong unit misses `rellu`.
const PROGRAM: &str = r#"use std.nn
use std.data
use std.optim

# A small classifier.
model Mlp(hidden: int = 64) {
  fc1 = Linear(784, hidden)
  fc2 = Linear(hidden, 10)
  forward(x: f32[B, 784]) -> f32[B, 10] = x |> fc1 |> relu |> fc2
}

let w = randn(f32[4,784], seed:1)
print("é≥𝑥", w |> rellu)

data train_set = tensors(randn(f32[64, 784], seed: 2), zeros(i64[64])) |> batch(16)

train small {
  model = Mlp()
  data = train_set
  loss = cross_entropy(model(x), y)
  optimizer = adam(lr: 1e-3)
  epochs = 1

}
"#;

fn doc(uri: &str) -> Value {
    json!({"uri": uri})
}

fn at(uri: &str, text: &str, needle: &str, nth: usize, shift: usize) -> Value {
    json!({"textDocument": doc(uri), "position": position(text, needle, nth, shift)})
}

/// The byte offset of an LSP position (UTF-16 columns).
fn offset(text: &str, pos: &Value) -> usize {
    let line = pos["line"].as_u64().unwrap() as usize;
    let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
    let mut units = pos["character"].as_u64().unwrap() as usize;
    let mut at = start;
    for c in text[start..].chars() {
        if units == 0 || c == '\n' {
            break;
        }
        units = units.saturating_sub(c.len_utf16());
        at += c.len_utf8();
    }
    at
}

/// `text` with LSP text edits applied.
fn apply(text: &str, edits: &[Value]) -> String {
    let mut spans: Vec<(usize, usize, String)> = edits
        .iter()
        .map(|e| (offset(text, &e["range"]["start"]), offset(text, &e["range"]["end"]), e["newText"].as_str().unwrap().to_string()))
        .collect();
    spans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut out = text.to_string();
    for (a, b, t) in spans {
        out.replace_range(a..b, &t);
    }
    out
}

/// Open the program with its error: the diagnostic is the CLI's, at the right UTF-16 column,
/// and its quick fix writes `relu`; typing that fix clears the diagnostics.
fn error_then_fix(c: &mut Client, dir: &std::path::Path, uri: &str) -> String {
    c.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "dl", "version": 1, "text": PROGRAM}}));
    let diags = c.diagnostics(uri, 1);
    assert_eq!(diags.len(), 1, "{diags:#?}");
    let d = &diags[0];
    let cli: Value = serde_json::from_str(&text(&dlc_in(dir, &["check", "--json", "small.dl"]).stdout)).expect("dlc check --json");
    let expected = &cli["diagnostics"][0];
    assert_eq!(d["code"], expected["code"]);
    assert_eq!(d["code"], "E0201");
    assert!(d["message"].as_str().unwrap().starts_with(expected["message"].as_str().unwrap()), "{d} vs {expected}");
    assert!(d["message"].as_str().unwrap().contains("help: did you mean `relu`?"), "{d}");
    assert_eq!(d["range"]["start"]["line"].as_u64().unwrap() + 1, expected["labels"][0]["span"]["line"].as_u64().unwrap());
    assert_eq!(d["range"]["start"], position(PROGRAM, "rellu", 0, 0));
    assert_eq!(d["range"]["end"], position(PROGRAM, "rellu", 0, 5));

    let actions =
        c.request("textDocument/codeAction", json!({"textDocument": doc(uri), "range": d["range"], "context": {"diagnostics": [d]}}));
    let action = &actions[0];
    assert_eq!(action["kind"], "quickfix");
    assert_eq!(action["title"], "Change to `relu`");
    let edits = action["edit"]["changes"][uri].as_array().expect("edits for the document").clone();
    let fixed = apply(PROGRAM, &edits);
    assert!(fixed.contains("w |> relu)"), "{fixed}");

    let change = json!({"range": d["range"], "text": "relu"});
    c.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [change]}));
    assert_eq!(c.diagnostics(uri, 2), Vec::<Value>::new());
    fixed
}

/// Hover on a layer and on a pipe stage, inlay hints, definition into the stdlib.
fn types_and_definitions(c: &mut Client, uri: &str, text: &str) {
    let layer = c.request("textDocument/hover", at(uri, text, "fc1", 1, 1));
    let shown = layer["contents"]["value"].as_str().unwrap();
    assert!(shown.contains("fc1: Linear(in_features=784, out_features=64, bias=true)"), "{shown}");
    assert!(shown.contains("50,240"), "{shown}");
    // On the `|>` before `relu`: the expression `x |> fc1 |> relu`.
    let stage = c.request("textDocument/hover", at(uri, text, "|> relu", 0, 0));
    assert!(stage["contents"]["value"].as_str().unwrap().contains("f32[B, 64]"), "{stage}");

    let whole = json!({"start": {"line": 0, "character": 0}, "end": position(text, "train small", 0, 0)});
    let hints = c.request("textDocument/inlayHint", json!({"textDocument": doc(uri), "range": whole}));
    let labels: Vec<(Value, String)> =
        hints.as_array().unwrap().iter().map(|h| (h["position"].clone(), h["label"].as_str().unwrap().to_string())).collect();
    assert!(labels.contains(&(position(text, "fc1 |> relu", 0, 3), ": f32[B, 64]".into())), "{labels:?}");
    assert!(labels.contains(&(position(text, "w = randn", 0, 1), ": f32[4, 784]".into())), "{labels:?}");

    let def = c.request("textDocument/definition", at(uri, text, "Linear", 0, 2));
    let target = def["uri"].as_str().unwrap();
    assert!(target.starts_with("file://") && target.ends_with("/nn.dl"), "{def}");
    let path = dlc::lsp::uri_to_path(&target.parse().unwrap()).unwrap();
    let nn = std::fs::read_to_string(&path).expect("the stdlib file exists");
    let line = nn.lines().nth(def["range"]["start"]["line"].as_u64().unwrap() as usize).unwrap();
    assert!(line.starts_with("model Linear("), "{line}");
}

/// Completion of recipe fields and of a field's values, and signature help.
fn completion(c: &mut Client, uri: &str, text: &str) {
    let blank = position(text, "\n}", 1, 0);
    let items = c.request("textDocument/completion", json!({"textDocument": doc(uri), "position": blank}));
    let labels: Vec<&str> = items.as_array().unwrap().iter().map(|i| i["label"].as_str().unwrap()).collect();
    assert!(labels.contains(&"schedule") && labels.contains(&"precision") && labels.contains(&"evaluate"), "{labels:?}");
    assert!(!labels.contains(&"model") && !labels.contains(&"epochs"), "fields already given are not offered: {labels:?}");

    let change = json!({"range": {"start": blank, "end": blank}, "text": "  precision = "});
    c.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": 3}, "contentChanges": [change]}));
    let end = json!({"line": blank["line"], "character": 14});
    let items = c.request("textDocument/completion", json!({"textDocument": doc(uri), "position": end}));
    let labels: Vec<&str> = items.as_array().unwrap().iter().map(|i| i["label"].as_str().unwrap()).collect();
    assert!(labels.contains(&"bf16") && labels.contains(&"f32"), "{labels:?}");
    // The whole text again (a change without a range).
    c.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": 4}, "contentChanges": [{"text": text}]}));

    let help = c.request("textDocument/signatureHelp", at(uri, text, "adam(lr", 0, 5));
    assert!(help["signatures"][0]["label"].as_str().unwrap().starts_with("fn adam(lr: float = 1e-3"), "{help}");
    assert_eq!(help["activeParameter"], 0);
}

/// Formatting gives `dlc fmt`'s text; the lenses count the parameters and plan the step.
fn formatting_and_lenses(c: &mut Client, uri: &str, text: &str) {
    let edits = c.request("textDocument/formatting", json!({"textDocument": doc(uri), "options": {"tabSize": 2, "insertSpaces": true}}));
    let formatted = apply(text, edits.as_array().unwrap());
    let expected = dlc_language::format::format(dlc_language::FileId(0), text).expect("formats");
    assert_eq!(formatted, expected);
    assert!(formatted.contains("randn(f32[4, 784], seed: 1)"));

    let lenses = c.request("textDocument/codeLens", json!({"textDocument": doc(uri)}));
    let lenses = lenses.as_array().unwrap();
    let titles: Vec<&str> = lenses.iter().filter_map(|l| l["command"]["title"].as_str()).collect();
    assert!(titles.contains(&"▶ Run train small") && titles.contains(&"50,890 parameters"), "{titles:?}");
    let lazy = lenses.iter().find(|l| l.get("command").is_none_or(Value::is_null)).expect("a lens to resolve");
    let resolved = c.request("codeLens/resolve", lazy.clone());
    let title = resolved["command"]["title"].as_str().unwrap();
    assert!(title.contains("peak") && title.contains("kernels"), "{title}");
}

/// References, document symbols and renaming a parameter.
fn names(c: &mut Client, uri: &str, text: &str) {
    let mut p = at(uri, text, "Mlp", 0, 0);
    p["context"] = json!({"includeDeclaration": true});
    let refs = c.request("textDocument/references", p);
    assert_eq!(refs.as_array().unwrap().len(), 2, "{refs}");

    let symbols = c.request("textDocument/documentSymbol", json!({"textDocument": doc(uri)}));
    let names: Vec<&str> = symbols.as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"Mlp") && names.contains(&"train small") && names.contains(&"train_set"), "{names:?}");

    let mut p = at(uri, text, "x: f32", 0, 0);
    p["newName"] = json!("inputs");
    let edit = c.request("textDocument/rename", p);
    let renamed = apply(text, edit["changes"][uri].as_array().unwrap());
    assert!(renamed.contains("forward(inputs: f32[B, 784]) -> f32[B, 10] = inputs |> fc1"), "{renamed}");
    // A layer is not a local: refused with a reason.
    let refused = c.request_raw("textDocument/prepareRename", at(uri, text, "fc1", 0, 0));
    assert!(refused["error"]["message"].as_str().unwrap().contains("only local names"), "{refused}");
}

#[test]
fn lsp_over_stdio() {
    let dir = scratch("lsp-stdio");
    std::fs::write(dir.join("small.dl"), PROGRAM).unwrap();
    let uri = dlc::lsp::uri_from_path(&dir.join("small.dl").canonicalize().unwrap()).unwrap().as_str().to_string();
    let mut c = Client::start(&dir);
    let root = dlc::lsp::uri_from_path(&dir.canonicalize().unwrap()).unwrap();
    let init = c.request("initialize", json!({"processId": null, "rootUri": root.as_str(), "capabilities": {}}));
    assert_eq!(init["serverInfo"]["name"], "dlc");
    assert_eq!(init["capabilities"]["textDocumentSync"]["change"], 2, "incremental sync");
    c.notify("initialized", json!({}));

    let fixed = error_then_fix(&mut c, &dir, &uri);
    types_and_definitions(&mut c, &uri, &fixed);
    completion(&mut c, &uri, &fixed);
    formatting_and_lenses(&mut c, &uri, &fixed);
    names(&mut c, &uri, &fixed);
    assert!(c.shutdown().success(), "exit status 0 after shutdown");
}
