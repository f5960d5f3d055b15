#!/usr/bin/env bash
# Check editors/vim in a real Vim, headless: every example is filetype dl, no text of any example
# is highlighted as an error, chosen words of examples/iris.dl and examples/gan.dl get the syntax
# items that syntax.vim lists, and indent/dl.vim re-indents (gg=G) every DL file of examples/,
# stdlib/, bench/ and tests/cases/valid/ as dlc fmt laid it out. Runs in Neovim too:
# VIM_BIN=nvim. Not part of CI.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
vim="${VIM_BIN:-vim}"
command -v "$vim" >/dev/null || { echo "syntax.sh: $vim not found" >&2; exit 1; }
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
status=0
DL_VIM_OUT="$out" timeout 120 "$vim" -N -u NONE -i NONE -n -es \
  --cmd "set rtp^=$repo/editors/vim" --cmd "let g:dl_repo = '$repo'" \
  -c "filetype plugin indent on" -c "syntax on" -c "source $repo/editors/vim/test/syntax.vim" </dev/null || status=$?
cat "$out"
bad=0
files=0
for f in "$repo"/examples/*.dl "$repo"/stdlib/*.dl "$repo"/bench/*.dl "$repo"/tests/cases/valid/*.dl; do
  files=$((files + 1))
  cp "$f" "$out.dl"
  "$vim" -N -u NONE -i NONE -n -es --cmd "set rtp^=$repo/editors/vim" -c "filetype plugin indent on" \
    -c "edit $out.dl" -c "normal! gg=G" -c "write" -c "qa!" </dev/null || true
  if ! diff -u "$f" "$out.dl" >"$out.diff"; then
    bad=$((bad + 1))
    head -20 "$out.diff"
  fi
done
rm -f "$out.dl" "$out.diff"
echo "indent: $((files - bad)) of $files files re-indented as written"
[ "$bad" -eq 0 ] || status=1
exit "$status"
