#!/usr/bin/env bash
# Checks beyond scripts/gpu-check.sh, for parts first run on a GPU in stop 38: CUDA graphs (on
# and off, and whole runs with them against the CPU), batches the data workers copy into
# page-locked memory, precisions other than f32, and forced channels-last convolutions in f32.
# Run on the GPU machine after gpu-check.sh has unpacked dlc-gpu (or with DLC set); writes its
# outputs and summary.txt into $OUT_DIR/extra.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT_DIR:-gpu-results}/extra
mkdir -p "$out"
dlc=${DLC:-./dlc-gpu}
. scripts/dlc-gpu-binary.sh
[ -n "${DLC:-}" ] || unpack_dlc_gpu
libs=$(python3 -c 'import glob,site;print(":".join(d for s in site.getsitepackages() for d in glob.glob(s+"/nvidia/cu*/lib")+glob.glob(s+"/nvidia/cudnn/lib")+glob.glob(s+"/nvidia/cuda_nvrtc/lib")))' 2>/dev/null)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DLC_CACHE_DIR="$out/cache"
t=${STEP_TIMEOUT:-60}
run() { # name, then the command
  local name=$1; shift
  local s=$SECONDS
  timeout "$t" "$@" > "$out/$name.out" 2> "$out/$name.err"; local rc=$?
  echo "$name: exit $rc in $((SECONDS - s)) s" | tee -a "$out/summary.txt"
}
# QUICK=1: only the runs that showed the race of stop 38 (below), then the side-by-side table.
examples="iris digits mnist_mlp"
[ "${QUICK:-0}" = 1 ] && examples="mnist_mlp"
# Whole runs with graphs (now on the executor's own stream) against the CPU.
for ex in $examples; do
  run "$ex-cuda" "$dlc" run "examples/$ex.dl" --device cuda --set epochs=1 --overwrite
  run "$ex-cpu" "$dlc" run "examples/$ex.dl" --device cpu --set epochs=1 --overwrite
  if diff <(grep -E "^epoch 1 (done|evaluate)" "$out/$ex-cuda.out" | sed 's/ in [0-9.]* s.*//') \
          <(grep -E "^epoch 1 (done|evaluate)" "$out/$ex-cpu.out" | sed 's/ in [0-9.]* s.*//') > /dev/null; then
    echo "$ex: GPU epoch equals the CPU's" | tee -a "$out/summary.txt"
  else
    echo "$ex: GPU epoch DIFFERS from the CPU's" | tee -a "$out/summary.txt"
  fi
done
[ "${QUICK:-0}" = 1 ] || for p in mlp_step_128 mlp_step_1024 mnist_cnn_step conv_bn_step; do
  DLC_CUDA_GRAPHS=0 run "bench-$p-nographs" "$dlc" bench "bench/$p.dl" --device cuda --json --steps 100
  run "bench-$p-graphs" "$dlc" bench "bench/$p.dl" --device cuda --json --steps 100
done
[ "${QUICK:-0}" = 1 ] || run kernels-mnist_cnn "$dlc" kernels examples/mnist_cnn.dl --check gpu --json
# Forced channels-last in f32 (stop 38's first run: a mean loss of 1.06 against 0.22 NCHW).
run mnist_cnn-nchw-cuda "$dlc" run examples/mnist_cnn.dl --device cuda --set epochs=1 --overwrite
DLC_CONV_LAYOUT=channels_last run mnist_cnn-nhwc-cuda "$dlc" run examples/mnist_cnn.dl --device cuda --set epochs=1 --overwrite
[ "${QUICK:-0}" = 1 ] || DLC_CONV_LAYOUT=channels_last DLC_CUDA_GRAPHS=0 run mnist_cnn-nhwc-nographs-cuda "$dlc" run examples/mnist_cnn.dl --device cuda --set epochs=1 --overwrite
[ "${QUICK:-0}" = 1 ] || DLC_CONV_LAYOUT=channels_last DLC_ARENA=0 run mnist_cnn-nhwc-noarena-cuda "$dlc" run examples/mnist_cnn.dl --device cuda --set epochs=1 --overwrite
[ "${QUICK:-0}" = 1 ] || DLC_CONV_LAYOUT=channels_last run mnist_cnn-nhwc-tf32-cuda "$dlc" run examples/mnist_cnn.dl --device cuda --set epochs=1 --set precision=tf32 --overwrite
[ "${QUICK:-0}" = 1 ] || run mnist_cnn-bf16-cuda "$dlc" run examples/mnist_cnn.dl --device cuda --set epochs=1 --set precision=bf16 --overwrite
# Batches from page-locked memory the data workers filled.
run cifar_jpeg-cuda "$dlc" run examples/cifar_jpeg.dl --device cuda --set epochs=2 --overwrite
timeout 150 python3 bench/gpu_compare.py --dlc "$dlc" --runs 1 --out "$out/compare.md" > "$out/compare.out" 2> "$out/compare.err"; echo "gpu_compare: exit $?" | tee -a "$out/summary.txt"
grep -H "^epoch 1 step\|^epoch [12] done\|^epoch 1 evaluate\|^device: [0-9]" "$out"/*.out "$out"/*.err > "$out/highlights.txt" 2>/dev/null
tar czf "$out.tgz" --exclude=cache -C "$(dirname "$out")" extra
