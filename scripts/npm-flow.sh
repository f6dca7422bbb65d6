#!/usr/bin/env bash
# The npm front door, end to end, as a new user without a Rust toolchain meets it: the packed
# tarballs (scripts/npm-pack.sh) installed into a scratch prefix with a scratch HOME, then
# `mcp-reconcile install claude` through the npm launcher, the real Claude Code's
# `claude mcp list` connecting to the installed gateway (which reaches the user's server), and
# `uninstall`. Nothing outside the scratch folder is touched; every process it started is
# stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
packs=$root/target-dist/npm
version=$(node -p 'require("./npm/cli/package.json").version')
[ -f "$packs/mcp-reconcile-cli-$version.tgz" ] || bash scripts/npm-pack.sh
scratch=$(mktemp -d)
export HOME=$scratch/home XDG_RUNTIME_DIR=$scratch/run XDG_STATE_HOME=$scratch/state
unset XDG_CONFIG_HOME XDG_DATA_HOME CLAUDE_CONFIG_DIR
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" "$scratch/prefix" "$scratch/project"
chmod 700 "$XDG_RUNTIME_DIR"
cleanup() {
  local pid
  pid=$(cd "$scratch/project" && "$scratch/prefix/node_modules/.bin/mcp-reconcile" daemon --status --json 2>/dev/null \
    | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{console.log(JSON.parse(s).pid)}catch{}})' || true)
  [ -n "$pid" ] && kill -TERM -- "-$pid" 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT

echo "==> npm install the packed @mcp-reconcile/cli and @mcp-reconcile/cli-linux-x64 into a scratch prefix"
(cd "$scratch/prefix" && npm init -y >/dev/null \
  && npm install --no-audit --no-fund --omit=optional --offline \
     "$packs/mcp-reconcile-cli-linux-x64-$version.tgz" "$packs/mcp-reconcile-cli-$version.tgz" >/dev/null)
launcher=$scratch/prefix/node_modules/.bin/mcp-reconcile
"$launcher" --version

fixture=$root/target/debug/mcp-fixture-server
[ -x "$fixture" ] || cargo build --locked -q -p mcp-reconcile-fixture
cat >"$HOME/.claude.json" <<JSON
{"mcpServers": {"notes": {"type": "stdio", "command": "$fixture", "args": ["--name", "notes", "--tools", "echo"]}}}
JSON
cp "$HOME/.claude.json" "$scratch/original.json"

echo "==> mcp-reconcile install claude (through the npm launcher)"
(cd "$scratch/project" && "$launcher" install claude)
command=$(node -p 'JSON.parse(require("fs").readFileSync(process.argv[1])).mcpServers.reconcile.command' "$HOME/.claude.json")
case "$command" in
  "$HOME/.local/share/mcp-reconcile/bin/$version/mcp-reconcile") ;;
  *) echo "npm-flow: install wrote $command, not the per-user copy" >&2; exit 1 ;;
esac
case "$command" in *node_modules*|*_npx*) echo "npm-flow: a node_modules path was written" >&2; exit 1 ;; esac

echo "==> claude mcp list (the real Claude Code) connects to the installed gateway"
listed=$(cd "$scratch/project" && DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
  timeout 120 "$root/node_modules/.bin/claude" mcp list </dev/null 2>&1 || true)
echo "$listed"
echo "$listed" | grep -q "reconcile:.*Connected" || { echo "npm-flow: the gateway did not connect" >&2; exit 1; }
if echo "$listed" | grep -q "^notes:"; then
  echo "npm-flow: Claude Code still starts the user's server itself" >&2
  exit 1
fi
(cd "$scratch/project" && "$launcher" status --layout claude) | grep -q "notes" \
  || { echo "npm-flow: the gateway does not know the user's server" >&2; exit 1; }

echo "==> mcp-reconcile uninstall claude"
(cd "$scratch/project" && "$launcher" uninstall claude)
node -e '
  const fs = require("fs");
  const now = JSON.parse(fs.readFileSync(process.argv[1])), was = JSON.parse(fs.readFileSync(process.argv[2]));
  if (now.mcpServers.reconcile) throw new Error("the gateway entry is still there");
  if (JSON.stringify(now.mcpServers.notes) !== JSON.stringify(was.mcpServers.notes)) throw new Error("the user server changed");
' "$HOME/.claude.json" "$scratch/original.json"
echo "==> npm flow: ok"
