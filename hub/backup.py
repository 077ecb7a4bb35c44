"""The online backup's Hub side: each scope copied to a staging folder under its lock (DESIGN.md §15.8).

``amux hub backup FILE`` calls the operator's method ``backup_stage``; the Hub
(:meth:`hub.service.MemoryService.backup_stage`) makes a fresh staging folder
``<AMUX_HOME>/backup-staging/<id>/`` (``0700``) and, scope after scope, takes
the scope's lock (``MemoryService.locked``) and copies, byte for byte, what
the scope holds: its documents (``memory/<relpath>/``), its history segment
(``history/<relpath>/``, cut at the end of its last record) and its review
queue (``review/<relpath>/``).  A writer of that scope waits for that one
scope's copy; writers of other scopes do not wait at all.  Then the registry
(``principals.toml``: token hashes only, checked here: a file holding
something shaped like a raw token is refused) and ``config.toml`` are
copied, and ``manifest.json`` lists every staged file (``sha256``,
``bytes``) and every document's revision.  The CLI packs the folder into a
gzip tar outside any lock and removes it (:mod:`tools.cli.backup`).

Under the lock, documents and proposals (files the Hub only replaces by a
rename) are hard-linked into the staging folder and only the appended files
(history segment, decisions log) are copied; digests are computed after the
lock is released.  Measured figures are in DESIGN.md §15.8's notes below.

Blocking functions: the service runs them in worker threads.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from amux_memory.hub.fsio import TEMP_SUFFIX
from amux_memory.hub.history import SEGMENT_NAME
from amux_memory.hub.registry import REGISTRY_NAME
from amux_memory.protocol.config_file import CONFIG_NAME
from amux_memory.protocol.errors import ErrorCode, HubError

FORMAT: Final = "amux-backup"
BACKUP_FORMAT_VERSION: Final = 1
MANIFEST_NAME: Final = "manifest.json"
STAGING_NAME: Final = "backup-staging"
"""The folder under ``<AMUX_HOME>`` holding staging folders while a backup is packed."""
STALE_STAGING_SECONDS: Final = 6 * 3600
"""A staging folder older than this was left by a backup that died: the next backup removes it."""
SCOPE_TREES: Final = ("memory", "history", "review")
"""The folders under ``<AMUX_HOME>`` holding a scope's files, each at ``<tree>/<scope relpath>``."""
SCOPE_GROUPS: Final = ("users", "teams")
"""Scope relpaths are ``global``, ``users/<hex>`` and ``teams/<hex>``."""
HOME_FILES: Final = (REGISTRY_NAME, CONFIG_NAME)
"""The home's own files a backup holds (the TLS key stays out: keep it, or run ``amux hub tls init`` again)."""
RAW_TOKEN: Final = re.compile(rb"amux_[0-9a-f]{12}_[A-Za-z0-9_-]{32,}")
"""Something shaped like a raw bearer token (``amux_<id>_<secret>``); the registry holds only hashes."""
_SCOPE_KEY: Final = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class StagedScope:
    """What :func:`stage_scope` copied of one scope: ``files`` archive path → ``{sha256, bytes}``, ``documents``
    logical path → revision, and how long the copy held the lock (ms)."""

    relpath: str
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    documents: dict[str, str] = field(default_factory=dict)
    held_ms: float = 0.0


def scope_relpaths(home: Path) -> list[str]:
    """Every scope relpath with a folder in any of :data:`SCOPE_TREES` (a scope whose documents are all
    forgotten still has history), sorted.  Names that are not scope keys are passed over."""
    found: set[str] = set()
    for tree in SCOPE_TREES:
        root = home / tree
        if (root / "global").is_dir() and not (root / "global").is_symlink():
            found.add("global")
        for group in SCOPE_GROUPS:
            try:
                names = os.listdir(root / group)
            except (FileNotFoundError, NotADirectoryError):
                continue
            found.update(f"{group}/{name}" for name in names
                         if _SCOPE_KEY.match(name) and stat.S_ISDIR(os.lstat(root / group / name).st_mode))
    return sorted(found)


def new_staging(home: Path) -> Path:
    """A fresh, empty staging folder ``<home>/backup-staging/<id>`` (``0700``); leftovers older than
    :data:`STALE_STAGING_SECONDS` are removed first."""
    parent = home / STAGING_NAME
    parent.mkdir(mode=0o700, exist_ok=True)
    now = time.time()
    for old in parent.iterdir():
        if not old.is_symlink() and old.is_dir() and now - old.stat().st_mtime > STALE_STAGING_SECONDS:
            shutil.rmtree(old, ignore_errors=True)
    staging = parent / secrets.token_hex(8)
    staging.mkdir(mode=0o700)
    return staging


def _regular_files(top: Path) -> Iterator[tuple[str, Path]]:
    """``(relative path, absolute path)`` of every regular file under ``top`` (symlinks and temporaries
    skipped, never followed), sorted."""
    for folder, dirs, files in os.walk(top, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder, name)
            if name.endswith(TEMP_SUFFIX) or not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            yield os.path.relpath(path, top), path


def _copy(source: Path, target: Path, limit: int = -1) -> tuple[str, int]:
    """Copy ``source`` (not followed if a symlink) to ``target`` (``0600``, parents ``0700``), at most ``limit``
    bytes (-1: all); returns ``(sha256 hex, bytes)``."""
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        with open(target, "xb") as out:
            os.fchmod(out.fileno(), 0o600)
            while limit < 0 or size < limit:
                chunk = os.read(fd, 1 << 20 if limit < 0 else min(1 << 20, limit - size))
                if not chunk:
                    break
                digest.update(chunk)
                out.write(chunk)
                size += len(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest(), size


def _link_or_copy(source: Path, target: Path) -> bool:
    """Hard-link ``source`` at ``target`` (True), or copy it when the file system refuses a link (False)."""
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        os.link(source, target, follow_symlinks=False)
        return True
    except OSError:
        _copy(source, target)
        return False


def stage_scope(home: Path, relpath: str, staging: Path, history_end: int = -1) -> StagedScope:
    """Stage one scope's files from ``home`` into ``staging`` (same layout); the caller holds the scope's lock.

    Files the Hub only ever replaces by a rename (documents, proposals) are hard-linked, so the lock is held
    for a directory entry per file, not a copy: the linked inode keeps the bytes the scope held, whatever is
    renamed over the original later.  Files the Hub appends to (the history segment, the decisions log) are
    copied; the segment up to ``history_end``, where its last record ends when the Hub has it open (-1: whole).
    Digests are computed afterwards, outside the lock (:func:`finish_scope`).
    """
    started = time.perf_counter()
    staged = StagedScope(relpath)
    for tree in SCOPE_TREES:
        top = home / tree / relpath
        if not top.is_dir() or top.is_symlink():
            continue
        for rel, path in _regular_files(top):
            name = f"{tree}/{relpath}/{rel}"
            if tree == "history" or rel.endswith(".log"):
                digest, size = _copy(path, staging / name, history_end if rel == SEGMENT_NAME else -1)
                staged.files[name] = {"sha256": digest, "bytes": size}
            else:
                _link_or_copy(path, staging / name)
                staged.files[name] = {}
    staged.held_ms = (time.perf_counter() - started) * 1000
    return staged


def finish_scope(staged: StagedScope, staging: Path) -> StagedScope:
    """Fill in the digests and sizes of :func:`stage_scope`'s linked files (no lock needed) and the scope's
    documents: its ``memory`` ``*.md`` files, each revision the SHA-256 of its bytes (as
    :func:`hub.store.revision_of`)."""
    prefix = f"memory/{staged.relpath}/"
    for name, entry in staged.files.items():
        if not entry:
            digest = hashlib.sha256()
            size = 0
            with open(staging / name, "rb") as f:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
                    size += len(chunk)
            entry.update(sha256=digest.hexdigest(), bytes=size)
        if name.startswith(prefix) and name.endswith(".md"):
            staged.documents[name[len(prefix):]] = entry["sha256"]
    return staged


def stage_home_files(home: Path, staging: Path) -> dict[str, dict[str, Any]]:
    """Copy the registry and ``config.toml`` (those that exist) into ``staging``; returns their manifest entries.

    Raises ``bad_request`` (nothing kept of it) when the registry holds something shaped like a raw token:
    it must hold only hashes (DESIGN.md §7), and a backup must not carry a credential.
    """
    files: dict[str, dict[str, Any]] = {}
    for name in HOME_FILES:
        source = home / name
        if not source.is_file() or source.is_symlink():
            continue
        digest, size = _copy(source, staging / name)
        if name == REGISTRY_NAME and RAW_TOKEN.search((staging / name).read_bytes()):
            (staging / name).unlink()
            raise HubError(ErrorCode.BAD_REQUEST, f"{source} holds something shaped like a raw token (amux_<id>_"
                           "<secret>); the registry keeps only token hashes. Nothing was backed up: revoke that "
                           "token and remove the text by hand", {"file": str(source)})
        files[name] = {"sha256": digest, "bytes": size}
    return files


def write_manifest(staging: Path, scopes: list[StagedScope], home_files: dict[str, dict[str, Any]],
                   version: str) -> dict[str, Any]:
    """Write ``staging/manifest.json`` and return it: ``{format, format_version, created, hub_version, scopes:
    {relpath: {documents: {path: revision}}}, files: {archive path: {sha256, bytes}}}``."""
    files = dict(home_files)
    for s in scopes:
        files.update(s.files)
    manifest = {"format": FORMAT, "format_version": BACKUP_FORMAT_VERSION,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "hub_version": version,
                "scopes": {s.relpath: {"documents": s.documents} for s in scopes},
                "files": dict(sorted(files.items()))}
    (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
    os.chmod(staging / MANIFEST_NAME, 0o600)
    return manifest
