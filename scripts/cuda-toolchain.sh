#!/usr/bin/env bash
# Installs NVIDIA's CUDA compilers without a GPU or a CUDA toolkit: NVRTC (the run-time compiler
# dlc's CUDA backend uses), ptxas (assembles PTX and reports registers and spills) and the CUDA
# headers, from the Python package registry into .cuda/ in the repository (about 320 MB
# unpacked). `dlc kernels FILE --check cuda` and the tests use them to compile every generated
# kernel for sm_80 and sm_90. Safe to run again: a working install is kept.
# Afterwards `source scripts/cuda-env.sh` puts them on the library path and PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.cuda/python
packages=(nvidia-cuda-nvrtc-cu12==12.9.86 nvidia-cuda-nvcc-cu12==12.9.86 nvidia-cuda-runtime-cu12==12.9.79)
if [ -x "$dest/nvidia/cuda_nvcc/bin/ptxas" ] && ls "$dest"/nvidia/cuda_nvrtc/lib/libnvrtc.so.* >/dev/null 2>&1; then
  echo "cuda-toolchain: .cuda/ already has NVRTC and ptxas; keeping it"
  exit 0
fi
python=""
for p in python3 python; do
  if command -v "$p" >/dev/null && "$p" -m pip --version >/dev/null 2>&1; then python="$p"; break; fi
done
if [ -z "$python" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq python3-pip
    python=python3
  else
    echo "error: installing the CUDA compilers needs Python's pip (apt-get install python3-pip)" >&2
    exit 1
  fi
fi
rm -rf "$dest"
"$python" -m pip install --quiet --disable-pip-version-check --no-deps --root-user-action=ignore --target "$dest" "${packages[@]}"
chmod +x "$dest"/nvidia/cuda_nvcc/bin/* 2>/dev/null || true
echo "cuda-toolchain: installed NVRTC and ptxas in .cuda/python ($(du -sh "$dest" | cut -f1))"
