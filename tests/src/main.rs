//! dlc's end-to-end tests, one binary: the program corpus (tests/cases), the examples, the code
//! blocks of the docs, the formatter over every DL file, and the parser/checker no-panic property
//! test.

mod corpus;
mod directives;
mod format;
mod lossless;
mod no_panic;
mod partial;
mod structure;

use std::path::{Path, PathBuf};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(|p| p.to_path_buf()).unwrap_or_default()
}

/// Every `.dl` file under `dir`, sorted.
pub fn dl_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().map(|x| x == "dl").unwrap_or(false) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
