"""Qoder CN's memory: ``~/.qoder-cn/memories/<user-hash>/{global,projects/<bucket>}/<category>/`` (DESIGN.md §11).

User hashes and buckets are found by listing, never assumed; the category
name suggests the type (:func:`qoder_type`); ``SharedClientCache/`` is an
embedding cache and is ignored.
"""

from __future__ import annotations

import re
from pathlib import Path

from amux_memory.tools.typed.hosts.base import (
    Discovery,
    Skipped,
    candidate_from_file,
    git_root,
    list_dirs,
    walk_markdown,
)

_CATEGORY = (
    (("user", "preference", "profile", "persona", "habit", "style"), "user"),
    (("feedback", "lesson", "experience", "correction", "mistake", "review"), "feedback"),
    (("project", "decision", "architecture", "convention", "task", "context", "fact"), "project"),
    (("reference", "doc", "link", "resource", "api", "knowledge"), "reference"),
)


def qoder_type(category: str) -> str | None:
    """The type a Qoder memory category suggests (by keyword in its name), or None."""
    lowered = category.lower()
    for words, kind in _CATEGORY:
        if any(w in lowered for w in words):
            return kind
    return None


def _alnum(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def discover_qoder(home: Path, cwd: Path, all_projects: bool) -> Discovery:
    """Candidates from every user's ``global`` area and ``cwd``'s project bucket (or every bucket).

    Other projects' buckets are :class:`Skipped` entries; no memory gives an
    empty discovery with a note; never raises.
    """
    found = Discovery("qoder")
    root = home / ".qoder-cn" / "memories"
    if not root.is_dir() or root.is_symlink():
        found.notes.append(f"no Qoder memory at {root}")
        return found
    for user in list_dirs(root):
        if user.name == "SharedClientCache":
            continue
        base = root / user.name
        areas = []
        if (base / "global").is_dir():
            areas.append(base / "global")
        for bucket in list_dirs(base / "projects"):
            # The bucket encodes the project path; compare letters and digits only, whatever the encoding.
            if all_projects or _alnum(bucket.name) in {_alnum(str(cwd)), _alnum(str(git_root(cwd) or cwd))}:
                areas.append(base / "projects" / bucket.name)
            else:
                found.skipped.append(Skipped(str(base / "projects" / bucket.name),
                                             "another project's bucket (use --all-projects or --cwd)"))
        for area in areas:
            found.roots.append(str(area))
            for path in walk_markdown(area, found):
                category = path.relative_to(area).parts[0] if len(path.relative_to(area).parts) > 1 else ""
                cand = candidate_from_file("qoder", path, found, type_hint=qoder_type(category))
                if cand is not None:
                    found.candidates.append(cand)
    if not found.roots:
        found.notes.append(f"no Qoder memory bucket under {root}/<user-hash>/ for {cwd}")
    return found
