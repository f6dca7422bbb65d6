#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance 0.1.13) against this
# project: the native host's streamable-HTTP client and its OAuth login (every client
# scenario: the core ones and auth/*; docs/REMOTE.md lists the two we fail on purpose), and the
# fixture server's --conformance-reference mode (every server scenario). Needs Node 20+;
# installs the pinned npm packages when they are missing. Prints one line per scenario; exits
# non-zero on a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x node_modules/.bin/conformance ]; then
    npm ci --no-audit --no-fund
fi
cargo test -q -p mcp-reconcile --test suite conformance:: -- --nocapture
