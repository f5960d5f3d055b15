#!/usr/bin/env bash
# Installs what building and testing dlc needs on a fresh Debian machine with rustup's toolchain:
# Open MPI (dlc links it for data parallelism: `mpirun -n 2 dlc run ...`; the `mpi` crate's
# bindings are generated with libclang), and NVRTC/ptxas for the CUDA kernel checks. Python and
# numpy are only needed to regenerate the numeric fixtures (tests/fixtures/gen_numeric.py), which
# are committed.
set -euo pipefail
if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo is not installed; install Rust with rustup first" >&2
  exit 1
fi
if ! cargo fmt --version >/dev/null 2>&1; then
  rustup component add rustfmt
fi
if ! cargo clippy --version >/dev/null 2>&1; then
  rustup component add clippy
fi
# Open MPI and what the `mpi` crate builds with, from Debian's packages; oneDNN (libdnnl2), the
# library PyTorch's CPU products run on, which dlc loads at run time as one of the product kernels
# it measures per machine (a machine without it keeps the gemm crate's kernels); Neovim, the real
# editor client CI attaches to `dlc lsp` (editors/nvim/test/lsp_smoke.sh).
packages=(libopenmpi-dev openmpi-bin libclang-dev pkg-config libdnnl2 neovim)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# NVRTC and ptxas (no GPU needed): the tests compile every generated CUDA kernel for sm_80 and
# sm_90 with them. Into .cuda/ in the repository, from the Python package registry.
bash "$(dirname "$0")/cuda-toolchain.sh"
