//! What each feature answers in the cases the stdio test does not reach, in-process: the quick
//! fixes of the diagnostics whose help carries one, types in a file with a syntax error, member
//! and module completion on lines that do not parse yet, signature help through a pipe and a
//! named argument, references across open documents, workspace symbols, range formatting.

use dlc::lsp::Server;
use serde_json::{json, Value};

fn open(server: &mut Server, name: &str, text: &str) -> String {
    let uri = format!("file:///tmp/dlc-lsp-features/{name}");
    server.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "dl", "version": 1, "text": text}}));
    uri
}

fn at(uri: &str, text: &str, needle: &str, shift: usize) -> Value {
    json!({"textDocument": {"uri": uri}, "position": super::client::position(text, needle, 0, shift)})
}

fn ok(server: &mut Server, method: &str, params: Value) -> Value {
    server.request(method, params).unwrap_or_else(|e| panic!("{method}: {}", e.message))
}

fn whole(text: &str) -> Value {
    json!({"start": {"line": 0, "character": 0}, "end": {"line": text.lines().count(), "character": 0}})
}

const FIXES: &str = "use std.data

model M(n: int = 8) {
  fc1 = Linear(784, n)
  fc2 = Linear(16, 10)
  forward(x: f32[B, 784]) = x |> fc1 |> relu |> fc2
}
let a = randn(f32[3, 4])
let s = a.sum(1)
";

#[test]
fn lsp_quick_fixes() {
    let mut server = Server::new(&Default::default());
    let uri = open(&mut server, "fixes.dl", FIXES);
    let actions = ok(
        &mut server,
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": whole(FIXES), "context": {"diagnostics": []}}),
    );
    let titles: Vec<&str> = actions.as_array().unwrap().iter().map(|a| a["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["Add `use std.nn`", "Write `sum(a, axis: 1)`"]);
    let edit = &actions[0]["edit"]["changes"][&uri][0];
    assert_eq!(edit["newText"], "use std.nn\n");
    assert_eq!(edit["range"]["start"], json!({"line": 1, "character": 0}), "after the last `use`");
    let edit = &actions[1]["edit"]["changes"][&uri][0];
    assert_eq!(edit["range"]["start"], super::client::position(FIXES, "a.sum", 0, 0));

    // With the `use`, the layer whose size does not fit gets the one that does.
    let fixed = format!("use std.nn\n{FIXES}");
    server.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": fixed}]}));
    let actions = ok(
        &mut server,
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": whole(&fixed), "context": {"diagnostics": []}}),
    );
    let layer = &actions[0];
    assert_eq!(layer["title"], "Change to `Linear(8, 10)`");
    let edit = &layer["edit"]["changes"][&uri][0];
    assert_eq!(edit["range"]["start"], super::client::position(&fixed, "Linear(16", 0, 0));
    assert_eq!(edit["range"]["end"], super::client::position(&fixed, "Linear(16, 10)", 0, 14));
}

const PARTIAL: &str = "use std.nn
use std.

model M(n: int = 8) {
  fc1 = Linear(784, n)
  forward(x: f32[B, 784]) {
    let h = x |> fc1
    let m = h.
    h |> relu
  }
}
fn oops(x) = x +* 2
let q = sum(randn(f32[3, 4]), axis: 1) |> softmax(axis: 0)
";

#[test]
fn lsp_on_a_file_being_typed() {
    let mut server = Server::new(&Default::default());
    let uri = open(&mut server, "partial.dl", PARTIAL);
    // What parsed is checked: the types after the broken lines are known.
    let hover = ok(&mut server, "textDocument/hover", at(&uri, PARTIAL, "q =", 0));
    assert!(hover["contents"]["value"].as_str().unwrap().contains("q: f32[3]"), "{hover}");
    let hints = ok(&mut server, "textDocument/inlayHint", json!({"textDocument": {"uri": uri}, "range": whole(PARTIAL)}));
    let labels: Vec<&str> = hints.as_array().unwrap().iter().map(|h| h["label"].as_str().unwrap()).collect();
    assert!(labels.contains(&": f32[B, 8]"), "the block's `let h`: {labels:?}");

    let labels = |v: Value| -> Vec<String> { v.as_array().unwrap().iter().map(|i| i["label"].as_str().unwrap().to_string()).collect() };
    let members = labels(ok(&mut server, "textDocument/completion", at(&uri, PARTIAL, "h.\n", 2)));
    assert_eq!(members, ["shape", "dtype", "ndim", "T"]);
    let modules = labels(ok(&mut server, "textDocument/completion", at(&uri, PARTIAL, "std.\n", 4)));
    assert_eq!(modules, ["prelude", "nn", "optim", "data"]);

    // Through a pipe the first parameter is the piped value; a named argument is its parameter.
    let help = ok(&mut server, "textDocument/signatureHelp", at(&uri, PARTIAL, "softmax(axis", 8));
    assert_eq!(help["signatures"][0]["label"], "fn softmax(x, axis: int = -1)");
    assert_eq!(help["activeParameter"], 1);
    let help = ok(&mut server, "textDocument/signatureHelp", at(&uri, PARTIAL, "sum(randn", 4));
    assert_eq!(help["signatures"][0]["label"], "sum(x, axis:, keepdim:)");
    assert_eq!(help["activeParameter"], 0);
}

const A: &str = "use std.nn\nfn f(x: f32[B, 4]) = relu(x) + relu(x)\n";
const B: &str = "fn g(y: f32[2]) = relu(y)\nlet z = 1\n\nlet   w   =   2\n";

#[test]
fn lsp_references_symbols_and_range_formatting() {
    let mut server = Server::new(&Default::default());
    let a = open(&mut server, "a.dl", A);
    let b = open(&mut server, "b.dl", B);
    let mut p = at(&a, A, "relu", 1);
    p["context"] = json!({"includeDeclaration": false});
    let refs = ok(&mut server, "textDocument/references", p);
    let files: Vec<&str> = refs.as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert_eq!(files.iter().filter(|u| **u == a).count(), 2, "{refs}");
    assert_eq!(files.iter().filter(|u| **u == b).count(), 1, "{refs}");

    let symbols = ok(&mut server, "workspace/symbol", json!({"query": "relu"}));
    let names: Vec<&str> = symbols.as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"relu") && names.contains(&"leaky_relu"), "{names:?}");
    let symbols = ok(&mut server, "workspace/symbol", json!({"query": "g"}));
    assert!(symbols.as_array().unwrap().iter().any(|s| s["name"] == "g" && s["location"]["uri"] == b), "{symbols}");

    // Only the lines asked for change.
    let range = json!({"start": {"line": 3, "character": 0}, "end": {"line": 3, "character": 5}});
    let edits = ok(
        &mut server,
        "textDocument/rangeFormatting",
        json!({"textDocument": {"uri": b}, "range": range, "options": {"tabSize": 2, "insertSpaces": true}}),
    );
    let edits = edits.as_array().unwrap();
    assert_eq!(edits.len(), 1, "{edits:?}");
    assert_eq!(edits[0]["newText"], "let w = 2\n");
    assert_eq!(edits[0]["range"]["start"]["line"], 3);
}
