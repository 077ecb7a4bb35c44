"""This installation's ``amux`` command, for anything that must start it again (DESIGN.md §2.3).

Two questions, two answers (deliberately not unified):

- :func:`amux_script` -- "which single ``amux`` *file* can I hand to another program?"  ``amux launch``
  (§10) writes it into the agent's MCP registration and, under ``--as-user``, copies it for the other
  account (``launch/isolation.py``), so it must be one executable file; the module form cannot be copied.
  It prefers ``argv0`` (the very script the user ran, so the agent gets the same installation), then the
  script beside ``sys.executable``, then ``amux`` on ``PATH`` as a last resort, else ``None`` (launch
  then fails with ``not_found``, listing :func:`script_candidates`).
- :func:`amux_command` -- "which argv runs *exactly this code*?"  The service files (§19.3), spawning a
  Hub (``tools/lifecycle/spawn.py``), ``amux doctor``, the bench and the tests need this installation and
  no other, and may take an argv prefix: the script beside ``sys.executable``, else
  ``[python, -m, tools.cli]``.  Never ``PATH``: an ``amux`` there may be another installation or version.

Nothing here imports more than the standard library.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def amux_script(argv0: str | None = None) -> Path | None:
    """The absolute path of this installation's ``amux`` console script, or ``None``.

    Looked for, in order: ``argv0`` when it is an executable file named ``amux`` (the running
    command), ``amux`` next to ``sys.executable``, ``amux`` on ``PATH``.  Raises nothing.
    """
    for path in script_candidates(argv0):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def script_candidates(argv0: str | None = None) -> list[Path]:
    """The absolute places :func:`amux_script` looks at, in its order (for an error that lists them)."""
    candidates: list[Path] = []
    if argv0 and os.path.basename(argv0) == "amux":
        candidates.append(Path(os.path.abspath(argv0)))
    candidates.append(Path(sys.executable).absolute().parent / "amux")
    found = shutil.which("amux")
    if found:
        candidates.append(Path(os.path.abspath(found)))
    return candidates


def amux_command() -> list[str]:
    """The argv prefix that runs this installation's ``amux``: ``[script]`` when the console script
    beside the running interpreter exists, else ``[python, -m, tools.cli]`` (never ``PATH``: another
    installation's ``amux`` there could be a different version). Raises nothing."""
    script = Path(sys.executable).absolute().parent / "amux"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [str(Path(sys.executable).absolute()), "-m", "amux_memory.tools.cli"]
