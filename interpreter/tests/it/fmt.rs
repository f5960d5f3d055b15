//! `dlc fmt`: files and folders rewritten in place (and nothing else touched), `--check` with
//! its exit status and first difference, standard input to standard output, and a file with a
//! syntax error reported and left alone.

use crate::common::{command, dlc_in, scratch, text};
use std::io::Write;
use std::process::Stdio;

const MESSY: &str = "use std.nn\nlet  x=[1.0,2.0];print( sum(x) )\nmodel M { w = 1, b = 2 }\n";
const TIDY: &str = "use std.nn\nlet x = [1.0, 2.0]\nprint(sum(x))\nmodel M {\n  w = 1\n  b = 2\n}\n";

#[test]
fn rewrites_files_and_folders_in_place() {
    let dir = scratch("fmt-in-place");
    std::fs::create_dir_all(dir.join("sub/.hidden")).expect("folders");
    std::fs::write(dir.join("a.dl"), MESSY).expect("write");
    std::fs::write(dir.join("sub/b.dl"), MESSY).expect("write");
    std::fs::write(dir.join("sub/tidy.dl"), TIDY).expect("write");
    std::fs::write(dir.join("sub/notes.txt"), MESSY).expect("write");
    std::fs::write(dir.join("sub/.hidden/c.dl"), MESSY).expect("write");
    let out = dlc_in(&dir, &["fmt", "a.dl", "sub"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(dir.join("a.dl")).expect("read"), TIDY);
    assert_eq!(std::fs::read_to_string(dir.join("sub/b.dl")).expect("read"), TIDY);
    assert_eq!(std::fs::read_to_string(dir.join("sub/tidy.dl")).expect("read"), TIDY);
    // Not DL, or in a hidden folder: not touched.
    assert_eq!(std::fs::read_to_string(dir.join("sub/notes.txt")).expect("read"), MESSY);
    assert_eq!(std::fs::read_to_string(dir.join("sub/.hidden/c.dl")).expect("read"), MESSY);
    // No temporary file is left beside the rewritten ones.
    let mut names: Vec<String> =
        std::fs::read_dir(&dir).expect("list").flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["a.dl", "sub"]);
    // Formatted, it is left as it is: the check passes.
    let out = dlc_in(&dir, &["fmt", "--check", "."]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
}

#[test]
fn check_lists_what_is_not_formatted_and_changes_nothing() {
    let dir = scratch("fmt-check");
    let messy = "use std.nn\nlet  x=1\nprint(x)\nprint(x)\nprint(x)\nlet y  =  2\n";
    std::fs::write(dir.join("messy.dl"), messy).expect("write");
    std::fs::write(dir.join("tidy.dl"), TIDY).expect("write");
    let out = dlc_in(&dir, &["fmt", "--check", "tidy.dl", "messy.dl"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("messy.dl: not formatted"), "{err}");
    assert!(!err.contains("tidy.dl"), "{err}");
    // The first difference only, as a unified diff's hunk with its context.
    let hunk = "--- messy.dl\n+++ messy.dl (formatted)\n@@ -1,4 +1,4 @@\n use std.nn\n-let  x=1\n+let x = 1\n print(x)\n print(x)\n";
    assert!(err.ends_with(hunk), "{err}");
    assert_eq!(std::fs::read_to_string(dir.join("messy.dl")).expect("read"), messy);
    let out = dlc_in(&dir, &["fmt", "--check", "tidy.dl"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // No line shows a difference: the line ends are named instead.
    std::fs::write(dir.join("crlf.dl"), TIDY.replace('\n', "\r\n")).expect("write");
    let out = dlc_in(&dir, &["fmt", "--check", "crlf.dl"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("crlf.dl: only its line ends differ"), "{}", text(&out.stderr));
}

#[test]
fn formats_standard_input_to_standard_output() {
    let dir = scratch("fmt-stdin");
    let run = |args: &[&str]| {
        let mut child =
            command(&dir).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run dlc");
        child.stdin.take().expect("stdin").write_all(MESSY.as_bytes()).expect("write stdin");
        child.wait_with_output().expect("dlc's output")
    };
    let out = run(&["fmt", "-"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), TIDY);
    let out = run(&["fmt", "--check", "-"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "");
    assert!(text(&out.stderr).contains("<stdin>: not formatted"), "{}", text(&out.stderr));
}

#[test]
fn a_syntax_error_is_reported_and_the_file_left_alone() {
    let dir = scratch("fmt-syntax");
    let bad = "let  x = (1 +\nlet y = 2\n";
    std::fs::write(dir.join("bad.dl"), bad).expect("write");
    std::fs::write(dir.join("good.dl"), MESSY).expect("write");
    let out = dlc_in(&dir, &["fmt", "bad.dl", "good.dl"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("E0104") && err.contains("bad.dl:1:10"), "{err}");
    assert!(err.contains("error: could not format `bad.dl`: 1 syntax error"), "{err}");
    assert_eq!(std::fs::read_to_string(dir.join("bad.dl")).expect("read"), bad);
    // The other files are formatted all the same.
    assert_eq!(std::fs::read_to_string(dir.join("good.dl")).expect("read"), TIDY);
    let out = dlc_in(&dir, &["fmt", "missing.dl"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot read `missing.dl`"), "{}", text(&out.stderr));
}
