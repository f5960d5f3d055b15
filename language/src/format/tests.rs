use super::*;

fn fmt(src: &str) -> String {
    let out = format(FileId(0), src).unwrap_or_else(|e| panic!("{e:?}\n{src}"));
    let again = format(FileId(0), &out).unwrap_or_else(|e| panic!("{e:?}\n{out}"));
    assert_eq!(again, out, "not stable:\n{out}");
    out
}

#[test]
fn spacing_is_canonical() {
    assert_eq!(fmt("let  y=x*2+-z@w.T\n"), "let y = x * 2 + -z @ w.T\n");
    assert_eq!(
        fmt("fn f(x:f32[B,H*D],y:f32[*S])->f32[B,H*D]=x[1:,:3,::2,...,-1]\n"),
        "fn f(x: f32[B, H * D], y: f32[*S]) -> f32[B, H * D] = x[1:, :3, ::2, ..., -1]\n"
    );
    assert_eq!(
        fmt("print( sum(x,axis:1) , (3,) , not(a) , a - -b , r=>(r.x) )\n"),
        "print(sum(x, axis: 1), (3,), not (a), a - -b, r => (r.x))\n"
    );
    assert_eq!(fmt("print(layers.0(x),m.w[0],log(x))\n"), "print(layers.0(x), m.w[0], log(x))\n");
    // A field of an integer stays apart from it: `1.5` would be a number.
    assert_eq!(fmt("print(t.0 .1, 1 . 5, layers.0.weight)\n"), "print(t.0 .1, 1 .5, layers.0.weight)\n");
}

#[test]
fn statements_go_one_a_line() {
    assert_eq!(fmt("let a = 1; let b = 2\n\n\n\nlet c = 3;\n"), "let a = 1\nlet b = 2\n\nlet c = 3\n");
    assert_eq!(fmt("let k = { let a = 3; a + 1 }\n"), "let k = {\n  let a = 3\n  a + 1\n}\n");
    // A model's members, even when listed on one line with commas.
    assert_eq!(fmt("model M { w = 1, b = 2 }\n"), "model M {\n  w = 1\n  b = 2\n}\n");
    // A one-line block of one statement stays one line; a broken one stays broken.
    assert_eq!(fmt("let v = if a {b} else {c}\n"), "let v = if a { b } else { c }\n");
    assert_eq!(fmt("let v = if a {\nb\n}\nelse { c }\n"), "let v = if a {\n  b\n} else { c }\n");
    assert_eq!(fmt("\n\n# head\n\nlet a = 1\n\n"), "# head\n\nlet a = 1\n");
    assert_eq!(fmt(""), "");
}

#[test]
fn pipelines_go_one_stage_a_line_only_when_long() {
    assert_eq!(fmt("let y = x\n  |> abs\n  |> sum(axis: 1)\n"), "let y = x |> abs |> sum(axis: 1)\n");
    let long = "data d = csv(\"data/sklearn/iris.csv\", features: 4, label: 4, header: 1) |> map(prepare) |> batch(128)\n";
    assert!(long.trim_end().len() > WIDTH);
    assert_eq!(
        fmt(long),
        "data d = csv(\"data/sklearn/iris.csv\", features: 4, label: 4, header: 1)\n  |> map(prepare)\n  |> batch(128)\n"
    );
    // Exactly as wide as the width: one line.
    let exact = format!("let y = {} |> f\n", "x".repeat(WIDTH - 13));
    assert_eq!(exact.trim_end().len(), WIDTH);
    assert_eq!(fmt(&exact.replace(" |> f", "\n  |> f")), exact);
    // A break after `=` before a broken pipeline goes; the stages indent from the statement.
    let method =
        "model M {\n  forward(x) =\n    x |> first_layer_of_the_model |> second_layer_of_the_model |> third_layer_of_the_model\n}\n";
    assert_eq!(
        fmt(method),
        "model M {\n  forward(x) = x\n    |> first_layer_of_the_model\n    |> second_layer_of_the_model\n    |> third_layer_of_the_model\n}\n"
    );
    // A pipeline holding a line break (here a block) is broken too.
    assert_eq!(fmt("let y = x |> map(r => {\n  r\n}) |> f\n"), "let y = x\n  |> map(r => {\n    r\n  })\n  |> f\n");
}

#[test]
fn other_continuations_are_joined_when_they_fit() {
    assert_eq!(fmt("let total =\n  1 + 2\nlet ok = a\n  and b\n"), "let total = 1 + 2\nlet ok = a and b\n");
    let long = format!("fn f(x) =\n  {}\n", ["x"; 60].join(" + "));
    assert_eq!(fmt(&long), long);
}

#[test]
fn line_breaks_inside_brackets_are_kept() {
    let literal = "let x = [[1.0, 2.0],\n         [3.0, 4.0]]\n";
    assert_eq!(fmt(literal), literal);
    assert_eq!(fmt("let x = [[1.0, 2.0],\n  [3.0, 4.0]]\n"), literal);
    let block_style = "let pair = (\n  a,\n\n  b,\n)\n";
    assert_eq!(fmt("let pair = (\n      a,\n\n\n b,\n    )\n"), block_style);
    // A model's body indents from the item, not from where its parameters were aligned.
    let params = "model M(a: int,\n        b: int) {\n  w = a\n}\n";
    assert_eq!(fmt(params), params);
}

#[test]
fn comments_stay_where_they_are() {
    let src = "# top\nlet a = 1 # after\nlet m = { # open\n  # inside\n  a\n}\nlet p = (\n  a, # first\n  # own line\n  b,\n)\nlet d = a\n  # before the stage\n  |> f\n# end\n";
    let want = "# top\nlet a = 1  # after\nlet m = {  # open\n  # inside\n  a\n}\nlet p = (\n  a,  # first\n  # own line\n  b,\n)\nlet d = a\n  # before the stage\n  |> f\n# end\n";
    assert_eq!(fmt(src), want);
    // A line break after a comment stays, whatever would join it.
    let src = "let v = if a { b } # c\n  else { c }\nlet w = x # d\n  |> f\n";
    assert_eq!(fmt(src), "let v = if a { b }  # c\n  else { c }\nlet w = x  # d\n  |> f\n");
}

#[test]
fn recipe_fields_are_aligned() {
    let src = "train {\n  model = M()\n  # note\n  optimizer = sgd(lr: 0.1)\n\n  epochs = 1\n  log every 10 steps\n  step(x) {\n    log (x, x)\n    log -x\n  }\n}\n";
    let want = "train {\n  model     = M()\n  # note\n  optimizer = sgd(lr: 0.1)\n\n  epochs = 1\n  log every 10 steps\n  step(x) {\n    log (x, x)\n    log -x\n  }\n}\n";
    assert_eq!(fmt(src), want);
    assert_eq!(fmt("infer { model = M(), input = x }\n"), "infer {\n  model = M()\n  input = x\n}\n");
}

#[test]
fn fmt_off_leaves_a_region_as_written() {
    let src = "let  a=1\n# fmt: off\nlet  b=2;let c = 3\n# fmt: on\nlet  d=4\n";
    assert_eq!(fmt(src), "let a = 1\n# fmt: off\nlet  b=2;let c = 3\n# fmt: on\nlet d = 4\n");
}

#[test]
fn windows_line_ends_and_byte_order_marks_go() {
    assert_eq!(fmt("\u{feff}let a = 1\r\n\r\n\tlet b = a # c\r\n"), "let a = 1\n\nlet b = a  # c\n");
}

#[test]
fn syntax_errors_are_returned_not_formatted() {
    match format(FileId(3), "let x = (1 +\nlet y = 2\n") {
        Err(FormatError::Syntax(diags)) => {
            assert!(!diags.is_empty());
            assert!(diags.iter().all(|d| d.is_error() && d.primary_span().file == FileId(3)), "{diags:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_check_sees_a_changed_program() {
    // What `format` compares before it answers: separators are one thing, tokens are not.
    assert_eq!(statements("let a = 1; let b = 2"), statements("let a = 1\n\nlet b = 2\n"));
    assert_eq!(statements("model M { a = 1, b = 2 }"), statements("model M {\n  a = 1\n  b = 2\n}"));
    assert_ne!(statements("let a = 1\nlet b = 2"), statements("let a = 1 let b = 2"));
    assert_ne!(statements("let a = x\n-1"), statements("let a = x - 1"));
    assert_ne!(comments("let a = 1 # x"), comments("let a = 1 # y"));
}
