#!/usr/bin/env bash
# Install the MCP conformance suite that tests/test_mcp_conformance.py runs against the Hub's /mcp, with the
# Node 22 it needs, from the npm registry only: npm's `node` package brings a Node binary as an ordinary npm
# dependency (the system Node 20 is too old for the suite; nothing is installed system-wide).
#
#   bash tests/clients/conformance.sh      # idempotent: does nothing when the pins are installed
#
# Everything goes to tests/clients/.install/conformance/ (gitignored), or $AMUX_CLIENTS_DIR/conformance when set.
# Prints the folder holding `node` and `conformance` (put it first on PATH) as the last line of stdout.
# Exit status: 0 when both are installed, 1 when npm is missing or the install fails.
set -euo pipefail

PINS=(
  "node@22.23.3"
  "@modelcontextprotocol/conformance@0.1.16"
)
BINS=(node conformance)

here="$(cd "$(dirname "$0")" && pwd)"
dest="${AMUX_CLIENTS_DIR:-$here/.install}/conformance"
bins="$dest/node_modules/.bin"

if ! command -v npm >/dev/null 2>&1; then
  echo "conformance.sh: npm is not on PATH; cannot install the MCP conformance suite" >&2
  exit 1
fi

# One install at a time (parallel pytest workers, two checkouts sharing $AMUX_CLIENTS_DIR): the others wait here.
mkdir -p "$dest"
exec 9>"$dest/.install.lock"
flock 9

stamp="$dest/pins.txt"
want="$(printf '%s\n' "${PINS[@]}")"
installed=1
for bin in "${BINS[@]}"; do
  [ -x "$bins/$bin" ] || installed=0
done
if [ "$installed" = 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$bins"
  exit 0
fi

mkdir -p "$dest"
[ -f "$dest/package.json" ] || echo '{"name": "amux-conformance", "private": true}' > "$dest/package.json"
echo "conformance.sh: installing ${PINS[*]} into $dest" >&2
npm install --prefix "$dest" --no-audit --no-fund --no-save --loglevel=error "${PINS[@]}" >&2
for bin in "${BINS[@]}"; do
  if [ ! -x "$bins/$bin" ]; then
    echo "conformance.sh: $bin is missing after npm install" >&2
    exit 1
  fi
done
version="$("$bins/node" --version)"
case "$version" in
  v22.*|v23.*|v24.*) ;;
  *) echo "conformance.sh: $bins/node is $version, the suite needs Node >= 22" >&2; exit 1 ;;
esac
printf '%s\n' "$want" > "$stamp"
echo "$bins"
