#!/usr/bin/env bash
# Build the VS Code extension package, dl-language-VERSION.vsix, in this folder:
#   editors/vscode/package.sh            # then: code --install-extension editors/vscode/dl-language-*.vsix
#   editors/vscode/package.sh -o FILE    # (any other arguments go to `vsce package`)
# Needs Node.js 20 or newer and npm. The packages (vscode-languageclient, which the .vsix carries,
# and @vscode/vsce, which builds it) come from the npm registry at the versions package-lock.json
# pins; npm's cache is used first.
set -euo pipefail
cd "$(dirname "$0")"
command -v npm >/dev/null || { echo "package.sh: npm not found (install Node.js 20 or newer)" >&2; exit 1; }
npm ci --prefer-offline --no-audit --no-fund
# No repository field and no LICENSE file of its own: the extension's license is the project's
# (MIT OR Apache-2.0, in package.json).
npx --no-install vsce package --allow-missing-repository --skip-license "$@"
