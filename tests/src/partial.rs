//! A file with syntax errors is still checked for what parsed (`Program::check_partial`), as an
//! editor needs while a file is being typed: the names defined before and after the broken line
//! have their types, and real errors elsewhere are reported beside the syntax error.

use dlc::Program;

/// A model file in the middle of being edited: line 8 is half typed.
const BEING_TYPED: &str = "use std.nn
model Net() {
  fc = Linear(4, 2)
  forward(x) = x |> fc |> relu
}
let net = Net()
let y = net(randn(f32[3, 4], seed: 0))
let z = y * (2.0 +
let w = net(randn(f32[3, 5], seed: 0))
let v = y |> sum
";

fn codes(p: &Program) -> Vec<&'static str> {
    p.diagnostics().iter().filter(|d| d.is_error()).map(|d| d.code).collect()
}

#[test]
fn what_parsed_is_checked_and_typed() {
    let mut p = Program::check_partial("typing.dl", BEING_TYPED, None);
    // The unclosed `(` of line 8 (closed where `let w` starts a new item), and the real shape
    // error of line 9; `z`, whose value did not parse, causes no further report.
    assert_eq!(codes(&p), ["E0104", "E0302"], "{:#?}", p.diagnostics());
    assert_eq!(p.session.type_of("y").as_deref(), Ok("f32[3, 2]"));
    assert_eq!(p.session.type_of("v").as_deref(), Ok("f32[]"));
    assert_eq!(p.session.type_of("net").as_deref(), Ok("model Net"));
}

#[test]
fn the_command_line_check_stops_at_syntax_errors() {
    // `dlc check` reports the syntax error alone, so that nothing it says is a consequence of it.
    let p = Program::check("typing.dl", BEING_TYPED, None);
    assert_eq!(codes(&p), ["E0104"]);
    assert!(!p.ok);
}
