"""The real agent clients installed from npm (MCP Inspector, Claude Code, Codex, Pi), for the tests that drive them.

``tests/clients/install.sh`` installs pinned versions into ``tests/clients/.install``
(or ``$AMUX_CLIENTS_DIR``).  Outside CI a test that needs them skips with a
message when Node/npm is missing or the install fails; with ``CI=true`` it fails
instead.  The ``bin_dir`` fixture in ``tests/conftest.py`` calls
:func:`install_clients`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import NoReturn

from tests.helpers import skip_or_fail

CLIENTS = Path(__file__).resolve().parent / "clients"
"""``tests/clients``: ``install.sh`` and, by default, the ``.install`` folder it fills."""


def unavailable(message: str) -> NoReturn:
    """A client the test needs is missing: skip with ``message``, or fail with it when ``CI=true``."""
    skip_or_fail(message, f"{message} (CI=true: the real MCP clients are required)")


def install_clients() -> Path:
    """Run ``tests/clients/install.sh`` (idempotent, ~20 s the first time) and return ``node_modules/.bin``.

    The folder holds ``mcp-inspector``, ``claude`` and ``codex`` (checked here) and ``pi``.  Calls
    :func:`unavailable` when ``node``/``npm`` are not on ``PATH``, the install fails (offline) or a
    client is missing afterwards.
    """
    dest = Path(os.environ.get("AMUX_CLIENTS_DIR") or CLIENTS / ".install")
    bins = dest / "node_modules" / ".bin"
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        unavailable(f"{' and '.join(missing)} not on PATH: cannot run the npm-installed MCP clients")
    # The README's test command does all set-up: install the pinned clients whenever npm is here.
    proc = subprocess.run(["bash", str(CLIENTS / "install.sh")], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        unavailable(f"tests/clients/install.sh failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}")
    for tool in ("mcp-inspector", "claude", "codex"):
        if not os.access(bins / tool, os.X_OK):
            unavailable(f"{tool} is not installed in {bins}; run 'bash tests/clients/install.sh' first")
    return bins


def client_env(**extra: str) -> dict[str, str]:
    """This process's environment without ``AMUX_*`` and the agents' own settings, plus ``extra``.

    Dropped prefixes: ``AMUX_``, ``ANTHROPIC_``, ``CLAUDE``, ``CODEX_``, ``OPENAI_`` (so a developer's
    keys or config never reach a client under test).

    Claude Code is told to wait for its MCP servers before the first turn (``MCP_CONNECTION_NONBLOCKING=0``,
    up to ``MCP_CONNECT_TIMEOUT_MS`` = 60 s): in ``-p`` mode it otherwise goes on at once and reports a
    server still starting as ``pending``, which on a loaded test machine the ``amux mcp`` relay can be
    (measured: a relay delayed 8 s is ``pending`` without the first setting, even with a 60 s timeout, and
    ``connected`` with both).
    """
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AMUX_", "ANTHROPIC_", "CLAUDE", "CODEX_", "OPENAI_"))}
    env["MCP_CONNECTION_NONBLOCKING"] = "0"
    env["MCP_CONNECT_TIMEOUT_MS"] = "60000"
    env.update(extra)
    return env
