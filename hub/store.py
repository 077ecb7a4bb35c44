"""The Markdown store: revisions, compare-and-swap writes, bounded reads, quotas.

Implements DESIGN.md §4 (storage, revisions, atomic durable writes) and §6
(bounds).  All methods are blocking and meant to run in a worker thread
(``trio.to_thread.run_sync``); callers serialise writes to one scope with that
scope's lock (check revision → check quota → write).

A scope is a directory (``<memory root>/global`` or ``<memory root>/users/<key>``);
documents are addressed by validated logical paths (:mod:`protocol.paths`).
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from dataclasses import dataclass
from typing import Any

from hub import fsio
from hub.rewrite_guard import check_rewrite, count_lines
from protocol.errors import ErrorCode, HubError
from protocol.limits import ENTRY_NAME, Limits
from protocol.messages import packed_size
from protocol.params import ABSENT

Result = dict[str, Any]

USAGE_TTL = 5.0
"""Seconds a counted scope usage is trusted (then recounted; the Hub's own writes keep it exact)."""


def revision_of(data: bytes) -> str:
    """The revision of a document: lowercase hex SHA-256 of all its bytes."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Usage:
    """A scope's current size: documents and total bytes of ``.md`` files."""

    documents: int
    bytes: int


def _quota(what: str, current: int, maximum: int, unit: str, **extra: Any) -> HubError:
    return HubError(
        ErrorCode.QUOTA_EXCEEDED,
        f"{what}: {current} {unit} exceeds the limit of {maximum} {unit}; nothing was written",
        {"current": current, "maximum": maximum, "unit": unit, "limit": what, **extra},
    )


def _conflict(path: str, expected: str, observed: str) -> HubError:
    return HubError(
        ErrorCode.CONFLICT,
        f"{path} changed: expected revision {expected[:12]}, found {observed[:12]}; "
        "read it again, merge, and retry with the new revision",
        {"path": path, "expected_revision": expected, "observed_revision": observed},
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
        # Scope usage, counted by a walk at most every USAGE_TTL seconds and kept exact
        # for the Hub's own writes in between (writes to a scope are serialised by its lock).
        self._usage: dict[str, tuple[Usage, float]] = {}

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
        segments = path.split("/")
        with fsio.open_parent(scope_dir, segments, path, create=False) as parent:
            if parent is None:
                return None
            fd = fsio.open_document(parent.fd, segments[-1], path)
            if fd is None:
                return None
            try:
                return fsio.read_all(fd)
            finally:
                os.close(fd)

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
        start = self._fragment_start(data, start_line, offset)
        end = self._line_end(data, end_line)
        return self._fragment(path, data, start, max(start, end))

    def _fragment_start(self, data: bytes, start_line: int, offset: int) -> int:
        if offset:
            if offset > len(data):
                raise HubError(ErrorCode.BAD_REQUEST, f"offset {offset} is past the end ({len(data)} bytes)")
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
        # Room for the content: budget minus the envelope, the str header and a
        # next_offset integer (9 bytes at most).
        budget = self.limits.response_max_bytes - self.limits.response_envelope_bytes - packed_size(result) - 5 - 9
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
        observed = revision_of(data)
        if expected_revision is not None and expected_revision != observed:
            raise _conflict(path, expected_revision, observed)
        if offset > len(data):
            raise HubError(ErrorCode.BAD_REQUEST, f"offset {offset} is past the end ({len(data)} bytes)")
        result: Result = {
            "path": path, "revision": observed, "content": b"", "truncated": False,
            "next_offset": None, "total_bytes": len(data),
        }
        budget = self.limits.response_max_bytes - self.limits.response_envelope_bytes - packed_size(result) - 5 - 9
        stop = min(len(data), offset + budget)
        result["content"] = data[offset:stop]
        if stop < len(data):
            result["truncated"] = True
            result["next_offset"] = stop
        return result

    # -- quotas --------------------------------------------------------------

    def _current_usage(self, scope_dir: str) -> Usage:
        """The scope's usage: recounted when the last count is older than :data:`USAGE_TTL`
        (so files edited by hand are seen within seconds), else kept up to date by writes."""
        cached = self._usage.get(scope_dir)
        now = time.monotonic()
        if cached is not None and now - cached[1] < USAGE_TTL:
            return cached[0]
        usage = self.usage(scope_dir)
        self._usage[scope_dir] = (usage, now)
        return usage

    def _account(self, scope_dir: str, documents: int, size: int) -> None:
        cached = self._usage.get(scope_dir)
        if cached is not None:
            usage, at = cached
            self._usage[scope_dir] = (Usage(usage.documents + documents, usage.bytes + size), at)

    def usage(self, scope_dir: str) -> Usage:
        """Count regular ``.md`` files and their bytes under the scope (symlinks not followed)."""
        documents = total = 0
        stack = [scope_dir]
        while stack:
            try:
                it = os.scandir(stack.pop())
            except FileNotFoundError:
                continue
            with it:
                for entry in it:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # removed or renamed since the directory was read
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(entry.path)
                    elif stat.S_ISREG(st.st_mode) and entry.name.endswith(".md"):
                        documents += 1
                        total += st.st_size
        return Usage(documents, total)

    def _check_quota(self, scope_dir: str, path: str, content: bytes, old: bytes | None) -> None:
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
        usage = self._current_usage(scope_dir)
        if old is None and usage.documents + 1 > lim.scope_max_documents:
            raise _quota("scope documents", usage.documents + 1, lim.scope_max_documents, "documents")
        new_total = usage.bytes - (len(old) if old is not None else 0) + len(content)
        if new_total > lim.scope_max_bytes and len(content) > (len(old) if old is not None else 0):
            raise _quota("scope size", new_total, lim.scope_max_bytes, "bytes")

    # -- writes --------------------------------------------------------------

    def upsert(self, scope_dir: str, path: str, content: bytes, expected_revision: str,
               allow_shrink: bool = False) -> Result:
        """Compare-and-swap replace (or create, with ``absent``) a whole document.

        Returns ``{path, revision, created, bytes}`` only after the data and the
        directory entry are on disk.  Raises ``conflict`` (with
        ``observed_revision``) on a revision mismatch and ``quota_exceeded``
        (with ``current``/``maximum``) over a limit, and ``destructive_rewrite``
        when a replacement looks like a lossy rewrite (:mod:`hub.rewrite_guard`)
        unless ``allow_shrink``; in every case nothing is written.
        """
        old = self.read(scope_dir, path)
        observed = ABSENT if old is None else revision_of(old)
        if observed != expected_revision:
            raise _conflict(path, expected_revision, observed)
        self._check_quota(scope_dir, path, content, old)
        if old is not None and not allow_shrink:
            check_rewrite(path, old, content)
        segments = path.split("/")
        with fsio.open_parent(scope_dir, segments, path, create=True, dir_mode=self.dir_mode) as parent:
            assert parent is not None
            try:
                fsio.atomic_write(parent, segments[-1], content, self.file_mode)
            except BaseException:
                fsio.remove_created(parent)
                raise
        self._account(scope_dir, 1 if old is None else 0, len(content) - (0 if old is None else len(old)))
        return {"path": path, "revision": revision_of(content), "created": old is None, "bytes": len(content)}

    def forget(self, scope_dir: str, path: str, expected_revision: str) -> Result:
        """Compare-and-swap delete one document, then fsync its directory.

        Returns ``{path, deleted, already_absent, revision}``; a missing
        document is success with ``already_absent: True``.  Raises ``conflict``
        when the document exists with another revision.
        """
        segments = path.split("/")
        with fsio.open_parent(scope_dir, segments, path, create=False) as parent:
            fd = None if parent is None else fsio.open_document(parent.fd, segments[-1], path)
            if parent is None or fd is None:
                return {"path": path, "deleted": False, "already_absent": True, "revision": ABSENT}
            try:
                data = fsio.read_all(fd)
            finally:
                os.close(fd)
            observed = revision_of(data)
            if observed != expected_revision:
                raise _conflict(path, expected_revision, observed)
            fsio.unlink_durably(parent.fd, segments[-1])
        self._account(scope_dir, -1, -len(data))
        return {"path": path, "deleted": True, "already_absent": False, "revision": ABSENT}
