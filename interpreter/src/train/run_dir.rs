//! Runs never clobber runs. A fresh run (no `--resume`) that would write into a checkpoint
//! directory or a metrics file holding an earlier run stops before anything is read or written,
//! unless told to start over (`--overwrite`, [`super::TrainOptions::overwrite`]), which moves
//! the earlier run aside to `NAME.old-N` (a rename: nothing is deleted). A resumed run writes
//! on into the directory it resumed, and appends to its metrics file after a `resumed` line.
//! Also here: the paths a run reads and writes, resolved by the one rule (crate::paths).

use super::{RuntimeError, Trainer};
use crate::paths;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Whether a checkpoint directory holds a run: a manifest, or a metrics file with lines in it
/// (a run killed before its first checkpoint).
pub fn holds_run(dir: &Path) -> bool {
    dir.join("manifest.json").exists() || non_empty(&dir.join("metrics.jsonl"))
}

fn non_empty(file: &Path) -> bool {
    std::fs::metadata(file).is_ok_and(|m| m.len() > 0)
}

/// Where [`move_aside`] would move `path`: the first free `NAME.old-N` beside it (N from 1).
pub fn aside_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    (1..).map(|n| path.with_file_name(format!("{name}.old-{n}"))).find(|p| !p.exists()).unwrap_or_default()
}

/// Rename `path` to [`aside_path`]; returns the new path.
pub fn move_aside(path: &Path) -> Result<PathBuf, String> {
    let aside = aside_path(path);
    std::fs::rename(path, &aside).map_err(|e| format!("cannot move {} aside to {}: {e}", path.display(), aside.display()))?;
    Ok(aside)
}

/// End a metrics file's last line when a killed run left it torn, so the lines appended after it
/// stay one JSON object a line.
fn mend_torn_line(file: &Path) -> std::io::Result<()> {
    let Ok(mut f) = std::fs::OpenOptions::new().read(true).append(true).open(file) else { return Ok(()) };
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    f.seek(SeekFrom::Start(len - 1))?;
    let mut last = [0u8];
    f.read_exact(&mut last)?;
    if last[0] != b'\n' {
        f.write_all(b"\n")?;
    }
    Ok(())
}

impl Trainer<'_> {
    /// The checkpoint directory the recipe names, relative to the program's folder (none for a
    /// run that writes no checkpoints).
    pub fn checkpoint_dir(&self) -> Option<PathBuf> {
        if !self.opts.checkpoints {
            return None;
        }
        self.spec.checkpoint.as_ref().map(|(dir, _)| paths::in_program(&self.opts.root, dir))
    }

    /// The metrics file: `--metrics FILE` (the working directory's), else `metrics.jsonl` in the
    /// checkpoint directory; none without either.
    pub fn metrics_path(&self) -> Option<PathBuf> {
        self.opts.metrics.as_deref().map(paths::absolute).or_else(|| self.checkpoint_dir().map(|d| d.join("metrics.jsonl")))
    }

    /// Every path the run reads or writes, absolute, by role: `data` (training and evaluation
    /// sources), `resume`, `checkpoint`, `metrics`.
    pub fn paths(&mut self) -> Vec<(&'static str, PathBuf)> {
        let root = self.opts.root.clone();
        let mut out: Vec<(&'static str, PathBuf)> = vec![];
        let mut pipelines = vec![self.pipeline.clone()];
        for (data, _, _) in self.evaluate_clauses() {
            pipelines.extend(self.clause_pipeline(&data).ok());
        }
        for p in pipelines {
            for path in paths::source_paths(&root, &p.source) {
                if !out.iter().any(|(_, q)| *q == path) {
                    out.push(("data", path));
                }
            }
        }
        out.extend(self.opts.resume.as_deref().map(|d| ("resume", paths::absolute(d))));
        out.extend(self.checkpoint_dir().map(|d| ("checkpoint", d)));
        out.extend(self.metrics_path().map(|m| ("metrics", m)));
        out
    }

    /// Before anything is read: refuse to write into an earlier run's checkpoint directory or
    /// metrics file, or move it aside when asked to start over. A resumed run may write on into
    /// the directory (and metrics file) it resumed.
    pub(super) fn claim_run_files(&mut self) -> Result<(), RuntimeError> {
        if !self.world.is_root() {
            return Ok(());
        }
        let resumed = self.opts.resume.as_deref().map(paths::absolute);
        let continuing = |p: &Path| resumed.as_deref().is_some_and(|r| p.starts_with(r));
        if self.opts.overwrite && resumed.is_some() && self.checkpoint_dir().is_some_and(|d| continuing(&d)) {
            return Err(RuntimeError::Unsupported("`--overwrite` starts the run over, `--resume` continues it: give one of them".into()));
        }
        let mut taken: Vec<PathBuf> = vec![];
        if let Some(dir) = self.checkpoint_dir().filter(|d| !continuing(d) && holds_run(d)) {
            taken.push(dir);
        }
        // A metrics file of its own (`--metrics FILE`) with lines in it is an earlier run's too;
        // a resumed run appends to its metrics file, whichever it is.
        if let Some(file) = self.metrics_path().filter(|m| resumed.is_none() && non_empty(m) && !taken.iter().any(|d| m.starts_with(d))) {
            taken.push(file);
        }
        for path in taken {
            if !self.opts.overwrite {
                return Err(RuntimeError::RunExists(path));
            }
            let aside = move_aside(&path).map_err(RuntimeError::Io)?;
            let said = format!("started over: the earlier run in {} was moved to {}", path.display(), aside.display());
            self.emit(&super::Event::Warning(&said));
        }
        if resumed.is_some() {
            if let Some(m) = self.metrics_path() {
                mend_torn_line(&m).map_err(|e| RuntimeError::Io(format!("cannot append to {}: {e}", m.display())))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_moved_aside_never_deleted_and_torn_lines_mended() {
        let dir = std::env::temp_dir().join(format!("dlc-run-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let ck = dir.join("ck");
        std::fs::create_dir_all(&ck).unwrap();
        assert!(!holds_run(&ck), "an empty directory holds no run");
        std::fs::write(ck.join("metrics.jsonl"), "{\"step\": 1}\n{\"step\": 2, \"lo").unwrap();
        assert!(holds_run(&ck));
        mend_torn_line(&ck.join("metrics.jsonl")).unwrap();
        assert_eq!(std::fs::read_to_string(ck.join("metrics.jsonl")).unwrap(), "{\"step\": 1}\n{\"step\": 2, \"lo\n");
        mend_torn_line(&ck.join("metrics.jsonl")).unwrap();
        assert!(std::fs::read_to_string(ck.join("metrics.jsonl")).unwrap().ends_with("lo\n"), "a whole last line is left alone");
        assert_eq!(move_aside(&ck).unwrap(), dir.join("ck.old-1"));
        std::fs::create_dir_all(&ck).unwrap();
        assert_eq!(move_aside(&ck).unwrap(), dir.join("ck.old-2"));
        assert!(dir.join("ck.old-1/metrics.jsonl").exists() && !ck.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
