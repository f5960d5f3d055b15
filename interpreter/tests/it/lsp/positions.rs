//! LSP positions (lines and UTF-16 units) against byte offsets, and file URIs against paths:
//! what every request's position and every reply's range goes through.

use dlc::lsp::{uri_from_path, uri_to_path, LineIndex};
use lsp_types::Position;

fn pos(line: u32, character: u32) -> Position {
    Position { line, character }
}

#[test]
fn lsp_positions_are_utf16_and_round_trip() {
    // `≥` is 3 bytes and 1 UTF-16 unit; `𝑥` is 4 bytes and 2 units (a surrogate pair).
    let text = "# ≥ 97%\nlet 𝑥 = 1\r\nend";
    let idx = LineIndex::new(text);
    assert_eq!(idx.line_count(), 3);
    assert_eq!(idx.offset(text, pos(0, 3)), "# ≥".len());
    assert_eq!(idx.position(text, "# ≥".len()), pos(0, 3));
    let second = text.find("let").unwrap();
    assert_eq!(idx.offset(text, pos(1, 4)), second + 4);
    // After the pair: 4 + 2 units; inside it: the character's start.
    assert_eq!(idx.offset(text, pos(1, 6)), second + 8);
    assert_eq!(idx.position(text, second + 8), pos(1, 6));
    assert_eq!(idx.offset(text, pos(1, 5)), second + 4);
    // Past a line's end: before its `\r\n`; past the last line: the end of the text.
    assert_eq!(idx.offset(text, pos(1, 99)), text.find('\r').unwrap());
    assert_eq!(idx.offset(text, pos(9, 0)), text.len());
    assert_eq!(idx.position(text, text.len()), pos(2, 3));
    // A byte inside a character: that character's start.
    assert_eq!(idx.position(text, 3), pos(0, 2));
    // Every character boundary round-trips.
    for (i, _) in text.char_indices() {
        if text[i..].starts_with('\n') && text[..i].ends_with('\r') {
            continue;
        }
        assert_eq!(idx.offset(text, idx.position(text, i)), i, "offset {i}");
    }
}

#[test]
fn lsp_file_uris_round_trip() {
    for p in ["/tmp/a b/ü.dl", "/work/main/examples/mnist_mlp.dl", "/x/%25/#y.dl"] {
        let uri = uri_from_path(std::path::Path::new(p)).expect("a file URI");
        assert!(uri.as_str().starts_with("file:///"), "{}", uri.as_str());
        assert!(!uri.as_str().contains(' ') && !uri.as_str().contains('#'), "{}", uri.as_str());
        assert_eq!(uri_to_path(&uri).unwrap(), std::path::PathBuf::from(p));
    }
    let vscode: lsp_types::Uri = "file:///tmp/a%20b/%C3%BC.dl".parse().unwrap();
    assert_eq!(uri_to_path(&vscode).unwrap(), std::path::PathBuf::from("/tmp/a b/ü.dl"));
    let untitled: lsp_types::Uri = "untitled:Untitled-1".parse().unwrap();
    assert_eq!(uri_to_path(&untitled), None);
}
