//! `dlc fmt [PATH...]`: rewrite `.dl` files (and the `.dl` files under folders) in DL's one
//! layout (`dlc_language::format`); `--check` changes nothing and lists the files that are not
//! formatted, with their first difference; `-` formats standard input to standard output. A file
//! with syntax errors is left as it is and its diagnostics are printed.

use crate::session::color;
use dlc::render::render;
use dlc_language::format::{format, FormatError};
use dlc_language::SourceMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

pub fn main(paths: &[PathBuf], check: bool) -> i32 {
    let mut failed = false;
    for path in paths {
        if path.as_os_str() == "-" {
            failed |= !stdin(check);
            continue;
        }
        let files = match dl_files(path) {
            Ok(files) => files,
            Err(e) => {
                eprintln!("error: cannot read `{}`: {e}", path.display());
                failed = true;
                continue;
            }
        };
        for file in files {
            failed |= !one_file(&file, check);
        }
    }
    i32::from(failed)
}

/// Format one file; false when it has errors, or under `--check`, when it is not formatted.
fn one_file(file: &Path, check: bool) -> bool {
    let name = file.display().to_string();
    let src = match std::fs::read_to_string(file) {
        Ok(src) => src,
        Err(e) => {
            eprintln!("error: cannot read `{name}`: {e}");
            return false;
        }
    };
    let Some(out) = formatted(&name, &src) else { return false };
    if out == src {
        return true;
    }
    if check {
        eprintln!("{name}: not formatted (`dlc fmt {name}` rewrites it)");
        eprint!("{}", first_difference(&name, &src, &out));
        return false;
    }
    match replace(file, &out) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("error: cannot write `{name}`: {e}");
            false
        }
    }
}

/// Standard input to standard output (under `--check`, nothing written; false when it would change).
fn stdin(check: bool) -> bool {
    let mut src = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut src) {
        eprintln!("error: cannot read standard input: {e}");
        return false;
    }
    let Some(out) = formatted("<stdin>", &src) else { return false };
    if check {
        if out != src {
            eprintln!("<stdin>: not formatted");
            eprint!("{}", first_difference("<stdin>", &src, &out));
        }
        return out == src;
    }
    std::io::stdout().write_all(out.as_bytes()).is_ok()
}

/// The formatted text, or `None` after printing why there is none.
fn formatted(name: &str, src: &str) -> Option<String> {
    let mut sources = SourceMap::default();
    let id = sources.add(name, src);
    match format(id, src) {
        Ok(out) => Some(out),
        Err(FormatError::Syntax(diags)) => {
            let color = color();
            for d in &diags {
                eprint!("{}", render(d, &sources, color));
            }
            let n = diags.len();
            eprintln!("error: could not format `{name}`: {n} syntax error{}", if n == 1 { "" } else { "s" });
            None
        }
        Err(FormatError::Internal(why)) => {
            eprintln!("error: internal formatter error on `{name}`: {why}; the file is left as it is");
            None
        }
    }
}

/// `path` itself if it is a file; the `.dl` files under it (hidden folders aside), sorted, if it
/// is a folder.
fn dl_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if !std::fs::metadata(path)?.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut out = vec![];
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let p = entry?.path();
            let hidden = p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
            if p.is_dir() && !hidden {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "dl") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Replace `file`'s contents at once: the text goes to a file beside it, which is renamed over
/// it, so a reader (or a crash) never sees half a file.
fn replace(file: &Path, text: &str) -> std::io::Result<()> {
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = file.with_file_name(format!(".{name}.dlc-fmt-{}", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::set_permissions(&tmp, std::fs::metadata(file)?.permissions())?;
        std::fs::rename(&tmp, file)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A unified-style hunk for the first place where `old` and `new` differ: up to two lines of
/// context each side, and the lines that differ until the two texts agree again.
fn first_difference(name: &str, old: &str, new: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    if a == b {
        return format!("{name}: only its line ends differ (Windows line ends, or no line end after the last line)\n");
    }
    let start = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    // The nearest point after `start` where both agree again (the fewest lines skipped).
    let resync = (0..=80)
        .flat_map(|d| (0..=d).map(move |i| (start + i, start + d - i)))
        .find(|&(i, j)| (i < a.len() && j < b.len() && a[i] == b[j]) || (i == a.len() && j == b.len()))
        .unwrap_or((a.len().min(start + 6), b.len().min(start + 6)));
    let from = start.saturating_sub(2);
    let after = (a.len() - resync.0).min(2);
    let mut s = format!("--- {name}\n+++ {name} (formatted)\n");
    s += &format!("@@ -{},{} +{},{} @@\n", from + 1, resync.0 + after - from, from + 1, resync.1 + after - from);
    a[from..start].iter().for_each(|l| s += &format!(" {l}\n"));
    a[start..resync.0].iter().for_each(|l| s += &format!("-{l}\n"));
    b[start..resync.1].iter().for_each(|l| s += &format!("+{l}\n"));
    a[resync.0..resync.0 + after].iter().for_each(|l| s += &format!(" {l}\n"));
    s
}
