#!/usr/bin/env bash
# One MNIST MLP training epoch, dlc (bench/mnist_mlp_peer.dl) and PyTorch (bench/peers/mnist_train.py)
# on this machine, one after the other, 2 threads each; prints both epoch times, the data
# preparation before each (dlc's "data prepared in X s", PyTorch's load() of the training set),
# the accuracies and the ratio. PyTorch runs on glibc's allocator and, when installed, with
# jemalloc preloaded; the faster of the two is the one compared.
# Set up once with `bash bench/setup.sh`. PYTHON overrides the interpreter, EPOCHS the epochs,
# NO_BUILD=1 uses target/release/dlc as it is.
set -euo pipefail
cd "$(dirname "$0")"
py=${PYTHON:-.venv/bin/python}
epochs=${EPOCHS:-1}
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release -q -p dlc

dlc_out=$(RAYON_NUM_THREADS=2 ../target/release/dlc run mnist_mlp_peer.dl --set epochs="$epochs")
echo "$dlc_out" | grep -E "done|evaluate"
dlc_s=$(echo "$dlc_out" | sed -n 's/.*epoch 1 done: .* steps in \([0-9.]*\) s .*/\1/p')
dlc_data=$(echo "$dlc_out" | sed -n 's/.*epoch 1 done: .*(data prepared in \([0-9.]*\) s before).*/\1/p')
# Both forms of the evaluation line: `epoch 1 evaluate: 0.98 (...)` and the newer
# `epoch 1 evaluate test_set: accuracy 0.98 (...)`.
dlc_acc=$(echo "$dlc_out" | sed -n 's/^epoch 1 evaluate[^:]*: \(accuracy \)\{0,1\}\([0-9.]*\).*/\2/p' | head -1)

jemalloc=""
for lib in /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/lib/aarch64-linux-gnu/libjemalloc.so.2; do
  [ -e "$lib" ] && jemalloc=$lib && break
done
# The first row a run prints is its epoch 1 (read it after the run ends: no early-closed pipe).
first_epoch() { local out; out=$("$@"); echo "$out" | head -1; }
peer_rows=$(first_epoch "$py" peers/mnist_train.py --model mlp --epochs "$epochs" --threads 2)
if [ -n "$jemalloc" ]; then
  peer_rows+=$'\n'$(LD_PRELOAD=$jemalloc first_epoch "$py" peers/mnist_train.py --model mlp --epochs "$epochs" --threads 2)
fi
echo "$peer_rows"

"$py" - "${dlc_s:-nan}" "${dlc_data:-nan}" "${dlc_acc:-nan}" "$peer_rows" <<'PY'
import json, sys
d, d_data, d_acc = map(float, sys.argv[1:4])
rows = [json.loads(line) for line in sys.argv[4].splitlines() if line.startswith("{")]
for r in rows:
    print(f"PyTorch eager ({r['allocator']}): epoch 1 {r['epoch_s']:.1f} s, data prepared in {r['train_load_s']:.2f} s before"
          f" ({r['load_s']:.2f} s with the test set), test accuracy {r['test_accuracy']:.4f}")
p = min(rows, key=lambda r: r["epoch_s"])
ps = p["epoch_s"]
print(f"dlc: epoch 1 {d:.1f} s, data prepared in {d_data:.2f} s before, test accuracy {d_acc:.4f}")
verdict = f"PyTorch is {d / ps:.2f}x faster" if d > ps else f"dlc is {ps / d:.2f}x faster"
print(f"epoch 1, dlc vs PyTorch eager ({p['allocator']}, the faster): {d:.1f} s vs {ps:.1f} s, {verdict};"
      f" data preparation {d_data:.2f} s vs {p['train_load_s']:.2f} s")
PY
