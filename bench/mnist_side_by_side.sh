#!/usr/bin/env bash
# One MNIST MLP training epoch, dlc and PyTorch (bench/peers/mnist_train.py) on this machine, one
# after the other, 2 threads each; prints both epoch times, accuracies and the ratio.
# Set up once with `bash bench/setup.sh`; PYTHON overrides the interpreter.
set -euo pipefail
cd "$(dirname "$0")"
py=${PYTHON:-.venv/bin/python}
epochs=${EPOCHS:-1}
cargo build --release -q -p dlc
dlc_out=$(RAYON_NUM_THREADS=2 ../target/release/dlc run mnist_mlp_peer.dl --set epochs="$epochs")
echo "$dlc_out" | grep -E "done|evaluate"
dlc_s=$(echo "$dlc_out" | sed -n 's/.*epoch 1 done: .* steps in \([0-9.]*\) s .*/\1/p')
dlc_acc=$(echo "$dlc_out" | sed -n 's/epoch 1 evaluate: \([0-9.]*\).*/\1/p' | head -1)
peer=$("$py" peers/mnist_train.py --model mlp --epochs "$epochs" --threads 2)
peer=$(echo "$peer" | head -1)
echo "$peer"
peer_s=$(echo "$peer" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["epoch_s"])')
peer_acc=$(echo "$peer" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["test_accuracy"])')
"$py" - "$dlc_s" "$peer_s" "$dlc_acc" "$peer_acc" <<'PY'
import sys
d, p, da, pa = map(float, sys.argv[1:])
print(f"epoch 1: dlc {d:.1f} s (test accuracy {da:.4f}), PyTorch eager {p:.1f} s ({pa:.4f}); "
      f"dlc/PyTorch time ratio {d / p:.2f} (PyTorch is {d / p:.1f}x faster)" if d > p else
      f"epoch 1: dlc {d:.1f} s, PyTorch {p:.1f} s; dlc is {p / d:.2f}x faster")
PY
