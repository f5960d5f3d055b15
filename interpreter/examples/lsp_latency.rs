//! The language server's latency: for every example, the time from a change to its
//! diagnostics (the file checked again by `Session::check_partial` and the diagnostics
//! converted) and the time to answer a hover, in-process (the server's own work, no debounce);
//! then for the largest example over stdio through the real `dlc lsp` binary beside this one,
//! from sending `didChange` to reading `publishDiagnostics` (with the default debounce and with
//! none) and a hover's round trip. Medians of many runs; docs/benchmarks.md has the figures.
//!
//! `cargo build --release -p dlc && cargo run --release -p dlc --example lsp_latency`

use dlc::lsp::Server;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

const RUNS: usize = 60;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// A change that keeps the program as it is: a space added at the end, then taken away.
fn change(version: i32, text: &str) -> Value {
    let lines = text.split('\n').count() - 1;
    let last = text.rsplit('\n').next().unwrap_or("").encode_utf16().count();
    let at = json!({"line": lines, "character": last});
    let (range, new) = if version % 2 == 0 {
        (json!({"start": at, "end": at}), " ")
    } else {
        (json!({"start": at, "end": {"line": lines, "character": last + 1}}), "")
    };
    json!({"textDocument": {"uri": "", "version": version}, "contentChanges": [{"range": range, "text": new}]})
}

/// The positions of the names of `text` (where a user hovers).
fn name_positions(text: &str) -> Vec<Value> {
    let mut out = vec![];
    for (line, l) in text.lines().enumerate() {
        let code = l.split('#').next().unwrap_or("");
        let mut col = 0;
        for (i, c) in code.char_indices() {
            if c.is_alphabetic() && (i == 0 || !code[..i].ends_with(|p: char| p.is_alphanumeric() || p == '_')) {
                out.push(json!({"line": line, "character": col}));
            }
            col += c.len_utf16();
        }
    }
    out
}

struct Row {
    file: String,
    bytes: usize,
    diagnostics_ms: f64,
    check_ms: f64,
    hover_us: f64,
}

fn in_process(file: &Path) -> Row {
    let text = std::fs::read_to_string(file).unwrap();
    let uri = dlc::lsp::uri_from_path(file).unwrap().as_str().to_string();
    let mut server = Server::new(&Default::default());
    server.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "dl", "version": 0, "text": text}}));
    let parsed: lsp_types::Uri = uri.parse().unwrap();
    server.flush(&parsed);
    server.take_outbox();
    let (mut diag, mut check) = (vec![], vec![]);
    for v in 1..=RUNS as i32 {
        let mut c = change(v, &text);
        c["textDocument"]["uri"] = json!(uri);
        server.notify("textDocument/didChange", c);
        let t = Instant::now();
        server.flush(&parsed);
        let out = server.take_outbox();
        diag.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(out.len(), 1, "one publishDiagnostics");
        check.push(server.analysis(&parsed).unwrap().elapsed.as_secs_f64() * 1e3);
    }
    let mut hover = vec![];
    for p in name_positions(&text).iter().cycle().take(RUNS * 10) {
        let t = Instant::now();
        let r = server.request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": p}));
        hover.push(t.elapsed().as_secs_f64() * 1e6);
        r.expect("a hover reply");
    }
    Row {
        file: file.file_name().unwrap().to_string_lossy().into(),
        bytes: text.len(),
        diagnostics_ms: median(diag),
        check_ms: median(check),
        hover_us: median(hover),
    }
}

struct Stdio2 {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Stdio2 {
    fn send(&mut self, m: Value) {
        let b = m.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{b}", b.len()).unwrap();
        self.stdin.flush().unwrap();
    }
    fn read(&mut self) -> Value {
        let mut n = 0;
        loop {
            let mut l = String::new();
            self.stdout.read_line(&mut l).unwrap();
            if l.trim().is_empty() {
                break;
            }
            if let Some(x) = l.trim().strip_prefix("Content-Length: ") {
                n = x.parse().unwrap();
            }
        }
        let mut body = vec![0; n];
        self.stdout.read_exact(&mut body).unwrap();
        serde_json::from_slice(&body).unwrap()
    }
    fn until(&mut self, f: impl Fn(&Value) -> bool) -> Value {
        loop {
            let m = self.read();
            if f(&m) {
                return m;
            }
        }
    }
}

/// Change-to-diagnostics and hover round trips through the binary, medians in ms.
fn over_stdio(dlc: &Path, file: &Path, debounce_ms: Option<u64>) -> (f64, f64) {
    let mut child = Command::new(dlc).arg("lsp").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start dlc lsp");
    let mut io = Stdio2 { stdin: child.stdin.take().unwrap(), stdout: BufReader::new(child.stdout.take().unwrap()) };
    let options = debounce_ms.map(|d| json!({"debounceMs": d})).unwrap_or(Value::Null);
    io.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {}, "initializationOptions": options}}));
    io.until(|m| m["id"] == 0);
    io.send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    let text = std::fs::read_to_string(file).unwrap();
    let uri = dlc::lsp::uri_from_path(file).unwrap().as_str().to_string();
    io.send(json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": uri, "languageId": "dl", "version": 0, "text": text}}}));
    io.until(|m| m["method"] == "textDocument/publishDiagnostics");
    let mut diag = vec![];
    for v in 1..=RUNS as i32 {
        let mut c = change(v, &text);
        c["textDocument"]["uri"] = json!(uri);
        let t = Instant::now();
        io.send(json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": c}));
        io.until(|m| m["method"] == "textDocument/publishDiagnostics" && m["params"]["version"] == v);
        diag.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mut hover = vec![];
    for (i, p) in name_positions(&text).iter().cycle().take(RUNS * 5).enumerate() {
        let id = i + 1;
        let t = Instant::now();
        io.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "textDocument/hover", "params": {"textDocument": {"uri": uri}, "position": p}}),
        );
        io.until(|m| m["id"] == id);
        hover.push(t.elapsed().as_secs_f64() * 1e3);
    }
    io.send(json!({"jsonrpc": "2.0", "id": -1, "method": "shutdown", "params": null}));
    io.until(|m| m["id"] == -1);
    io.send(json!({"jsonrpc": "2.0", "method": "exit", "params": null}));
    let _ = child.wait();
    (median(diag), median(hover))
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("examples"))
        .unwrap()
        .flatten()
        .map(|e| e.path().canonicalize().unwrap())
        .filter(|p| p.extension().is_some_and(|e| e == "dl"))
        .collect();
    files.sort_by_key(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0));
    println!("in-process, medians of {RUNS} changes and {} hovers:", RUNS * 10);
    println!("{:<22} {:>6} {:>16} {:>10} {:>10}", "example", "bytes", "diagnostics ms", "check ms", "hover us");
    for f in &files {
        let r = in_process(f);
        println!("{:<22} {:>6} {:>16.2} {:>10.2} {:>10.1}", r.file, r.bytes, r.diagnostics_ms, r.check_ms, r.hover_us);
    }
    let largest = files.last().expect("examples");
    let dlc = std::env::current_exe().unwrap().parent().and_then(|p| p.parent()).map(|p| p.join("dlc")).filter(|p| p.exists());
    let Some(dlc) = dlc else {
        println!("(no dlc binary beside this example: build it with `cargo build -p dlc` in the same profile for the stdio figures)");
        return;
    };
    for debounce in [None, Some(0)] {
        let (d, h) = over_stdio(&dlc, largest, debounce);
        let which = debounce.map_or(format!("default debounce {} ms", dlc::lsp::DEBOUNCE.as_millis()), |d| format!("debounce {d} ms"));
        println!(
            "over stdio, {} ({which}): didChange -> publishDiagnostics median {d:.2} ms; hover round trip median {h:.2} ms",
            largest.file_name().unwrap().to_string_lossy()
        );
    }
}
