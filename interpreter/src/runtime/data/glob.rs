//! File name patterns of a source's `files` (`"data/train-*.tar"`): `*` (any run of characters)
//! and `?` (one character) in the last component of a path, expanded in sorted order, as a shell
//! expands them (a name starting with `.` is matched only by a pattern starting with `.`). A path
//! without them is itself, whether or not it exists (reading it says when it does not).

use super::{err, DataError};
use std::path::{Path, PathBuf};

fn has_wildcards(s: &str) -> bool {
    s.contains(['*', '?'])
}

/// Whether `name` matches `pattern` (`*` any run of characters, `?` one character).
pub fn matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Greedy with one backtrack point, the last `*`: linear for patterns of one star, quadratic
    // at worst.
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        match p.get(i) {
            Some('*') => {
                star = Some((i, j));
                i += 1;
            }
            Some(c) if *c == '?' || *c == n[j] => {
                i += 1;
                j += 1;
            }
            _ => match star {
                Some((si, sj)) => {
                    i = si + 1;
                    j = sj + 1;
                    star = Some((si, sj + 1));
                }
                None => return false,
            },
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

/// The files `pattern` names: itself without wildcards, else the matching files of its folder in
/// sorted order (an error when none match, or when a folder above the name has wildcards).
pub fn expand(pattern: &Path) -> Result<Vec<PathBuf>, DataError> {
    let text = pattern.to_string_lossy();
    if !has_wildcards(&text) {
        return Ok(vec![pattern.to_path_buf()]);
    }
    let name = pattern.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = pattern.parent().unwrap_or(Path::new(""));
    if has_wildcards(&dir.to_string_lossy()) || !has_wildcards(&name) {
        return Err(err(pattern, "only the file name of a pattern may hold `*` or `?`, not a folder above it"));
    }
    let entries = std::fs::read_dir(dir).map_err(|e| err(dir, format!("cannot list (for the pattern {name}): {e}")))?;
    let mut out = vec![];
    for entry in entries {
        let entry = entry.map_err(|e| err(dir, format!("cannot list: {e}")))?;
        let file = entry.file_name().to_string_lossy().into_owned();
        let hidden = file.starts_with('.') && !name.starts_with('.');
        if !hidden && matches(&name, &file) && entry.path().is_file() {
            out.push(entry.path());
        }
    }
    if out.is_empty() {
        return Err(err(pattern, "the pattern matches no file"));
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stars_and_question_marks_match_as_a_shell_matches_them() {
        assert!(matches("train-*.tar", "train-000001.tar"));
        assert!(matches("train-*.tar", "train-.tar"));
        assert!(!matches("train-*.tar", "train-1.tar.gz"));
        assert!(matches("*.tar", "a.b.tar"));
        assert!(matches("a?c", "abc") && !matches("a?c", "ac") && !matches("a?c", "abbc"));
        assert!(matches("*a*b*", "xaybzb") && !matches("*a*b*", "xbya"));
        assert!(matches("*", "") && !matches("?", ""));
        assert!(matches("exact.tar", "exact.tar") && !matches("exact.tar", "exact.ta"));
    }

    #[test]
    fn a_pattern_expands_to_its_folders_matching_files_in_sorted_order() {
        let dir = std::env::temp_dir().join(format!("dlc-glob-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub-2.tar")).unwrap();
        for f in ["b-10.tar", "b-02.tar", "a-01.tar", ".b-00.tar", "b-03.txt"] {
            std::fs::write(dir.join(f), b"").unwrap();
        }
        let names = |p: &str| -> Vec<String> {
            expand(&dir.join(p)).unwrap().iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect()
        };
        assert_eq!(names("b-*.tar"), ["b-02.tar", "b-10.tar"], "sorted, dotfiles and other kinds left out");
        assert_eq!(names("*-0?.tar"), ["a-01.tar", "b-02.tar"]);
        assert_eq!(names("*.tar"), ["a-01.tar", "b-02.tar", "b-10.tar"], "files only, not the folder sub-2.tar");
        assert_eq!(names(".b-*"), [".b-00.tar"], "a leading dot matched when written");
        assert_eq!(names("plain.tar"), ["plain.tar"], "no wildcard: the path itself");
        assert!(expand(&dir.join("c-*.tar")).unwrap_err().to_string().contains("matches no file"));
        assert!(expand(&dir.join("s*/x.tar")).unwrap_err().to_string().contains("only the file name"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
