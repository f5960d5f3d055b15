//! Names for the values an evaluation reports, as Keras and Lightning print them
//! (`accuracy 0.9824`, not a bare number): a record's labels, else each metric's function name.

use dlc_language::syntax::ast::{Expr, ExprKind};

/// Keys of an evaluation's metrics line that a metric's name must not take.
const RESERVED: [&str; 4] = ["step", "epoch", "evaluate", "examples"];

/// One name for each of the `count` values `body` evaluates to. `(top1: ..., top3: ...)` gives
/// its labels; `accuracy(model(x), y)` gives `accuracy`; `(accuracy(..), cross_entropy(..))`
/// both function names. When the expression's shape does not say (a function returning a
/// tuple, say), the values are `metric0`, `metric1`, ... Repeated names get `_2`, `_3`, ...
pub fn metric_names(body: &Expr, count: usize) -> Vec<String> {
    let mut names = match &innermost(body).kind {
        ExprKind::Record(fields) => fields.iter().map(|(label, _)| label.name.clone()).collect(),
        ExprKind::Tuple(items) => items.iter().map(name_of).collect(),
        _ => vec![name_of(body)],
    };
    if names.len() != count {
        names = (0..count).map(|i| format!("metric{i}")).collect();
    }
    for n in names.iter_mut() {
        if RESERVED.contains(&n.as_str()) {
            *n = format!("metric_{n}");
        }
    }
    dedupe(names)
}

/// A block's value, looking through `{ ... }` and `precision`/`checkpoint` wrappers.
fn innermost(e: &Expr) -> &Expr {
    match &e.kind {
        ExprKind::Block(stmts, Some(v)) if stmts.is_empty() => innermost(v),
        ExprKind::Precision(_, v) | ExprKind::Checkpoint(v) => innermost(v),
        _ => e,
    }
}

/// What a single metric is called: the function it calls (the last one of a pipe), or the
/// variable it reads.
fn name_of(e: &Expr) -> String {
    match &innermost(e).kind {
        ExprKind::Name(n) => n.clone(),
        ExprKind::Field(_, f) => f.name.clone(),
        ExprKind::Call(callee, _) => name_of(callee),
        ExprKind::Pipe(_, rhs) => name_of(rhs),
        _ => "metric".into(),
    }
}

fn dedupe(names: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for n in names {
        let mut candidate = n.clone();
        let mut k = 2;
        while out.contains(&candidate) {
            candidate = format!("{n}_{k}");
            k += 1;
        }
        out.push(candidate);
    }
    out
}

/// `accuracy 0.9824, cross_entropy 0.0612`.
pub fn shown(names: &[String], values: &[f64]) -> String {
    names.iter().zip(values).map(|(n, v)| format!("{n} {v:.4}")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(src: &str) -> Expr {
        let file = format!("let m = {src}\n");
        let (ast, diags) = dlc_language::syntax::parse(dlc_language::FileId(0), &file);
        assert!(diags.is_empty(), "{src}: {diags:?}");
        match &ast.items[0].kind {
            dlc_language::syntax::ast::ItemKind::Let(_, e) => e.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn names_come_from_labels_then_function_names() {
        assert_eq!(metric_names(&body("accuracy(model(x), y)"), 1), ["accuracy"]);
        assert_eq!(metric_names(&body("(top1: accuracy(model(x), y), top3: top_k_accuracy(model(x), y, k: 3))"), 2), ["top1", "top3"]);
        assert_eq!(metric_names(&body("(accuracy(model(x), y), cross_entropy(model(x), y))"), 2), ["accuracy", "cross_entropy"]);
        assert_eq!(metric_names(&body("model(x) |> nn.accuracy"), 1), ["accuracy"]);
        assert_eq!(metric_names(&body("(accuracy(a, y), accuracy(b, y), accuracy(c, y))"), 3), ["accuracy", "accuracy_2", "accuracy_3"]);
    }

    #[test]
    fn unknown_shapes_and_reserved_keys_get_neutral_names() {
        // A function that returns two metrics: the expression does not say what they are.
        assert_eq!(metric_names(&body("both(model(x), y)"), 2), ["metric0", "metric1"]);
        assert_eq!(metric_names(&body("(step: accuracy(a, y))"), 1), ["metric_step"]);
        assert_eq!(metric_names(&body("1.0 + 2.0"), 1), ["metric"]);
    }
}
