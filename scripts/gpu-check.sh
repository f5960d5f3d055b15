#!/usr/bin/env bash
# Runs the GPU checks on a machine with an NVIDIA GPU and writes their results to OUT_DIR
# (default gpu-results/): every generated kernel of every example and bench program launched on
# GPU 0 and compared with the interpreter (`dlc kernels FILE --check gpu`); one epoch of small
# examples trained with `--device cuda` against `--device cpu` (the epoch's mean loss and the
# evaluations must agree to the printed digits); `dlc bench --device cuda` of the MNIST MLP; and
# the GPU's identity; and bench/gpu_compare.py, dlc's training steps against PyTorch's on the same
# GPU. The GPU machines have no Rust toolchain: build here with
#   cargo build --release -p dlc --no-default-features && strip -o /tmp/dlc-gpu target/release/dlc
#   xz -9e -c /tmp/dlc-gpu > dlc-gpu.xz
# (--no-default-features: the lent GPU machines have no Open MPI, which the default build links;
# xz: the tracked tree and the binary together are near what one call carries, 64 MiB; gzip's
# dlc-gpu.gz is 2.3 MB larger and also accepted) and carry dlc-gpu.xz; this script uses $DLC
# (default ./dlc-gpu, unpacked from dlc-gpu.xz or dlc-gpu.gz if need be, else target/release/dlc). See docs/gpu.md for what the first run found.
# Without a GPU every check reports itself as skipped, not passed, and the script exits 2.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT_DIR:-gpu-results}
mkdir -p "$out"
dlc=${DLC:-}
. scripts/dlc-gpu-binary.sh
[ -n "$dlc" ] || unpack_dlc_gpu
if [ -z "$dlc" ]; then
  if [ -x ./dlc-gpu ]; then dlc=./dlc-gpu; else dlc=target/release/dlc; fi
fi
# NVRTC: the CUDA toolkit's, a Python package's (PyTorch brings one), or .cuda/'s.
libs=()
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib .cuda/python/nvidia/cuda_nvrtc/lib; do
  [ -d "$d" ] && libs+=("$d")
done
for py in python3 python; do
  if command -v "$py" >/dev/null; then
    while IFS= read -r d; do [ -n "$d" ] && libs+=("$d"); done < <("$py" - <<'PY' 2>/dev/null
import glob, os, site
for s in site.getsitepackages():
    for d in glob.glob(os.path.join(s, "nvidia", "cu*", "lib")) + glob.glob(os.path.join(s, "nvidia", "cuda_nvrtc", "lib")):
        print(d)
PY
)
    break
  fi
done
export LD_LIBRARY_PATH="$(IFS=:; echo "${libs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DLC_CACHE_DIR="$out/cache"
# Every command gets a time limit (STEP_TIMEOUT seconds, default 120): a hang on the GPU is
# reported as a failure of that step, and the remaining checks still run.
t=${STEP_TIMEOUT:-120}
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || echo "nvidia-smi: no GPU"
  echo "dlc: $("$dlc" --version)"
  echo "LD_LIBRARY_PATH: $LD_LIBRARY_PATH"
} > "$out/machine.txt"
cat "$out/machine.txt"
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIPPED: no NVIDIA GPU here; nothing was checked" | tee "$out/summary.txt"
  exit 2
fi
status=0
: > "$out/summary.txt"
for f in examples/*.dl bench/*.dl; do
  name=$(basename "$f" .dl)
  # Twice: the second run must load every module from the kernel cache.
  for run in 1 2; do
    timeout "$t" "$dlc" kernels "$f" --check gpu --json > "$out/$name.$run.json" 2> "$out/$name.$run.err"
    rc=$?
    [ $rc -ne 0 ] && status=1
  done
  python3 - "$out/$name.2.json" "$f" "$rc" >> "$out/summary.txt" <<'PY' || echo "$f: no report (exit $rc): $(tail -3 "$out/$name.2.err")" >> "$out/summary.txt"
import json, sys
r = json.load(open(sys.argv[1]))
g = r["gpu_check"]
ks = g["kernels"]
bad = [k["name"] for k in ks if not k["ok"]]
worst = max([k["max_rel"] for k in ks] or [0])
print(f'{sys.argv[2]}: {len(ks) - len(bad)}/{len(ks)} kernels agree, max rel {worst:.2e}, module {g["module"]}{"; FAILED: " + ", ".join(bad) if bad else ""}')
PY
done
# Whole runs on the device executor against the CPU.
for f in examples/iris.dl examples/digits.dl examples/mnist_mlp.dl; do
  name=$(basename "$f" .dl)
  for dev in cuda cpu; do
    # --overwrite: the other device's run of the same file left its checkpoint there.
    timeout "$t" "$dlc" run "$f" --device "$dev" --set epochs=1 --overwrite > "$out/$name.run-$dev.out" 2> "$out/$name.run-$dev.err" || status=1
  done
  if diff <(grep -E "^epoch 1 (done|evaluate)" "$out/$name.run-cuda.out" | sed 's/ in [0-9.]* s.*//') \
          <(grep -E "^epoch 1 (done|evaluate)" "$out/$name.run-cpu.out" | sed 's/ in [0-9.]* s.*//') > "$out/$name.run-diff.txt"; then
    echo "$f: one epoch on the GPU agrees with the CPU ($(grep -E '^device: [0-9]+ kernel' "$out/$name.run-cuda.err" | head -1))" >> "$out/summary.txt"
  else
    echo "$f: one epoch on the GPU DIFFERS from the CPU (see $name.run-diff.txt)" >> "$out/summary.txt"
    status=1
  fi
done
timeout "$t" "$dlc" bench examples/mnist_mlp.dl --device cuda --json > "$out/bench-mnist_mlp-cuda.json" 2> "$out/bench-mnist_mlp-cuda.err" || status=1
timeout "$t" "$dlc" bench examples/mnist_mlp.dl --device cpu --json > "$out/bench-mnist_mlp-cpu.json" 2> "$out/bench-mnist_mlp-cpu.err" || status=1
# dlc's steps against PyTorch's on the same GPU (eager, bf16 autocast, torch.compile).
COMPARE_TIMEOUT=${COMPARE_TIMEOUT:-360}
if timeout "$COMPARE_TIMEOUT" python3 bench/gpu_compare.py --dlc "$dlc" --runs "${COMPARE_RUNS:-1}" --out "$out/compare.md" \
    > "$out/compare.out" 2> "$out/compare.err"; then
  echo "bench/gpu_compare.py: table in compare.md" >> "$out/summary.txt"
else
  echo "bench/gpu_compare.py FAILED (see compare.out, compare.err)" >> "$out/summary.txt"
  status=1
fi
cat "$out/summary.txt"
# One file to carry back (the device tool returns a handful of files, not a folder of a hundred).
tar czf "$out.tgz" --exclude=cache -C "$(dirname "$out")" "$(basename "$out")" && echo "packed: $out.tgz"
exit $status
