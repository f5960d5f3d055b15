#!/usr/bin/env bash
# Runs bench/compare.py's CPU step rows on the host processor of a lent GPU machine (an Intel
# Xeon with AVX-512 and AMX on every machine lent so far), pinned to two of its cores with two
# threads a side, as on the 2-core machines this project is built on. It is the only Intel
# machine a session may have (issue 24 asks for figures on Intel and AMD).
#
# That machine has PyTorch but no Rust toolchain, no oneDNN library of its own (PyTorch's is
# linked into libtorch) and no network. Build here and carry the binary and the library dlc
# loads at run time, both xz-compressed (what one call carries is 64 MiB, tracked files included):
#   cargo build --release -p dlc --no-default-features && strip -o /tmp/dlc-gpu target/release/dlc
#   xz -9e -c /tmp/dlc-gpu > dlc-gpu.xz
#   mkdir -p .cpu-libs && for l in libdnnl.so.2 libOpenCL.so.1 libgomp.so.1; do
#     xz -9 -c "$(readlink -f /usr/lib/x86_64-linux-gnu/$l)" > .cpu-libs/$l.xz; done
# (.cpu-libs/ and dlc-gpu.xz are git-ignored) and call it with `carry: [dlc-gpu.xz, .cpu-libs]`.
# ONLY (default "gelu mlp bf16 cnn conv-bn") picks compare.py's groups, RUNS its fresh processes
# per benchmark (default 1, with --quick's shorter timings), CORES the cores (default 0,1). The
# table goes to $OUT_DIR/compare.txt (default cpu-results/), written as the rows finish.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT_DIR:-cpu-results}
mkdir -p "$out"
. scripts/dlc-gpu-binary.sh
unpack_dlc_gpu || { echo "no dlc-gpu.xz or dlc-gpu.gz carried" >&2; exit 2; }
mkdir -p target/release && cp dlc-gpu target/release/dlc
lib=/tmp/dlc-cpu-libs
mkdir -p "$lib"
for f in .cpu-libs/*.xz; do
  [ -f "$f" ] && xz -dc "$f" > "$lib/$(basename "$f" .xz)"
done
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python=${PYTHON:-python3}
{
  lscpu | grep -E "^(Model name|Flags|Thread|Core|Socket|NUMA node0)" | cut -c1-400
  echo "cores used: ${CORES:-0,1}"
  "$python" -c "import torch; print('torch', torch.__version__)"
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
# dlc reports whether it found oneDNN in `dlc bench --json`'s tuning; say it here too.
./dlc-gpu --version
ldd "$lib/libdnnl.so.2" 2>&1 | grep -i "not found" && echo "oneDNN cannot load: convolutions fall back to im2col" >&2
export PYTHONUNBUFFERED=1
runs=${RUNS:-1}
quick=()
[ "$runs" = 1 ] && quick=(--quick)
# shellcheck disable=SC2086
taskset -c "${CORES:-0,1}" "$python" bench/compare.py --no-build "${quick[@]}" --runs "$runs" --threads 2 \
  --only ${ONLY:-gelu mlp bf16 cnn conv-bn} 2>&1 | tee "$out/compare.txt"
