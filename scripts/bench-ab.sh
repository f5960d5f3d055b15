#!/usr/bin/env bash
# Times two dlc binaries on the CPU benchmark programs, alternating them run by run (A B A B ...)
# so that a noisy machine slows both alike; prints each run's median step time and, per
# workload, the median of each side's medians and their ratio (B's time over A's: above 1 means
# B is slower). What a change does to speed is measured this way before it lands.
#
# Usage: scripts/bench-ab.sh A_BINARY B_BINARY [ROUNDS] [FILES...]
#   e.g. scripts/bench-ab.sh /tmp/before/dlc target/release/dlc 3
# (default: 3 rounds of bench/{gelu_1m,gelu_16m,mlp_step_128,mlp_step_1024,mnist_cnn_step,conv_bn_step}.dl)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
a="$1"
b="$2"
rounds="${3:-3}"
shift 3 || shift $#
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  for w in gelu_1m gelu_16m mlp_step_128 mlp_step_1024 mnist_cnn_step conv_bn_step; do
    files+=("$repo/bench/$w.dl")
  done
fi
cd "$repo"
median() { sort -g | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2] + v[NR/2+1]) / 2}'; }
echo "A: $a"
echo "B: $b"
echo "$(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for f in "${files[@]}"; do
  as=()
  bs=()
  for _ in $(seq "$rounds"); do
    for side in A B; do
      bin="$a"
      [ "$side" = B ] && bin="$b"
      ms=$("$bin" bench "$f" --json --steps 20 --warmup 3 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')
      if [ "$side" = A ]; then as+=("$ms"); else bs+=("$ms"); fi
    done
  done
  ma=$(printf '%s\n' "${as[@]}" | median)
  mb=$(printf '%s\n' "${bs[@]}" | median)
  printf '%-20s A %8.3f ms (%s)  B %8.3f ms (%s)  B/A %.3f\n' "$(basename "$f" .dl)" "$ma" "${as[*]}" "$mb" "${bs[*]}" \
    "$(python3 -c "print($mb / $ma)")"
done
