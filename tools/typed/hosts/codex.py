"""Codex's memory: ``$CODEX_HOME/memories/`` (default ``~/.codex/memories/``) (DESIGN.md §11).

Codex 0.171 builds it in two phases: per-session extraction, then a
consolidation agent.  Importable: ``MEMORY.md``, the consolidated handbook,
one candidate per ``# Task Group:`` block (its ``scope:`` line is the
description, its ``### keywords`` the tags); ``extensions/ad_hoc/notes/``
(notes the user explicitly asked Codex to remember); and
``extensions/external_agent_import/resources/`` (memory files Codex copied
from another agent).  Skipped as derived: ``memory_summary.md`` (a
prompt-sized digest of ``MEMORY.md``), ``raw_memories.md`` (a temporary
merge of per-session extractions, rebuilt on every consolidation and
already folded into ``MEMORY.md``), ``rollout_summaries/`` (per-session
recaps that ``MEMORY.md`` points to; Codex prunes them), and ``skills/``
(procedures, not facts).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

from amux_memory.tools.typed.hosts.base import (
    Candidate,
    Discovery,
    Skipped,
    candidate_from_file,
    collect_markdown,
    list_dirs,
    mtime_date,
    read_host_file,
    walk_markdown,
)
from amux_memory.tools.typed.model import parse_date

_DERIVED = {
    "memory_summary.md": "derived: Codex's prompt-sized digest of MEMORY.md",
    "raw_memories.md": "derived: temporary merge of per-session extractions, already consolidated into MEMORY.md",
}
_DERIVED_DIRS = {
    "rollout_summaries": "derived: per-session recaps that MEMORY.md points to (Codex prunes them)",
    "skills": "procedures (Codex skills), not memory facts",
}
_TASK_GROUP = re.compile(r"^# Task Group:\s*(.+?)\s*$", re.M)
_UPDATED_AT = re.compile(r"updated_at=(\d{4}-\d{2}-\d{2})")
_NOTE_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2})T")
_NOTE_PREFIX = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-?")


def discover_codex(env: dict[str, str], home: Path) -> Discovery:
    """Candidates from Codex's memory folder (``CODEX_HOME`` from ``env``, else under ``home``).

    No memory folder gives an empty discovery with a note; never raises.
    """
    found = Discovery("codex")
    root = Path(env.get("CODEX_HOME") or home / ".codex").expanduser() / "memories"
    if not root.is_dir() or root.is_symlink():
        found.notes.append(f"no Codex memory at {root}")
        return found
    found.roots.append(str(root))
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        found.skipped.append(Skipped(str(root), f"unreadable folder: {exc.strerror or exc}"))
        return found
    for entry in entries:
        path = root / entry.name
        if entry.name.startswith("."):
            continue
        if entry.is_symlink():
            found.skipped.append(Skipped(str(path), "symlink (not followed)"))
        elif entry.name == "MEMORY.md" and entry.is_file(follow_symlinks=False):
            _handbook(path, found)
        elif entry.name in _DERIVED:
            found.skipped.append(Skipped(str(path), _DERIVED[entry.name]))
        elif entry.name in _DERIVED_DIRS:
            found.skipped.append(Skipped(str(path), _DERIVED_DIRS[entry.name]))
        elif entry.name == "extensions" and entry.is_dir(follow_symlinks=False):
            _extensions(path, found)
        elif entry.name.endswith(".md"):
            found.skipped.append(Skipped(str(path), "not a file Codex's memory layout defines"))
    return found


def _handbook(path: Path, found: Discovery) -> None:
    got = read_host_file(path, found.budget)
    if isinstance(got, str):
        found.skipped.append(Skipped(str(path), got))
        return
    text, mtime = got
    heads = list(_TASK_GROUP.finditer(text))
    if not heads:
        if text.strip():
            found.candidates.append(Candidate("codex", str(path), "project", "host", "codex-memory", "", (),
                                              text, mtime_date(mtime)))
        return
    for i, head in enumerate(heads):
        block = text[head.start():heads[i + 1].start() if i + 1 < len(heads) else len(text)].strip() + "\n"
        found.candidates.append(_task_group(path, head.group(1), block, mtime))


def _task_group(path: Path, title: str, block: str, mtime: float) -> Candidate:
    scope = re.search(r"^scope:\s*(.+)$", block, re.M)
    keywords: list[str] = []
    for kw in re.finditer(r"^### keywords\s*\n((?:- .*\n?)+)", block, re.M):
        for line in kw.group(1).splitlines():
            keywords.extend(k.strip() for k in line.removeprefix("- ").split(",") if k.strip())
    dates = sorted(_UPDATED_AT.findall(block))
    anchor = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "task-group"
    return Candidate("codex", f"{path}#{anchor}", "project", "host", title,
                     scope.group(1).strip() if scope else "", tuple(dict.fromkeys(keywords)), block,
                     dates[-1] if dates else mtime_date(mtime))


def _extensions(root: Path, found: Discovery) -> None:
    for entry in list_dirs(root):
        path = root / entry.name
        if entry.name == "ad_hoc":
            notes = path / "notes"
            if notes.is_dir() and not notes.is_symlink():
                for note in walk_markdown(notes, found):
                    # <timestamp>-<short slug>.md: the slug names the note.
                    slug = _NOTE_PREFIX.sub("", note.stem) or note.stem
                    cand = candidate_from_file("codex", note, found, name=slug)
                    if cand is not None:
                        stamp = _NOTE_STAMP.match(note.name)
                        if stamp and "created" not in cand.meta:
                            cand = _with_created(cand, stamp.group(1))
                        found.candidates.append(cand)
        elif entry.name == "external_agent_import":
            resources = path / "resources"
            if resources.is_dir() and not resources.is_symlink():
                collect_markdown("codex", resources, found, skip_names=frozenset({"MEMORY.md"}))
        else:
            found.skipped.append(Skipped(str(path), "memory extension of unknown layout"))


def _with_created(cand: Candidate, day: str) -> Candidate:
    return replace(cand, created=day) if parse_date(day) else cand
