"""Read-only discovery of the memories other agent hosts keep for themselves.

``amux memory import --from HOST`` starts here: each adapter finds a host's
private memory folder, reads its Markdown files and turns each piece of
reusable memory into a :class:`Candidate`; files that are indexes, derived
summaries or logs become :class:`Skipped` entries so the plan can say why
they were left out.  Typed-memory spec (seed 004) §5.1 (host adapters:
host-private memory is a cache owned by its host, read only by discovery).

Hosts and what was verified about them:

``claude-code``
    ``<base>/projects/<bucket>/memory/`` where ``<base>`` is
    ``$CLAUDE_CODE_REMOTE_MEMORY_DIR``, else ``$CLAUDE_CONFIG_DIR``, else
    ``~/.claude``.  Claude Code 2.1.197 (its bundled JavaScript) names the
    bucket after the project root (the git root of the working directory,
    else the directory itself): every character outside ``[A-Za-z0-9]``
    becomes ``-``; a name over 200 characters is cut to 200 and gets ``-``
    plus the base-36 absolute value of a 32-bit Java-style string hash.  It
    writes ``MEMORY.md`` (an index of ``- [Title](file.md) — hook`` lines:
    skipped) and one file per memory whose frontmatter it re-serialises as
    ``name``, ``description`` and ``metadata: {node_type: memory, type,
    originSessionId}`` (checked by running it against a fake model); it also
    reads a top-level ``type`` as metadata, and so does this adapter.  Team
    memories live in ``team/`` under the same folder.
``codex``
    ``$CODEX_HOME/memories/`` (default ``~/.codex/memories/``).  Codex 0.171
    builds it in two phases: per-session extraction, then a consolidation
    agent.  Importable: ``MEMORY.md``, the consolidated handbook, one
    candidate per ``# Task Group:`` block (its ``scope:`` line is the
    description, its ``### keywords`` the tags); ``extensions/ad_hoc/notes/``
    (notes the user explicitly asked Codex to remember); and
    ``extensions/external_agent_import/resources/`` (memory files Codex copied
    from another agent).  Skipped as derived: ``memory_summary.md`` (a
    prompt-sized digest of ``MEMORY.md``), ``raw_memories.md`` (a temporary
    merge of per-session extractions, rebuilt on every consolidation and
    already folded into ``MEMORY.md``), ``rollout_summaries/`` (per-session
    recaps that ``MEMORY.md`` points to; Codex prunes them), and ``skills/``
    (procedures, not facts).
``minimax``
    ``~/.minimax/memory/``: ``user.md`` is the user's profile (type
    ``user``); other Markdown there is imported with the default type;
    ``tracking/`` holds logs and a ``summary`` file is a view: both skipped.
``qoder``
    ``~/.qoder-cn/memories/<user-hash>/global/<category>/`` and
    ``.../projects/<bucket>/<category>/``: user hashes and buckets are found
    by listing, never assumed; the category name suggests the type;
    ``SharedClientCache/`` is an embedding cache and is ignored.
``DIR``
    Any directory: every ``.md`` file below it.

Safety: nothing here writes, renames or deletes.  Files are opened read-only
with ``O_NOFOLLOW`` (and ``O_NOATIME`` when allowed), symlinks inside a host
tree are never followed, and a walk stops at :data:`MAX_FILES` files or
:data:`MAX_TOTAL_BYTES` bytes.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tools.typed_memory.model import TYPES, TopicError, _short, parse_date, parse_topic

HOSTS = ("claude-code", "codex", "minimax", "qoder")
"""Host names ``--from`` accepts; anything else is a directory."""

MAX_FILES = 1024
"""Most Markdown files one discovery reads."""

MAX_TOTAL_BYTES = 16 * 1024 * 1024
"""Most bytes one discovery reads in all."""

MAX_FILE_BYTES = 1024 * 1024
"""A single host file larger than this is skipped (a topic may hold 64 KiB anyway)."""

MAX_DEPTH = 20
"""Deepest directory level a walk descends to (the Hub's path-segment limit)."""

_CLAUDE_BUCKET_MAX = 200


class SourceError(ValueError):
    """``--from`` names neither a host nor a directory."""


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
class _Budget:
    files: int = 0  # read
    bytes: int = 0  # read
    listed: int = 0  # Markdown files found by walks, across all roots of one discovery
    exhausted: bool = False


@dataclass
class Discovery:
    """What one adapter found: the folders it read, candidates, skipped files and notes."""

    host: str
    roots: list[str] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    budget: _Budget = field(default_factory=_Budget)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary: host, roots, candidates (no bodies), skipped, notes."""
        return {"host": self.host, "roots": self.roots, "candidates": [c.as_dict() for c in self.candidates],
                "skipped": [s.as_dict() for s in self.skipped], "notes": self.notes}


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
        return _claude(env, home, here, all_projects)
    if source == "codex":
        return _codex(env, home)
    if source == "minimax":
        return _minimax(home)
    if source == "qoder":
        return _qoder(home, here, all_projects)
    path = Path(source).expanduser()
    if not path.is_dir():
        raise SourceError(f"--from {source!r} is neither a host ({', '.join(HOSTS)}) nor a directory")
    return _directory(path.resolve())


# -- reading, never writing -------------------------------------------------------------


def _open_flags() -> int:
    return os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


def read_host_file(path: Path, budget: _Budget) -> tuple[str, float] | str:
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


def _mtime_date(mtime: float) -> str:
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
            found.skipped.append(Skipped(str(path), f"{key} {_short(value)} is not a date (YYYY-MM-DD)"))
            return None
    created = (_date_of(meta.get("created")) or _date_of(meta.get("date")) or _date_of(nested_created)
               or _mtime_date(mtime))
    title = next((str(meta[k]).strip() for k in ("name", "title") if isinstance(meta.get(k), str)
                  and str(meta[k]).strip()), None)
    description = str(meta["description"]) if isinstance(meta.get("description"), str) else ""
    return Candidate(host=host, source=str(path), type=kind, type_from=why, name=title or name or _generic_stem(path),
                     description=description.strip(), tags=_tags_of(meta), body=body, created=created, meta=meta)


def _collect(host: str, root: Path, found: Discovery, *, type_hint: str | None = None,
             skip_names: frozenset[str] = frozenset(), skip_dirs: frozenset[str] = frozenset()) -> None:
    for path in walk_markdown(root, found, skip_dirs=skip_dirs):
        if path.name in skip_names:
            found.skipped.append(Skipped(str(path), "index, not a memory"))
            continue
        cand = candidate_from_file(host, path, found, type_hint=type_hint)
        if cand is not None:
            found.candidates.append(cand)


# -- Claude Code ---------------------------------------------------------------------------


def _java_hash(text: str) -> int:
    # JavaScript's (h << 5) - h + charCodeAt(i), wrapped to a signed 32-bit int, over UTF-16 units.
    h = 0
    units = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i:i + 2], "little")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def claude_bucket(project: str) -> str:
    """The folder name Claude Code gives a project path under ``projects/`` (see the module docstring)."""
    # JavaScript replaces per UTF-16 unit: a character outside the BMP becomes two dashes.
    name = "".join(c if c.isascii() and c.isalnum() else "-" * (2 if ord(c) > 0xFFFF else 1) for c in project)
    if len(name) <= _CLAUDE_BUCKET_MAX:
        return name
    return f"{name[:_CLAUDE_BUCKET_MAX]}-{_base36(abs(_java_hash(project)))}"


def git_root(start: Path) -> Path | None:
    """The top of the git checkout holding ``start`` (a linked worktree maps to its main checkout), or None."""
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


def _claude(env: dict[str, str], home: Path, cwd: Path, all_projects: bool) -> Discovery:
    found = Discovery("claude-code")
    base = Path(env.get("CLAUDE_CODE_REMOTE_MEMORY_DIR") or env.get("CLAUDE_CONFIG_DIR") or home / ".claude")
    projects = base.expanduser() / "projects"
    if all_projects:
        buckets = [projects / e.name for e in _list_dirs(projects)]
    else:
        wanted = []
        for folder in (git_root(cwd), cwd):
            if folder is not None and claude_bucket(str(folder)) not in wanted:
                wanted.append(claude_bucket(str(folder)))
        buckets = [projects / name for name in wanted]
    for bucket in buckets:
        memory = bucket / "memory"
        if memory.is_dir() and not memory.is_symlink():
            found.roots.append(str(memory))
            _collect("claude-code", memory, found, skip_names=frozenset({"MEMORY.md"}))
    if not found.roots:
        where = f"{projects}/*/memory" if all_projects else " or ".join(str(b / "memory") for b in buckets)
        found.notes.append(f"no Claude Code memory at {where}")
    return found


def _list_dirs(folder: Path) -> list[os.DirEntry[str]]:
    try:
        return sorted((e for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)
                       and not e.name.startswith(".")), key=lambda e: e.name)
    except OSError:
        return []


# -- Codex -----------------------------------------------------------------------------------

_CODEX_DERIVED = {
    "memory_summary.md": "derived: Codex's prompt-sized digest of MEMORY.md",
    "raw_memories.md": "derived: temporary merge of per-session extractions, already consolidated into MEMORY.md",
}
_CODEX_DERIVED_DIRS = {
    "rollout_summaries": "derived: per-session recaps that MEMORY.md points to (Codex prunes them)",
    "skills": "procedures (Codex skills), not memory facts",
}
_TASK_GROUP = re.compile(r"^# Task Group:\s*(.+?)\s*$", re.M)
_UPDATED_AT = re.compile(r"updated_at=(\d{4}-\d{2}-\d{2})")
_NOTE_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2})T")
_NOTE_PREFIX = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-?")


def _codex(env: dict[str, str], home: Path) -> Discovery:
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
            _codex_handbook(path, found)
        elif entry.name in _CODEX_DERIVED:
            found.skipped.append(Skipped(str(path), _CODEX_DERIVED[entry.name]))
        elif entry.name in _CODEX_DERIVED_DIRS:
            found.skipped.append(Skipped(str(path), _CODEX_DERIVED_DIRS[entry.name]))
        elif entry.name == "extensions" and entry.is_dir(follow_symlinks=False):
            _codex_extensions(path, found)
        elif entry.name.endswith(".md"):
            found.skipped.append(Skipped(str(path), "not a file Codex's memory layout defines"))
    return found


def _codex_handbook(path: Path, found: Discovery) -> None:
    got = read_host_file(path, found.budget)
    if isinstance(got, str):
        found.skipped.append(Skipped(str(path), got))
        return
    text, mtime = got
    heads = list(_TASK_GROUP.finditer(text))
    if not heads:
        if text.strip():
            found.candidates.append(Candidate("codex", str(path), "project", "host", "codex-memory", "", (),
                                              text, _mtime_date(mtime)))
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
                     dates[-1] if dates else _mtime_date(mtime))


def _codex_extensions(root: Path, found: Discovery) -> None:
    for entry in _list_dirs(root):
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
                _collect("codex", resources, found, skip_names=frozenset({"MEMORY.md"}))
        else:
            found.skipped.append(Skipped(str(path), "memory extension of unknown layout"))


def _with_created(cand: Candidate, day: str) -> Candidate:
    return replace(cand, created=day) if parse_date(day) else cand


# -- MiniMax ---------------------------------------------------------------------------------


def _minimax(home: Path) -> Discovery:
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


# -- Qoder CN --------------------------------------------------------------------------------

_QODER_CATEGORY = (
    (("user", "preference", "profile", "persona", "habit", "style"), "user"),
    (("feedback", "lesson", "experience", "correction", "mistake", "review"), "feedback"),
    (("project", "decision", "architecture", "convention", "task", "context", "fact"), "project"),
    (("reference", "doc", "link", "resource", "api", "knowledge"), "reference"),
)


def qoder_type(category: str) -> str | None:
    """The type a Qoder memory category suggests (by keyword in its name), or None."""
    lowered = category.lower()
    for words, kind in _QODER_CATEGORY:
        if any(w in lowered for w in words):
            return kind
    return None


def _alnum(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _qoder(home: Path, cwd: Path, all_projects: bool) -> Discovery:
    found = Discovery("qoder")
    root = home / ".qoder-cn" / "memories"
    if not root.is_dir() or root.is_symlink():
        found.notes.append(f"no Qoder memory at {root}")
        return found
    for user in _list_dirs(root):
        if user.name == "SharedClientCache":
            continue
        base = root / user.name
        areas = []
        if (base / "global").is_dir():
            areas.append(base / "global")
        for bucket in _list_dirs(base / "projects"):
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


# -- any directory -----------------------------------------------------------------------------


def _directory(root: Path) -> Discovery:
    found = Discovery("dir", roots=[str(root)])
    # A MEMORY.md there is most likely another library's index: its lines point at the topics.
    _collect("dir", root, found, skip_names=frozenset({"MEMORY.md"}))
    return found
