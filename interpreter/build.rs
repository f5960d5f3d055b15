//! The commit `dlc --version` names, read from git when the build has a checkout. A build from a
//! tarball (no `.git`, or no git) says `unknown`, or what `DLC_BUILD_COMMIT` says (a packager's
//! way to name the source it built).

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    println!("cargo:rerun-if-env-changed=DLC_BUILD_COMMIT");
    println!("cargo:rerun-if-changed=build.rs");
    let commit = std::env::var("DLC_BUILD_COMMIT").ok().filter(|c| !c.is_empty()).or_else(|| {
        let hash = git(&dir, &["rev-parse", "--short=9", "HEAD"])?;
        let date = git(&dir, &["log", "-1", "--format=%cs", "HEAD"]).unwrap_or_default();
        // Rebuild when HEAD moves: a commit, a checkout, or a ref packed or rewritten.
        for path in ["HEAD", "packed-refs"] {
            if let Some(p) = git(&dir, &["rev-parse", "--git-path", path]) {
                println!("cargo:rerun-if-changed={}", dir.join(p).display());
            }
        }
        if let Some(p) = git(&dir, &["symbolic-ref", "-q", "HEAD"]).and_then(|r| git(&dir, &["rev-parse", "--git-path", &r])) {
            println!("cargo:rerun-if-changed={}", dir.join(p).display());
        }
        Some(format!("{hash} {date}").trim().to_string())
    });
    println!("cargo:rustc-env=DLC_COMMIT={}", commit.unwrap_or_else(|| "unknown".into()));
}
