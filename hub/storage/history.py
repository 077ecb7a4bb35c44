"""Memory history: one append-only segment file per scope holding every recorded version (DESIGN.md §15).

Layout: ``<AMUX_HOME>/history/<scope relpath>/versions.log`` (``0700``
folders, ``0600`` file), outside the memory root, so search, list and get
never see it.  The file is a sequence of records, each

``#amux-history 1 {JSON header}\\n<body bytes>\\n``

where the header holds ``seq``, ``path``, ``revision``, ``time``, ``action``,
``actor``, ``bytes``, ``lines``, ``added``, ``removed`` (``restored_from`` for
a restore), ``body`` (the stored body length: the version's bytes, 0 for a
tombstone) and, for a version whose bytes were removed, ``gone``
(``pruned`` or ``purged``, body 0), for a write a person let through the
credential check (``--allow-secret``, DESIGN.md §16), ``secret_override``
(the names of the rules it tripped), for an approved proposal ``review``
(``{proposal, proposed_by}``, DESIGN.md §21), for a copy or move ``origin``
(where the text came from, DESIGN.md §7.8) and, when it differs from ``time`` (an
``external`` version's time is the file's mtime), ``recorded`` (when the Hub
recorded it; retention ages by it).  The bodies are the plain Markdown;
``grep -a '^#amux-history' versions.log`` is only a quick look (a body line
may start the same way): a reader follows the ``body`` lengths (DESIGN.md §15.2).

Writes append one record with one ``write`` and one ``fdatasync``.  The file is
extended :data:`PREALLOCATE_BYTES` at a time by writing zeros and fsyncing
them, so the ``fdatasync`` of an append into that space flushes data only (no
size or extent change for the journal to commit); the zeros after the last
record are free space, not records.  A torn
record at the end (a kill during the append) is cut off when the file is
next opened: its header does not parse, its body is short, its terminator is
missing, or (last record) its body's SHA-256 is not its revision.  Pruning
only forgets versions in memory; :meth:`ScopeHistory.compact_locked` rewrites the
file without their bodies (:func:`hub.storage.fsio.replace_file`: temp file, fsync, rename, directory fsync) once
the dead bytes outweigh the live ones.  A purge overwrites the bodies in
place with zeros, fdatasyncs, then compacts at once, so no file of the store
keeps the erased bytes.

Every method is blocking (call it from a worker thread) and thread-safe (a
lock per scope); the Hub also serialises a scope's writes with its scope
lock.  Errors: ``storage_*`` / ``permission_denied`` from :mod:`hub.storage.faults`.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import hashlib
import json
import logging
import mmap
import os
import shlex
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from amux_memory.hub.storage import fsio
from amux_memory.hub.storage.faults import step
from amux_memory.hub.storage.fsio import TEMP_SUFFIX
from amux_memory.hub.storage.rewrite_guard import count_lines
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.params import ABSENT, REVISION_DIGITS

log = logging.getLogger(__name__)

MAGIC = b"#amux-history 1 "
"""Every record starts with this, then a one-line JSON header."""

SEGMENT_NAME = "versions.log"
"""The one segment file in a scope's history folder."""

PREALLOCATE_BYTES = 64 << 10
"""The segment grows by this many zero bytes (fsynced) at a time; appends then overwrite them."""

COMPACT_MIN_DEAD_BYTES = 256 << 10
"""Compaction waits until at least this many bytes (and as many as are live) belong to pruned versions."""

GONE_HEADERS_PER_PATH = 50
"""At most this many headers of pruned or purged versions are kept per path (so ``get`` can say which)."""


ACTIONS = ("create", "update", "forget", "restore", "external")


def utc_time(epoch_ns: int | None = None) -> str:
    """An ISO 8601 UTC time with microseconds (``2026-12-01T08:40:37.123456Z``); now when ``epoch_ns`` is None."""
    ns = time_ns() if epoch_ns is None else epoch_ns
    when = datetime.datetime.fromtimestamp(ns / 1e9, datetime.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def time_ns() -> int:
    """Epoch nanoseconds (the wall clock)."""
    import time

    return time.time_ns()


def line_changes(old: bytes | None, new: bytes | None) -> tuple[int, int]:
    """``(added, removed)`` line counts from ``old`` to ``new`` (None = no document), as a unified diff counts them.

    Common leading and trailing lines are skipped before :mod:`difflib` runs,
    so a local edit of a 64 KiB document costs little.
    """
    a = (old or b"").splitlines()
    b = (new or b"").splitlines()
    lo = 0
    while lo < len(a) and lo < len(b) and a[lo] == b[lo]:
        lo += 1
    hi = 0
    while hi < len(a) - lo and hi < len(b) - lo and a[-1 - hi] == b[-1 - hi]:
        hi += 1
    a, b = a[lo : len(a) - hi], b[lo : len(b) - hi]
    if not a or not b:
        return len(b), len(a)
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return added, removed


@dataclass(frozen=True)
class Actor:
    """Who made a change: the principal, the client's name and binding and session from ``hello``."""

    principal: str | None
    client: str
    binding: str | None = None
    session: str | None = None
    agent: str | None = field(default=None, compare=False)
    """Why the caller is an agent (:func:`hub.access.identity.agent_reason`), None for a person; not recorded."""
    forced: bool = field(default=False, compare=False)
    """The caller belongs to a review-forced tidy run (:mod:`hub.access.tidy_runs`): its writes are proposals whatever
    the review rule (DESIGN.md §21); not recorded."""

    def as_dict(self) -> dict[str, Any]:
        """``{"principal", "client", "binding", "session"}``."""
        return {"principal": self.principal, "client": self.client, "binding": self.binding,
                "session": self.session}


EXTERNAL = Actor(None, "external")
"""The actor of a hand edit found on disk."""


@dataclass(frozen=True)
class Retention:
    """How much history a scope keeps (DESIGN.md §15): versions per document, days, bytes per scope."""

    max_versions: int = 50
    max_days: int = 180
    max_bytes: int = 64 << 20


ACTOR_MAPS_MAX = 4096
"""Distinct actor maps shared by the versions of the index (:func:`shared_actor`); past it the table starts
anew (a map already shared stays shared)."""

_ACTOR_MAPS: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}


def shared_actor(actor: dict[str, Any]) -> dict[str, Any]:
    """One dict object for every version with the same actor map (``principal``, ``client``, ``binding``,
    ``session``): the index holds thousands of versions by a few callers, and a map is ~400 bytes.  The map
    returned is shared: never change it.  A map with a value that is not a string or None is returned as is."""
    if not all(v is None or isinstance(v, str) for v in actor.values()):
        return actor
    key = tuple(sorted(actor.items()))
    shared = _ACTOR_MAPS.get(key)
    if shared is None:
        if len(_ACTOR_MAPS) >= ACTOR_MAPS_MAX:
            _ACTOR_MAPS.clear()
        shared = _ACTOR_MAPS[key] = {sys.intern(k): v if v is None else sys.intern(v) for k, v in actor.items()}
    return shared


@dataclass(slots=True)
class Version:
    """One recorded version (the in-memory index entry of a record; ``slots``, its ``path`` and ``action``
    interned and its ``actor`` map shared (:func:`shared_actor`): ~0.5-0.6 KiB each, :data:`INDEX_MAX_VERSIONS`).

    ``size`` is the version's bytes (0 for a tombstone), ``offset``/``body``
    where its bytes are in the segment, ``gone`` ``None``, ``"pruned"`` or
    ``"purged"``; ``record`` is the record's whole length in the file.
    ``time`` is the version's time (the file's mtime for ``external``);
    ``recorded`` is when the Hub recorded it (header ``recorded``, written
    only when it differs from ``time``): retention ages versions by it.
    """

    seq: int
    path: str
    revision: str
    time: str
    action: str
    actor: dict[str, Any]
    size: int
    lines: int
    added: int
    removed: int
    restored_from: str | None = None
    offset: int = 0
    body: int = 0
    record: int = 0
    gone: str | None = None
    recorded: str = ""
    secret_override: list[str] | None = None
    """The rules a person overrode with ``--allow-secret`` to write this version (DESIGN.md §16)."""
    review: dict[str, Any] | None = None
    """For an approved proposal (DESIGN.md §21): ``{proposal, proposed_by}`` (the proposer's actor map; the
    version's ``actor`` is the approver)."""
    origin: dict[str, Any] | None = None
    """For a copy or move between scopes (DESIGN.md §7.8): ``{from: {scope, document, revision}}`` on the
    written version (a scope copy's also ``author: {principal, client, time}``, who wrote the text copied),
    ``{to: {scope, document}}`` on the tombstone a move leaves at its source."""

    def __post_init__(self) -> None:
        if not self.recorded or self.recorded == self.time:
            self.recorded = self.time  # one string for both, as a version read back from the segment has
        self.path = sys.intern(self.path)
        self.action = sys.intern(self.action)
        self.actor = shared_actor(self.actor)

    def header(self) -> dict[str, Any]:
        """The record's JSON header."""
        h: dict[str, Any] = {"seq": self.seq, "path": self.path, "revision": self.revision, "time": self.time,
                             "action": self.action, "actor": self.actor, "bytes": self.size, "lines": self.lines,
                             "added": self.added, "removed": self.removed, "body": self.body}
        if self.recorded != self.time:
            h["recorded"] = self.recorded
        if self.restored_from is not None:
            h["restored_from"] = self.restored_from
        if self.gone is not None:
            h["gone"] = self.gone
        if self.secret_override is not None:
            h["secret_override"] = self.secret_override
        if self.review is not None:
            h["review"] = self.review
        if self.origin is not None:
            h["origin"] = self.origin
        return h

    def wire(self, with_path: bool = False) -> dict[str, Any]:
        """The entry of a ``history`` (or, ``with_path``, ``log``) answer."""
        w: dict[str, Any] = {"revision": self.revision, "time": self.time, "action": self.action,
                             "actor": self.actor, "bytes": self.size, "lines": self.lines, "added": self.added,
                             "removed": self.removed}
        if self.restored_from is not None:
            w["restored_from"] = self.restored_from
        if self.secret_override is not None:
            w["secret_override"] = self.secret_override
        if self.review is not None:
            w["review"] = self.review
        if self.origin is not None:
            w["origin"] = self.origin
        if with_path:
            w = {"path": self.path, **w}
        return w

    @property
    def tombstone(self) -> bool:
        """True for a forget (or a document found deleted by hand)."""
        return self.revision == ABSENT


def _encode(version: Version, body: bytes) -> bytes:
    header = json.dumps(version.header(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return MAGIC + header + b"\n" + body + b"\n"


def _version_from(h: dict[str, Any], offset: int, record: int) -> Version:
    return Version(
        seq=int(h["seq"]), path=str(h["path"]), revision=str(h["revision"]), time=str(h["time"]),
        action=str(h["action"]), actor=dict(h.get("actor") or EXTERNAL.as_dict()), size=int(h["bytes"]),
        lines=int(h.get("lines", 0)), added=int(h.get("added", 0)), removed=int(h.get("removed", 0)),
        restored_from=h.get("restored_from"), offset=offset, body=int(h["body"]), record=record,
        gone=h.get("gone"), recorded=str(h.get("recorded") or h["time"]),
        secret_override=[str(r) for r in h["secret_override"]] if isinstance(h.get("secret_override"), list) else None,
        review=h["review"] if isinstance(h.get("review"), dict) else None,
        origin=h["origin"] if isinstance(h.get("origin"), dict) else None,
    )


def _not_found(path: str, revision: str, reason: str) -> HubError:
    what = {"unknown": "was never recorded", "pruned": "was pruned by the history retention settings",
            "purged": "was purged"}[reason]
    shown = shlex.quote(path)
    step = (f"List the versions stored for {path} with 'amux memory history {shown}' and use one of their revisions."
            if reason == "unknown" else
            f"That version is gone for good; 'amux memory history {shown}' lists the versions still stored.")
    return HubError(ErrorCode.NOT_FOUND, f"version {revision[:12]} of {path} {what}",
                    {"path": path, "revision": revision, "reason": reason}, next_step=step)


@dataclass
class ScopeHistory:
    """The history of one scope: its folder, its segment file and an in-memory index built by one scan.

    The index is built on first use by reading the record headers
    (:meth:`load`); bodies are read only when asked for.  ``versions`` is in
    ``seq`` order (oldest first); ``by_path`` maps a path to its versions.
    """

    directory: str
    retention: Retention
    root: str = ""
    """The history root (``<AMUX_HOME>/history``): its folders down to ``directory`` are kept ``0700``."""
    versions: list[Version] = field(default_factory=list)
    by_path: dict[str, list[Version]] = field(default_factory=dict)
    live_bytes: int = 0
    dead_bytes: int = 0
    end: int = 0
    allocated: int = 0
    next_seq: int = 1
    fd: int = -1
    lock: threading.Lock = field(default_factory=threading.Lock)
    observed: dict[str, tuple[int, int]] = field(default_factory=dict)
    """path → ``(bytes, mtime_ns)`` of the file when :meth:`reconcile` last checked it (in memory only)."""
    rewrites: int = 0
    """How often bytes of the open segment before ``end`` changed in place or the file was cut (a purge's
    zeros, a torn tail cut at :meth:`load`); appends and compaction (a new file, renamed) leave it.  The online
    backup copies a segment's prefix after the scope lock is released and redoes it when this moved."""

    # -- opening -------------------------------------------------------------

    def _segment(self) -> str:
        return os.path.join(self.directory, SEGMENT_NAME)

    def load(self, create: bool = True) -> None:
        """Open (creating ``0700``/``0600``) and scan the segment; cut off a torn last record.  Idempotent.

        With ``create`` False (a read) a missing segment is not created: the
        index stays empty and the next call looks again.
        """
        if self.fd >= 0:
            return
        if not create and not os.path.exists(self._segment()):
            return
        with step("create history directory", ""):
            make_private_dirs(self.directory, self.root)
        for name in os.listdir(self.directory):
            if name.endswith(TEMP_SUFFIX):  # a compaction that did not finish
                os.unlink(os.path.join(self.directory, name))
        with step("open history", ""):
            fd = os.open(self._segment(), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            self._scan(fd)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def _scan(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        pos = 0
        last: Version | None = None
        found: list[Version] = []
        if size:
            with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mm:
                while pos < size:
                    if mm[pos : pos + len(MAGIC)] != MAGIC:
                        break
                    nl = mm.find(b"\n", pos)
                    if nl < 0:
                        break
                    try:
                        v = _version_from(json.loads(mm[pos + len(MAGIC) : nl]), nl + 1, 0)
                    except (ValueError, KeyError, TypeError):
                        break
                    stop = nl + 1 + v.body
                    if stop >= size or mm[stop : stop + 1] != b"\n":
                        break
                    v.record = stop + 1 - pos
                    found.append(v)
                    last = v
                    pos = stop + 1
                if last is not None and last.body and last.gone is None and not last.tombstone and \
                        hashlib.sha256(mm[last.offset : last.offset + last.body]).hexdigest() != last.revision:
                    found.pop()
                    pos -= last.record
        if pos < size:  # free space after the last record, or a torn record: cut, and zero-fill again later
            self.rewrites += 1
            with step("truncate history", ""):
                os.ftruncate(fd, pos)
                os.fsync(fd)
        self.end = self.allocated = pos
        for v in found:
            self._index(v)
        self.next_seq = (found[-1].seq + 1) if found else 1
        self._prune_all()

    def _index(self, v: Version) -> None:
        self.versions.append(v)
        self.by_path.setdefault(v.path, []).append(v)
        if v.gone is None:
            self.live_bytes += v.record
        else:
            self.dead_bytes += v.record

    def close(self) -> None:
        """Close the segment file (the index is dropped; the next use scans again)."""
        with self.lock:
            self.close_locked()

    def close_locked(self) -> None:
        """:meth:`close` for a caller holding :attr:`lock`."""
        if self.fd >= 0:
            os.close(self.fd)
        self.fd = -1
        self.versions, self.by_path, self.live_bytes, self.dead_bytes = [], {}, 0, 0

    # -- reading -------------------------------------------------------------

    def newest(self, path: str) -> Version | None:
        """The newest recorded version of ``path`` (pruned or purged ones included), or None."""
        with self.lock:
            self.load(create=False)
            versions = self.by_path.get(path)
            return versions[-1] if versions else None

    def resolve(self, path: str, revision: str) -> str:
        """The full revision a stored-version ``revision`` of ``path`` names: itself, or the one its prefix starts.

        A prefix (12-63 hex digits, :func:`protocol.params.parse_stored_revision`)
        must start exactly one recorded revision of ``path`` (pruned and
        purged versions count, so the answer can say why one is missing);
        none is ``not_found`` (``reason`` ``unknown``), several are
        ``bad_request`` naming them.  A full revision is returned as is.  Call
        with :attr:`lock` held and the index loaded.  DESIGN.md §15.
        """
        if len(revision) >= REVISION_DIGITS:
            return revision
        matches = list(dict.fromkeys(v.revision for v in self.by_path.get(path, [])
                                     if v.revision != ABSENT and v.revision.startswith(revision)))
        if not matches:
            raise _not_found(path, revision, "unknown")
        if len(matches) > 1:
            raise HubError(ErrorCode.BAD_REQUEST,
                           f"ambiguous: {len(matches)} versions of {path} start with {revision}; give more of the "
                           "revision (see `amux memory history`)",
                           {"field": "revision", "path": path, "revision": revision, "matches": matches[:10]})
        return matches[0]

    def find(self, path: str, revision: str) -> tuple[Version, bytes]:
        """The newest stored version of ``path`` with ``revision`` (full, or a prefix: :meth:`resolve`) and its bytes.

        Raises ``not_found`` with ``data.reason`` ``unknown``, ``pruned`` or
        ``purged``, and ``bad_request`` for a prefix several versions start.
        """
        with self.lock:
            self.load(create=False)
            revision = self.resolve(path, revision)
            reason = "unknown"
            for v in reversed(self.by_path.get(path, [])):
                if v.revision != revision:
                    continue
                if v.gone is None:
                    with step("read history", path):
                        data = os.pread(self.fd, v.body, v.offset)
                    return v, data
                if reason == "unknown":
                    reason = v.gone
            raise _not_found(path, revision, reason)

    def stored(self) -> Iterator[tuple[Version, bytes]]:
        """Every stored version that still has its bytes (not a tombstone, pruned or purged), oldest first,
        with those bytes (DESIGN.md §16's ``scan``).  Holds the lock while it iterates: consume it promptly."""
        with self.lock:
            self.load(create=False)
            for v in list(self.versions):
                if v.gone is None and not v.tombstone:
                    with step("read history", v.path):
                        data = os.pread(self.fd, v.body, v.offset)
                    yield v, data

    def page(self, path: str | None, cursor: int, limit: int, budget: int, *, path_prefix: str = "",
             since: str | None = None, seen: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
             ) -> tuple[list[dict[str, Any]], str | None]:
        """Wire entries newest first, ``seq`` below ``cursor`` (0 = from the newest), within ``budget`` bytes.

        ``path`` selects one document's history (entries without ``path``);
        None selects the whole scope (``log``: entries with ``path``, filtered
        by ``path_prefix`` and ``since``).  ``seen`` rewrites an entry's ``origin`` (what the caller may see of
        a copy's other side) before the entry is measured; None leaves it as recorded.  Returns
        ``(entries, next_cursor)``.
        """
        from amux_memory.protocol.messages import packed_size

        with self.lock:
            self.load(create=False)
            pool = self.by_path.get(path, []) if path is not None else self.versions
            start = _bisect_seq(pool, cursor) if cursor else len(pool)
            out: list[dict[str, Any]] = []
            used = 0
            last_seq = 0
            i = start - 1
            while i >= 0:
                v = pool[i]
                i -= 1
                if v.gone is not None:
                    continue
                if path is None:
                    if since is not None and v.time < since:
                        continue
                    if path_prefix and not v.path.startswith(path_prefix):
                        continue
                if len(out) == limit:
                    return out, str(last_seq)
                entry = v.wire(with_path=path is None)
                if seen is not None and "origin" in entry:
                    entry["origin"] = seen(entry["origin"])
                size = packed_size(entry)
                if used + size > budget:
                    return out, str(last_seq) if out else None
                out.append(entry)
                used += size
                last_seq = v.seq
            return out, None

    def stats(self) -> dict[str, int]:
        """``{"versions", "live_bytes", "dead_bytes", "record_bytes", "file_bytes"}`` of the segment (tests, bench)."""
        with self.lock:
            self.load(create=False)
            return {"versions": sum(1 for v in self.versions if v.gone is None), "live_bytes": self.live_bytes,
                    "dead_bytes": self.dead_bytes, "record_bytes": self.end, "file_bytes": self.allocated}

    # -- writing -------------------------------------------------------------

    def record(self, path: str, content: bytes | None, action: str, actor: Actor, *, previous: bytes | None,
               epoch_ns: int | None = None, restored_from: str | None = None, after_change: bool = False,
               recorded_ns: int | None = None, secret_override: list[str] | None = None,
               review: dict[str, Any] | None = None, origin: dict[str, Any] | None = None) -> Version:
        """Append one version durably (one write, one ``fdatasync``) and apply retention; returns it.

        ``content`` None is a tombstone.  ``previous`` is the version before
        (for ``added``/``removed``).  ``epoch_ns`` is the version's time (the
        file's mtime for ``external``; now otherwise), ``recorded_ns`` when it
        was recorded (now; retention ages by it); ``secret_override`` the
        rules a person overrode to write it (DESIGN.md §16); ``review`` the approved proposal
        (``{proposal, proposed_by}``, DESIGN.md §21); ``origin`` where a copy or move took the text from
        (:attr:`Version.origin`).  Raises ``storage_*``,
        with ``uncertain`` when ``after_change`` (the document was already
        written: it stands, and the next write records it as ``external``).
        """
        added, removed = line_changes(previous, content)
        body = content or b""
        size = len(body)  # one int object for both fields: the index holds thousands of versions
        now = time_ns()
        with self.lock:
            self.load()
            v = Version(self.next_seq, path, ABSENT if content is None else hashlib.sha256(body).hexdigest(),
                        utc_time(now if epoch_ns is None else epoch_ns), action, actor.as_dict(), size,
                        count_lines(body) if body else 0, added, removed, restored_from, body=size,
                        recorded=utc_time(now if recorded_ns is None else recorded_ns),
                        secret_override=secret_override, review=review, origin=origin)
            data = _encode(v, body)
            if self.end + len(data) > self.allocated:
                self._preallocate(len(data), path, after_change)
            with step("write history", path, uncertain=after_change):
                view = memoryview(data)
                pos = self.end
                while view:
                    n = os.pwrite(self.fd, view, pos)
                    view, pos = view[n:], pos + n
            with step("fdatasync history", path, uncertain=after_change):
                os.fdatasync(self.fd)
            v.offset = self.end + len(data) - len(body) - 1
            v.record = len(data)
            self.end += len(data)
            self.next_seq += 1
            self._index(v)
            self._prune_after(v)
            return v

    def _preallocate(self, need: int, path: str, uncertain: bool) -> None:
        """Write and fsync zeros after the last record, so the next appends change no metadata."""
        grow = max(PREALLOCATE_BYTES, need)
        with step("extend history", path, uncertain=uncertain):
            written = 0
            zeros = bytes(grow)
            while written < grow:
                written += os.pwrite(self.fd, zeros[written:], self.end + written)
            os.fsync(self.fd)
        self.allocated = self.end + grow

    def sync(self, path: str, current: bytes | None, mtime_ns: int, create: bool = True) -> Version | None:
        """Record the on-disk bytes of ``path`` as ``external`` when they are not its newest recorded version.

        ``current`` None means the file is absent (recorded as an ``external``
        tombstone if the newest version is not one; nothing if ``path`` was
        never recorded).  ``mtime_ns`` is the file's mtime (the version's time).
        Returns the new version or None.  ``create`` False (a read): a
        missing segment is created only if a version is recorded; True (a
        write, before the document changes) opens or creates it now.
        """
        if create:
            with self.lock:
                self.load()
        newest = self.newest(path)
        revision = ABSENT if current is None else hashlib.sha256(current).hexdigest()
        if newest is None and current is None:
            return None
        if newest is not None and newest.revision == revision:
            return None
        previous = None
        if newest is not None and newest.gone is None and not newest.tombstone:
            previous = self.find(path, newest.revision)[1]
        return self.record(path, current, "external", EXTERNAL, previous=previous,
                           epoch_ns=mtime_ns if current is not None and mtime_ns else None)

    def reconcile(self, found: list[tuple[str, int]], mtimes: dict[str, int], complete: bool,
                  read: Callable[[str], tuple[bytes | None, int]]) -> None:
        """Record the hand edits, new files and deletions of a scope walk as ``external`` (DESIGN.md §15.1).

        ``found`` is ``(path, bytes)`` of every document the walk saw and
        ``mtimes`` their mtimes (ns); only a document whose size or mtime
        differs from when it was last checked is read (``read(path)`` →
        ``(bytes or None, mtime_ns)``) and hashed.  When the walk was
        ``complete``, a recorded path with no file gets an ``external``
        tombstone.  Caller holds the scope's write lock.
        """
        present: set[str] = set()
        for path, size in found:
            present.add(path)
            key = (size, mtimes.get(path, 0))
            if self.observed.get(path) == key:
                continue
            try:
                current, mtime_ns = read(path)
            except HubError as exc:  # unreadable now: checked again next time
                log.warning("history could not check %s: %s", path, exc)
                continue
            self.sync(path, current, mtime_ns, create=False)
            self.observed[path] = key
        if complete:
            with self.lock:
                self.load(create=False)
                missing = [p for p, vs in self.by_path.items() if p not in present and not vs[-1].tombstone
                           and vs[-1].gone is None]
            for path in missing:
                try:
                    current, mtime_ns = read(path)
                except HubError as exc:
                    log.warning("history could not check %s: %s", path, exc)
                    continue
                self.sync(path, current, mtime_ns, create=False)
                self.observed.pop(path, None)

    # -- retention -----------------------------------------------------------

    def _protected(self, path: str) -> set[int]:
        """Seqs kept whatever the caps: the newest version of ``path`` and, after a tombstone, the one before it."""
        keep: set[int] = set()
        live = [v for v in self.by_path.get(path, []) if v.gone is None]
        if live:
            keep.add(live[-1].seq)
            if live[-1].tombstone:
                for v in reversed(live[:-1]):
                    if not v.tombstone:
                        keep.add(v.seq)
                        break
        return keep

    def _drop(self, v: Version, reason: str) -> None:
        v.gone = reason
        self.live_bytes -= v.record
        self.dead_bytes += v.record

    def _prune_after(self, new: Version) -> None:
        r = self.retention
        live = [v for v in self.by_path[new.path] if v.gone is None]
        # The version this write replaced is never pruned by the write itself (DESIGN.md §15.5).
        replaced = {live[-2].seq} if len(live) >= 2 and live[-1] is new else set()
        if len(live) > r.max_versions:
            keep = self._protected(new.path) | replaced
            for v in live[: len(live) - r.max_versions]:
                if v.seq not in keep:
                    self._drop(v, "pruned")
        self._prune_old_and_big(new.path, replaced)
        if self.dead_bytes >= max(self.live_bytes, COMPACT_MIN_DEAD_BYTES):
            try:
                self.compact_locked()
            except (HubError, OSError) as exc:  # the version is already durable; compaction retries next time
                log.warning("compacting the history in %s failed (retried on a later write): %s", self.directory, exc)

    def _prune_all(self) -> None:
        r = self.retention
        for path, versions in self.by_path.items():
            live = [v for v in versions if v.gone is None]
            keep = self._protected(path)
            for v in live[: max(0, len(live) - r.max_versions)]:
                if v.seq not in keep:
                    self._drop(v, "pruned")
        self._prune_old_and_big()

    def _prune_old_and_big(self, path: str = "", replaced: set[int] | None = None) -> None:
        """Drop versions recorded more than ``max_days`` ago, then the oldest while over ``max_bytes``.

        Ages by ``recorded`` (when the Hub recorded the version; records are
        appended in that order), never by ``time``: an ``external`` version's
        time is the file's mtime, which may be years old.  ``replaced`` (seqs
        of ``path``) are never dropped here.
        """
        r = self.retention
        cutoff = utc_time(time_ns() - r.max_days * 86_400 * 10**9)
        protected: dict[str, set[int]] = {}
        if path and replaced:
            protected[path] = self._protected(path) | replaced
        for v in self.versions:
            if v.gone is not None:
                continue
            if v.path == path and replaced and v.seq in replaced:
                continue
            old = v.recorded < cutoff
            if not old and self.live_bytes <= r.max_bytes:
                break
            if not old:
                keep = protected.get(v.path)
                if keep is None:
                    keep = protected[v.path] = self._protected(v.path)
                if v.seq in keep:
                    continue
            self._drop(v, "pruned")

    def compact_locked(self) -> None:
        """Rewrite the segment with only live bodies (gone versions keep a header), durably; caller holds ``lock``.

        :func:`hub.storage.fsio.replace_file`: a temp file in the same folder, fsync, rename over the segment, fsync
        of the folder; a failing step is the storage error of ``compact history`` (``uncertain`` once the
        rename is done, DESIGN.md §4.8), the old segment and its index untouched when it came before the
        rename.  A crash leaves the old file or the new one (a leftover temp file is deleted on the next
        :meth:`load`).
        """
        per_path_gone: dict[str, int] = {}
        keep: list[Version] = []
        for v in reversed(self.versions):
            if v.gone is not None:
                n = per_path_gone.get(v.path, 0)
                if n >= GONE_HEADERS_PER_PATH:
                    continue
                per_path_gone[v.path] = n + 1
            keep.append(v)
        keep.reverse()
        new_versions: list[Version] = []

        def switch() -> None:
            # The new file is the segment now: switch to it before anything else can fail.  Should it not
            # open, the index is dropped too and the next use loads the segment afresh.
            os.close(self.fd)
            self.fd = -1
            self.versions, self.by_path, self.live_bytes, self.dead_bytes = [], {}, 0, 0
            with step("compact history", "", uncertain=True):
                self.fd = os.open(self._segment(), os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
            self.end = self.allocated = sum(nv.record for nv in new_versions)
            for nv in new_versions:
                self._index(nv)

        fsio.replace_file(self._segment(), self._records(keep, new_versions), logical="",
                          operation="compact history", renamed=switch)

    def _records(self, keep: list[Version], out: list[Version]) -> Iterator[bytes]:
        """The records of ``keep`` as a compacted segment holds them (a gone version's header without a body),
        256 records at a time; each version is appended to ``out`` with its new offset and length."""
        chunks: list[bytes] = []
        pos = 0
        for v in keep:
            body = b""
            if v.gone is None and v.body:
                body = os.pread(self.fd, v.body, v.offset)
            nv = dataclasses.replace(v)
            nv.body = len(body)
            data = _encode(nv, body)
            nv.offset = pos + len(data) - len(body) - 1
            nv.record = len(data)
            pos += len(data)
            chunks.append(data)
            out.append(nv)
            if len(chunks) >= 256:
                yield b"".join(chunks)
                chunks.clear()
        if chunks:
            yield b"".join(chunks)

    # -- purge ---------------------------------------------------------------

    def purge(self, path: str, revision: str | None, current_revision: str) -> list[dict[str, Any]]:
        """Erase stored bytes of ``path``: the versions with ``revision``, or every version (``revision`` None).

        ``current_revision`` is the live document's (``absent`` when none):
        erasing the version the document still holds is ``bad_request``
        (forget or change the document first).  The bodies are overwritten
        with zeros in place and fdatasynced, then the segment is compacted,
        so no file of the store holds them.  Returns what was erased
        (``[{revision, time, action, bytes}]``); raises ``not_found`` when
        nothing matches.  ``revision`` may be a prefix (:meth:`resolve`).
        """
        with self.lock:
            self.load()
            if revision is not None:
                revision = self.resolve(path, revision)
            targets = [v for v in self.by_path.get(path, [])
                       if v.gone != "purged" and (revision is None or v.revision == revision)]
            if revision is not None and not targets:
                raise _not_found(path, revision, "unknown")
            if not targets:
                raise HubError(ErrorCode.NOT_FOUND, f"{path} has no stored versions", {"path": path,
                                                                                        "reason": "unknown"},
                               next_step="Nothing to purge; 'amux memory log' lists the paths that have stored "
                               "versions.")
            if current_revision != ABSENT and any(v.revision == current_revision for v in targets):
                raise HubError(ErrorCode.BAD_REQUEST,
                               f"{path} still holds version {current_revision[:12]}: forget the document or "
                               "change it first, then purge", {"path": path, "revision": current_revision})
            self.rewrites += 1
            for v in targets:
                # Every target whose bytes are still in this file, pruned-not-yet-compacted ones too: compaction
                # only frees the old file's blocks, so zeroing here is what erases them (DESIGN.md §15.6).
                if v.body:
                    with step("purge history", path):
                        os.pwrite(self.fd, b"\0" * v.body, v.offset)
            with step("purge history", path):
                os.fdatasync(self.fd)
            erased = [{"revision": v.revision, "time": v.time, "action": v.action, "bytes": v.size}
                      for v in targets]
            for v in targets:
                if v.gone is None:
                    self._drop(v, "purged")
                else:
                    v.gone = "purged"
            self.compact_locked()
            return erased


def make_private_dirs(directory: str, top: str = "") -> None:
    """Create ``directory`` and every missing parent with mode ``0700`` (``os.makedirs`` gives only the leaf it).

    Existing folders from ``top`` down to ``directory`` (``top`` a parent of
    it, or empty for none) that are looser than ``0700`` are tightened to it.
    """
    if top:
        rel = os.path.relpath(directory, top)
        d = top
        for part in [] if rel.startswith("..") else [""] + ([] if rel == "." else rel.split(os.sep)):
            d = os.path.join(d, part) if part else d
            try:
                st = os.stat(d, follow_symlinks=False)
            except FileNotFoundError:
                break
            if (st.st_mode & 0o077) and os.path.isdir(d) and not os.path.islink(d):
                os.chmod(d, 0o700)
    missing: list[str] = []
    d = directory
    while not os.path.isdir(d):
        missing.append(d)
        d = os.path.dirname(d)
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            continue
        os.chmod(d, 0o700)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` at the file's position."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _bisect_seq(pool: list[Version], seq: int) -> int:
    lo, hi = 0, len(pool)
    while lo < hi:
        mid = (lo + hi) // 2
        if pool[mid].seq < seq:
            lo = mid + 1
        else:
            hi = mid
    return lo


INDEX_MAX_VERSIONS = 150_000
"""Versions the history indexes of all scopes may hold in memory together (about 0.6 KiB each: ~86 MiB), plus
the scope in use.  Past it, :meth:`HistoryStore.scope` drops the indexes of the least recently used scopes not in
use; each
scans its segment's headers again when next used (25 ms for 1,000 versions on a loaded 2-core VM).  A
scope's own index is bounded by retention: ``history_max_versions`` live versions a document, as many pruned
ones awaiting compaction and :data:`GONE_HEADERS_PER_PATH` headers of gone ones.  Measured in process
(``tracemalloc``, 3,000 versions of 60-300 notes): 0.48-0.67 KiB a version with ``slots``, shared actor maps and
one string for ``time`` and ``recorded`` when equal (1.0 KiB before the first two).  In the 30-minute soak
(``bench/README.md``, ~1,100 notes in 46 scopes) Python's arenas, which hold the indexes, grew 36 → 94 MiB,
slowing as retention caught up (the Hub's RSS 2.0 MiB a minute over the last 10 minutes)."""


class HistoryStore:
    """Every scope's history under ``root`` (``<AMUX_HOME>/history``), opened lazily, one :class:`ScopeHistory` each.

    ``scope(relpath)`` gives the scope's history (``relpath`` is the scope's
    directory key, ``global`` or ``users/<key>``).  The indexes in memory hold at most ``max_versions``
    (:data:`INDEX_MAX_VERSIONS`) versions together, the least recently used scopes' dropped first.  DESIGN.md §15.
    """

    def __init__(self, root: str, retention: Retention, max_versions: int = INDEX_MAX_VERSIONS) -> None:
        self.root = root
        self.retention = retention
        self.max_versions = max_versions
        self.dropped = 0
        """How many times a scope's index was dropped to stay within ``max_versions`` (tests, bench)."""
        self._scopes: OrderedDict[str, ScopeHistory] = OrderedDict()
        self._lock = threading.Lock()

    def scope(self, relpath: str) -> ScopeHistory:
        """The history of the scope whose directory key is ``relpath`` (not yet opened: it loads on first use).

        Marks it the most recently used; when the indexes together hold more than ``max_versions`` versions,
        drops those of the least recently used other scopes whose lock is free until they fit
        (:meth:`ScopeHistory.close`).
        """
        with self._lock:
            h = self._scopes.get(relpath)
            if h is None:
                h = self._scopes[relpath] = ScopeHistory(os.path.join(self.root, relpath), self.retention,
                                                                 self.root)
            else:
                self._scopes.move_to_end(relpath)
            total = sum(len(s.versions) for s in self._scopes.values())
            if total > self.max_versions:
                for other in list(self._scopes.values()):
                    if other is h or not other.versions or not other.lock.acquire(blocking=False):
                        continue
                    try:
                        total -= len(other.versions)
                        other.close_locked()
                        self.dropped += 1
                    finally:
                        other.lock.release()
                    if total <= self.max_versions:
                        break
            return h

    def indexed_versions(self) -> int:
        """Versions the scopes' indexes hold in memory now, together (at most ``max_versions`` once
        :meth:`scope` has dropped what it can)."""
        with self._lock:
            return sum(len(s.versions) for s in self._scopes.values())

    def scopes(self) -> Iterator[ScopeHistory]:
        """The scope histories opened so far."""
        with self._lock:
            yield from list(self._scopes.values())
