"""What every host adapter shares: candidates, skipped files, read-only reading and walking.

An adapter (one module per host in :mod:`tools.typed.hosts`) finds a host's
private memory folder, reads its Markdown files with :func:`read_host_file`
and :func:`walk_markdown`, and turns each piece of reusable memory into a
:class:`Candidate` (:func:`candidate_from_file`); files that are indexes,
derived summaries or logs become :class:`Skipped` entries so the plan can say
why they were left out.  Host-private memory is a cache owned by its host:
discovery only reads it (DESIGN.md §11).

Safety: nothing here writes, renames or deletes.  Files are opened read-only
with ``O_NOFOLLOW`` (and ``O_NOATIME`` when allowed), symlinks inside a host
tree are never followed, and a walk stops at :data:`MAX_FILES` files or
:data:`MAX_TOTAL_BYTES` bytes over one discovery.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amux_memory.tools.typed.model import TYPES, TopicError, parse_date, parse_topic, short_repr

MAX_FILES = 1024
"""Most Markdown files one discovery reads."""

MAX_TOTAL_BYTES = 16 * 1024 * 1024
"""Most bytes one discovery reads in all."""

MAX_FILE_BYTES = 1024 * 1024
"""A single host file larger than this is skipped (a topic may hold 64 KiB anyway)."""

MAX_DEPTH = 20
"""Deepest directory level a walk descends to (the Hub's path-segment limit)."""

class SourceError(ValueError):
    """``--from`` names neither a host (:data:`tools.typed.hosts.HOSTS`) nor a directory."""


@dataclass(frozen=True)
class Candidate:
    """One piece of host memory that could become a typed topic.

    ``source`` is the absolute path of the host file, with ``#anchor`` when
    one file yields several candidates (Codex task groups); it identifies the
    candidate across runs.  ``type`` is the suggested type or None (the
    importer then uses its default); ``type_from`` says why (``frontmatter``,
    ``host``, ``none``).  ``name``, ``description`` and ``tags`` are as the
    host wrote them (not yet slugs); ``created`` is an ISO date from the
    file's frontmatter, else its modification time.  ``meta`` is the host's
    frontmatter, kept for the record.
    """

    host: str
    source: str
    type: str | None
    type_from: str
    name: str
    description: str
    tags: tuple[str, ...]
    body: str
    created: str
    meta: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (no body)."""
        return {"host": self.host, "source": self.source, "type": self.type, "type_from": self.type_from,
                "name": self.name, "description": self.description, "tags": list(self.tags),
                "created": self.created, "body_chars": len(self.body)}


@dataclass(frozen=True)
class Skipped:
    """A host file (or folder) that was looked at and deliberately not offered, and why."""

    source: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        """``{"source", "reason"}``."""
        return {"source": self.source, "reason": self.reason}


@dataclass
class Budget:
    """What one discovery has used so far, against :data:`MAX_FILES` and :data:`MAX_TOTAL_BYTES`.

    ``files`` and ``bytes`` count what was read; ``listed`` the Markdown files
    found by walks across all roots of the discovery; ``exhausted`` is set
    once a bound stopped the discovery from reading everything.
    """

    files: int = 0
    bytes: int = 0
    listed: int = 0
    exhausted: bool = False


@dataclass
class Discovery:
    """What one adapter found: the folders it read, candidates, skipped files and notes."""

    host: str
    roots: list[str] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    budget: Budget = field(default_factory=Budget)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary: host, roots, candidates (no bodies), skipped, notes."""
        return {"host": self.host, "roots": self.roots, "candidates": [c.as_dict() for c in self.candidates],
                "skipped": [s.as_dict() for s in self.skipped], "notes": self.notes}


# -- reading, never writing -------------------------------------------------------------


def _open_flags() -> int:
    return os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


def read_host_file(path: Path, budget: Budget) -> tuple[str, float] | str:
    """``(text, mtime)`` of a regular file opened read-only, or a reason it was not read.

    Never follows a symlink (``O_NOFOLLOW``), never blocks on a FIFO, and asks
    for ``O_NOATIME`` so even the access time stays as it was when the kernel
    allows it.  Counts the file against ``budget``.
    """
    noatime = getattr(os, "O_NOATIME", 0)
    try:
        try:
            fd = os.open(path, _open_flags() | noatime)
        except PermissionError:
            # O_NOATIME is only allowed to a file's owner; read without it.
            fd = os.open(path, _open_flags())
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if st.st_size > MAX_FILE_BYTES:
            return f"too large ({st.st_size} bytes; at most {MAX_FILE_BYTES})"
        if budget.bytes + st.st_size > MAX_TOTAL_BYTES:
            budget.exhausted = True
            return f"over the discovery budget of {MAX_TOTAL_BYTES} bytes"
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    finally:
        os.close(fd)
    budget.files += 1
    budget.bytes += len(data)
    try:
        return data.decode("utf-8"), st.st_mtime
    except UnicodeDecodeError:
        return "not UTF-8 text"


def walk_markdown(root: Path, found: Discovery, *, skip_dirs: frozenset[str] = frozenset()) -> list[Path]:
    """Every ``*.md`` file under ``root``, sorted, without following symlinks.

    Hidden entries (``.git``, ``.memory-sync``) and directories named in
    ``skip_dirs`` are passed over silently; symlinks are recorded in
    ``found.skipped``.  Stops at :data:`MAX_FILES` files (over the whole
    discovery) or :data:`MAX_DEPTH` levels, with a note.
    """
    out: list[Path] = []

    def visit(folder: Path, depth: int) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            found.skipped.append(Skipped(str(folder), f"unreadable folder: {exc.strerror or exc}"))
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = folder / entry.name
            if entry.is_symlink():
                found.skipped.append(Skipped(str(path), "symlink (not followed)"))
            elif entry.is_dir(follow_symlinks=False):
                if entry.name in skip_dirs:
                    continue
                if depth >= MAX_DEPTH:
                    found.notes.append(f"{path}: deeper than {MAX_DEPTH} levels, not read")
                    continue
                visit(path, depth + 1)
            elif entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                if found.budget.listed >= MAX_FILES:
                    if not found.budget.exhausted:
                        found.notes.append(f"stopped after {MAX_FILES} Markdown files")
                    found.budget.exhausted = True
                    return
                found.budget.listed += 1
                out.append(path)

    visit(root, 0)
    return out


def _date_of(value: Any) -> str | None:
    if isinstance(value, _dt.datetime):
        return value.date().isoformat()
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, str):
        day = parse_date(value[:10])
        return day.isoformat() if day is not None else None
    return None


def mtime_date(mtime: float) -> str:
    """A modification time (seconds since the epoch) as its UTC ISO date ``YYYY-MM-DD``."""
    return _dt.datetime.fromtimestamp(mtime, _dt.UTC).date().isoformat()


def _tags_of(meta: dict[str, Any]) -> tuple[str, ...]:
    for key in ("tags", "keywords"):
        value = meta.get(key)
        if isinstance(value, str):
            value = re.split(r"[,\s]+", value)
        if isinstance(value, list):
            tags = tuple(str(v).strip() for v in value if isinstance(v, (str, int)) and str(v).strip())
            if tags:
                return tags
    return ()


def _type_of(meta: dict[str, Any], hint: str | None) -> tuple[str | None, str]:
    declared = meta.get("type")
    nested = meta.get("metadata")
    if declared not in TYPES and isinstance(nested, dict):
        declared = nested.get("type")
    if declared in TYPES:
        return str(declared), "frontmatter"
    if hint in TYPES:
        return hint, "host"
    return None, "none"


def _generic_stem(path: Path) -> str:
    # SKILL.md, README.md and the like say nothing: name them after their folder.
    stem = path.stem
    if stem.upper() in {"SKILL", "README", "INDEX", "AGENTS", "CLAUDE", "NOTES", "AGENT"} and path.parent.name:
        return f"{path.parent.name}-{stem.lower()}"
    return stem


def candidate_from_file(host: str, path: Path, found: Discovery, *, type_hint: str | None = None,
                        name: str | None = None) -> Candidate | None:
    """Read one Markdown file into a candidate (or a :class:`Skipped` entry, returning None).

    Frontmatter is read with the same YAML reader as topics; a file whose
    frontmatter does not parse is imported whole as body, with a note.  A
    ``created`` (or ``metadata.created``) that is there but not a date skips
    the file with that reason, rather than guessing; a loose ``date`` field
    that is not one is ignored.
    """
    got = read_host_file(path, found.budget)
    if isinstance(got, str):
        found.skipped.append(Skipped(str(path), got))
        return None
    text, mtime = got
    try:
        meta, body, _ = parse_topic(text)
    except TopicError as exc:
        found.notes.append(f"{path}: frontmatter unreadable ({exc.message}); imported as plain text")
        meta, body = {}, text
    if not body.strip():
        found.skipped.append(Skipped(str(path), "empty body"))
        return None
    kind, why = _type_of(meta, type_hint)
    nested = meta.get("metadata")
    nested_created = nested.get("created") if isinstance(nested, dict) else None
    for key, value in (("created", meta.get("created")), ("metadata.created", nested_created)):
        if value is not None and _date_of(value) is None:
            found.skipped.append(Skipped(str(path), f"{key} {short_repr(value)} is not a date (YYYY-MM-DD)"))
            return None
    created = (_date_of(meta.get("created")) or _date_of(meta.get("date")) or _date_of(nested_created)
               or mtime_date(mtime))
    title = next((str(meta[k]).strip() for k in ("name", "title") if isinstance(meta.get(k), str)
                  and str(meta[k]).strip()), None)
    description = str(meta["description"]) if isinstance(meta.get("description"), str) else ""
    return Candidate(host=host, source=str(path), type=kind, type_from=why, name=title or name or _generic_stem(path),
                     description=description.strip(), tags=_tags_of(meta), body=body, created=created, meta=meta)


def collect_markdown(host: str, root: Path, found: Discovery, *, type_hint: str | None = None,
                     skip_names: frozenset[str] = frozenset(), skip_dirs: frozenset[str] = frozenset()) -> None:
    """Add a candidate to ``found`` for every Markdown file under ``root`` (:func:`walk_markdown`).

    Files named in ``skip_names`` (a host's own index, usually ``MEMORY.md``)
    become :class:`Skipped` entries; ``type_hint`` is passed to
    :func:`candidate_from_file`.  Reads only; never raises for a file's content.
    """
    for path in walk_markdown(root, found, skip_dirs=skip_dirs):
        if path.name in skip_names:
            found.skipped.append(Skipped(str(path), "index, not a memory"))
            continue
        cand = candidate_from_file(host, path, found, type_hint=type_hint)
        if cand is not None:
            found.candidates.append(cand)


def list_dirs(folder: Path) -> list[os.DirEntry[str]]:
    """The non-hidden subdirectories of ``folder`` (symlinks excluded), sorted by name; ``[]`` if unreadable."""
    try:
        return sorted((e for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)
                       and not e.name.startswith(".")), key=lambda e: e.name)
    except OSError:
        return []


def git_root(start: Path) -> Path | None:
    """The top of the git checkout holding ``start`` (a linked worktree maps to its main checkout), or None.

    Hosts that keep one memory bucket per project (Claude Code, Qoder) name it
    after this directory.  Reads ``.git`` files only; never runs git.
    """
    for folder in (start, *start.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return folder
        if dot_git.is_file():
            try:
                pointer = dot_git.read_text("utf-8").strip()
            except (OSError, UnicodeDecodeError):
                return folder
            target = Path(pointer.removeprefix("gitdir:").strip())
            if not target.is_absolute():
                target = (folder / target).resolve()
            # <main>/.git/worktrees/<name>: the main checkout owns the memory bucket.
            if target.parent.name == "worktrees" and target.parent.parent.name == ".git":
                return target.parent.parent.parent
            return folder
    return None
