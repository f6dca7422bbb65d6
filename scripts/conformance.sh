#!/usr/bin/env bash
# The native host's streamable-HTTP MCP client against the official MCP conformance suite
# (@modelcontextprotocol/conformance 0.1.13, client mode: initialize, tools_call,
# elicitation-sep1034-client-defaults, sse-retry). Needs Node 20+; installs the pinned npm
# packages when they are missing. Prints one line per scenario; exits non-zero on a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x node_modules/.bin/conformance ]; then
    npm ci --no-audit --no-fund
fi
cargo test -q -p mcp-reconcile --test conformance -- --nocapture
