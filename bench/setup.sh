#!/usr/bin/env bash
# Installs the PyTorch peers' Python packages into bench/.venv (CPU is enough).
set -euo pipefail
cd "$(dirname "$0")"
python3 -m venv .venv
.venv/bin/pip install --quiet -r peers/requirements.txt safetensors
.venv/bin/python -c "import torch; print('torch', torch.__version__)"
