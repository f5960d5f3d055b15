#!/usr/bin/env bash
# Check editors/nvim/queries/dl/ in a real headless Neovim (0.7 or newer): the parser compiled from
# editors/tree-sitter-dl/src loads, every query compiles, and highlights.scm (last match wins in
# Neovim) colours every node of examples/*.dl as tree-sitter-dl's highlights.scm does when the
# first match wins. Needs nvim and a C compiler (cc). Not part of CI.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
command -v nvim >/dev/null || { echo "queries.sh: nvim not found (Debian: apt-get install neovim)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cc -shared -fPIC -O2 -I "$repo/editors/tree-sitter-dl/src" \
  "$repo/editors/tree-sitter-dl/src/parser.c" "$repo/editors/tree-sitter-dl/src/scanner.c" -o "$tmp/dl.so"
timeout 120 nvim --headless --clean \
  --cmd "lua _G.dl_parser = '$tmp/dl.so'; _G.dl_repo = '$repo'" \
  -c "luafile $repo/editors/nvim/test/queries.lua"
echo
