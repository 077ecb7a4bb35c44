"""Any directory as a host: every ``.md`` file below it (DESIGN.md §11)."""

from __future__ import annotations

from pathlib import Path

from amux_memory.tools.typed.hosts.base import Discovery, collect_markdown


def discover_directory(root: Path) -> Discovery:
    """Candidates from every Markdown file under ``root`` (an existing directory); never raises."""
    found = Discovery("dir", roots=[str(root)])
    # A MEMORY.md there is most likely another library's index: its lines point at the topics.
    collect_markdown("dir", root, found, skip_names=frozenset({"MEMORY.md"}))
    return found
