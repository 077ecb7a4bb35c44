"""The online backup's Hub side: each scope copied to a staging folder under its lock (DESIGN.md §15.8).

``amux hub backup FILE`` calls the operator's method ``backup_stage``; the Hub
(:meth:`hub.methods.memory.MemoryMethods.backup_stage`) makes a fresh staging folder
``<AMUX_HOME>/backup-staging/<id>/`` (``0700``) and, scope after scope, takes
the scope's lock (``MemoryMethods.locked``) and copies, byte for byte, what
the scope holds: its documents (``memory/<relpath>/``), its history segment
(``history/<relpath>/``, cut at the end of its last record) and its review
queue (``review/<relpath>/``).  A writer of that scope waits for that one
scope's copy; writers of other scopes do not wait at all.  Then the registry
(``principals.toml``: token hashes only, checked here: a file holding
something shaped like a raw token is refused) and ``config.toml`` are
copied, and ``manifest.json`` lists every staged file (``sha256``,
``bytes``) and every document's revision.  The CLI packs the folder into a
gzip tar outside any lock and removes it (:mod:`tools.cli.backup`).

Under the lock only directory entries are made: documents and proposals
(files the Hub only replaces by a rename) are hard-linked into the staging
folder, the appended files (history segment, decisions log) are hard-linked
aside with their length then (the segment's: where its last record ends).
After the lock is released their prefixes are copied and every digest is
computed: an append never changes earlier bytes (``ScopeHistory.record``
writes at ``end``; ``decisions.log`` is ``O_APPEND``) and compaction writes a
new file renamed over the segment, so the linked inode still holds what the
scope held.  Only a purge (zeros over bodies) and the cut of a torn tail at
load change a segment in place; they count in ``ScopeHistory.rewrites``, and
when it moved during the copy the scope is staged again with the prefixes
copied under the lock (:func:`stage_scope` ``copy_appended``).

Measured (2 cores shared with other test runs, load average 7-9): staging a
1,000-document scope (2.2 KB each, 3.7 MB of history) held its lock, over 10
interleaved runs of :func:`stage_scope`, median 128 ms (63-545) when the
segment was copied under the lock with ``os.walk``/``pathlib``, and 27 ms
(18-332) linking everything with ``os.scandir`` and strings; through a Hub
(``amux hub backup --json``, ``lock_max_ms``, 7 runs each) 249 ms (177-636)
before and 33 ms (17-148) after.  The hold is now about 20 µs a file (one
``link``), not a write per document: writers of a scope wait that long once.

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

from amux_memory.hub.storage.fsio import TEMP_SUFFIX
from amux_memory.hub.storage.history import SEGMENT_NAME
from amux_memory.protocol.config_file import CONFIG_NAME, REGISTRY_NAME
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
    """What :func:`stage_scope` staged of one scope: ``files`` archive path → ``{sha256, bytes}`` (empty until
    :func:`copy_prefixes` and :func:`finish_scope`), ``documents`` logical path → revision, and how long
    staging held the lock (ms)."""

    relpath: str
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    documents: dict[str, str] = field(default_factory=dict)
    held_ms: float = 0.0
    rewrites: int = 0
    """The scope's :attr:`hub.storage.history.ScopeHistory.rewrites` when it was staged."""
    appended: dict[str, int] = field(default_factory=dict)
    """Appended files linked under :data:`LINKS_NAME`, archive path → bytes to copy (-1: all)."""


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


def _regular_files(top: str, rel: str = "") -> Iterator[tuple[str, str]]:
    """``(relative path, absolute path)`` of every regular file under ``top`` (symlinks and temporaries
    skipped, never followed), sorted; ``os.scandir``'s entry types, no ``stat`` per file."""
    with os.scandir(top) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        name = f"{rel}{entry.name}"
        if entry.is_dir(follow_symlinks=False):
            yield from _regular_files(entry.path, f"{name}/")
        elif entry.is_file(follow_symlinks=False) and not entry.name.endswith(TEMP_SUFFIX):
            yield name, entry.path


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


LINKS_NAME: Final = ".links"
"""The folder in a staging folder holding links to appended files until their prefix is copied."""


def _link_or_copy(source: str, target: str, made: set[str] | None = None) -> bool:
    """Hard-link ``source`` at ``target`` (True), or copy it when the file system refuses a link (False).
    ``made`` remembers the folders already created (one ``mkdir`` per folder, not per file)."""
    parent = os.path.dirname(target)
    if made is None or parent not in made:
        os.makedirs(parent, mode=0o700, exist_ok=True)
        if made is not None:
            made.add(parent)
    try:
        os.link(source, target, follow_symlinks=False)
        return True
    except OSError:
        _copy(Path(source), Path(target))
        return False


def stage_scope(home: Path, relpath: str, staging: Path, history_end: int = -1, copy_appended: bool = False,
                rewrites: int = 0) -> StagedScope:
    """Stage one scope's files from ``home`` into ``staging`` (same layout); the caller holds the scope's lock.

    Every file is hard-linked, so the lock is held for a directory entry per file, not a copy.  Files the
    Hub only replaces by a rename (documents, proposals) are staged as that link: the linked inode keeps the
    bytes the scope held, whatever is renamed over the original later.  Files the Hub appends to (the
    history segment, the decisions log) are linked under :data:`LINKS_NAME` with their length now (the
    segment's: ``history_end``, where its last record ends when the Hub has it open; -1: its size), for
    :func:`copy_prefixes` to copy that prefix after the lock is released: appends never change earlier bytes
    and compaction writes a new file (renamed over the segment), so the linked inode's prefix stays what the
    scope held.  A purge or a torn tail cut changes them in place: ``rewrites``
    (:attr:`hub.storage.history.ScopeHistory.rewrites` now) lets the caller notice and stage the scope again with
    ``copy_appended``, which copies the appended files' prefixes under the lock instead.
    """
    started = time.perf_counter()
    staged = StagedScope(relpath, rewrites=rewrites)
    made: set[str] = set()
    for tree in SCOPE_TREES:
        top = home / tree / relpath
        if not top.is_dir() or top.is_symlink():
            continue
        for rel, path in _regular_files(str(top)):
            name = f"{tree}/{relpath}/{rel}"
            if tree == "history" or rel.endswith(".log"):
                length = history_end if rel == SEGMENT_NAME and history_end >= 0 else os.lstat(path).st_size
                if copy_appended:
                    digest, size = _copy(Path(path), staging / name, length)
                    staged.files[name] = {"sha256": digest, "bytes": size}
                    continue
                if not _link_or_copy(path, f"{staging}/{LINKS_NAME}/{name}", made):
                    length = -1  # a copy made now: all of it is the scope's
                staged.appended[name] = length
            else:
                _link_or_copy(path, f"{staging}/{name}", made)
            staged.files[name] = {}
    staged.held_ms = (time.perf_counter() - started) * 1000
    return staged


def copy_prefixes(staged: StagedScope, staging: Path) -> StagedScope:
    """Copy each appended file :func:`stage_scope` linked, up to the length it recorded, into its place in
    ``staging`` and remove the link (no lock needed); fills in those files' digests and sizes."""
    for name, length in staged.appended.items():
        link = staging / LINKS_NAME / name
        target = staging / name
        target.unlink(missing_ok=True)  # a second try after a rewrite
        digest, size = _copy(link, target, length)
        link.unlink()
        staged.files[name] = {"sha256": digest, "bytes": size}
    staged.appended.clear()
    shutil.rmtree(staging / LINKS_NAME, ignore_errors=True)
    return staged


def drop_scope(staged: StagedScope, staging: Path) -> None:
    """Remove what :func:`stage_scope` staged of one scope (before staging it again)."""
    for tree in SCOPE_TREES:
        shutil.rmtree(staging / tree / staged.relpath, ignore_errors=True)
    shutil.rmtree(staging / LINKS_NAME, ignore_errors=True)


def finish_scope(staged: StagedScope, staging: Path) -> StagedScope:
    """Fill in the digests and sizes of :func:`stage_scope`'s linked files (no lock needed) and the scope's
    documents: its ``memory`` ``*.md`` files, each revision the SHA-256 of its bytes (as
    :func:`hub.storage.store.revision_of`)."""
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
