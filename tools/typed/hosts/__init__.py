"""Read-only discovery of the memories other agent hosts keep for themselves (DESIGN.md §11).

``amux memory import --from HOST`` starts at :func:`discover`, which hands
``HOST`` to its adapter, one module per host:

``claude-code``
    :mod:`tools.typed.hosts.claude_code`: ``<base>/projects/<bucket>/memory/``.
``codex``
    :mod:`tools.typed.hosts.codex`: ``$CODEX_HOME/memories/``.
``minimax``
    :mod:`tools.typed.hosts.minimax`: ``~/.minimax/memory/``.
``qoder``
    :mod:`tools.typed.hosts.qoder`: ``~/.qoder-cn/memories/``.
``DIR``
    :mod:`tools.typed.hosts.directory`: any directory, every ``.md`` file below it.

Each module's docstring says what was verified about its host.  What they
share (:class:`Candidate`, :class:`Skipped`, :class:`Discovery`, read-only
reading and walking, the discovery bounds) is :mod:`tools.typed.hosts.base`,
and is exported here too.  Nothing in this package writes, renames or deletes.
"""

from __future__ import annotations

import os
from pathlib import Path

from amux_memory.tools.typed.hosts.base import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_TOTAL_BYTES,
    Budget,
    Candidate,
    Discovery,
    Skipped,
    SourceError,
    candidate_from_file,
    git_root,
    read_host_file,
    walk_markdown,
)
from amux_memory.tools.typed.hosts.claude_code import claude_bucket, discover_claude_code
from amux_memory.tools.typed.hosts.codex import discover_codex
from amux_memory.tools.typed.hosts.directory import discover_directory
from amux_memory.tools.typed.hosts.minimax import discover_minimax
from amux_memory.tools.typed.hosts.qoder import discover_qoder, qoder_type

__all__ = [
    "HOSTS",
    "MAX_DEPTH",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "MAX_TOTAL_BYTES",
    "Budget",
    "Candidate",
    "Discovery",
    "Skipped",
    "SourceError",
    "candidate_from_file",
    "claude_bucket",
    "discover",
    "git_root",
    "qoder_type",
    "read_host_file",
    "walk_markdown",
]

HOSTS = ("claude-code", "codex", "minimax", "qoder")
"""Host names ``--from`` accepts; anything else is a directory."""


def discover(source: str, *, cwd: Path | None = None, all_projects: bool = False,
             env: dict[str, str] | None = None, home: Path | None = None) -> Discovery:
    """Find the candidates of ``source``: a name from :data:`HOSTS`, else a directory path.

    ``cwd`` picks the project bucket for Claude Code and Qoder (default: the
    current directory); ``all_projects`` takes every bucket instead.  ``env``
    and ``home`` default to the process's (tests pass their own).  A host
    without a memory folder gives an empty discovery with a note.  Raises
    :class:`SourceError` when ``source`` is neither a host nor a directory;
    a file's content never raises (a bad file is a :class:`Skipped` entry).
    """
    env = dict(os.environ) if env is None else env
    home = home or Path(env.get("HOME") or Path.home())
    here = (cwd or Path.cwd()).absolute()
    if source == "claude-code":
        return discover_claude_code(env, home, here, all_projects)
    if source == "codex":
        return discover_codex(env, home)
    if source == "minimax":
        return discover_minimax(home)
    if source == "qoder":
        return discover_qoder(home, here, all_projects)
    path = Path(source).expanduser()
    if not path.is_dir():
        raise SourceError(f"--from {source!r} is neither a host ({', '.join(HOSTS)}) nor a directory")
    return discover_directory(path.resolve())
