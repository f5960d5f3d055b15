//! The server's state and its one entry for each kind of message: the open documents, when each
//! is due to be checked (debounced after a change), and what has to be sent without being asked
//! (diagnostics, messages). The stdio loop (`main_loop`) and the in-process tests drive the
//! same `Server`, so what the tests call is what an editor gets.

use super::analysis::{analyze, panic_text, Analysis};
use super::document::Document;
use super::stdlib::Stdlib;
use lsp_server::{ErrorCode, Notification, ResponseError};
use lsp_types::notification::{Notification as _, PublishDiagnostics, ShowMessage};
use lsp_types::{InitializeParams, MessageType, PublishDiagnosticsParams, ShowMessageParams, Uri};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long after a change the file is checked, unless another change comes first: a burst of
/// keystrokes (or a paste, or an editor's multi-part edit) is checked once. A check of the
/// largest example takes a few milliseconds, so this is short.
pub const DEBOUNCE: Duration = Duration::from_millis(15);
/// However fast changes come, a file is checked at least this often.
const MAX_WAIT: Duration = Duration::from_millis(200);

pub struct Server {
    pub(super) docs: HashMap<Uri, Document>,
    /// When each document with unchecked changes was first changed.
    dirty_since: HashMap<Uri, Instant>,
    pub(super) std: Stdlib,
    pub(super) roots: Vec<PathBuf>,
    pub debounce: Duration,
    /// Step plans computed for code lenses, by (document, version, recipe).
    pub(super) plans: HashMap<(String, i32, usize), String>,
    /// `dlc run` processes started by the run lens, reaped as they end.
    pub(super) runs: Vec<std::process::Child>,
    outbox: Vec<Notification>,
}

impl Server {
    pub fn new(init: &InitializeParams) -> Server {
        #[allow(deprecated)] // Older clients send only `rootUri`.
        let mut roots: Vec<PathBuf> = init.workspace_folders.iter().flatten().filter_map(|f| super::uri::to_path(&f.uri)).collect();
        #[allow(deprecated)]
        if roots.is_empty() {
            roots.extend(init.root_uri.as_ref().and_then(super::uri::to_path));
        }
        let debounce = init
            .initialization_options
            .as_ref()
            .and_then(|o| o.get("debounceMs"))
            .and_then(|v| v.as_u64())
            .map_or(DEBOUNCE, Duration::from_millis);
        Server {
            docs: HashMap::new(),
            dirty_since: HashMap::new(),
            std: Stdlib::load(),
            roots,
            debounce,
            plans: HashMap::new(),
            runs: vec![],
            outbox: vec![],
        }
    }

    /// Notifications to send: diagnostics of documents checked since the last call, messages.
    pub fn take_outbox(&mut self) -> Vec<Notification> {
        self.runs.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
        std::mem::take(&mut self.outbox)
    }

    pub(super) fn message(&mut self, typ: MessageType, text: String) {
        self.outbox.push(Notification::new(ShowMessage::METHOD.into(), ShowMessageParams { typ, message: text }));
    }

    pub(super) fn open(&mut self, uri: Uri, text: String, version: i32) {
        self.docs.insert(uri.clone(), Document::new(uri, text, version));
    }

    pub(super) fn change(&mut self, params: lsp_types::DidChangeTextDocumentParams) {
        let uri = params.text_document.uri;
        let Some(doc) = self.docs.get_mut(&uri) else { return };
        doc.apply(params.content_changes, params.text_document.version);
        let now = Instant::now();
        let since = *self.dirty_since.entry(uri).or_insert(now);
        doc.due = Some((now + self.debounce).min(since + MAX_WAIT));
    }

    pub(super) fn close(&mut self, uri: &Uri) {
        self.docs.remove(uri);
        self.dirty_since.remove(uri);
        let params = PublishDiagnosticsParams { uri: uri.clone(), diagnostics: vec![], version: None };
        self.outbox.push(Notification::new(PublishDiagnostics::METHOD.into(), params));
    }

    /// The earliest time a document is due to be checked.
    pub fn next_due(&self) -> Option<Instant> {
        self.docs.values().filter_map(|d| d.due).min()
    }

    /// Check every document that is due, queueing its diagnostics.
    pub fn flush_due(&mut self) {
        let now = Instant::now();
        let due: Vec<Uri> = self.docs.values().filter(|d| d.due.is_some_and(|t| t <= now)).map(|d| d.uri.clone()).collect();
        for uri in due {
            self.check(&uri);
        }
    }

    /// Check a document now if it has unchecked changes (a request about it cannot wait).
    pub fn flush(&mut self, uri: &Uri) {
        if self.docs.get(uri).is_some_and(|d| d.due.is_some()) {
            self.check(uri);
        }
    }

    fn check(&mut self, uri: &Uri) {
        let Some(doc) = self.docs.get_mut(uri) else { return };
        let analysis = Rc::new(analyze(doc.path.as_deref(), &doc.text, doc.version));
        doc.analysis = Some(analysis.clone());
        doc.due = None;
        self.dirty_since.remove(uri);
        // The stdlib's files are read-only references: nothing to report on them.
        let own = doc.path.as_deref().is_some_and(|p| self.std.owns(p));
        let diagnostics = if own { vec![] } else { super::diagnostics::for_document(&analysis, &self.std, uri) };
        let params = PublishDiagnosticsParams { uri: uri.clone(), diagnostics, version: Some(analysis.version) };
        self.outbox.push(Notification::new(PublishDiagnostics::METHOD.into(), params));
    }

    /// The current analysis of an open document (checked first if it changed).
    pub fn analysis(&mut self, uri: &Uri) -> Option<Rc<Analysis>> {
        self.flush(uri);
        self.docs.get(uri)?.current().cloned()
    }

    /// Every open document's analysis (for references and workspace symbols).
    pub(super) fn all_analyses(&mut self) -> Vec<(Uri, Rc<Analysis>)> {
        let uris: Vec<Uri> = self.docs.keys().cloned().collect();
        uris.into_iter().filter_map(|u| self.analysis(&u).map(|a| (u, a))).collect()
    }

    /// Answer a request. A panic in a handler answers an internal error instead of ending the
    /// server: an editor keeps its session while a bug is reported.
    pub fn request(&mut self, method: &str, params: serde_json::Value) -> Result<serde_json::Value, ResponseError> {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| super::handlers::request(self, method, params)));
        r.unwrap_or_else(|e| Err(error(ErrorCode::InternalError, format!("dlc lsp: {method} failed: {}", panic_text(&*e)))))
    }

    /// Handle a notification (documents opened, changed, closed).
    pub fn notify(&mut self, method: &str, params: serde_json::Value) {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| super::handlers::notification(self, method, params)));
        if let Err(e) = r {
            self.message(MessageType::ERROR, format!("dlc lsp: {method} failed: {}", panic_text(&*e)));
        }
    }
}

pub fn error(code: ErrorCode, message: String) -> ResponseError {
    ResponseError { code: code as i32, message, data: None }
}
