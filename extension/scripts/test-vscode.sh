#!/usr/bin/env bash
# `make test-vscode`: the packaged extension in a real VS Code host (code-server), driven by
# headless Chromium against a real training process (test/vscode/vscode.test.ts).
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
./scripts/install-code-server.sh
echo "code-server ready in $((SECONDS - started)) s"

rm -f onthefly-*.vsix
npm run --silent package
node scripts/build.mjs --tests
node --test --test-reporter=spec --test-concurrency=1 out/test/vscode/
