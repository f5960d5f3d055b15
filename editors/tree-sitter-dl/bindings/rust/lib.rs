//! DL for the [tree-sitter] parsing library: the grammar of `editors/tree-sitter-dl/grammar.js`,
//! generated into C by the tree-sitter CLI and compiled by this crate, and the editor queries.
//!
//! ```
//! let mut parser = tree_sitter::Parser::new();
//! parser.set_language(&tree_sitter_dl::LANGUAGE.into()).expect("the DL grammar loads");
//! let tree = parser.parse("let x = [1.0, 2.0] |> sum\n", None).expect("a tree");
//! assert!(!tree.root_node().has_error());
//! ```
//!
//! [tree-sitter]: https://tree-sitter.github.io/

use tree_sitter_language::LanguageFn;

extern "C" {
    fn tree_sitter_dl() -> *const ();
}

/// The tree-sitter [`LanguageFn`] of DL.
pub const LANGUAGE: LanguageFn = unsafe { LanguageFn::from_raw(tree_sitter_dl) };

/// The node types of the grammar (`src/node-types.json`).
pub const NODE_TYPES: &str = include_str!("../../src/node-types.json");

/// Syntax highlighting (`queries/highlights.scm`).
pub const HIGHLIGHTS_QUERY: &str = include_str!("../../queries/highlights.scm");

/// Scopes, definitions and references (`queries/locals.scm`).
pub const LOCALS_QUERY: &str = include_str!("../../queries/locals.scm");

/// Indentation (`queries/indents.scm`, Helix's and Zed's captures).
pub const INDENTS_QUERY: &str = include_str!("../../queries/indents.scm");

/// Text objects: functions, models and recipes, parameters, comments (`queries/textobjects.scm`).
pub const TEXTOBJECTS_QUERY: &str = include_str!("../../queries/textobjects.scm");
