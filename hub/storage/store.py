"""The Markdown store: revisions, compare-and-swap writes, bounded reads, quotas.

Implements DESIGN.md §4 (storage, revisions, atomic durable writes; §4.7
quotas, recounted after hand edits; §4.8 storage faults) and §6 (bounds).
All methods are blocking and meant to run in a worker thread
(``trio.to_thread.run_sync``); callers serialise writes to one scope with that
scope's lock (check revision → check quota → write).

A scope is a directory (``<memory root>/global`` or ``<memory root>/users/<key>``);
documents are addressed by validated logical paths (:mod:`protocol.paths`).

The quota count (DESIGN.md §4.7): a scope's usage is counted by a walk of its
``.md`` files and kept exact by the Hub's own writes, whose folder mtimes it
notes.  So that no create is acknowledged over a quota on a stale count, it is
redone before a write when a walked folder has a new ``mtime_ns`` (a hand add,
remove or rename; one ``stat`` per folder, for at most
:data:`COUNT_MAX_CHECKED_FOLDERS` (1,024) folders), when count plus write is
within 1/:data:`NEAR_LIMIT_FRACTION` (1/16) of a quota (where an in-place hand
edit could matter), when the last count was incomplete (an unreadable folder,
or cut at :data:`COUNT_MAX_ENTRIES` (65,536) entries), and after
:data:`USAGE_TTL` (5 s).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from amux_memory.hub.storage import fsio
from amux_memory.hub.storage.rewrite_guard import check_rewrite, count_lines
from amux_memory.hub.storage.walk import count_documents
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import ENTRY_NAME, Limits
from amux_memory.protocol.messages import MSGPACK_INT_MAX, MSGPACK_STR_HEADER_MAX, response_room
from amux_memory.protocol.params import ABSENT, revision_matches
from amux_memory.protocol.paths import is_reserved

Result = dict[str, Any]

BeforeWrite = Callable[[bytes | None, int], None]
"""Called with the document's current bytes (None: absent) and mtime (epoch ns) once a write is sure to go ahead."""

USAGE_TTL = 5.0
"""Seconds a counted scope usage is trusted at most (then recounted; the Hub's own writes keep it exact)."""

NEAR_LIMIT_FRACTION = 16
"""A count within 1/16 of a scope quota (64 of 1,024 documents, 1 MiB of 16 MiB) is recounted before every write."""

COUNT_MAX_ENTRIES = 65_536
"""The quota count walks at most this many directory entries; past it the count is partial
(``Usage.complete`` false, said in the answer) and redone on the next write (DESIGN.md §4.7)."""

COUNT_MAX_CHECKED_FOLDERS = 1_024
"""At most this many folders' mtimes are checked before a write; a count that walked more is trusted
only for :data:`USAGE_TTL` and away from the limits (DESIGN.md §4.7)."""


def revision_of(data: bytes) -> str:
    """The revision of a document: lowercase hex SHA-256 of all its bytes."""
    return hashlib.sha256(data).hexdigest()


def refuse_reserved(path: str) -> None:
    """Raise ``invalid_path`` (``data.reason`` ``reserved``) when ``path``'s first segment starts with ``@``: such
    names are reserved for team mounts, so no scope holds a document under one (DESIGN.md §7.8).  Writes are
    refused; reading or forgetting one placed by hand still works, so it can be moved out
    (``amux doctor`` lists them)."""
    if is_reserved(path):
        raise HubError(ErrorCode.INVALID_PATH, f"invalid path {path[:120]!r}: a name starting with '@' is reserved "
                       "for team mounts (@NAME/); choose a name without '@' at its start. Nothing was written",
                       {"path": path[:120], "reason": "reserved"},
                       next_step="Names starting with '@' are reserved for team mounts: write under a name that does "
                       "not start with '@'. Nothing was written.")


@dataclass(frozen=True)
class Usage:
    """A scope's current size: documents and total bytes of ``.md`` files.

    ``unreadable`` names (logical, ``notes/private/``; at most
    :data:`hub.storage.faults.MAX_REPORTED_PATHS`) the folders the count could not
    read: their documents are not counted (DESIGN.md §4.7).
    """

    documents: int
    bytes: int
    unreadable: tuple[str, ...] = field(default=(), compare=False)
    complete: bool = field(default=True, compare=False)
    """False when the walk stopped at :data:`COUNT_MAX_ENTRIES` entries: what it saw is counted."""


@dataclass
class _Count:
    """A usage count and the ``mtime_ns`` of every folder it walked (absolute path → mtime)."""

    usage: Usage
    at: float
    folders: dict[str, int]


def _quota(what: str, current: int, maximum: int, unit: str, **extra: Any) -> HubError:
    return HubError(
        ErrorCode.QUOTA_EXCEEDED,
        f"{what}: {current} {unit} exceeds the limit of {maximum} {unit}; nothing was written",
        {"current": current, "maximum": maximum, "unit": unit, "limit": what, **extra},
    )


def _conflict(path: str, expected: str, observed: str) -> HubError:
    """The ``conflict`` of a compare-and-swap on ``path``; data ``{path, expected_revision, observed_revision}``.

    The message says "already exists" when the caller expected ``absent``
    (it meant to create), else "changed"; the data is the same either way.
    """
    data = {"path": path, "expected_revision": expected, "observed_revision": observed}
    if expected == ABSENT:
        return HubError(
            ErrorCode.CONFLICT,
            f"{path} already exists (revision {observed[:12]}): read it first with "
            f"`amux memory show {shlex.quote(path)}`, then retry with its revision; nothing was written",
            data,
        )
    return HubError(
        ErrorCode.CONFLICT,
        f"{path} changed: expected revision {expected[:12]}, found {observed[:12]}; "
        "read it again, merge, and retry with the new revision",
        data,
    )


def _utf8_boundary(data: bytes, pos: int) -> int:
    """Largest position ≤ pos that does not split a well-formed UTF-8 sequence.

    Stray continuation bytes of a hand-placed non-UTF-8 file are not part of any
    character, so a position next to them is a boundary (reads always progress).
    """
    for back in range(1, 4):
        i = pos - back
        if i < 0 or pos >= len(data):
            break
        lead = data[i]
        if (lead & 0xC0) == 0x80:
            continue
        need = 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4 if lead >> 3 == 0b11110 else 1
        if need > back:
            try:
                data[i : i + need].decode("utf-8")
            except UnicodeDecodeError:
                break
            return i
        break
    return pos


def _read_in(dir_fd: int, name: str, logical: str) -> tuple[bytes | None, int]:
    """``(bytes, mtime_ns)`` of document ``name`` in the open folder ``dir_fd`` (``(None, 0)``: absent).
    Errors as :meth:`Store.read`."""
    opened = fsio.open_document(dir_fd, name, logical)
    if opened is None:
        return None, 0
    fd, st = opened
    try:
        return fsio.read_all(fd, logical, st.st_size), st.st_mtime_ns
    finally:
        os.close(fd)


class Store:
    """Documents under one memory root, addressed by (scope directory, logical path).

    ``limits`` supplies every quota; responses are kept within
    ``limits.response_max_bytes`` serialized (msgpack) bytes.  New files get
    ``file_mode`` and new directories ``dir_mode`` (0600/0700: the Hub's
    memory is private to its user; a project library shared through a
    repository passes 0666/0777 and lets the umask decide).
    """

    def __init__(self, limits: Limits, *, file_mode: int = 0o600, dir_mode: int = 0o700) -> None:
        self.limits = limits
        self.file_mode = file_mode
        self.dir_mode = dir_mode
        # Scope usage, counted by a walk and kept exact for the Hub's own writes in between
        # (writes to a scope are serialised by its lock); recounted per _stale().
        self._counts: dict[str, _Count] = {}

    # -- reads ---------------------------------------------------------------

    def read(self, scope_dir: str, path: str) -> bytes | None:
        """The whole document at logical ``path`` in ``scope_dir``, as raw bytes; None if it does not exist.

        ``path`` must already be a validated logical path
        (:func:`protocol.paths.normalize_path`).  No size bound is applied
        here: the quota keeps a document at most ``document_max_bytes``.  A
        missing directory on the way is "does not exist", not an error.
        Blocking (run it in a worker thread).  Raises ``invalid_path`` when a
        segment is a symlink, a directory where a file belongs or not a
        regular file (nothing is followed), and :class:`OSError` for other
        file-system failures (permission denied, I/O errors).  DESIGN.md §4.
        """
        return self.read_stat(scope_dir, path)[0]

    def read_stat(self, scope_dir: str, path: str) -> tuple[bytes | None, int]:
        """:meth:`read` plus the file's mtime in epoch nanoseconds (0 when it does not exist); same errors."""
        segments = path.split("/")
        with fsio.open_parent(scope_dir, segments, path, create=False) as parent:
            return (None, 0) if parent is None else _read_in(parent.fd, segments[-1], path)

    def get(self, scope_dir: str, path: str, start_line: int = 0, end_line: int = 0, offset: int = 0) -> Result:
        """A bounded fragment of a document, with whole-file metadata.

        Lines are 1-based and inclusive; 0 means "from the start" / "to the end".
        ``offset`` (bytes) continues a truncated fragment from its ``next_offset``.
        Returns ``{path, exists, revision, content, truncated, next_offset,
        total_bytes, total_lines}``; a missing document is ``exists: False``,
        ``revision: "absent"``.  Raises ``bad_request`` for an offset past the
        end or inside a UTF-8 character.
        """
        data = self.read(scope_dir, path)
        if data is None:
            return {
                "path": path, "exists": False, "revision": ABSENT, "content": "",
                "truncated": False, "next_offset": None, "total_bytes": 0, "total_lines": 0,
            }
        return self.fragment_of(path, data, start_line, end_line, offset)

    def fragment_of(self, path: str, data: bytes, start_line: int = 0, end_line: int = 0, offset: int = 0) -> Result:
        """:meth:`get`'s answer for the document bytes ``data`` (a stored version, DESIGN.md §15); same errors."""
        start = self._fragment_start(data, start_line, offset)
        end = self._line_end(data, end_line)
        return self._fragment(path, data, start, max(start, end))

    def _fragment_start(self, data: bytes, start_line: int, offset: int) -> int:
        if offset:
            if offset > len(data):
                raise HubError(ErrorCode.BAD_REQUEST, f"offset {offset} is past the end of a {len(data)}-byte document")
            if _utf8_boundary(data, offset) != offset:
                raise HubError(ErrorCode.BAD_REQUEST, "offset is inside a UTF-8 character; use next_offset as given")
            return offset
        if start_line <= 1:
            return 0
        return self._line_end(data, start_line - 1)

    @staticmethod
    def _line_end(data: bytes, line: int) -> int:
        """Byte position just after line ``line`` (its newline included); 0 = end of file."""
        if line <= 0:
            return len(data)
        pos = -1
        for _ in range(line):
            pos = data.find(b"\n", pos + 1)
            if pos < 0:
                return len(data)
        return pos + 1

    def _fragment(self, path: str, data: bytes, start: int, end: int) -> Result:
        result: Result = {
            "path": path, "exists": True, "revision": revision_of(data), "content": "",
            "truncated": False, "next_offset": None, "total_bytes": len(data),
            "total_lines": count_lines(data),
        }
        # Room for the content: the budget less the answer so far, the content's str header and a next_offset.
        budget = response_room(self.limits, result, MSGPACK_STR_HEADER_MAX + MSGPACK_INT_MAX)
        stop = end
        if end - start > budget:
            stop = _utf8_boundary(data, start + budget)
            newline = data.rfind(b"\n", start, stop)
            if newline >= start + budget // 2:
                stop = newline + 1
        content = data[start:stop].decode("utf-8", "replace")
        size = len(content.encode("utf-8"))
        while size > budget:
            # Invalid bytes of a hand-placed file grow to U+FFFD (3 bytes): read less.
            stop = _utf8_boundary(data, start + (stop - start) * budget // size)
            content = data[start:stop].decode("utf-8", "replace")
            size = len(content.encode("utf-8"))
        result["content"] = content
        if stop < end:
            result["truncated"] = True
            result["next_offset"] = stop
        return result

    def export_page(self, scope_dir: str, path: str, offset: int, expected_revision: str | None) -> Result:
        """One page of a whole-document export: the file's raw bytes from ``offset``.

        Returns ``{path, revision, content (bytes), truncated, next_offset,
        total_bytes}``; pages are cut by bytes (not characters), so a
        hand-placed file that is not valid UTF-8 still exports exactly.
        Raises ``not_found`` for a missing document, ``conflict`` when
        ``expected_revision`` (the first page's revision) no longer matches,
        and ``bad_request`` for an offset past the end.
        """
        data = self.read(scope_dir, path)
        if data is None:
            raise HubError(ErrorCode.NOT_FOUND, f"{path} does not exist", {"path": path})
        return self.export_of(path, data, offset, expected_revision)

    def export_of(self, path: str, data: bytes, offset: int, expected_revision: str | None) -> Result:
        """:meth:`export_page`'s answer for the document bytes ``data`` (a stored version, DESIGN.md §15)."""
        observed = revision_of(data)
        if expected_revision is not None and not revision_matches(expected_revision, observed):
            raise _conflict(path, expected_revision, observed)
        if offset > len(data):
            raise HubError(ErrorCode.BAD_REQUEST, f"offset {offset} is past the end of a {len(data)}-byte document")
        result: Result = {
            "path": path, "revision": observed, "content": b"", "truncated": False,
            "next_offset": None, "total_bytes": len(data),
        }
        budget = response_room(self.limits, result, MSGPACK_STR_HEADER_MAX + MSGPACK_INT_MAX)  # bin header, next_offset
        stop = min(len(data), offset + budget)
        result["content"] = data[offset:stop]
        if stop < len(data):
            result["truncated"] = True
            result["next_offset"] = stop
        return result

    # -- quotas --------------------------------------------------------------

    def _current_usage(self, scope_dir: str, adding_bytes: int = 0, creating: bool = True) -> Usage:
        """The scope's usage, recounted when the last count may be stale (DESIGN.md §4.7).

        A count is used as is only while it is younger than :data:`USAGE_TTL`,
        it was complete and could read every folder, no folder it walked has a
        new ``mtime_ns`` (a file added, removed or renamed by hand changes its
        folder's mtime; one ``stat`` per folder, for at most
        :data:`COUNT_MAX_CHECKED_FOLDERS` folders) and neither quota is within
        1/:data:`NEAR_LIMIT_FRACTION` of its limit after this write
        (``creating`` adds one document, ``adding_bytes`` the bytes).
        Otherwise the scope is walked again, so a file added by hand never lets
        a create through over the quota; a file grown in place by hand is seen
        within :data:`USAGE_TTL` or once the count is near the limit.
        """
        cached = self._counts.get(scope_dir)
        now = time.monotonic()
        if cached is not None and not self._stale(cached, now, adding_bytes, creating):
            return cached.usage
        usage, folders = self._count(scope_dir)
        self._counts[scope_dir] = _Count(usage, now, folders)
        return usage

    def _stale(self, count: _Count, now: float, adding_bytes: int, creating: bool) -> bool:
        lim = self.limits
        usage = count.usage
        if now - count.at >= USAGE_TTL or usage.unreadable or not usage.complete:
            return True  # an unreadable folder made readable again changes only its ctime: count again
        if creating and usage.documents + 1 > lim.scope_max_documents - lim.scope_max_documents // NEAR_LIMIT_FRACTION:
            return True
        if usage.bytes + adding_bytes > lim.scope_max_bytes - lim.scope_max_bytes // NEAR_LIMIT_FRACTION:
            return True
        if len(count.folders) > COUNT_MAX_CHECKED_FOLDERS:
            return False  # a hostile tree: trusted for USAGE_TTL, away from the limits (DESIGN.md §4.7)
        for absdir, mtime_ns in count.folders.items():
            try:
                if os.stat(absdir, follow_symlinks=False).st_mtime_ns != mtime_ns:
                    return True
            except OSError:
                return True
        return False

    def _account(self, scope_dir: str, segments: list[str], documents: int, size: int) -> None:
        """Apply one of the Hub's own writes to the cached count and note the new mtimes of its folders."""
        cached = self._counts.get(scope_dir)
        if cached is None:
            return
        usage = cached.usage
        cached.usage = Usage(usage.documents + documents, usage.bytes + size, usage.unreadable, usage.complete)
        absdir = scope_dir
        for name in ["", *segments[:-1]]:
            absdir = absdir + "/" + name if name else absdir
            try:
                cached.folders[absdir] = os.stat(absdir, follow_symlinks=False).st_mtime_ns
            except OSError:
                cached.folders.pop(absdir, None)

    def usage(self, scope_dir: str) -> Usage:
        """Count regular ``.md`` files and their bytes under the scope (symlinks not followed).

        Folders that cannot be read (``EACCES``, ``EIO``) are left out and
        named in :attr:`Usage.unreadable`; the count never raises for them.
        At most :data:`COUNT_MAX_ENTRIES` directory entries are walked
        (:attr:`Usage.complete` says whether the walk saw everything).
        """
        return self._count(scope_dir)[0]

    def _count(self, scope_dir: str) -> tuple[Usage, dict[str, int]]:
        """The scope's usage and the ``mtime_ns`` of every folder walked (:func:`hub.storage.walk.count_documents`)."""
        counted = count_documents(scope_dir, COUNT_MAX_ENTRIES)
        usage = Usage(counted.documents, counted.bytes, tuple(counted.unreadable), complete=counted.complete)
        return usage, counted.folders

    def _check_quota(self, scope_dir: str, path: str, content: bytes, old: bytes | None) -> Usage:
        lim = self.limits
        if path == ENTRY_NAME:
            if len(content) > lim.entry_max_bytes:
                raise _quota(
                    f"{ENTRY_NAME} size", len(content), lim.entry_max_bytes, "bytes",
                    hint="keep the entry small; move details into a topic document",
                )
            lines = count_lines(content)
            if lines > lim.entry_max_lines:
                raise _quota(
                    f"{ENTRY_NAME} lines", lines, lim.entry_max_lines, "lines",
                    hint="keep the entry small; move details into a topic document",
                )
        elif len(content) > lim.document_max_bytes:
            raise _quota("document size", len(content), lim.document_max_bytes, "bytes", path=path)
        old_size = len(old) if old is not None else 0
        usage = self._current_usage(scope_dir, len(content) - old_size, creating=old is None)
        extra: dict[str, Any] = {"unreadable": list(usage.unreadable)} if usage.unreadable else {}
        if not usage.complete:
            extra["count_incomplete"] = True
        if old is None and usage.documents + 1 > lim.scope_max_documents:
            raise _quota("scope documents", usage.documents + 1, lim.scope_max_documents, "documents", **extra)
        new_total = usage.bytes - old_size + len(content)
        if new_total > lim.scope_max_bytes and len(content) > old_size:
            raise _quota("scope size", new_total, lim.scope_max_bytes, "bytes", **extra)
        return usage

    # -- writes --------------------------------------------------------------

    def check_upsert(self, scope_dir: str, path: str, content: bytes, expected_revision: str,
                     allow_shrink: bool = False) -> bytes | None:
        """Every check :meth:`upsert` makes (compare-and-swap, quotas, the rewrite guard), writing nothing.

        Returns the current bytes (None: absent).  Raises what :meth:`upsert` would: ``conflict``,
        ``quota_exceeded``, ``destructive_rewrite`` (unless ``allow_shrink``), ``invalid_path`` for a reserved
        path (:func:`refuse_reserved`).  For a proposal
        (DESIGN.md §21), whose checks run when it is made.
        """
        refuse_reserved(path)
        old = self.read(scope_dir, path)
        observed = ABSENT if old is None else revision_of(old)
        if not revision_matches(expected_revision, observed):
            raise _conflict(path, expected_revision, observed)
        self._check_quota(scope_dir, path, content, old)
        if old is not None and not allow_shrink:
            check_rewrite(path, old, content)
        return old

    def upsert(self, scope_dir: str, path: str, content: bytes, expected_revision: str,
               allow_shrink: bool = False, before_write: BeforeWrite | None = None) -> Result:
        """Compare-and-swap replace (or create, with ``absent``) a whole document.

        ``expected_revision`` is ``absent``, a full revision or a prefix of at
        least 12 hex digits (:func:`protocol.params.revision_matches`).

        Returns ``{path, revision, created, bytes}`` only after the data and the
        directory entry are on disk.  Raises ``conflict`` (with
        ``observed_revision``) on a revision mismatch and ``quota_exceeded``
        (with ``current``/``maximum``) over a limit, ``invalid_path`` for a path whose first segment starts
        with ``@`` (:func:`refuse_reserved`), and ``destructive_rewrite``
        when a replacement looks like a lossy rewrite (:mod:`hub.storage.rewrite_guard`)
        unless ``allow_shrink``; in every case nothing is written.  A file-system
        failure is ``storage_full`` / ``storage_read_only`` / ``storage_error``
        or ``permission_denied`` with ``data.errno`` and ``data.operation``
        (DESIGN.md §4.8); the old document is then untouched unless
        ``data.uncertain``.  When the quota count could not read some folders
        the result also has ``unreadable`` (their logical paths).
        ``before_write(old, mtime_ns)`` runs once every check passed, just
        before the write (the history's hand-edit check, DESIGN.md §15); if
        it raises, nothing is written.
        """
        refuse_reserved(path)
        segments = path.split("/")
        # One walk to the folder serves the read and, when it exists, the write (no folder is created
        # before every check passed).
        with fsio.open_parent(scope_dir, segments, path, create=False) as parent:
            old, mtime_ns = (None, 0) if parent is None else _read_in(parent.fd, segments[-1], path)
            observed = ABSENT if old is None else revision_of(old)
            if not revision_matches(expected_revision, observed):
                raise _conflict(path, expected_revision, observed)
            usage = self._check_quota(scope_dir, path, content, old)
            if old is not None and not allow_shrink:
                check_rewrite(path, old, content)
            if before_write is not None:
                before_write(old, mtime_ns)
            if parent is not None:
                fsio.atomic_write(parent, segments[-1], content, self.file_mode, path)
        if parent is None:
            with fsio.open_parent(scope_dir, segments, path, create=True, dir_mode=self.dir_mode) as made:
                assert made is not None
                try:
                    fsio.atomic_write(made, segments[-1], content, self.file_mode, path)
                except BaseException:
                    fsio.remove_created(made)
                    raise
        self._account(scope_dir, segments, 1 if old is None else 0, len(content) - (0 if old is None else len(old)))
        result: Result = {"path": path, "revision": revision_of(content), "created": old is None,
                          "bytes": len(content)}
        if usage.unreadable:
            result["unreadable"] = list(usage.unreadable)  # folders the quota count could not read
        if not usage.complete:
            result["count_incomplete"] = True  # the quota count stopped at COUNT_MAX_ENTRIES entries
        return result

    def forget(self, scope_dir: str, path: str, expected_revision: str,
               before_write: BeforeWrite | None = None) -> Result:
        """Compare-and-swap delete one document, then fsync its directory.

        Returns ``{path, deleted, already_absent, revision}``; a missing
        document is success with ``already_absent: True``.  Raises ``conflict``
        when the document exists with another revision.  ``before_write(old,
        mtime_ns)`` runs just before the unlink (see :meth:`upsert`).
        """
        segments = path.split("/")
        with fsio.open_parent(scope_dir, segments, path, create=False) as parent:
            data, mtime_ns = (None, 0) if parent is None else _read_in(parent.fd, segments[-1], path)
            if parent is None or data is None:
                return {"path": path, "deleted": False, "already_absent": True, "revision": ABSENT}
            observed = revision_of(data)
            if not revision_matches(expected_revision, observed):
                raise _conflict(path, expected_revision, observed)
            if before_write is not None:
                before_write(data, mtime_ns)
            fsio.unlink_durably(parent.fd, segments[-1], path)
        self._account(scope_dir, segments, -1, -len(data))
        return {"path": path, "deleted": True, "already_absent": False, "revision": ABSENT}
