//! Each request and notification: its parameters decoded with lsp-types, the document's
//! analysis looked up (checked first if it changed), positions converted, and the feature's
//! module called. A request about a document that is not open answers `null`.

use super::server::{error, Server};
use lsp_server::{ErrorCode, ResponseError};
use lsp_types::notification::{self as note, Notification as _};
use lsp_types::request::{self as req, Request};
use lsp_types::*;
use serde_json::Value;

pub fn notification(s: &mut Server, method: &str, params: Value) {
    match method {
        note::DidOpenTextDocument::METHOD => {
            if let Ok(p) = serde_json::from_value::<DidOpenTextDocumentParams>(params) {
                s.open(p.text_document.uri, p.text_document.text, p.text_document.version);
            }
        }
        note::DidChangeTextDocument::METHOD => {
            if let Ok(p) = serde_json::from_value::<DidChangeTextDocumentParams>(params) {
                s.change(p);
            }
        }
        note::DidCloseTextDocument::METHOD => {
            if let Ok(p) = serde_json::from_value::<DidCloseTextDocumentParams>(params) {
                s.close(&p.text_document.uri);
            }
        }
        // Saving changes no text; modules a file uses are read again at its next check.
        _ => {}
    }
}

/// Decode `R`'s parameters and answer with `f`; `Err(text)` from `f` is a failed request
/// (a rename that cannot be done, say), which the editor shows.
fn on<R: Request>(
    s: &mut Server,
    params: Value,
    f: impl FnOnce(&mut Server, R::Params) -> Result<R::Result, String>,
) -> Result<Value, ResponseError> {
    let p: R::Params = serde_json::from_value(params).map_err(|e| error(ErrorCode::InvalidParams, format!("{}: {e}", R::METHOD)))?;
    let result = f(s, p).map_err(|m| error(ErrorCode::RequestFailed, m))?;
    serde_json::to_value(result).map_err(|e| error(ErrorCode::InternalError, e.to_string()))
}

/// The document and byte offset of a position.
fn at(s: &mut Server, p: &TextDocumentPositionParams) -> Option<(std::rc::Rc<super::analysis::Analysis>, usize)> {
    let a = s.analysis(&p.text_document.uri)?;
    let offset = a.offset(p.position);
    Some((a, offset))
}

pub fn request(s: &mut Server, method: &str, params: Value) -> Result<Value, ResponseError> {
    match method {
        req::HoverRequest::METHOD => on::<req::HoverRequest>(s, params, |s, p| {
            Ok(at(s, &p.text_document_position_params).and_then(|(a, o)| super::hover::hover(&a, o)))
        }),
        req::InlayHintRequest::METHOD => on::<req::InlayHintRequest>(s, params, |s, p| {
            Ok(s.analysis(&p.text_document.uri).map(|a| {
                let (start, end) = a.lines.span(&a.text, p.range);
                super::inlay::hints(&a, start, end)
            }))
        }),
        req::GotoDefinition::METHOD => on::<req::GotoDefinition>(s, params, |s, p| {
            let uri = p.text_document_position_params.text_document.uri.clone();
            let found = at(s, &p.text_document_position_params).and_then(|(a, o)| super::navigate::definition(&a, &s.std, &uri, o));
            Ok(found.map(GotoDefinitionResponse::Scalar))
        }),
        req::References::METHOD => on::<req::References>(s, params, |s, p| {
            let pos = &p.text_document_position;
            let Some((_, offset)) = at(s, pos) else { return Ok(None) };
            let all = s.all_analyses();
            let docs: Vec<(&Uri, &super::analysis::Analysis)> = all.iter().map(|(u, a)| (u, &**a)).collect();
            Ok(Some(super::navigate::references(&docs, &s.std, &pos.text_document.uri, offset, p.context.include_declaration)))
        }),
        req::Completion::METHOD => on::<req::Completion>(s, params, |s, p| {
            let Some((a, o)) = at(s, &p.text_document_position) else { return Ok(None) };
            Ok(Some(CompletionResponse::Array(super::completion::complete(&a, &s.std, o))))
        }),
        req::SignatureHelpRequest::METHOD => on::<req::SignatureHelpRequest>(s, params, |s, p| {
            Ok(at(s, &p.text_document_position_params).and_then(|(a, o)| super::signature::help(&a, &s.std, o)))
        }),
        req::DocumentSymbolRequest::METHOD => on::<req::DocumentSymbolRequest>(s, params, |s, p| {
            Ok(s.analysis(&p.text_document.uri).map(|a| DocumentSymbolResponse::Nested(super::symbols::document(&a))))
        }),
        req::WorkspaceSymbolRequest::METHOD => on::<req::WorkspaceSymbolRequest>(s, params, |s, p| {
            let all = s.all_analyses();
            let docs: Vec<(&Uri, &super::analysis::Analysis)> = all.iter().map(|(u, a)| (u, &**a)).collect();
            Ok(Some(WorkspaceSymbolResponse::Flat(super::symbols::workspace(&p.query, &docs, &s.roots, &s.std))))
        }),
        req::PrepareRenameRequest::METHOD => on::<req::PrepareRenameRequest>(s, params, |s, p| {
            let Some((a, o)) = at(s, &p) else { return Ok(None) };
            super::rename::prepare(&a, o).map(|r| Some(PrepareRenameResponse::Range(r)))
        }),
        req::Rename::METHOD => on::<req::Rename>(s, params, |s, p| {
            let uri = p.text_document_position.text_document.uri.clone();
            let Some((a, o)) = at(s, &p.text_document_position) else { return Ok(None) };
            let edits = super::rename::rename(&a, o, &p.new_name)?;
            Ok(Some(WorkspaceEdit { changes: Some([(uri, edits)].into_iter().collect()), ..Default::default() }))
        }),
        req::CodeActionRequest::METHOD => on::<req::CodeActionRequest>(s, params, |s, p| {
            let Some(a) = s.analysis(&p.text_document.uri) else { return Ok(None) };
            let (start, end) = a.lines.span(&a.text, p.range);
            Ok(Some(super::actions::actions(&a, &p.text_document.uri, start, end, &p.context.diagnostics)))
        }),
        req::Formatting::METHOD => on::<req::Formatting>(s, params, |s, p| format(s, &p.text_document.uri, None)),
        req::RangeFormatting::METHOD => {
            on::<req::RangeFormatting>(s, params, |s, p| format(s, &p.text_document.uri, Some((p.range.start.line, p.range.end.line))))
        }
        req::CodeLensRequest::METHOD => on::<req::CodeLensRequest>(s, params, |s, p| {
            Ok(s.analysis(&p.text_document.uri).map(|a| super::lens::lenses(&a, &p.text_document.uri)))
        }),
        req::CodeLensResolve::METHOD => on::<req::CodeLensResolve>(s, params, |s, lens| Ok(resolve_lens(s, lens))),
        req::ExecuteCommand::METHOD => on::<req::ExecuteCommand>(s, params, |s, p| super::run::execute(s, p).map(|()| None)),
        req::Shutdown::METHOD => Ok(Value::Null),
        _ => Err(error(ErrorCode::MethodNotFound, format!("dlc lsp does not handle {method}"))),
    }
}

fn format(s: &mut Server, uri: &Uri, lines: Option<(u32, u32)>) -> Result<Option<Vec<TextEdit>>, String> {
    s.flush(uri);
    let Some(doc) = s.docs.get(uri) else { return Ok(None) };
    // A file with syntax errors is left as it is: no edits, as formatters on save expect.
    Ok(super::formatting::format(&doc.text, lines).ok())
}

fn resolve_lens(s: &mut Server, mut lens: CodeLens) -> CodeLens {
    if lens.command.is_some() {
        return lens;
    }
    let data = lens.data.clone().unwrap_or_default();
    let uri = data.get("uri").and_then(|u| u.as_str()).and_then(|u| u.parse::<Uri>().ok());
    let index = data.get("train").and_then(|i| i.as_u64()).unwrap_or(0) as usize;
    let title = match uri.as_ref().and_then(|u| s.analysis(u).map(|a| (u, a))) {
        Some((u, a)) => {
            let key = (u.as_str().to_string(), a.version, index);
            match s.plans.get(&key) {
                Some(t) => t.clone(),
                None => {
                    let t = super::lens::plan_title(&a, index);
                    // Plans of the document's older versions are never asked for again.
                    s.plans.retain(|k, _| k.0 != key.0 || k.1 == key.1);
                    s.plans.insert(key, t.clone());
                    t
                }
            }
        }
        None => "no step plan: the document is closed".into(),
    };
    lens.command = Some(Command { title, command: String::new(), arguments: None });
    lens
}
