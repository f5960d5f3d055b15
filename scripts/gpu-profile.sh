#!/usr/bin/env bash
# Where a GPU step's time goes: `dlc bench --profile --device cuda` (each kernel waited for, the
# timed steps only) of the bench steps, then the same steps unprofiled (the step time to quote).
# Carry dlc-gpu.xz as for scripts/gpu-check.sh; PROGRAMS overrides the list.
set -u
cd "$(dirname "$0")/.."
. scripts/dlc-gpu-binary.sh
unpack_dlc_gpu || { echo "no dlc-gpu.xz or dlc-gpu.gz carried" >&2; exit 2; }
for d in $(python3 -c 'import glob,site; [print(d) for s in site.getsitepackages() for d in glob.glob(s+"/nvidia/*/lib")]' 2>/dev/null); do
  LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
export LD_LIBRARY_PATH
for p in ${PROGRAMS:-mnist_cnn_step conv_bn_step mlp_step_1024 mlp_step_128}; do
  echo "== $p"
  timeout 100 ./dlc-gpu bench "bench/$p.dl" --device cuda --profile --steps 30 2>&1 | head -24
  timeout 100 ./dlc-gpu bench "bench/$p.dl" --device cuda --steps 50 2>&1 | grep -E "^bench/|^error"
done
