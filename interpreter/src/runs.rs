//! What `dlc run` says about runs: with `--resume`, the recorded `--set` overrides applied again
//! and what changed since the checkpoint; and the exact commands that continue a run or start it
//! over, when an earlier run is in the way or Ctrl-C stopped this one.

use dlc::paths::shell_quote;
use dlc::train::manifest::{self, RunRecord};
use std::path::Path;

/// The overrides this run applies and its record for the manifest. With `--resume DIR` the
/// checkpoint's recorded overrides apply again (those given now replace them), and a program
/// or seed that changed since is said. An unreadable checkpoint ends the command (exit 1).
/// `text` is the program as it was compiled (the file may have changed since it was read).
pub fn overrides_and_record(
    file: &Path,
    text: &str,
    given: &[(String, String)],
    resume: Option<&Path>,
    seed: u64,
) -> Result<(Vec<(String, String)>, RunRecord), i32> {
    let Some(dir) = resume else { return Ok((given.to_vec(), RunRecord::of(file, text, given))) };
    let m = match manifest::read(dir) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: cannot resume from {}: {e}", dir.display());
            return Err(1);
        }
    };
    let (set, said) = manifest::merge_overrides(&m.run.set, given);
    for line in said {
        eprintln!("note: {line}");
    }
    let record = RunRecord::of(file, text, &set);
    if let (Some(then), Some(now)) = (&m.run.program_sha256, &record.program_sha256) {
        if then != now {
            let by = match &m.run.program {
                Some(p) if Some(p) != record.program.as_ref() => format!(" (by {})", p.display()),
                _ => String::new(),
            };
            eprintln!(
                "warning: `{}` changed since the checkpoint in {} was written{by}: SHA-256 {} then, {} now; the run goes on with the program as it is now",
                file.display(),
                dir.display(),
                &then[..12.min(then.len())],
                &now[..12.min(now.len())]
            );
        }
    }
    if m.seed != seed {
        eprintln!(
            "warning: the checkpoint was trained with `--seed {}`, this run has `--seed {seed}`: its random draws (dropout masks) differ from an uninterrupted run's",
            m.seed
        );
    }
    Ok((set, record))
}

/// This process's command line, for a shell, with every `--resume`/`--overwrite` replaced by
/// `extra`; under `mpirun` (more than one rank) with the launcher in front.
pub fn command_with(extra: &[&str], ranks: usize) -> String {
    let args: Vec<String> = std::env::args().collect();
    let mut kept = vec![];
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "--resume" {
            i += 2;
            continue;
        }
        if !(a == "--overwrite" || a.starts_with("--resume=")) {
            kept.push(shell_quote(a));
        }
        i += 1;
    }
    kept.extend(extra.iter().map(|a| shell_quote(a)));
    let launcher = if ranks > 1 { format!("mpirun -n {ranks} ") } else { String::new() };
    format!("{launcher}{}", kept.join(" "))
}

/// The refusal of a run that would write where an earlier run is, with the ways on.
pub fn run_exists(path: &Path, ranks: usize) -> String {
    let shown = path.display();
    let aside = dlc::train::aside_path(path);
    let over = command_with(&["--overwrite"], ranks);
    if path.is_dir() {
        let ck = manifest::read(path).ok();
        let what = ck.as_ref().map(|m| format!("a checkpoint at step {}, epoch {}", m.step, m.epoch)).unwrap_or("a metrics file".into());
        let mut s = format!("error: {shown} holds an earlier run ({what}); this run would replace it, so it did not start\n");
        if ck.is_some() {
            s += &format!("  to continue that run: {}\n", command_with(&["--resume", &path.to_string_lossy()], ranks));
        }
        s += &format!("  to start over:        {over}\n                        (the earlier run is moved to {})\n", aside.display());
        s += "  or give the recipe another `checkpoint \"DIR\"`\n";
        s
    } else {
        format!(
            "error: the metrics file {shown} holds an earlier run; this run would mix its lines into it, so it did not start\n  \
             to start over: {over}\n                 (the earlier file is moved to {})\n  or give another `--metrics FILE`\n",
            aside.display()
        )
    }
}

/// What Ctrl-C leaves: the command that continues from the checkpoint just saved.
pub fn interrupted(checkpoint: Option<&Path>, ranks: usize) -> String {
    match checkpoint.and_then(|d| manifest::read(d).ok().map(|m| (d, m.step))) {
        Some((dir, step)) => format!(
            "training interrupted at step {step}; the checkpoint in {} continues it:\n  {}\n",
            dir.display(),
            command_with(&["--resume", &dir.to_string_lossy()], ranks)
        ),
        None => "training interrupted; the recipe names no `checkpoint` directory, so nothing was saved to resume from\n".into(),
    }
}
