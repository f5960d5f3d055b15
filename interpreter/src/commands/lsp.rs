//! `dlc lsp`: the language server on stdin and stdout (`dlc::lsp`).

pub fn main() -> i32 {
    dlc::lsp::run_stdio()
}
