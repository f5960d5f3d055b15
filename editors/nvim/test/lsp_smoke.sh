#!/usr/bin/env bash
# A real client against `dlc lsp`: headless Neovim (0.7 or newer, e.g. Debian's `neovim` package)
# with the DL plugin (editors/nvim) opens a copy of examples/iris.dl with an error put in
# (`clases` for `classes`), waits for a diagnostic on that line, asks for a hover on an
# expression, fixes the error and waits for the diagnostic to go; it prints what it gets and
# exits non-zero on the first step that fails.
#
#   editors/nvim/test/lsp_smoke.sh                 # dlc: $DLC, else target/debug/dlc, else PATH
#   DLC=target/release/dlc editors/nvim/test/lsp_smoke.sh
#   DL_SMOKE_CMD="other-server --stdio" editors/nvim/test/lsp_smoke.sh   # any other server command
# DL_SMOKE_TIMEOUT_MS (default 20000) bounds each wait.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
command -v nvim >/dev/null || { echo "lsp_smoke.sh: nvim not found (Debian: apt-get install neovim)" >&2; exit 1; }
if [ -z "${DL_SMOKE_CMD:-}" ]; then
  dlc="${DLC:-}"
  [ -n "$dlc" ] || { [ -x "$repo/target/debug/dlc" ] && dlc="$repo/target/debug/dlc"; } || true
  [ -n "$dlc" ] || dlc="$(command -v dlc || true)"
  [ -n "$dlc" ] || { echo "lsp_smoke.sh: no dlc (build it, or set DLC)" >&2; exit 1; }
  DL_SMOKE_CMD="$dlc lsp"
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# The example with its data folder beside it, and the error: an unknown name (with a "did you mean").
cp "$repo/examples/iris.dl" "$tmp/iris.dl"
sed -i 's/fc2 = Linear(hidden, classes)/fc2 = Linear(hidden, clases)/' "$tmp/iris.dl"
grep -q clases "$tmp/iris.dl" || { echo "lsp_smoke.sh: examples/iris.dl changed; no line to put the error in" >&2; exit 1; }
export DL_SMOKE_FILE="$tmp/iris.dl"
# The command as tab-separated words, for the Lua side.
export DL_SMOKE_CMD="$(printf '%s' "$DL_SMOKE_CMD" | tr ' ' '\t')"
cd "$tmp"
timeout 120 nvim --headless --clean -n \
  --cmd "set rtp^=$repo/editors/nvim" \
  -c "luafile $repo/editors/nvim/test/lsp_smoke.lua"
