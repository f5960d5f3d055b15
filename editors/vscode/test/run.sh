#!/usr/bin/env bash
# The VS Code extension's tests (CI runs this): install the npm packages package-lock.json pins
# (npm's cache first), then
#   - test/tokenize.test.js: the TextMate grammar, tokenised by vscode-textmate and
#     vscode-oniguruma, against expected scopes and every DL file of the repository;
#   - test/extension.test.js: extension.js and the manifest with VS Code stand-ins, and the
#     snippets through `dlc check` and `dlc fmt --check` (skipped without a dlc binary);
#   - test/client.test.js: the real vscode-languageclient starting a stand-in server;
# check that editors/sync-queries.js's copies of the tree-sitter queries are up to date, and
# build the .vsix into a temporary folder, checking that it carries the client and its
# dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "editors/vscode/test/run.sh: no node/npm; installing Debian's nodejs and npm" >&2
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nodejs npm >/dev/null
fi
npm ci --prefer-offline --no-audit --no-fund --loglevel=error
node --test test/tokenize.test.js test/extension.test.js test/client.test.js
# The Neovim, Helix and Zed copies of the tree-sitter queries are up to date.
node ../sync-queries.js --check

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! npx --no-install vsce package --allow-missing-repository --skip-license -o "$tmp/dl.vsix" >"$tmp/vsce.log" 2>&1; then
  cat "$tmp/vsce.log" >&2
  echo "editors/vscode/test/run.sh: vsce package failed" >&2
  exit 1
fi
listing="$(node -e '
  // The .vsix is a zip: list its entries from the central directory.
  const b = require("fs").readFileSync(process.argv[1]);
  let i = b.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  let at = b.readUInt32LE(i + 16), n = b.readUInt16LE(i + 10), names = [];
  for (let k = 0; k < n; k++) {
    const len = b.readUInt16LE(at + 28), extra = b.readUInt16LE(at + 30), comment = b.readUInt16LE(at + 32);
    names.push(b.toString("utf8", at + 46, at + 46 + len));
    at += 46 + len + extra + comment;
  }
  console.log(names.join("\n"));
' "$tmp/dl.vsix")"
for entry in extension/package.json extension/extension.js extension/language-configuration.json \
  extension/syntaxes/dl.tmLanguage.json extension/snippets/dl.json \
  extension/node_modules/vscode-languageclient/node.js extension/node_modules/vscode-jsonrpc/package.json; do
  grep -qx "$entry" <<<"$listing" || { echo "editors/vscode/test/run.sh: $entry missing from the .vsix" >&2; exit 1; }
done
if grep -q '^extension/test/\|^extension/node_modules/vscode-textmate/\|^extension/node_modules/@vscode/vsce/' <<<"$listing"; then
  echo "editors/vscode/test/run.sh: the .vsix carries test files or dev dependencies" >&2
  exit 1
fi
echo "editors/vscode: $(grep -c . <<<"$listing") files in the .vsix ($(du -k "$tmp/dl.vsix" | cut -f1) KiB)"
