"""``python -m tests.typecheck``: ``mypy --strict`` over the installed import root and the bench.

mypy reads source trees, not setuptools' package-dir mapping (an editable install reaches
``amux_memory.hub`` through an import hook mypy does not run). So this builds the tree the wheel
installs as links, ``.typecheck/amux_memory/{hub,protocol,tools,launch}`` pointing at the repository's
folders (and ``.typecheck/bench``), and runs mypy there with ``pyproject.toml``'s ``[tool.mypy]``
settings. The links are rebuilt on each run; ``.typecheck/`` is ignored by git and keeps mypy's cache.
Extra arguments go to mypy. Exits with mypy's status.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
INSTALLED = ("hub", "protocol", "tools", "launch")


def view(repo: Path = REPO) -> Path:
    """The linked tree under ``repo/.typecheck`` (made or refreshed): its root, which holds ``amux_memory/``
    (a namespace package of links to the four folders) and ``bench``."""
    root = repo / ".typecheck"
    package = root / "amux_memory"
    package.mkdir(parents=True, exist_ok=True)
    links = {package / name: repo / name for name in INSTALLED} | {root / "bench": repo / "bench"}
    for link, target in links.items():
        if link.is_symlink() and Path(os.readlink(link)) == target:
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target, target_is_directory=True)
    return root


def run(args: list[str], repo: Path = REPO) -> subprocess.CompletedProcess[str]:
    """mypy over the view (``pyproject.toml``'s settings), its output captured."""
    root = view(repo)
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(repo / "pyproject.toml"), *args],
                          cwd=root, capture_output=True, text=True, timeout=600)


def main() -> int:
    proc = run(sys.argv[1:])
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
