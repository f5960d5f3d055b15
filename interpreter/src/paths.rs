//! The one rule for paths (docs/language.md, "Paths"): a path written in a program is relative to
//! the program file's folder, as Cargo.toml's paths are relative to the manifest, so a run reads
//! and writes the same files from any working directory; a path given on the command line
//! (`--resume DIR`, `--metrics FILE`) is relative to the working directory, as any command's
//! arguments are. Every path a run reads or writes is shown absolute, so two runs from two
//! directories show the same lines.

use dlc_language::eval::recipe::RecipeInfo;
use dlc_language::eval::value::Stage;
use dlc_language::eval::Value;
use std::path::{Component, Path, PathBuf};

/// `path` made absolute against the working directory, with `.` and `..` removed from the text
/// (as Python's `os.path.abspath`; nothing needs to exist).
pub fn absolute(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map(|d| d.join(path)).unwrap_or_else(|_| path.to_path_buf())
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            // `/..` is `/`; popping a name keeps the root.
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The folder a program's paths are relative to: the program file's, absolute.
pub fn program_root(file: &Path) -> PathBuf {
    absolute(file.parent().unwrap_or(Path::new("")))
}

/// A path written in a program whose folder is `root`.
pub fn in_program(root: &Path, written: &str) -> PathBuf {
    absolute(&root.join(written))
}

/// The arguments of data sources that name files or folders (`csv("a.csv")`'s `path`,
/// `mnist("dir")`'s `dir`, `idx(images:, labels:)`, `npy(path, labels:)`, `cifar(files)`).
const PATH_ARGS: [&str; 5] = ["path", "dir", "images", "labels", "files"];

/// The files and folders a data source reads.
pub fn source_paths(root: &Path, src: &Stage) -> Vec<PathBuf> {
    let mut out = vec![];
    for (name, v) in &src.args {
        // (A `safetensors` source's `labels` names a tensor of its file, not a file.)
        if !PATH_ARGS.contains(&name.as_str()) || (src.kind == "safetensors" && name != "path") {
            continue;
        }
        match v {
            Value::Str(s) => out.push(in_program(root, s)),
            Value::Tuple(items) => out.extend(items.iter().filter_map(|v| match v {
                Value::Str(s) => Some(in_program(root, s)),
                _ => None,
            })),
            _ => {}
        }
    }
    out
}

/// What an `evaluate` or `infer` block reads and writes, by role: its data, its checkpoint, an
/// `infer`'s output file and vocabulary.
pub fn recipe_paths(root: &Path, info: &RecipeInfo) -> Vec<(&'static str, PathBuf)> {
    let mut out: Vec<(&'static str, PathBuf)> = vec![];
    if let Some(Value::Pipeline(p)) = info.field("data") {
        out.extend(source_paths(root, &p.source).into_iter().map(|p| ("data", p)));
    }
    for (field, role) in [("init", "init"), ("checkpoint", "checkpoint"), ("vocab", "vocab"), ("output", "output")] {
        if let Some(Value::Str(s)) = info.field(field) {
            out.push((role, in_program(root, s)));
        }
    }
    out
}

/// One argument as a POSIX shell reads it back: as it is when it is plain, else single-quoted.
pub fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_paths_lose_dots_and_keep_the_root() {
        assert_eq!(absolute(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(absolute(Path::new("/../x")), PathBuf::from("/x"));
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(absolute(Path::new("runs/x")), cwd.join("runs/x"));
        assert_eq!(in_program(Path::new("/p/examples"), "../runs/x"), PathBuf::from("/p/runs/x"));
        assert_eq!(in_program(Path::new("/p/examples"), "/abs/ck"), PathBuf::from("/abs/ck"));
        assert_eq!(program_root(Path::new("/p/q/prog.dl")), PathBuf::from("/p/q"));
        assert_eq!(program_root(Path::new("prog.dl")), cwd);
    }

    #[test]
    fn shell_quoting_round_trips_through_sh() {
        for arg in ["plain/path.dl", "with space", "it's", "", "$HOME", "steps=600"] {
            let out = std::process::Command::new("sh").arg("-c").arg(format!("printf %s {}", shell_quote(arg))).output().unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), arg);
        }
        assert_eq!(shell_quote("steps=600"), "steps=600");
    }
}
