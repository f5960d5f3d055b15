//! What the tests that drive the `dlc` binary share: running it as a user does (no colour, and
//! autotuning's choices in a cache of the tests', not the user's), its output as text, and
//! scratch folders. Each test module uses its own part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's root: `examples/`, `bench/` and `stdlib/` are under it.
pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// `dlc`, to be run from `dir`, before its arguments.
pub fn command(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dlc"));
    c.current_dir(dir).env("NO_COLOR", "1").env("DLC_CACHE_DIR", std::env::temp_dir().join(format!("dlc-tests-{}", std::process::id())));
    c
}

/// `dlc ARGS` run from `dir`.
pub fn dlc_in(dir: &Path, args: &[&str]) -> Output {
    command(dir).args(args).output().expect("run dlc")
}

/// `dlc ARGS` run from the repository's root.
pub fn dlc(args: &[&str]) -> Output {
    dlc_in(Path::new(ROOT), args)
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A new empty folder `dlc-NAME-PID` in the system's temporary directory.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dlc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}
