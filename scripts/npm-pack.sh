#!/usr/bin/env bash
# Packs the npm front door: @mcp-reconcile/cli (the launcher, npm/cli) and this platform's
# @mcp-reconcile/cli-linux-x64 with the static musl binary (scripts/dist.sh builds it), into
# target-dist/npm/*.tgz. The other platforms' packages are made the same way from their
# binaries (`--binary FILE --os OS --cpu CPU`); the wasm library (npm `mcp-reconcile`) carries
# no native binary.
#
#   bash scripts/npm-pack.sh [--binary FILE --os linux --cpu x64]
set -euo pipefail
cd "$(dirname "$0")/.."
binary=target-dist/x86_64-unknown-linux-musl/${DIST_PROFILE:-dist}/mcp-reconcile
os=linux
cpu=x64
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=$2; shift 2 ;;
    --os) os=$2; shift 2 ;;
    --cpu) cpu=$2; shift 2 ;;
    *) echo "npm-pack: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$binary" ] || bash scripts/dist.sh
version=$(node -p 'require("./npm/cli/package.json").version')
out=target-dist/npm
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out" "$stage/bin"
cp "$binary" "$stage/bin/mcp-reconcile"
chmod 0755 "$stage/bin/mcp-reconcile"
node -e '
  const [version, os, cpu] = process.argv.slice(1);
  const pkg = {
    name: `@mcp-reconcile/cli-${os}-${cpu}`,
    version,
    description: `The mcp-reconcile binary for ${os}/${cpu} (static; used by @mcp-reconcile/cli).`,
    license: "MIT OR Apache-2.0",
    os: [os],
    cpu: [cpu],
    files: ["bin/mcp-reconcile"],
  };
  require("fs").writeFileSync(process.argv[4] + "/package.json", JSON.stringify(pkg, null, 2) + "\n");
' "$version" "$os" "$cpu" "$stage"
(cd "$stage" && npm pack --silent --pack-destination "$OLDPWD/$out" >/dev/null)
(cd npm/cli && npm pack --silent --pack-destination "$OLDPWD/$out" >/dev/null)
ls -l "$out"
