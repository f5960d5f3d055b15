#!/usr/bin/env bash
# Installs what building and testing dlc needs on a fresh Debian machine with rustup's toolchain.
# The test suite itself needs nothing beyond cargo; Python and numpy are only needed to regenerate
# the numeric fixtures (tests/fixtures/gen_numeric.py), which are committed.
set -euo pipefail
if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo is not installed; install Rust with rustup first" >&2
  exit 1
fi
if ! cargo fmt --version >/dev/null 2>&1; then
  rustup component add rustfmt
fi
# NVRTC and ptxas (no GPU needed): the tests compile every generated CUDA kernel for sm_80 and
# sm_90 with them. Into .cuda/ in the repository, from the Python package registry.
bash "$(dirname "$0")/cuda-toolchain.sh"
