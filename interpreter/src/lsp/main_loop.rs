//! `dlc lsp`: the transport (lsp-server's stdio connection, rust-analyzer's), the handshake with
//! the capabilities this server has, and the loop: each message handled in order, documents
//! checked when their debounce ends, then whatever the server queued (diagnostics) sent.

use super::server::Server;
use lsp_server::{Connection, Message, Response};
use lsp_types::*;

pub fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Options(TextDocumentSyncOptions {
            open_close: Some(true),
            change: Some(TextDocumentSyncKind::INCREMENTAL),
            ..Default::default()
        })),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        completion_provider: Some(CompletionOptions { trigger_characters: Some(vec![".".into()]), ..Default::default() }),
        signature_help_provider: Some(SignatureHelpOptions {
            trigger_characters: Some(vec!["(".into(), ",".into()]),
            retrigger_characters: Some(vec![":".into()]),
            ..Default::default()
        }),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        document_symbol_provider: Some(OneOf::Left(true)),
        workspace_symbol_provider: Some(OneOf::Left(true)),
        rename_provider: Some(OneOf::Right(RenameOptions { prepare_provider: Some(true), work_done_progress_options: Default::default() })),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
            ..Default::default()
        })),
        document_formatting_provider: Some(OneOf::Left(true)),
        document_range_formatting_provider: Some(OneOf::Left(true)),
        code_lens_provider: Some(CodeLensOptions { resolve_provider: Some(true) }),
        inlay_hint_provider: Some(OneOf::Left(true)),
        execute_command_provider: Some(ExecuteCommandOptions { commands: vec![super::lens::RUN.into()], ..Default::default() }),
        ..Default::default()
    }
}

/// Serve on stdin and stdout until the client says `exit`; the exit status: 0 after a
/// `shutdown`, 1 otherwise (as the protocol asks).
pub fn run_stdio() -> i32 {
    let (connection, io_threads) = Connection::stdio();
    let status = match serve(&connection) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("dlc lsp: {e}");
            1
        }
    };
    drop(connection);
    let _ = io_threads.join();
    status
}

/// Whether the session ended with a `shutdown` request.
fn serve(conn: &Connection) -> Result<bool, String> {
    let (id, params) = conn.initialize_start().map_err(|e| e.to_string())?;
    let init: InitializeParams = serde_json::from_value(params).unwrap_or_default();
    let result = serde_json::json!({
        "capabilities": capabilities(),
        "serverInfo": { "name": "dlc", "version": env!("CARGO_PKG_VERSION") },
    });
    conn.initialize_finish(id, result).map_err(|e| e.to_string())?;
    let mut server = Server::new(&init);
    loop {
        let msg = match server.next_due() {
            Some(due) => match conn.receiver.recv_deadline(due) {
                Ok(m) => Some(m),
                Err(e) if e.is_timeout() => None,
                Err(_) => return Ok(false),
            },
            None => match conn.receiver.recv() {
                Ok(m) => Some(m),
                Err(_) => return Ok(false),
            },
        };
        match msg {
            None => server.flush_due(),
            Some(Message::Request(req)) => {
                if conn.handle_shutdown(&req).map_err(|e| e.to_string())? {
                    return Ok(true);
                }
                let reply = Response { id: req.id, response_result: server.request(&req.method, req.params) };
                // Diagnostics of a document checked to answer go before the answer.
                send_outbox(conn, &mut server)?;
                conn.sender.send(reply.into()).map_err(|e| e.to_string())?;
            }
            Some(Message::Notification(n)) if n.method == "exit" => return Ok(false),
            Some(Message::Notification(n)) => server.notify(&n.method, n.params),
            Some(Message::Response(_)) => {}
        }
        send_outbox(conn, &mut server)?;
    }
}

fn send_outbox(conn: &Connection, server: &mut Server) -> Result<(), String> {
    for n in server.take_outbox() {
        conn.sender.send(n.into()).map_err(|e| e.to_string())?;
    }
    Ok(())
}
