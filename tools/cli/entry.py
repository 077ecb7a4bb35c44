"""The ``amux`` console script: ``amux mcp`` straight to the relay, everything else to the CLI (DESIGN.md §13.6).

``amux mcp`` starts with every agent conversation, so it must not pay for
the CLI's imports (cyclopts, the command table): with exactly that argument
this module hands over to :func:`tools.mcp.relay.main` before importing
anything else.  ``amux mcp --help`` and the like go through the CLI.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run ``amux`` with ``sys.argv`` and exit with its status."""
    if sys.argv[1:] == ["mcp"]:
        from amux_memory.tools.mcp.relay import main as relay

        sys.exit(relay())
    from amux_memory.tools.cli.app import main as cli

    cli()
