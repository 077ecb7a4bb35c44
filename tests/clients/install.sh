#!/usr/bin/env bash
# Install the real agent clients that tests/test_mcp_clients.py, tests/test_launch_agents.py and
# tests/test_launch_more_agents.py drive (MCP Inspector, Claude Code, Codex, Pi, OpenCode, GitHub Copilot CLI,
# Qwen Code, Gemini CLI) from the npm registry, with pinned versions known to run on Node 20 (see
# ../../../shared/notes/agent-clients.md).
#
#   bash tests/clients/install.sh          # idempotent: does nothing when the pins are installed
#
# Everything goes to tests/clients/.install/ (gitignored), or to $AMUX_CLIENTS_DIR when set.
# Exit status: 0 when all the clients are installed, 1 when node/npm is missing or npm fails.
set -euo pipefail

PINS=(
  "@modelcontextprotocol/inspector@0.15.0"
  "@anthropic-ai/claude-code@2.1.197"
  "@openai/codex@0.171.0"
  "@mariozechner/pi-coding-agent@0.73.1"
  "opencode-ai@1.18.33"
  "@github/copilot@1.0.102"
  "@qwen-code/qwen-code@0.15.10"
  "@google/gemini-cli@0.61.0"
)
BINS=(mcp-inspector claude codex pi opencode copilot qwen gemini)

here="$(cd "$(dirname "$0")" && pwd)"
dest="${AMUX_CLIENTS_DIR:-$here/.install}"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install.sh: $tool is not on PATH; cannot install the MCP clients" >&2
    exit 1
  fi
done

# One install at a time (parallel pytest workers, two checkouts sharing $AMUX_CLIENTS_DIR): the others wait here.
mkdir -p "$dest"
exec 9>"$dest/.install.lock"
flock 9

stamp="$dest/pins.txt"
want="$(printf '%s\n' "${PINS[@]}")"
installed=1
for bin in "${BINS[@]}"; do
  [ -x "$dest/node_modules/.bin/$bin" ] || installed=0
done
if [ "$installed" = 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "install.sh: clients already installed in $dest"
  exit 0
fi

mkdir -p "$dest"
[ -f "$dest/package.json" ] || echo '{"name": "amux-test-clients", "private": true}' > "$dest/package.json"
echo "install.sh: installing ${PINS[*]} into $dest" >&2
npm install --prefix "$dest" --no-audit --no-fund --no-save --loglevel=error "${PINS[@]}" >&2
for bin in "${BINS[@]}"; do
  if [ ! -x "$dest/node_modules/.bin/$bin" ]; then
    echo "install.sh: $bin is missing after npm install" >&2
    exit 1
  fi
done
printf '%s\n' "$want" > "$stamp"
echo "install.sh: installed into $dest"
