#!/usr/bin/env bash
# Sets up the PyTorch peers: bench/.venv with the Python packages (CPU is enough), and the system
# tools compare.py uses: jemalloc (the peers also run with it preloaded, since a PyTorch user
# chasing speed would) and GNU time (peak memory of a fresh process). Safe to run again: a working
# .venv is kept, and installed packages are not reinstalled.
set -euo pipefail
cd "$(dirname "$0")"

# System packages: only as root through apt-get; otherwise say what is missing and go on (the
# comparisons then run without jemalloc, or without the memory rows).
need=()
[ -e /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] || [ -e /usr/lib/aarch64-linux-gnu/libjemalloc.so.2 ] || need+=(libjemalloc2)
[ -x /usr/bin/time ] || need+=(time)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq "${need[@]}"
  else
    echo "setup: not installing ${need[*]} (needs root and apt-get); compare.py skips what needs them" >&2
  fi
fi

if [ -x .venv/bin/python ] && .venv/bin/python -c "import torch, numpy" 2>/dev/null; then
  echo "setup: bench/.venv already works; keeping it"
else
  python3 -m venv .venv
  .venv/bin/pip install --quiet -r peers/requirements.txt safetensors
fi
# TensorBoard's own reader checks the event files `dlc run` writes (interpreter/tests/it/cli_metrics.rs).
.venv/bin/python -c "import tensorboard" 2>/dev/null || .venv/bin/pip install --quiet tensorboard
# torchvision for the image-folder peer (image_folder.py). No build of 0.30 (torch 2.15's pair)
# is published yet; 0.29.2's Python transforms and ImageFolder run on torch 2.15 (its compiled
# ops are not used), so it is installed without its pinned torch.
.venv/bin/python -c "import torchvision, PIL" 2>/dev/null || .venv/bin/pip install --quiet --no-deps torchvision==0.29.2 pillow
# Hugging Face's tokenizers: scripts/train_tokenizer.py made the bundled tokenizer.json with it.
.venv/bin/python -c "import tokenizers" 2>/dev/null || .venv/bin/pip install --quiet tokenizers
# Hugging Face's datasets for the text peer (peers/text_tokenize.py: `datasets.map` with the same
# tokenizer.json). 5.2.0 pulls in pyarrow, pandas, dill, multiprocess and xxhash: about 270 MB.
.venv/bin/python -c "import datasets" 2>/dev/null || .venv/bin/pip install --quiet datasets==5.2.0
.venv/bin/python -c "import torch; print('torch', torch.__version__)"
