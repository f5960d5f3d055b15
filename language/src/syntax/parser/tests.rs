//! Parser unit tests: precedence, layout rules and recovery.

use crate::span::FileId;
use crate::syntax::ast::*;
use crate::syntax::parse;

/// Parse one expression statement and print it fully parenthesised.
fn shape(src: &str) -> String {
    let (p, d) = parse(FileId(0), src);
    assert!(d.is_empty(), "{src}: {d:?}");
    match &p.items[0].kind {
        ItemKind::Expr(e) => show(e),
        ItemKind::Let(_, e) => show(e),
        other => format!("{other:?}"),
    }
}

fn show(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Int(v) => v.to_string(),
        ExprKind::Float(v) => v.to_string(),
        ExprKind::Name(n) => n.clone(),
        ExprKind::Binary(op, a, b) => format!("({} {} {})", show(a), op.symbol(), show(b)),
        ExprKind::Unary(UnOp::Neg, a) => format!("(-{})", show(a)),
        ExprKind::Unary(UnOp::Not, a) => format!("(not {})", show(a)),
        ExprKind::Pipe(a, b) => format!("({} |> {})", show(a), show(b)),
        ExprKind::Call(f, args) => format!("{}({})", show(f), args.iter().map(|a| show(&a.value)).collect::<Vec<_>>().join(", ")),
        ExprKind::Field(x, n) => format!("{}.{}", show(x), n.name),
        ExprKind::Tuple(items) => format!("({})", items.iter().map(show).collect::<Vec<_>>().join(", ")),
        ExprKind::Lambda(ps, b) => format!("(({}) => {})", ps.iter().map(|p| p.name.clone()).collect::<Vec<_>>().join(", "), show(b)),
        ExprKind::Block(stmts, Some(tail)) if stmts.is_empty() => format!("{{ {} }}", show(tail)),
        ExprKind::Checkpoint(b) => format!("checkpoint {}", show(b)),
        ExprKind::Precision(d, b) => format!("precision {} {}", d.name, show(b)),
        other => format!("{other:?}"),
    }
}

#[test]
fn precedence() {
    assert_eq!(shape("a + b * c"), "(a + (b * c))");
    assert_eq!(shape("a - b - c"), "((a - b) - c)");
    assert_eq!(shape("-x ** 2"), "(-(x ** 2))");
    assert_eq!(shape("a ** b ** c"), "(a ** (b ** c))");
    assert_eq!(shape("2 ** -1"), "(2 ** (-1))");
    assert_eq!(shape("a @ b + c"), "((a @ b) + c)");
    assert_eq!(shape("not a == b and c or d"), "(((not (a == b)) and c) or d)");
    assert_eq!(shape("x |> f |> g(1)"), "((x |> f) |> g(1))");
    assert_eq!(shape("a + b |> f"), "((a + b) |> f)");
    assert_eq!(shape("x // 2 % 3"), "((x // 2) % 3)");
    assert_eq!(shape("m.fc1(x).shape"), "m.fc1(x).shape");
    assert_eq!(shape("(a, b) => a * b"), "((a, b) => (a * b))");
}

#[test]
fn precision_is_a_block_after_a_precision_name_and_a_name_otherwise() {
    assert_eq!(shape("let h = precision f32 { x |> f }"), "precision f32 { (x |> f) }");
    assert_eq!(shape("precision tf32 { g(x) }"), "precision tf32 { g(x) }");
    assert_eq!(shape("precision + 1"), "(precision + 1)");
    assert_eq!(shape("f(precision)"), "f(precision)");
    assert_eq!(shape("x |> (precision => precision * 2)"), "(x |> ((precision) => (precision * 2)))");
}

#[test]
fn checkpoint_is_a_block_before_a_brace_and_a_name_otherwise() {
    assert_eq!(shape("let h = checkpoint { x |> f }"), "checkpoint { (x |> f) }");
    assert_eq!(shape("x |> (h => checkpoint { g(h) }) |> f"), "((x |> ((h) => checkpoint { g(h) })) |> f)");
    assert_eq!(shape("checkpoint + 1"), "(checkpoint + 1)");
    assert_eq!(shape("f(checkpoint)"), "f(checkpoint)");
}

#[test]
fn pipes_continue_across_lines() {
    assert_eq!(shape("let d = x\n  |> f\n  |> g"), "((x |> f) |> g)");
}

#[test]
fn chained_comparisons_are_rejected() {
    let (_, d) = parse(FileId(0), "a < b < c\n");
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].code, "E0101");
}

#[test]
fn recovery_reports_each_bad_line() {
    let src = "let a = )\nlet b = 1\nfn f(x) = x +\nmodel M {\n  w = ]\n  v = 1\n}\nlet c = 2 3\n";
    let (p, d) = parse(FileId(0), src);
    assert_eq!(d.len(), 4, "{d:#?}");
    // The good items around the errors survive.
    let lets = p.items.iter().filter(|i| matches!(i.kind, ItemKind::Let(..))).count();
    assert_eq!(lets, 1, "only `let b` is intact");
    assert!(p.items.iter().any(|i| matches!(&i.kind, ItemKind::Model(m) if m.fields.len() == 1)));
}

#[test]
fn unclosed_delimiter_points_at_the_opener() {
    let (_, d) = parse(FileId(0), "let x = f(1, 2");
    assert_eq!(d[0].code, "E0104");
    assert_eq!(d[0].primary_span().start, 9);
}
