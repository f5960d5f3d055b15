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
        ExprKind::If(c, t, e) => format!("if {} {} else {}", show(c), show(t), show(e)),
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
    // The good items around the errors survive, and a definition whose value does not parse keeps
    // its name (with an error value), so the checker knows `a` and `c` exist.
    let lets: Vec<(&str, bool)> = p
        .items
        .iter()
        .filter_map(|i| match &i.kind {
            ItemKind::Let(n, e) => Some((n.name.as_str(), matches!(e.kind, ExprKind::Error))),
            _ => None,
        })
        .collect();
    assert_eq!(lets, vec![("a", true), ("b", false), ("c", true)]);
    assert!(p.items.iter().any(|i| matches!(&i.kind, ItemKind::Fn(f) if f.name.name == "f" && matches!(f.body.kind, ExprKind::Error))));
    assert!(p.items.iter().any(|i| matches!(&i.kind, ItemKind::Model(m) if m.fields.len() == 2)));
}

/// The messages of the errors in `src`, as `line:col message`.
fn errors(src: &str) -> Vec<String> {
    let (_, d) = parse(FileId(0), src);
    d.iter()
        .map(|d| {
            let at = d.primary_span().start as usize;
            let line = src[..at].matches('\n').count() + 1;
            let col = at - src[..at].rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
            format!("{line}:{col} {} {}", d.code, d.message)
        })
        .collect()
}

#[test]
fn messages_name_what_could_come_next() {
    assert_eq!(errors("let c = 2 3"), ["1:11 E0101 expected end of line, found integer `3`"]);
    assert_eq!(errors("fn g(x y) = x"), ["1:8 E0101 expected `:`, `=`, `,` or `)`, found `y`"]);
    assert_eq!(errors("let = 5"), ["1:5 E0101 expected a name, found `=`"]);
    assert_eq!(errors("let y = x +* 2.0"), ["1:12 E0101 expected an expression, found `*`"]);
    assert_eq!(errors("fn f(x) x"), ["1:9 E0101 expected `=` or `{` to start the body, found `x`"]);
    assert_eq!(errors("train {\n  log 50 steps\n}"), ["2:7 E0101 expected `every`, found integer `50`"]);
    assert_eq!(errors("fn f(x: foo) = x"), ["1:9 E0101 expected a type, found `foo`"]);
    assert_eq!(errors("let x = f(a: 1, b 2)"), ["1:19 E0101 expected `:`, `,` or `)`, found integer `2`"]);
    assert_eq!(errors("let x = max(1, 2]"), ["1:17 E0101 expected `,` or `)`, found `]`"]);
    assert_eq!(errors("let a = 1\n] 2"), ["2:1 E0101 expected an expression, found `]`"]);
    assert_eq!(errors("let b = x[]"), ["1:11 E0101 expected an expression or `...`, found `]`"]);
    // A stray `(` inside brackets: the error is at it, and the lines after still parse.
    let src = "model D() {\n  forward(x: f32[B, 2]) -> f32[B, (3] = x\n  g(x) = x\n}\nlet y = 1 +\n";
    assert_eq!(
        errors(src),
        [
            "2:35 E0101 expected a dimension (a number, a name, `_` or `...`) or `]`, found `(`",
            "5:12 E0101 expected an expression, found end of file"
        ]
    );
}

#[test]
fn named_errors() {
    assert_eq!(errors("let v = if a { 1 }\nlet w = 2"), ["1:14 E0101 `if` needs an `else` branch"]);
    assert_eq!(errors("let f = (a, 1) => a"), ["1:9 E0101 lambda parameters must be plain names"]);
    assert_eq!(errors("let a = (x == y) == z"), Vec::<String>::new());
    assert_eq!(errors("fn f(m, g) {\n  update m by g\n}"), ["2:3 E0310 `update` statements belong in a `step` block of a `train` recipe"]);
    assert_eq!(errors("train {\n  step(b) {\n    update m by g\n    log b\n  }\n}"), Vec::<String>::new());
}

#[test]
fn else_and_pipes_continue_lines_and_groups_ignore_them() {
    assert_eq!(shape("let v = if a { 1 }\nelse { 2 }"), "if a { 1 } else { 2 }");
    // A line that ends with `else`, `|>`, `and` or `or` goes on below too.
    assert_eq!(shape("let v = if a { 1 } else\n{ 2 }"), "if a { 1 } else { 2 }");
    assert_eq!(shape("let p = x |>\n  f |>\n  g"), "((x |> f) |> g)");
    assert_eq!(shape("let s = f(1,\n  2)\n"), "f(1, 2)");
    assert_eq!(shape("let t = x\n  and y\n  or z"), "((x and y) or z)");
    assert_eq!(shape("let u =\n  1 + 2"), "(1 + 2)");
    // A call's `(` must be on the line of what it calls: here `(2)` is a statement of its own.
    let (p, d) = parse(FileId(0), "let a = f\n(2)\n");
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(p.items.len(), 2);
}

#[test]
fn an_item_at_column_one_closes_what_was_left_open() {
    // The `(` never closed: reported at the opener, and the next item still parses.
    let src = "let a = f(1,\nlet b = 2\nlet c = [1, 2\n\nfn g(x) = x\n";
    assert_eq!(errors(src), ["1:10 E0104 unclosed delimiter `(`", "3:9 E0104 unclosed delimiter `[`"]);
    let (p, _) = parse(FileId(0), src);
    let names: Vec<String> = p
        .items
        .iter()
        .map(|i| match &i.kind {
            ItemKind::Let(n, _) => n.name.clone(),
            ItemKind::Fn(f) => f.name.name.clone(),
            _ => "?".into(),
        })
        .collect();
    assert_eq!(names, ["a", "b", "c", "g"]);
}

#[test]
fn what_follows_a_complete_definition_is_skipped_not_the_definition() {
    let (p, d) = parse(FileId(0), "let x = 1, 2\nlet y = x }\nfn f() {\n  let a = 1, 3\n  a\n}\n");
    assert_eq!(d.len(), 3, "{d:#?}");
    let names: Vec<String> = p
        .items
        .iter()
        .map(|i| match &i.kind {
            ItemKind::Let(n, e) if !matches!(e.kind, ExprKind::Error) => n.name.clone(),
            ItemKind::Fn(f) => match &f.body.kind {
                ExprKind::Block(stmts, Some(_)) if stmts.len() == 1 => f.name.name.clone(),
                other => format!("{other:?}"),
            },
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(names, ["x", "y", "f"]);
}

#[test]
fn a_wrong_closer_costs_one_line() {
    // `]` closes the `(`, for the layout and for recovery alike: `y` and `z` survive.
    let src = "let x = f(1]\nlet y = 2\nlet z = y\n";
    assert_eq!(errors(src), ["1:12 E0101 expected `,` or `)`, found `]`"]);
    assert_eq!(parse(FileId(0), src).0.items.len(), 3);
}

#[test]
fn definitions_at_column_one_close_an_unclosed_brace() {
    let src = "model M {\n  w = 1\nfn g(x) = x\nlet y = g(2)\n";
    assert_eq!(errors(src), ["1:9 E0104 unclosed delimiter `{`"]);
    assert_eq!(parse(FileId(0), src).0.items.len(), 3);
    // `let` at column 1 inside a block is a statement, not a new item.
    assert!(errors("fn f() {\nlet a = 1\na\n}\n").is_empty());
    // A definition does not swallow the next one through a trailing `=`.
    assert_eq!(errors("let x =\nlet y = 2\n"), ["1:8 E0101 expected an expression, found end of line"]);
}

#[test]
fn errors_inside_groups_become_error_nodes() {
    let (p, d) = parse(FileId(0), "let a = g([1,, 2], 3)\nlet b = a");
    assert_eq!(d.len(), 1, "{d:?}");
    let ItemKind::Let(_, e) = &p.items[0].kind else { panic!("{:?}", p.items[0]) };
    let ExprKind::Call(_, args) = &e.kind else { panic!("{e:?}") };
    assert!(matches!(args[0].value.kind, ExprKind::Error));
    assert!(matches!(args[1].value.kind, ExprKind::Int(3)));
}

#[test]
fn deep_nesting_is_an_answer_not_a_crash() {
    let nested = |depth: usize| format!("let x = {}1{}\nlet y = 2", "[".repeat(depth), "]".repeat(depth));
    let (_, d) = parse(FileId(0), &nested(crate::syntax::layout::MAX_NESTING));
    assert!(d.is_empty(), "{d:?}");
    for depth in [crate::syntax::layout::MAX_NESTING + 1, 50_000] {
        let (p, d) = parse(FileId(0), &nested(depth));
        assert_eq!(d.iter().map(|d| d.code).collect::<Vec<_>>(), ["E0106"], "{depth}");
        assert_eq!(p.items.len(), 2, "the line after still parses");
        let (_, d) = parse(FileId(0), &"(".repeat(depth));
        assert_eq!(d.iter().map(|d| d.code).collect::<Vec<_>>(), ["E0106", "E0104"], "{depth}");
    }
}

#[test]
fn unclosed_delimiter_points_at_the_opener() {
    let (_, d) = parse(FileId(0), "let x = f(1, 2");
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].code, "E0104");
    assert_eq!(d[0].primary_span().start, 9);
}
