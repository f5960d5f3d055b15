#!/usr/bin/env bash
# Times the chumsky parser against the hand-written one it replaced (commit f432160), both
# built into one program that alternates them run by run, so a noisy machine slows both alike
# and the ratio stays meaningful. Builds in a scratch directory (default /tmp/dlc-parser-ab);
# the repository is not touched. Usage: scripts/bench-parser-ab.sh [RUNS] [FILES...]
# (default: 300 runs of every example, and of the whole stdlib).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${DLC_AB_DIR:-/tmp/dlc-parser-ab}"
runs="${1:-300}"
shift || true
files=("$@")
[ ${#files[@]} -gt 0 ] || files=("$repo"/examples/*.dl)
mkdir -p "$work/src"
if [ ! -d "$work/old" ]; then
  # Its stdlib.rs includes the stdlib's text from ../../stdlib.
  git -C "$repo" archive f432160 language stdlib | tar -x -C "$work" --transform 's,^language,old,'
  # Two packages of one name cannot be linked into one program, and this one is outside the
  # workspace it inherited its settings from: give it a manifest of its own.
  cat > "$work/old/Cargo.toml" <<'TOML'
[package]
name = "dlc-language-old"
version = "0.0.0"
edition = "2021"
[lib]
doctest = false
[dependencies]
serde = { version = "1", features = ["derive"] }
TOML
fi
cat > "$work/Cargo.toml" <<TOML
[package]
name = "parser-ab"
version = "0.0.0"
edition = "2021"
[dependencies]
new = { path = "$repo/language", package = "dlc-language" }
old = { path = "old", package = "dlc-language-old" }
mimalloc = { version = "0.1", default-features = false }
[profile.release]
debug = 1
[workspace]
TOML
cp "$repo/Cargo.lock" "$work/Cargo.lock"
cat > "$work/src/main.rs" <<'RS'
// dlc uses mimalloc; so does this, so the allocator is the one users get.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::time::Instant;

/// As dlc's `bench::stats` takes it: of an even count, the mean of the two middle values.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// Old and new alternately, `n` times each; their medians in microseconds.
fn race(n: usize, old: impl Fn(), new: impl Fn()) -> (f64, f64) {
    let time = |f: &dyn Fn()| {
        let t = Instant::now();
        f();
        t.elapsed().as_secs_f64() * 1e6
    };
    let (mut o, mut w) = (vec![], vec![]);
    for _ in 0..n {
        o.push(time(&old));
        w.push(time(&new));
    }
    (median(o), median(w))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args[1].parse().expect("runs");
    let show = |what: &str, bytes: usize, (o, w): (f64, f64)| {
        println!("| {what} | {bytes} | {o:.1} µs | {w:.1} µs | {:.2} |", w / o)
    };
    println!("| file | bytes | hand-written | chumsky | ratio |\n| --- | ---: | ---: | ---: | ---: |");
    for path in &args[2..] {
        let src = std::fs::read_to_string(path).expect(path);
        let r = race(
            n,
            || drop(std::hint::black_box(old::syntax::parse(old::FileId(0), &src))),
            || drop(std::hint::black_box(new::syntax::parse(new::FileId(0), &src))),
        );
        show(path.rsplit('/').next().unwrap_or(path), src.len(), r);
    }
    let bytes = new::stdlib::MODULES.iter().map(|(_, s)| s.len()).sum();
    let r = race(
        n,
        // Both parse today's text.
        || new::stdlib::MODULES.iter().for_each(|(_, s)| drop(std::hint::black_box(old::syntax::parse(old::FileId(0), s)))),
        || new::stdlib::MODULES.iter().for_each(|(_, s)| drop(std::hint::black_box(new::syntax::parse(new::FileId(0), s)))),
    );
    show("the whole stdlib", bytes, r);
}
RS
(cd "$work" && CARGO_TARGET_DIR="$work/target" cargo build --release --quiet)
"$work/target/release/parser-ab" "$runs" "${files[@]}"
