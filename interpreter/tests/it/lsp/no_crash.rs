//! The server never crashes on a file being typed: every prefix of every example (at every 7th
//! byte and every line end) and of a sample of the corpus is opened, and every kind of request is
//! made at the prefix's end (where typing happens) and in its middle. Each must answer, and with
//! a result: an error reply only where one is the answer (a rename that cannot be done). The
//! handlers are called in-process (`dlc::lsp::Server`, what the stdio loop calls), for speed.
//! (`workspace/executeCommand` is left out: its one command starts `dlc run`.)

use crate::common::ROOT;
use dlc::lsp::Server;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `RequestFailed`: the server refuses what cannot be done, with the reason.
const REFUSED: i64 = -32803;

/// Byte offsets to cut `text` at: every `step`th byte and every line end, at character starts.
fn cuts(text: &str, step: usize) -> Vec<usize> {
    let mut out: Vec<usize> = (0..=text.len()).step_by(step).collect();
    out.extend(text.match_indices('\n').map(|(i, _)| i));
    out.push(text.len());
    out.retain(|&i| text.is_char_boundary(i));
    out.sort();
    out.dedup();
    out
}

fn position(text: &str, offset: usize) -> Value {
    let line = text[..offset].matches('\n').count();
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    json!({"line": line, "character": text[start..offset].encode_utf16().count()})
}

/// How many answers each request kind gave that were not empty, and how many renames were refused.
#[derive(Default)]
struct Tally {
    answered: BTreeMap<&'static str, usize>,
    refused: usize,
}

/// Every request kind at `pos`.
fn requests(server: &mut Server, uri: &str, text: &str, pos: &Value, what: &str, tally: &mut Tally) {
    let doc = json!({"uri": uri});
    let end = position(text, text.len());
    let whole = json!({"start": {"line": 0, "character": 0}, "end": end});
    let at = json!({"textDocument": doc, "position": pos});
    let with = |extra: Value| {
        let mut p = at.clone();
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let calls = [
        ("textDocument/hover", at.clone()),
        ("textDocument/definition", at.clone()),
        ("textDocument/references", with(json!({"context": {"includeDeclaration": true}}))),
        ("textDocument/completion", at.clone()),
        ("textDocument/signatureHelp", at.clone()),
        ("textDocument/prepareRename", at.clone()),
        ("textDocument/rename", with(json!({"newName": "renamed"}))),
        ("textDocument/inlayHint", json!({"textDocument": doc, "range": whole})),
        ("textDocument/documentSymbol", json!({"textDocument": doc})),
        ("textDocument/codeAction", json!({"textDocument": doc, "range": {"start": pos, "end": pos}, "context": {"diagnostics": []}})),
        ("textDocument/formatting", json!({"textDocument": doc, "options": {"tabSize": 2, "insertSpaces": true}})),
        (
            "textDocument/rangeFormatting",
            json!({"textDocument": doc, "range": {"start": pos, "end": end}, "options": {"tabSize": 2, "insertSpaces": true}}),
        ),
        ("textDocument/codeLens", json!({"textDocument": doc})),
        ("workspace/symbol", json!({"query": "a"})),
    ];
    for (method, params) in calls {
        match server.request(method, params) {
            Ok(result) => {
                if method == "textDocument/codeLens" {
                    resolve_lenses(server, &result, what);
                }
                let empty = result.is_null() || result.as_array().is_some_and(|a| a.is_empty());
                *tally.answered.entry(method).or_default() += usize::from(!empty);
            }
            Err(e) if i64::from(e.code) == REFUSED && method.contains("ename") => tally.refused += 1,
            Err(e) => panic!("{method} on {what}: {} ({})", e.message, e.code),
        }
    }
}

fn resolve_lenses(server: &mut Server, lenses: &Value, what: &str) {
    for lens in lenses.as_array().into_iter().flatten().filter(|l| l.get("command").is_none_or(Value::is_null)) {
        let r = server.request("codeLens/resolve", lens.clone()).unwrap_or_else(|e| panic!("codeLens/resolve on {what}: {}", e.message));
        assert!(r["command"]["title"].is_string(), "{what}: {r}");
    }
}

/// The diagnostics published for the prefix: in range of its text.
fn check_published(server: &mut Server, text: &str, what: &str) {
    let lines = text.split('\n').count() as u64;
    for n in server.take_outbox() {
        for d in n.params["diagnostics"].as_array().into_iter().flatten() {
            let (s, e) = (&d["range"]["start"], &d["range"]["end"]);
            assert!(s["line"].as_u64() <= e["line"].as_u64() && e["line"].as_u64().unwrap() < lines, "{what}: {d}");
            assert!(d["code"].is_string() || d["severity"] != 1, "{what}: an error without a code: {d}");
        }
    }
}

/// Every prefix of `file`; returns how many.
fn every_prefix(server: &mut Server, file: &Path, step: usize, tally: &mut Tally) -> usize {
    let text = std::fs::read_to_string(file).unwrap();
    let uri = dlc::lsp::uri_from_path(file).unwrap().as_str().to_string();
    let cuts = cuts(&text, step);
    for (version, &cut) in cuts.iter().enumerate() {
        let prefix = &text[..cut];
        let what = format!("{} cut at byte {cut}", file.display());
        let open = json!({"textDocument": {"uri": uri, "languageId": "dl", "version": version, "text": prefix}});
        server.notify("textDocument/didOpen", open);
        requests(server, &uri, prefix, &position(prefix, cut), &what, tally);
        let middle = (0..=cut / 2).rev().find(|&i| prefix.is_char_boundary(i)).unwrap_or(0);
        requests(server, &uri, prefix, &position(prefix, middle), &what, tally);
        check_published(server, prefix, &what);
    }
    server.notify("textDocument/didClose", json!({"textDocument": {"uri": uri}}));
    server.take_outbox();
    cuts.len()
}

fn dl_files(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join(dir))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "dl"))
        .map(|p| p.canonicalize().unwrap())
        .collect();
    files.sort();
    files
}

#[test]
fn lsp_answers_every_request_on_every_prefix() {
    let start = std::time::Instant::now();
    let mut server = Server::new(&Default::default());
    let mut files = dl_files("examples");
    assert!(files.len() >= 10, "the examples: {files:?}");
    let examples = files.len();
    // A sample of the corpus: every 8th file, in name order.
    files.extend(dl_files("tests/cases/valid").into_iter().step_by(8));
    let mut tally = Tally::default();
    let mut prefixes = 0;
    for (i, f) in files.iter().enumerate() {
        prefixes += every_prefix(&mut server, f, if i < examples { 7 } else { 13 }, &mut tally);
    }
    // The requests reached the documents: every kind answered something somewhere (a server
    // answering `null` to everything would pass the loop above).
    assert_eq!(tally.answered.len(), 14, "{:?}", tally.answered);
    for (method, n) in &tally.answered {
        assert!(*n > 0, "{method} never answered anything in {prefixes} prefixes");
    }
    // Renames at arbitrary places are mostly refused, but not all: locals do get renamed.
    assert!(tally.refused > 0 && tally.refused < prefixes * 4, "{} refusals in {prefixes} prefixes", tally.refused);
    eprintln!("lsp no-crash: {} files, {prefixes} prefixes, {:.1} s", files.len(), start.elapsed().as_secs_f64());
}
