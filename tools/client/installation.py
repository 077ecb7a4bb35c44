"""This installation's ``amux`` command, for anything that must start it again (DESIGN.md §2.3).

One answer to "which ``amux`` is this?" for the service files (§19.3), ``amux launch``'s
entry point (§10), the test suite and the bench: the console script beside the running
interpreter (a virtualenv's ``bin/amux``), else ``amux`` on ``PATH``, else the module form
``[python, -m, tools.cli]``. Nothing here imports more than the standard library.
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
    return [str(Path(sys.executable).absolute()), "-m", "tools.cli"]
