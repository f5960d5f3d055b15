//! Signature help: inside a call's parentheses, the callee's signature with the parameter being
//! written highlighted. The call is found from the tokens before the cursor (the call being
//! typed does not parse yet); the callee is resolved as hover resolves names. After `|>`, the
//! piped value is the first parameter, so the highlighted one is one further on.

use super::analysis::Analysis;
use super::resolve::{builtin_signature, global, signature_of_value, target_at, value_of, Signature};
use super::stdlib::Stdlib;
use dlc_language::syntax::lexer::lex;
use dlc_language::syntax::token::{Punct, Tok};
use dlc_language::FileId;
use lsp_types::{Documentation, MarkupContent, MarkupKind, ParameterInformation, ParameterLabel, SignatureHelp, SignatureInformation};

/// The call the cursor is in.
struct Call {
    callee: String,
    callee_at: usize,
    /// Arguments before the cursor's.
    index: usize,
    /// The name of a named argument being written (`axis:`).
    named: Option<String>,
    piped: bool,
}

pub fn help(a: &Analysis, std: &Stdlib, offset: usize) -> Option<SignatureHelp> {
    let call = call_at(&a.text[..offset.min(a.text.len())])?;
    let sig = signature(a, std, &call)?;
    let active = match &call.named {
        Some(n) => sig.params.iter().position(|p| p.split([':', '=', ' ']).next() == Some(n.as_str())),
        None => Some(call.index + usize::from(call.piped && sig.takes_input)),
    };
    // Past the last parameter only a variadic one (`print(...)`) is still being written.
    let n = sig.params.len();
    let variadic = sig.params.last().is_some_and(|p| p == "...");
    let active = active.and_then(|i| if i < n { Some(i) } else { variadic.then(|| n - 1) }).map(|i| i as u32);
    let info = SignatureInformation {
        label: sig.label.clone(),
        documentation: sig.doc.clone().map(|d| Documentation::MarkupContent(MarkupContent { kind: MarkupKind::Markdown, value: d })),
        parameters: Some(
            sig.params.iter().map(|p| ParameterInformation { label: ParameterLabel::Simple(p.clone()), documentation: None }).collect(),
        ),
        active_parameter: active,
    };
    Some(SignatureHelp { signatures: vec![info], active_signature: Some(0), active_parameter: active })
}

fn signature(a: &Analysis, std: &Stdlib, call: &Call) -> Option<Signature> {
    if let Some((_, t)) = target_at(a, call.callee_at) {
        if let Some(sig) = value_of(a, &t).and_then(|v| signature_of_value(&a.session, &v)) {
            return Some(sig);
        }
    }
    if let Some(t) = global(&a.session, &call.callee) {
        if let Some(sig) = value_of(a, &t).and_then(|v| signature_of_value(&a.session, &v)) {
            return Some(sig);
        }
    }
    if let Some(sig) = builtin_signature(&call.callee) {
        return Some(sig);
    }
    // A stdlib item the file does not import yet.
    let item = std.any(&call.callee)?;
    Some(Signature {
        label: item.signature.clone(),
        params: item.params.clone(),
        doc: Some(item.doc.clone()),
        takes_input: !item.params.is_empty(),
    })
}

/// The innermost open call in `before` (the text up to the cursor).
fn call_at(before: &str) -> Option<Call> {
    let (tokens, _) = lex(FileId(0), before);
    // Open brackets: the token index of each `(` `[` `{`, with its argument count and name.
    let mut open: Vec<(usize, usize, Option<String>)> = vec![];
    for (i, t) in tokens.iter().enumerate() {
        let Tok::Punct(p) = t.tok else { continue };
        match p {
            Punct::LParen | Punct::LBracket | Punct::LBrace => open.push((i, 0, None)),
            Punct::RParen | Punct::RBracket | Punct::RBrace => {
                open.pop();
            }
            Punct::Comma => {
                if let Some(top) = open.last_mut() {
                    top.1 += 1;
                    top.2 = None;
                }
            }
            Punct::Colon => {
                let starts_arg = i >= 2 && matches!(tokens[i - 2].tok, Tok::Punct(Punct::LParen | Punct::Comma));
                if let (Some(top), true, Tok::Ident(n)) = (open.last_mut(), starts_arg, &tokens[i.saturating_sub(1)].tok) {
                    top.2 = Some(n.clone());
                }
            }
            _ => {}
        }
    }
    let (at, index, named) = open.pop()?;
    if !matches!(tokens[at].tok, Tok::Punct(Punct::LParen)) || at == 0 {
        return None;
    }
    let callee = &tokens[at - 1];
    let name = match &callee.tok {
        Tok::Ident(n) => n.clone(),
        _ => return None,
    };
    let piped = at >= 2 && matches!(tokens[at - 2].tok, Tok::Punct(Punct::Pipe));
    Some(Call { callee: name, callee_at: callee.span.start as usize, index, named, piped })
}
