//! The lossless piece stream (what `dlc fmt` and the language server build on) gives every file of
//! the corpus, the examples and the stdlib back byte for byte, and its comments are the ones the
//! parser records beside the AST.

use crate::{dl_files, repo};
use dlc_language::syntax::trivia::{pieces, PieceKind, TriviaKind};
use dlc_language::FileId;

#[test]
fn every_file_comes_back_from_its_pieces() {
    let mut files = dl_files(&repo().join("tests/cases"));
    files.extend(dl_files(&repo().join("examples")));
    files.extend(dl_files(&repo().join("stdlib")));
    assert!(files.len() > 100, "corpus not found");
    for f in files {
        let src = std::fs::read_to_string(&f).unwrap_or_default();
        let ps = pieces(FileId(0), &src);
        let text: String = ps.iter().map(|p| &src[p.span.range()]).collect();
        assert!(text == src, "{} does not come back from its pieces", f.display());
        let comments: Vec<_> = ps.iter().filter(|p| p.kind == PieceKind::Comment).map(|p| p.span).collect();
        let (program, _) = dlc_language::syntax::parse(FileId(0), &src);
        let recorded: Vec<_> = program.trivia.iter().filter(|t| t.kind == TriviaKind::Comment).map(|t| t.span).collect();
        assert_eq!(comments, recorded, "{}", f.display());
    }
}
