//! Inlay hints: the type after each `|>` stage (at the stage's end) and after each name a `let`
//! or `data` binds, as the checker traced them (`f32[B, 512]`; a pipeline's element). A value the
//! checker never traced (code nothing calls whose parameters have no annotations, or code after
//! an error) gets no hint.

use super::analysis::Analysis;
use super::describe::short;
use super::walk::{self, Node};
use dlc_language::eval::Value;
use dlc_language::syntax::ast::ExprKind;
use lsp_types::{InlayHint, InlayHintKind, InlayHintLabel, Position};

/// Hints longer than this are cut: a record of many tensors would push the line off screen.
const LONGEST: usize = 60;

pub fn hints(a: &Analysis, start: usize, end: usize) -> Vec<InlayHint> {
    let mut out = vec![];
    let within = |o: u32| (start as u32) <= o && o <= (end as u32);
    walk::program(&a.program, &mut |node| match node {
        Node::Expr(e) => {
            if let ExprKind::Pipe(_, rhs) = &e.kind {
                if let (true, Some(v)) = (within(rhs.span.end), a.value_at_span(e.span)) {
                    out.push(hint(a, a.lines.position(&a.text, rhs.span.end as usize), v));
                }
            }
        }
        Node::Binding(name, value) => {
            if let (true, Some(v)) = (within(name.span.end), a.value_at_span(value.span)) {
                if !matches!(v, Value::Func(_)) {
                    out.push(hint(a, a.lines.position(&a.text, name.span.end as usize), v));
                }
            }
        }
    });
    out.sort_by_key(|h| (h.position.line, h.position.character));
    out
}

fn hint(a: &Analysis, position: Position, v: &Value) -> InlayHint {
    let mut text = short(&a.session, v);
    if text.chars().count() > LONGEST {
        text = text.chars().take(LONGEST - 1).collect::<String>() + "…";
    }
    InlayHint {
        position,
        label: InlayHintLabel::String(format!(": {text}")),
        kind: Some(InlayHintKind::TYPE),
        text_edits: None,
        tooltip: None,
        padding_left: Some(false),
        padding_right: Some(true),
        data: None,
    }
}
