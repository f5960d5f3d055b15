//! A small LSP client over a child process's stdin and stdout: `Content-Length` framing, requests
//! answered by id, and the notifications the server sends meanwhile kept for the test to read.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// Any one reply taking longer than this is a hang (a check takes milliseconds).
const PATIENCE: Duration = Duration::from_secs(20);

pub struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    incoming: Receiver<Value>,
    pub notifications: Vec<Value>,
    next_id: i64,
}

impl Client {
    /// `dlc lsp` started in `dir`.
    pub fn start(dir: &std::path::Path) -> Client {
        let mut child = crate::common::command(dir)
            .arg("lsp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start dlc lsp");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            while let Some(msg) = read_message(&mut r) {
                if tx.send(msg).is_err() {
                    break;
                }
            }
        });
        Client { child, stdin, incoming: rx, notifications: vec![], next_id: 1 }
    }

    pub fn send(&mut self, msg: Value) {
        let body = msg.to_string();
        let stdin = self.stdin.as_mut().expect("stdin open");
        write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write to dlc lsp");
        stdin.flush().expect("flush");
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Send a request and wait for its reply (the whole message: `result` or `error`).
    pub fn request_raw(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + PATIENCE;
        loop {
            let msg = self.next(deadline).unwrap_or_else(|| panic!("no reply to {method} within {PATIENCE:?}"));
            if msg.get("id") == Some(&json!(id)) && msg.get("method").is_none() {
                return msg;
            }
            self.notifications.push(msg);
        }
    }

    /// A request's `result`; an error reply fails the test.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let reply = self.request_raw(method, params);
        assert!(reply.get("error").is_none(), "{method} failed: {reply}");
        reply["result"].clone()
    }

    fn next(&mut self, deadline: Instant) -> Option<Value> {
        // A timeout and a server that went away both end the wait.
        self.incoming.recv_timeout(deadline.saturating_duration_since(Instant::now())).ok()
    }

    /// The next `publishDiagnostics` for `uri` at document version `version`.
    pub fn diagnostics(&mut self, uri: &str, version: i64) -> Vec<Value> {
        let wanted = |m: &Value| {
            m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri && m["params"]["version"] == json!(version)
        };
        if let Some(i) = self.notifications.iter().position(wanted) {
            let m = self.notifications.remove(i);
            return m["params"]["diagnostics"].as_array().cloned().unwrap_or_default();
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            let msg = self.next(deadline).unwrap_or_else(|| panic!("no diagnostics for {uri} version {version}"));
            if wanted(&msg) {
                return msg["params"]["diagnostics"].as_array().cloned().unwrap_or_default();
            }
            self.notifications.push(msg);
        }
    }

    /// `shutdown`, `exit`, and the server's exit status.
    pub fn shutdown(mut self) -> std::process::ExitStatus {
        let reply = self.request_raw("shutdown", Value::Null);
        assert!(reply.get("error").is_none() && reply["result"].is_null(), "shutdown: {reply}");
        self.notify("exit", Value::Null);
        drop(self.stdin.take());
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for dlc lsp") {
                return status;
            }
            assert!(Instant::now() < deadline, "dlc lsp did not exit after `exit`");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // A failed test must not leave a server behind; after `shutdown` it has exited already.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_message(r: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(n) = line.strip_prefix("Content-Length: ") {
            length = n.parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    r.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

/// The LSP position (line, UTF-16 column) of the `nth` occurrence of `needle` in `text`, plus
/// `shift` characters.
pub fn position(text: &str, needle: &str, nth: usize, shift: usize) -> Value {
    let at = text.match_indices(needle).nth(nth).unwrap_or_else(|| panic!("`{needle}` #{nth} not in the text")).0;
    let at = at + text[at..].chars().take(shift).map(char::len_utf8).sum::<usize>();
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[..at].matches('\n').count();
    json!({"line": line, "character": text[line_start..at].encode_utf16().count()})
}
