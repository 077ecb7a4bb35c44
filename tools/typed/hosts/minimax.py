"""MiniMax's memory: ``~/.minimax/memory/`` (DESIGN.md §11).

``user.md`` is the user's profile (type ``user``); other Markdown there is
imported with the default type; ``tracking/`` holds logs and a ``summary``
file is a view: both skipped.
"""

from __future__ import annotations

from pathlib import Path

from amux_memory.tools.typed.hosts.base import Discovery, Skipped, candidate_from_file, walk_markdown


def discover_minimax(home: Path) -> Discovery:
    """Candidates from ``home/.minimax/memory/``; no such folder gives an empty discovery with a note."""
    found = Discovery("minimax")
    root = home / ".minimax" / "memory"
    if not root.is_dir() or root.is_symlink():
        found.notes.append(f"no MiniMax memory at {root}")
        return found
    found.roots.append(str(root))
    if (root / "tracking").is_dir():
        found.skipped.append(Skipped(str(root / "tracking"), "tracking logs, not memory"))
    for path in walk_markdown(root, found, skip_dirs=frozenset({"tracking"})):
        if path.stem.lower() == "summary":
            found.skipped.append(Skipped(str(path), "derived: MiniMax's summary view"))
            continue
        hint = "user" if path.name == "user.md" and path.parent == root else None
        cand = candidate_from_file("minimax", path, found, type_hint=hint,
                                   name="minimax-user-profile" if hint else None)
        if cand is not None:
            found.candidates.append(cand)
    return found
