"""The bounded literal scan behind ``search`` (DESIGN.md §5; its bounds, §6).

No index: every call walks the scope breadth-first (§5.4: the top level and
``MEMORY.md`` first, then a fair share of the file budget per folder, small
folders before crowded ones) and tests each Markdown document for the query's
literal keywords (Unicode casefold, so case is ignored; CJK text matches as
contiguous characters).  Entries that cannot be documents (not ``*.md``) cost
no budget; a folder or file the Hub may not read is reported (``unreadable``)
and the rest is still scanned.  The scan stops at the
first of: ``scan_max_files`` documents, ``scan_max_bytes`` read, the caller's
``should_stop()`` (the Hub wires this to a Trio cancel scope with the 250 ms
budget), the point where one more file read at the pace of the slowest recent
read would end past ``scan_budget_seconds``, or the directory-entry limits; the
result then says ``incomplete``.  A search over mounts (:func:`search_parts`) gives each scope these
budgets, under one deadline.  On a cold page cache the reads overlap in a
small thread pool, taken in plan order (:class:`_Collector`, DESIGN.md §5.4.1).

Matching, its thresholds and figures (DESIGN.md §5.1; :func:`_presence`, over
the documents joined in path order): a keyword with :data:`FREQUENT_HITS`
(32) hits or more in the first :data:`SAMPLE_BYTES` (64 KiB) is frequent; its
one-pattern pass jumps to the next document after a hit, crediting each
document once (16 common keywords on the corpus: matching 12.6 -> 7.4 ms, the
whole search 20.8 -> 17.9 ms, rg 13-14 ms).  :data:`GROUP_MIN` (5) rare
keywords or more share one leftmost-longest Aho-Corasick pass; it can hide a
keyword only inside a reported match or overlapping its end, at fixed offsets
(:func:`_hidden_at`) that are then tested, so the result equals one substring
test per keyword (16 rare keywords: about 5 ms -> 1-2 ms of matching).  Fewer
rare keywords, and dense ones, get a SIMD substring pass each: reporting every
occurrence of a dense set to Python cost more than the passes saved.

Reading, its thresholds and figures (DESIGN.md §5.4.1; :class:`_Collector`):
a cached document its folder's watch still trusts (:mod:`hub.storage.watch`,
begun before the folder's first ``lstat``) is taken as it is; the rest of
a folder's planned files are ``lstat``-ed first (:meth:`_Collector.stat_ahead`)
and those the cache lacks or holds stale are hinted to the kernel
(``POSIX_FADV_WILLNEED``), so a cold disk reads them at once.  That pass stops
at the deadline, or once :data:`SLOW_READS_TO_POOL` (4) ``lstat`` calls took
over :data:`SLOW_READ_SECONDS` (0.2 ms), which starts the read pool for the
rest of the folder (it once ran 63 ``lstat`` calls before its first clock
check: a 6 ms ``lstat`` overran the 250 ms by about 140 ms).  Reads run in
turn until 4 of the last :data:`SLOW_READ_WINDOW` (8) took over 0.2 ms (one
slow read on a loaded machine is a preemption, not a cold disk); then
:data:`READ_POOL_THREADS` (4) threads overlap them, at most
:data:`READ_AHEAD` (32) files ahead, taken and counted in plan order, so
results and budgets do not depend on which read ends first.  A file that grew
between its ``lstat`` and its read is held to the bytes budget by what was
read (the pass widens that window to a whole folder: 8,236 bytes were once
scanned under a 4,096-byte budget).  A read starts only
while one more at the slowest recent pace fits the 250 ms, and the pool ends
before the answer.  Measured: with the pool a disk-cold search went from about
1.8x to 1.3x rg under load; hinting every stale file, not only never-cached
ones, took a disk-cold search after changes from 137-149 ms to 73-78 ms,
0.82-0.92x rg (1,024 corpus files, one Hub, 12 searches).  Listing bounds:
:data:`LISTING_WORK_FACTOR` (4) times ``scan_max_total_entries`` candidate
names in all, and :data:`hub.storage.cache.RAW_ENTRIES_FACTOR` raw entries per entry
of a listing's bound.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import time
import unicodedata
from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field
from typing import Any

import ahocorasick_rs

from amux_memory.hub.storage.cache import CachedDoc, Haystack, ScopeCache, fold
from amux_memory.hub.storage.faults import MAX_REPORTED_PATHS, SCOPE_ROOT, short_path
from amux_memory.hub.storage.walk import Batch, FileEntry, breadth_first
from amux_memory.hub.storage.watch import FolderWatch
from amux_memory.protocol.limits import Limits
from amux_memory.protocol.messages import MSGPACK_ARRAY16_GROWTH, packed_size, response_room
from amux_memory.protocol.paths import is_canonical_path

Reader = Callable[[str], bytes]
"""Reads one file (absolute path) without following symlinks; returns its bytes."""


def read_file_nofollow(abspath: str) -> bytes:
    """Default :data:`Reader`: ``O_NOFOLLOW | O_NONBLOCK`` open, whole-file read.

    The first ``read`` asks for one byte more than ``fstat``'s size; when exactly that size comes back, the
    file is whole (a file that grew since its ``fstat`` returns more; a short read, as some FUSE file systems
    give, returns less): one ``read`` call a file, not two (a cold search of 1,000 files makes 1,000 fewer
    system calls).  Otherwise it reads on to the end."""
    fd = os.open(abspath, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError("not a regular file")
        want = st.st_size + 1
        first = os.read(fd, want)
        if len(first) == st.st_size:
            return first
        chunks = [first]
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})
"""Errnos that say the Hub ran short of a resource, not that a file is unreadable (DESIGN.md §4.8)."""


@dataclass
class _Walk:
    """Traversal state against the scan budget.

    ``skip`` marks the result incomplete but goes on (a directory listing cut
    at its entry limit, a file too large for the bytes left, a folder or file
    the Hub may not read); ``stop`` also ends the scan (files, time or total
    entries exhausted).  ``unreadable`` names what could not be read
    (logical paths, at most :data:`hub.storage.faults.MAX_REPORTED_PATHS`).
    """

    limits: Limits
    entries: int = 0
    incomplete: bool = False
    halted: bool = False
    reasons: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    storage_errors: list[str] = field(default_factory=list)

    def skip(self, reason: str) -> None:
        self.incomplete = True
        if reason not in self.reasons:
            self.reasons.append(reason)

    def stop(self, reason: str) -> None:
        self.skip(reason)
        self.halted = True

    def cannot_read(self, logical: str, exc: OSError | None = None) -> None:
        """Note that ``logical`` could not be read because of ``exc``.

        Running out of descriptors or memory (``EMFILE``, ``ENFILE``,
        ``ENOMEM``) is the Hub's condition, not the file's: it is reported as
        the reason ``storage_error`` with the errno name in ``storage_errors``,
        and the path is not named ``unreadable``.
        """
        if exc is not None and exc.errno in RESOURCE_ERRNOS:
            self.skip("storage_error")
            name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            if name not in self.storage_errors:
                self.storage_errors.append(name)
            return
        self.skip("unreadable")
        if logical == SCOPE_ROOT:
            self.unreadable = [SCOPE_ROOT]  # the scope's own folder: nothing under it can be read either
        elif len(self.unreadable) < MAX_REPORTED_PATHS and self.unreadable != [SCOPE_ROOT]:
            self.unreadable.append(short_path(logical))

    def cannot_list(self, logical: str, exc: OSError) -> None:
        """Note that the folder ``logical`` could not be listed (see :meth:`cannot_read`)."""
        self.cannot_read(logical, exc)


LISTING_WORK_FACTOR = 4
"""Step 1 of the scan lists at most this many times ``scan_max_total_entries`` candidate names in all
(directories and ``*.md`` files, DESIGN.md §5.4.1); a hostile tree of huge folders stops there."""


def fair_shares(sizes: list[int], budget: int) -> list[int]:
    """Max-min fair shares of ``budget`` among items wanting ``sizes`` (same order, DESIGN.md §5.4.1).

    Every item gets all it wants if that fits; otherwise the largest items get
    equal shares of what remains, an odd unit going to the earlier item.
    Returns one share per item, each at most its size; their sum is at most
    ``max(budget, 0)``.
    """
    ordered = sorted(sizes)
    share, extra, left = max(ordered, default=0), 0, max(budget, 0)
    for i, size in enumerate(ordered):
        remaining = len(ordered) - i
        if size * remaining > left:
            share, extra = divmod(left, remaining)
            break
        left -= size
    takes: list[int] = []
    for size in sizes:
        take = min(size, share)
        if take < size and extra > 0:
            take += 1
            extra -= 1
        takes.append(take)
    return takes


def _list_tree(root: str, prefix: str, walk: _Walk, cache: ScopeCache, seen_dirs: set[str],
               out_of_time: Callable[[], bool]) -> list[Batch]:
    """Step 1 of the scan (DESIGN.md §5.4.1): every directory's Markdown files, breadth-first.

    The folders are listed by :func:`hub.storage.walk.breadth_first` (the top level
    first, ``MEMORY.md`` first in it, then depth 1, ...; symlinks skipped,
    directories that cannot lead to ``prefix`` pruned, listings from the
    cache; only folders count toward the total-entry bound while listing, and
    at most :data:`LISTING_WORK_FACTOR` times it names are listed); the
    ``*.md`` names then get what is left of the bound
    (:func:`_share_entries`), so many ordinary folders cannot hide a later
    one.  A directory that cannot be read is reported (``unreadable``) and
    the rest is still listed.
    """
    limits = walk.limits
    listed = breadth_first(root, prefix, limits, cache, walk, seen_dirs, out_of_time,
                           limits.scan_max_total_entries * LISTING_WORK_FACTOR)
    return _share_entries(listed, root, walk)


def _share_entries(listed: list[Batch], root: str, walk: _Walk) -> list[Batch]:
    """Share what is left of the total-entry bound among the folders' ``*.md`` names (DESIGN.md §5.4.1).

    The top level takes what it needs first; the other folders share the rest
    max-min fairly (:func:`fair_shares`, in ``listed``'s breadth-first
    order).  A folder cut short marks the result incomplete (``total
    entries``); folders left with no names are dropped.  The names kept are
    added to ``walk.entries``.
    """
    room = walk.limits.scan_max_total_entries - walk.entries
    batches: list[Batch] = []
    rest = listed
    if listed and listed[0][0] == root:
        top = listed[0][1]
        if len(top) > room:
            walk.skip("total entries")
        top = top[: max(room, 0)]
        room -= len(top)
        if top:
            batches.append((root, top))
        rest = listed[1:]
    for (absdir, files), take in zip(rest, fair_shares([len(f) for _, f in rest], room), strict=True):
        if take < len(files):
            walk.skip("total entries")
        if take:
            batches.append((absdir, files[:take]))
    walk.entries += sum(len(files) for _, files in batches)
    return batches


def _fair_plan(batches: list[Batch], root: str, max_files: int, walk: _Walk) -> list[Batch]:
    """Share the file budget among directories so one crowded folder cannot use it all (DESIGN.md §5.4).

    The top level (``MEMORY.md`` first) takes what it needs first.  The rest is
    shared max-min fairly (:func:`fair_shares`): every other directory gets all
    its files if that fits, and the largest directories get equal shares of
    what remains (earlier in breadth-first order first on a remainder).  The
    plan reads the top level, then directories from the smallest share to the
    largest, so the bytes and time budgets too run out in the crowded folders
    last.  A cut directory marks the result incomplete (``files``).
    """
    budget = max_files
    plan: list[Batch] = []
    rest = batches
    if batches and batches[0][0] == root:
        top = batches[0][1]
        plan.append((root, top[:budget]))
        if len(top) > budget:
            walk.skip("files")
        budget -= len(plan[0][1])
        rest = batches[1:]
    shares: list[tuple[int, int, Batch]] = []
    takes = fair_shares([len(files) for _, files in rest], budget)
    for index, ((absdir, files), take) in enumerate(zip(rest, takes, strict=True)):
        if take < len(files):
            walk.skip("files")
        if take:
            shares.append((take, index, (absdir, files[:take])))
    shares.sort(key=lambda item: (item[0], item[1]))
    plan.extend(batch for _, _, batch in shares)
    return plan


def _snippet(line: str, folded_kw: str, max_bytes: int) -> tuple[str, bool]:
    """A window of ``line`` around the keyword, at most ``max_bytes`` UTF-8 bytes."""
    line = line.strip()
    if len(line.encode("utf-8", "replace")) <= max_bytes:
        return line, False
    # Map the keyword's position in the folded line back to a character index
    # (in NFC, so that per-character folding lines up with the folded line).
    line = unicodedata.normalize("NFC", line)
    target = fold(line).find(folded_kw)
    at = 0
    if target > 0:
        acc = 0
        for index, ch in enumerate(line):
            at = index
            acc += len(fold(ch))
            if acc > target:
                break
    start = max(0, at - max_bytes // 6)
    out: list[str] = []
    used = 0
    for ch in line[start:]:
        size = len(ch.encode("utf-8", "replace"))
        if used + size > max_bytes:
            break
        out.append(ch)
        used += size
    text = "".join(out)
    return text, True


def _best_line(hay: Haystack, index: int, matched: list[int], folded_kws: list[bytes]) -> tuple[int, int]:
    """``(0-based line, keyword index)`` for a match: of the lines where each matched keyword
    first occurs, the one holding the most distinct keywords (the earliest on a tie)."""
    blob, start = hay.blob, hay.starts[index]
    end = start + len(hay.docs[index].folded)
    firsts = sorted((blob.find(folded_kws[k], start, end), k) for k in matched)
    best_pos, best_kw, best_count = firsts[0][0], firsts[0][1], 0
    for pos, k in firsts:
        line_start = blob.rfind(b"\n", start, pos) + 1 or start
        line_end = blob.find(b"\n", pos, end)
        line = blob[line_start : line_end if line_end >= 0 else end]
        count = sum(1 for j in matched if folded_kws[j] in line)
        if count > best_count:
            best_pos, best_kw, best_count = pos, k, count
    return blob.count(b"\n", start, best_pos), best_kw


SAMPLE_BYTES = 65536
"""How much of the haystack (bytes) :func:`_presence` samples to tell a frequent keyword from a rare one."""

FREQUENT_HITS = 32
"""A keyword with at least this many hits in the first :data:`SAMPLE_BYTES` is frequent (DESIGN.md §5.1)."""


GROUP_MIN = 5
"""The one-pass automaton is used for this many rare keywords or more; fewer are searched one by one (a
one-pattern search is ``memmem``, and the library's prefilter for 2-4 patterns is sometimes a slow one)."""


def _hidden_at(other: bytes, kw: bytes) -> tuple[int, ...]:
    """Offsets from the start of a match of ``other`` at which an occurrence of ``kw`` could lie under it in
    a leftmost-longest, non-overlapping scan (DESIGN.md §5.1), ascending.

    A match covering an occurrence starts at or before it (a reported match
    never starts inside an earlier one) and ends inside or after it: ``kw``
    lies inside ``other`` (equal folded keywords included; at the same start
    the longest keyword is reported), or a proper suffix of ``other`` is a
    proper prefix of ``kw``.  Elsewhere ``other`` cannot hide ``kw``.
    """
    inside = {at for at in range(len(other) - len(kw) + 1) if other.startswith(kw, at)}
    overlap = {len(other) - n for n in range(1, min(len(kw), len(other))) if other.endswith(kw[:n])}
    return tuple(sorted(inside | overlap))


@dataclass(frozen=True)
class _Matcher:
    """How one query's folded keywords are found: ``group`` (keyword indexes) in one leftmost-longest
    Aho-Corasick pass (``automaton``; ``checks[p]``: ``(pattern, offset)`` pairs where a match of pattern
    ``p`` could hide another pattern, :func:`_hidden_at`), every other keyword in a pass of its own."""

    group: tuple[int, ...]
    automaton: ahocorasick_rs.BytesAhoCorasick | None
    checks: tuple[tuple[tuple[int, int], ...], ...]
    alone: tuple[int, ...]


@functools.lru_cache(maxsize=64)
def _matcher(folded_kws: tuple[bytes, ...], frequent: tuple[bool, ...], dense: bool = False) -> _Matcher:
    """The :class:`_Matcher` of ``folded_kws``, built once per query (and kept for repeated queries):
    keyword ``i`` joins the group unless ``frequent[i]``; the group needs :data:`GROUP_MIN` keywords and
    is not used when ``dense`` (its keywords together are frequent: one reported match per occurrence
    would cost more than one jumping pass per keyword)."""
    group = tuple(i for i in range(len(folded_kws)) if not frequent[i])
    if len(group) < GROUP_MIN or dense:
        return _Matcher((), None, (), tuple(range(len(folded_kws))))
    patterns = [folded_kws[i] for i in group]
    checks = tuple(tuple((q, at) for q, kw in enumerate(patterns) if q != p for at in _hidden_at(other, kw))
                   for p, other in enumerate(patterns))
    automaton = ahocorasick_rs.BytesAhoCorasick(patterns, matchkind=ahocorasick_rs.MatchKind.LeftmostLongest)
    return _Matcher(group, automaton, checks, tuple(i for i, f in enumerate(frequent) if f))


def _presence(hay: Haystack, folded_kws: list[bytes]) -> dict[int, list[int]]:
    """Which keywords each document contains: ``{document index: [keyword index, ...]}`` (indexes ascending).

    Many rare keywords go through the haystack in one pass (DESIGN.md §5.1):
    a leftmost-longest Aho-Corasick automaton of all of them (SIMD prefilter
    underneath) reports their occurrences, each credited to its document.  A
    non-overlapping scan can hide one keyword's occurrence under another's
    match (one keyword inside another, or one's end the next one's start);
    those places are fixed offsets from the reported match's start
    (:func:`_hidden_at`), and are tested with ``bytes.startswith``: the result
    is exactly the per-keyword test.  A frequent keyword (at least
    :data:`FREQUENT_HITS` hits in the first :data:`SAMPLE_BYTES`) is found
    with ``bytes.find``, jumping to the next document after each hit, so it
    costs about one short search per document rather than one reported match
    per occurrence.  Fewer than :data:`GROUP_MIN` rare keywords, or rare
    keywords that together reach :data:`FREQUENT_HITS` in the sample (the
    one pass would report too many matches), each get a one-pattern
    automaton (``memmem`` underneath), as before.
    """
    blob, starts = hay.blob, hay.starts
    ends = starts[1:] + [len(blob)]
    sampled = [blob.count(kw, 0, SAMPLE_BYTES) for kw in folded_kws]
    frequent = tuple(hits >= FREQUENT_HITS for hits in sampled)
    dense = sum(hits for hits in sampled if hits < FREQUENT_HITS) >= FREQUENT_HITS
    matcher = _matcher(tuple(folded_kws), frequent, dense)
    found: dict[int, set[int]] = {}
    if matcher.automaton is not None:
        _credit(found, matcher.automaton, blob, starts, ends, matcher.group, matcher.checks, folded_kws)
    for ki in matcher.alone:
        kw = folded_kws[ki]
        if frequent[ki]:
            pos = blob.find(kw)
            while pos >= 0:
                d = bisect_right(starts, pos) - 1
                found.setdefault(d, set()).add(ki)
                pos = blob.find(kw, ends[d])
        else:
            for d in _documents_with(ahocorasick_rs.BytesAhoCorasick([kw]), blob, starts, ends):
                found.setdefault(d, set()).add(ki)
    return {d: sorted(ks) for d, ks in found.items()}


def _documents_with(automaton: ahocorasick_rs.BytesAhoCorasick, blob: bytes, starts: list[int],
                    ends: list[int]) -> list[int]:
    """The documents (ascending indexes) holding a match of a one-pattern ``automaton``: :func:`_credit` for
    one keyword, whose matches need no hidden-match checks, so a match in the document of the one before
    costs one comparison (a dense keyword reports thousands)."""
    out: list[int] = []
    end = -1
    for _, start, _ in automaton.find_matches_as_indexes(blob):
        if start >= end:
            d = bisect_right(starts, start) - 1
            end = ends[d]
            out.append(d)
    return out


def _credit(found: dict[int, set[int]], automaton: ahocorasick_rs.BytesAhoCorasick, blob: bytes,
            starts: list[int], ends: list[int], keyword_of: tuple[int, ...],
            checks: tuple[tuple[tuple[int, int], ...], ...], folded_kws: list[bytes]) -> None:
    """Add to ``found`` the keywords (``keyword_of[pattern]``) of every match ``automaton`` reports in
    ``blob``, each to the document it starts in (matches come in position order), and those a match hides
    (``checks[pattern]``: ``(pattern, offset)`` tested with ``bytes.startswith``)."""
    end = -1
    ks: set[int] = set()
    for pattern, start, _ in automaton.find_matches_as_indexes(blob):
        if start >= end:
            d = bisect_right(starts, start) - 1
            end = ends[d]
            ks = found.setdefault(d, set())
        ks.add(keyword_of[pattern])
        for other, at in checks[pattern]:
            ki = keyword_of[other]
            if ki not in ks and blob.startswith(folded_kws[ki], start + at):
                ks.add(ki)


def _prefetch(dir_fd: int, names: list[str]) -> None:
    """Ask the kernel to start reading files the scan must read (``POSIX_FADV_WILLNEED``).

    The scan reads one file at a time until reads turn out slow; on a cold
    page cache (a first search after boot) the disk then works on all of them
    at once instead of one request per read.  Only a hint: errors are ignored
    and nothing is read here.
    """
    for name in names:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        except OSError:
            pass
        finally:
            os.close(fd)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NOT_STATED = object()
"""``_Collector.file``'s marker: no ``lstat`` was taken ahead for this file."""
_GONE = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENXIO})

READ_POOL_THREADS = 4
"""Threads (so reads at once) of a scan's read pool once its reads are slow (DESIGN.md §5.4.1)."""
READ_AHEAD = 32
"""Files handed to the read pool and not yet taken, at most: a slow read at the head of the plan does
not idle the other threads."""
SLOW_READ_SECONDS = 0.0002
"""A file's ``lstat`` and read taking longer than this is slow: the page cache did not have it."""
SLOW_READS_TO_POOL = 4
"""Slow reads among the last :data:`SLOW_READ_WINDOW` that start the read pool (one slow read on a
loaded machine is a preemption, not a cold disk; a warm scan must not pay a hand-off per file)."""
SLOW_READ_WINDOW = 8
"""How many of the latest reads :data:`SLOW_READS_TO_POOL` counts among."""


@dataclass
class _Fetched:
    """What a pool thread found for one planned file: its ``lstat`` (None: gone or not a regular file),
    the error of the ``lstat`` or the read, the bytes read (None: not read) and the seconds the read took."""

    st: os.stat_result | None = None
    error: OSError | None = None
    data: bytes | None = None
    seconds: float = 0.0


def _fetch(collector: _Collector, dir_fd: int, absdir: str, name: str, cached: CachedDoc | None, may_read: bool,
           max_size: int) -> _Fetched | None:
    """Pool task: ``lstat`` one file relative to ``dir_fd`` and read it unless ``cached`` is still fresh,
    it may not be read (a new path that is not canonical) or it is larger than ``max_size`` bytes (more
    than the byte budget can have left).  None, doing nothing, when it starts too late for one more
    read at the slowest recent pace (``collector.read_cost``) before the deadline.  Changes nothing
    shared: the scan's thread takes the result."""
    if time.perf_counter() + collector.read_cost > collector.deadline:
        return None
    out = _Fetched()
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return out
    except OSError as exc:
        out.error = exc
        return out
    if not stat.S_ISREG(st.st_mode):
        return out
    out.st = st
    if may_read and st.st_size <= max_size and (cached is None or not cached.fresh(st)):
        began = time.perf_counter()
        try:
            out.data = collector.reader(absdir + "/" + name)
        except OSError as exc:
            out.error = exc
        out.seconds = time.perf_counter() - began
    return out


@dataclass
class _InFlight:
    """One planned file handed to the pool, in plan order."""

    absdir: str
    logical: str
    future: Future[_Fetched | None]
    folder: list[int]  # [dir_fd, files of the folder not yet taken]; the fd closes at 0
    watch: FolderWatch | None  # the folder's watch, begun before the pool's lstat of the file


@dataclass
class _Collector:
    """Step 3 of the scan (DESIGN.md §5.4.1): read the planned files within budget, refreshing the cache.

    Each file is ``lstat``-ed relative to its open directory (no path walk per
    file), a folder's files before any is read (:meth:`stat_ahead`, which hints
    the kernel to read ahead every one to be read); a cached entry whose size,
    mtime, ctime or inode differs is read again.  ``docs`` and ``scanned_bytes`` are what was taken (``docs``
    also tells the cache's prune after a complete walk what is still there).
    ``read_cost`` is the slowest recent read-and-fold of one file, in
    seconds (a decaying maximum).

    Reads run on the scan's thread until :data:`SLOW_READS_TO_POOL` of the
    last :data:`SLOW_READ_WINDOW` took over :data:`SLOW_READ_SECONDS` (a cold
    page cache); then up to :data:`READ_POOL_THREADS` ``lstat``-and-reads
    overlap in a thread pool (reads release the GIL; up to :data:`READ_AHEAD`
    files handed over), a read being handed over, and started, only while now
    plus ``read_cost`` is within the deadline.  Results are
    taken, folded, counted and budgeted in plan order on the scan's thread, so
    what a search returns does not depend on which read finished first; a file
    handed over but not taken when the budget ends (waiting for it would
    overrun) is neither counted nor scanned.  :meth:`close` ends the pool
    before the scan returns: no thread outlives its request.
    """

    limits: Limits
    walk: _Walk
    should_stop: Callable[[], bool]
    reader: Reader
    cache: ScopeCache
    deadline: float
    read_cost: float = 0.0
    docs: list[CachedDoc] = field(default_factory=list)
    scanned_bytes: int = 0
    pool: ThreadPoolExecutor | None = None
    recent_slow: deque[bool] = field(default_factory=lambda: deque(maxlen=SLOW_READ_WINDOW))
    in_flight: deque[_InFlight] = field(default_factory=deque)
    watch: FolderWatch | None = None
    """The watch of the folder being taken (:mod:`hub.storage.watch`), begun before any of its files' ``lstat``."""
    misses: int = 0
    """Files read because the cache lacked them or held them stale (the rest of ``docs`` were hits)."""

    def out_of_time(self) -> bool:
        """True once the caller says stop or the time budget is spent."""
        return self.should_stop() or time.perf_counter() > self.deadline

    def run(self, plan: list[Batch]) -> None:
        """Take every planned file in order until a budget stops the scan; then :meth:`close`."""
        try:
            for absdir, batch in plan:
                if self.walk.halted:
                    break
                self.folder(absdir, batch)
            while self.in_flight and not self.walk.halted:
                self.take()
        finally:
            self.close()
            self.cache.hits += len(self.docs) - self.misses
            self.cache.misses += self.misses

    def close(self) -> None:
        """Drop what is still in flight (not counted), wait for running reads, end the pool, close the folders."""
        for item in self.in_flight:
            item.future.cancel()
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
        while self.in_flight:
            self._done_with(self.in_flight.popleft())

    def _done_with(self, item: _InFlight) -> None:
        item.folder[1] -= 1
        if item.folder[1] == 0:
            os.close(item.folder[0])

    def folder(self, absdir: str, batch: list[FileEntry]) -> None:
        """Take one directory's planned files (until the file budget or a stop); a vanished one is skipped."""
        try:
            dir_fd = os.open(absdir, _DIR_FLAGS)
        except OSError as exc:
            if exc.errno not in _GONE:
                self.walk.cannot_read(batch[0][0].rpartition("/")[0] + "/", exc)
            return  # gone (or replaced by a symlink) since it was listed
        folder = [dir_fd, 1]  # the 1 is this call's own hold on the fd
        try:
            if self.cache.watch is not None and batch:  # watched from before any lstat below
                first, name = batch[0]
                self.watch = self.cache.watch.folder(absdir, dir_fd, first[: len(first) - len(name)])
            room = max(0, self.limits.scan_max_files - len(self.docs) - len(self.in_flight))
            stats: dict[str, CachedDoc | os.stat_result | OSError | None] = {}
            taken = 0
            if self.pool is None:
                taken, stats = self.stat_ahead(dir_fd, batch[:room])
            for logical, name in batch[taken:] if taken else batch:
                if self.pool is not None:
                    if not self.hand_over(absdir, dir_fd, logical, name, folder):
                        break
                    continue
                if len(self.docs) >= self.limits.scan_max_files:
                    self.walk.stop("files")
                    break
                if not self.file(absdir, dir_fd, logical, name, stats.pop(logical, _NOT_STATED)):
                    break
        finally:
            folder[1] -= 1
            if folder[1] == 0:
                os.close(dir_fd)

    def start_pool(self) -> None:
        """Start the read pool (once): reads are slow, the page or inode cache did not have them."""
        if self.pool is None:
            self.pool = ThreadPoolExecutor(READ_POOL_THREADS, thread_name_prefix="amux-read")

    def stat_ahead(self, dir_fd: int,
                   batch: list[FileEntry]) -> tuple[int, dict[str, CachedDoc | os.stat_result | OSError | None]]:
        """``lstat`` a folder's planned files before reading any, and hint the kernel to read ahead the ones the
        cache does not hold fresh (:func:`_prefetch`): on a cold page cache the disk then works on all of them
        at once, whether the cache never held a file or holds an older version of it.

        The warm path: while every file so far was fresh in the cache and fits the budgets, each is taken here
        (what :meth:`file` and :meth:`take_fresh` would do, in the same plan order: one ``lstat`` and one
        comparison a file).  Returns ``(taken, stats)``: the first ``taken`` files of ``batch`` are taken; for
        the others, logical path → its cache entry when fresh, else its ``lstat`` (None: gone or not a regular
        file; an ``OSError`` to report when :meth:`file` takes it).  Stops early, leaving the rest to
        :meth:`file`, once the budget is spent, or starts the read pool and leaves the rest to it once
        :data:`SLOW_READS_TO_POOL` ``lstat`` calls took over :data:`SLOW_READ_SECONDS` (inodes not cached: the
        pool overlaps them and counts each in its read's cost, so the time budget sees it)."""
        stats: dict[str, CachedDoc | os.stat_result | OSError | None] = {}
        stale: list[str] = []
        slow = taken = 0
        cached, docs, max_bytes, watch = self.cache.docs, self.docs, self.limits.scan_max_bytes, self.watch
        for i, (logical, name) in enumerate(batch):
            if i % 64 == 63 and self.should_stop():
                break
            if watch is not None:
                doc = cached.get(logical)
                if doc is not None and doc.watch is watch:  # trusted: no event named it (hub.storage.watch)
                    if taken == i and self.scanned_bytes + doc.size <= max_bytes:
                        docs.append(doc)
                        self.scanned_bytes += doc.size
                        taken += 1
                    else:
                        stats[logical] = doc  # file() takes it, as it would after an lstat found it fresh
                    continue
            began = time.perf_counter()
            try:
                st: os.stat_result | OSError | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            except OSError as exc:
                st = exc
            now = time.perf_counter()
            slow += now - began > SLOW_READ_SECONDS
            entry: CachedDoc | os.stat_result | OSError | None = st
            if isinstance(st, os.stat_result):
                if not stat.S_ISREG(st.st_mode):
                    entry = None
                else:
                    doc = cached.get(logical)
                    if doc is not None and doc.fresh(st):
                        entry = doc
                        doc.trust(watch, st.st_nlink)
                        if taken == i and self.scanned_bytes + doc.size <= max_bytes:
                            docs.append(doc)
                            self.scanned_bytes += doc.size
                            taken += 1
                    else:
                        stale.append(name)
            if taken <= i:
                stats[logical] = entry
            if slow >= SLOW_READS_TO_POOL:
                self.start_pool()  # a cold disk: the rest are lstat-ed and read by the pool, within the budget
                break
            if now > self.deadline:
                break  # the rest are left to file(), which stops the scan in time
        _prefetch(dir_fd, stale)
        return taken, stats

    def hand_over(self, absdir: str, dir_fd: int, logical: str, name: str, folder: list[int]) -> bool:
        """Give one file to the pool, first taking results while the pool is full or the deadline leaves no
        room for one more read; False when the scan must stop."""
        assert self.pool is not None
        while True:
            if self.walk.halted:
                return False
            if len(self.docs) + len(self.in_flight) >= self.limits.scan_max_files:
                if not self.in_flight:
                    self.walk.stop("files")
                    return False
            elif len(self.in_flight) < READ_AHEAD and not self.should_stop() \
                    and time.perf_counter() + self.read_cost <= self.deadline:
                break
            elif not self.in_flight:
                self.walk.stop("time")  # one more read at the slowest recent pace would overrun
                return False
            self.take()
        cached = self.cache.docs.get(logical)
        may_read = cached is not None or is_canonical_path(logical)  # a cached path was validated when first read
        future = self.pool.submit(_fetch, self, dir_fd, absdir, name, cached, may_read,
                                  self.limits.scan_max_bytes - self.scanned_bytes)
        folder[1] += 1
        self.in_flight.append(_InFlight(absdir, logical, future, folder, self.watch))
        return True

    def take(self) -> None:
        """Take the oldest file in flight (waiting at most until the deadline); stops the scan (``time``) when
        it is not done by then."""
        item = self.in_flight[0]
        try:
            fetched = item.future.result(timeout=max(0.0, self.deadline - time.perf_counter()))
        except FuturesTimeout:
            self.walk.stop("time")
            return
        self.in_flight.popleft()
        self._done_with(item)
        if fetched is None or self.should_stop():
            self.walk.stop("time")
            return
        self.record(item.absdir, item.logical, fetched, item.watch)

    def record(self, absdir: str, logical: str, fetched: _Fetched, watch: FolderWatch | None) -> None:
        """Count one file the pool fetched, exactly as :meth:`file` would have (trusted on ``watch``, its
        folder's)."""
        if fetched.st is None:
            if fetched.error is not None:
                self.walk.cannot_read(logical, fetched.error)
            return
        st = fetched.st
        if self.scanned_bytes + st.st_size > self.limits.scan_max_bytes:
            self.walk.skip("bytes")
            return
        doc = self.cache.docs.get(logical)
        if doc is not None and doc.fresh(st):
            doc.trust(watch, st.st_nlink)
        else:
            if doc is None and not is_canonical_path(logical):
                return
            if fetched.error is not None:
                if fetched.error.errno is not None and fetched.error.errno not in _GONE:
                    self.walk.cannot_read(logical, fetched.error)
                return
            if fetched.data is None:
                return  # unreachable: the pool reads every stale file that fits the byte budget
            began = time.perf_counter()
            doc = CachedDoc.load(logical, st, fetched.data)
            self.cache.put(doc)
            doc.trust(watch)
            self.read_cost = max(fetched.seconds + time.perf_counter() - began, self.read_cost * 0.9)
            if self.scanned_bytes + len(doc.data) > self.limits.scan_max_bytes:
                self.walk.skip("bytes")  # it grew between its lstat and the read
                return
            self.misses += 1
        self.add(logical, doc)

    def file(self, absdir: str, dir_fd: int, logical: str, name: str,
             stated: object = _NOT_STATED) -> bool:
        """Take one file (from the cache while fresh, else read); False when the scan must stop (time).
        ``stated`` is its result from :meth:`stat_ahead`, if it has one (else ``lstat`` now): its cache entry
        when that ``lstat`` found it fresh."""
        if isinstance(stated, CachedDoc):  # the warm path: fresh, one check per file
            if self.scanned_bytes + stated.size > self.limits.scan_max_bytes:
                self.walk.skip("bytes")
                return True
            return self.take_fresh(logical, stated)
        began = time.perf_counter()
        if stated is _NOT_STATED:
            st = self.lstat(dir_fd, logical, name)
        elif isinstance(stated, OSError):
            self.walk.cannot_read(logical, stated)
            st = None
        else:
            assert stated is None or isinstance(stated, os.stat_result)
            st = stated
        if st is None:
            return True
        if self.scanned_bytes + st.st_size > self.limits.scan_max_bytes:
            # Too big for what is left of the budget: skip it, smaller files may still fit.
            self.walk.skip("bytes")
            return True
        doc = self.cache.docs.get(logical)
        if doc is not None and doc.fresh(st):
            doc.trust(self.watch, st.st_nlink)
            return self.take_fresh(logical, doc)
        # Stop when the budget is spent, or when reading one more file at the pace of the
        # slowest recent read would overrun it (a slow disk: return in time, not one read late).
        if self.should_stop() or time.perf_counter() + self.read_cost > self.deadline:
            self.walk.stop("time")
            return False
        if doc is None and not is_canonical_path(logical):  # a cached path was validated when first read
            return True
        doc = self.read(absdir, logical, name, st, began)
        if doc is None:
            return True
        if self.scanned_bytes + len(doc.data) > self.limits.scan_max_bytes:
            # It grew since its lstat (taken by stat_ahead before the folder's reads): held to what was read.
            self.walk.skip("bytes")
            return True
        self.misses += 1
        self.add(logical, doc)
        return True

    def take_fresh(self, logical: str, doc: CachedDoc) -> bool:
        """Take a document the cache holds fresh (every 64th asks whether to stop); False when the scan
        must stop (time)."""
        if len(self.docs) % 64 == 63 and self.should_stop():
            self.walk.stop("time")
            return False
        self.docs.append(doc)  # what add() does, without a second call on the warm path
        self.scanned_bytes += len(doc.data)
        return True

    def add(self, logical: str, doc: CachedDoc) -> None:
        """Count ``doc`` as scanned (its bytes against the budget; its path seen for the cache's prune)."""
        self.docs.append(doc)
        self.scanned_bytes += len(doc.data)

    def lstat(self, dir_fd: int, logical: str, name: str) -> os.stat_result | None:
        """The file's ``lstat`` when it is (still) a regular file; None when it is gone, odd or unreadable
        (reported)."""
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.walk.cannot_read(logical, exc)
            return None
        return st if stat.S_ISREG(st.st_mode) else None

    def read(self, absdir: str, logical: str, name: str, st: os.stat_result, began: float) -> CachedDoc | None:
        """Read and fold one file into the cache, noting its cost (from ``began``, before its ``lstat``) and
        starting the read pool once reads are slow; None when it could not be read."""
        try:
            data = self.reader(absdir + "/" + name)
        except OSError as exc:
            if exc.errno is not None and exc.errno not in _GONE:
                self.walk.cannot_read(logical, exc)  # EACCES, EIO: say so; a vanished or odd file is just absent
            return None
        io_done = time.perf_counter()
        self.recent_slow.append(io_done - began > SLOW_READ_SECONDS)
        if sum(self.recent_slow) >= SLOW_READS_TO_POOL:
            self.start_pool()
        doc = CachedDoc.load(logical, st, data)
        self.cache.put(doc)
        doc.trust(self.watch)
        self.read_cost = max(time.perf_counter() - began, self.read_cost * 0.9)
        return doc


def _collect(
    root: str, path_prefix: str, limits: Limits, walk: _Walk, should_stop: Callable[[], bool],
    reader: Reader, cache: ScopeCache,
) -> tuple[list[CachedDoc], int]:
    """Walk the scope within budget (DESIGN.md §5.4.1: list, share, read); returns ``(documents, bytes read)``.

    The cache's entries of vanished files and folders are dropped after a
    complete walk (DESIGN.md §5.5).
    """
    collector = _Collector(limits, walk, should_stop, reader, cache, time.perf_counter() + limits.scan_budget_seconds)
    seen_dirs: set[str] = set()
    batches = _list_tree(root, path_prefix, walk, cache, seen_dirs, collector.out_of_time)
    collector.run(_fair_plan(batches, root, limits.scan_max_files, walk))
    if not walk.incomplete:
        cache.prune(path_prefix, collector.docs, seen_dirs)
    return collector.docs, collector.scanned_bytes


def _path_of(doc: CachedDoc) -> str:
    return doc.path


def search_scope(
    root: str,
    keywords: tuple[str, ...],
    path_prefix: str,
    limit: int,
    limits: Limits,
    should_stop: Callable[[], bool] = lambda: False,
    reader: Reader = read_file_nofollow,
    cache: ScopeCache | None = None,
    on_start: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Scan ``root`` for documents containing any keyword and rank them.

    Ranking: number of distinct keywords matched (desc), then keywords found
    in the path or title (desc), then path (asc).  Returns ``{matches,
    candidates, incomplete, incomplete_reasons, scanned_files, scanned_bytes,
    truncated}``; each match is ``{path, line, snippet, truncated, revision,
    matched}`` with a 1-based ``line``.  The serialized result stays within
    ``limits.response_max_bytes``; matches cut for that or for ``limit`` set
    ``truncated``.  ``cache`` keeps unchanged documents between calls (see
    :mod:`hub.storage.cache`); without one, every file is read.  ``on_start`` is
    called once the scan holds the scope's cache lock (the Hub starts its time
    budget there).
    """
    cache = cache if cache is not None else ScopeCache()
    folded_str = [fold(k) for k in keywords]
    folded_kws = [k.encode("utf-8") for k in folded_str]
    walk = _Walk(limits)
    with cache.lock:
        cache.refresh_watch()
        on_start()  # the time budget runs from here, not while waiting behind another scan of this scope
        docs, scanned_bytes = _collect(root, path_prefix, limits, walk, should_stop, reader, cache)
        # The haystack is in path order whatever order the fair scan read in (DESIGN.md §5.4.1): _presence samples
        # its first 64 KiB to pick a strategy per keyword, and one folder read first must not skew that.
        docs.sort(key=_path_of)
        hay = cache.haystack_for(docs)
    hits = _presence(hay, folded_kws)
    result: dict[str, Any] = {
        "matches": [], "candidates": len(hits), "incomplete": walk.incomplete,
        "incomplete_reasons": walk.reasons, "unreadable": walk.unreadable, "scanned_files": len(docs),
        "scanned_bytes": scanned_bytes, "truncated": len(hits) > limit,
    }
    if walk.storage_errors:
        result["storage_errors"] = walk.storage_errors  # errno names, e.g. ["EMFILE"] (DESIGN.md §4.8)
    _add_matches(result, hay, _top(hits, docs, folded_str, limit), keywords, folded_str, folded_kws, limits)
    return result


def _add_matches(result: dict[str, Any], hay: Haystack, ranked: list[tuple[int, list[int]]],
                 keywords: tuple[str, ...], folded_str: list[str], folded_kws: list[bytes], limits: Limits) -> None:
    """Append the ``ranked`` candidates' matches to ``result["matches"]`` while the answer fits the response
    budget (:func:`protocol.messages.response_room`); a match left out sets ``truncated``.  Each match costs its
    packed size plus :data:`protocol.messages.MSGPACK_ARRAY16_GROWTH`, more than the list's header can grow by."""
    room = response_room(limits, result)
    used = 0
    for index, matched in ranked:
        match = _match(hay, index, matched, keywords, folded_str, folded_kws, limits)
        grow = packed_size(match) + MSGPACK_ARRAY16_GROWTH
        if used + grow > room:
            result["truncated"] = True
            break
        result["matches"].append(match)
        used += grow


def _top(hits: dict[int, list[int]], docs: list[CachedDoc], folded_str: list[str],
         limit: int) -> list[tuple[int, list[int]]]:
    """The first ``limit`` candidates in rank order: distinct keywords matched (desc), keywords in the
    path or title (desc), path (asc).  Only the keyword-count groups that reach the top ``limit`` are
    sorted, so a common word matching most of the scope costs no full sort."""
    by_count: dict[int, list[int]] = {}
    for d, matched in hits.items():
        by_count.setdefault(len(matched), []).append(d)
    top: list[int] = []
    for count in sorted(by_count, reverse=True):
        if len(top) >= limit:
            break
        group = by_count[count]
        group.sort(key=lambda d: (-sum(1 for k in hits[d] if folded_str[k] in docs[d].where), docs[d].path))
        top += group
    return [(d, hits[d]) for d in top[:limit]]


def _match(hay: Haystack, index: int, matched: list[int], keywords: tuple[str, ...], folded_str: list[str],
           folded_kws: list[bytes], limits: Limits) -> dict[str, Any]:
    doc = hay.docs[index]
    line_index, kw = _best_line(hay, index, matched, folded_kws)
    text = doc.data.decode("utf-8", "replace")
    line = text.split("\n")[line_index] if line_index >= 0 else ""
    snippet, cut = _snippet(line, folded_str[kw], limits.snippet_max_bytes)
    return {
        "path": doc.path,
        "line": line_index + 1 if line_index >= 0 else 0,
        "snippet": snippet,
        "truncated": cut,
        "revision": doc.revision,
        "matched": [keywords[i] for i in matched],
    }


@dataclass(frozen=True)
class SearchPart:
    """One scope a search covers (DESIGN.md §7.8): ``label`` (``""`` for the caller's own scope, ``@NAME/`` for
    a team mount, put before every path the part answers), the scope's directory, the path prefix inside it
    and the scope's content cache."""

    label: str
    root: str
    prefix: str
    cache: ScopeCache


def search_parts(
    parts: list[SearchPart],
    keywords: tuple[str, ...],
    limit: int,
    limits: Limits,
    should_stop: Callable[[], bool] = lambda: False,
    reader: Reader = read_file_nofollow,
    on_start: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Scan several scopes as one search, each under its own budget, all under one deadline (DESIGN.md §7.8).

    One part is exactly :func:`search_scope`. With more, every part keeps the budget of a scope of its own
    (``scan_max_files``, ``scan_max_bytes``, the entry limits: its own plan, cache and incomplete reasons, as
    :func:`search_scope` scans it), and the time is one deadline for all: a search over N parts reads at most N
    scopes' budgets. The caller's own scope (label ``""``, its ``MEMORY.md`` first) is listed and read first, then
    the mounts are listed and read from the fewest listed documents to the most, so a deadline (a slow listing too)
    cuts the most crowded mount, never the caller's own notes before a team's. Matches are ranked across parts by
    the same rule (distinct keywords, keywords in the path or title of the document inside its scope, then the shown
    path) and named by their mounted path.
    The answer is :func:`search_scope`'s plus ``parts``: ``[{mount, scanned_files, incomplete_reasons}]`` in the
    order given (``mount`` is the label), so a caller sees which mount was cut short and why (time, or that
    scope's own limits).  Caches are locked in the order of their directories (no two searches wait for each
    other in a circle); ``on_start`` runs once all are held.
    """
    if len(parts) == 1:
        only = parts[0]
        return _labelled(search_scope(only.root, keywords, only.prefix, limit, limits, should_stop, reader,
                                      only.cache, on_start), only.label)
    folded_str = [fold(k) for k in keywords]
    folded_kws = [k.encode("utf-8") for k in folded_str]
    order = sorted(range(len(parts)), key=lambda i: parts[i].root)
    locks = [parts[i].cache.lock for i in order]
    for lock in locks:
        lock.acquire()
    try:
        for part in parts:
            part.cache.refresh_watch()
        on_start()
        deadline = time.perf_counter() + limits.scan_budget_seconds
        walks = [_Walk(limits) for _ in parts]
        seen_dirs: list[set[str]] = [set() for _ in parts]

        def out_of_time() -> bool:
            return should_stop() or time.perf_counter() > deadline

        listed: list[list[Batch]] = [[] for _ in parts]
        sizes = [0] * len(parts)
        found: list[tuple[int, list[CachedDoc]]] = []
        scanned_bytes = 0

        def list_part(i: int) -> None:
            listed[i] = _list_tree(parts[i].root, parts[i].prefix, walks[i], parts[i].cache, seen_dirs[i],
                                   out_of_time)
            sizes[i] = sum(len(files) for _, files in listed[i])

        def read_part(i: int) -> None:
            nonlocal scanned_bytes
            part, walk = parts[i], walks[i]
            collector = _Collector(limits, walk, should_stop, reader, part.cache, deadline)
            if sizes[i] and out_of_time():
                walk.stop("time")  # the deadline passed in the parts before: not one cached file more
            else:
                collector.run(_fair_plan(listed[i], part.root, limits.scan_max_files, walk))
            if not walk.incomplete:
                part.cache.prune(part.prefix, collector.docs, seen_dirs[i])
            scanned_bytes += collector.scanned_bytes
            collector.docs.sort(key=_path_of)
            found.append((i, collector.docs))

        own = [i for i, p in enumerate(parts) if p.label == ""]
        mounts = [i for i, p in enumerate(parts) if p.label != ""]
        for i in own:  # listed and read before any mount is listed: a slow listing cuts a team's notes, not these
            list_part(i)
            read_part(i)
        for i in mounts:
            list_part(i)
        for i in sorted(mounts, key=lambda i: (sizes[i], i)):
            read_part(i)
        ranked: list[tuple[tuple[int, int, str], str, Haystack, int, list[int]]] = []
        candidates = 0
        for i, docs in found:
            hay = parts[i].cache.haystack_for(docs)
            hits = _presence(hay, folded_kws)
            candidates += len(hits)
            for index, matched in _top(hits, docs, folded_str, limit):
                where = sum(1 for k in matched if folded_str[k] in docs[index].where)
                label = parts[i].label
                ranked.append(((-len(matched), -where, label + docs[index].path), label, hay, index, matched))
    finally:
        for lock in reversed(locks):
            lock.release()
    ranked.sort(key=lambda item: item[0])
    reasons: list[str] = []
    for walk in walks:
        reasons += [r for r in walk.reasons if r not in reasons]
    result: dict[str, Any] = {
        "matches": [], "candidates": candidates, "incomplete": any(w.incomplete for w in walks),
        "incomplete_reasons": reasons,
        "unreadable": [p.label + u for p, w in zip(parts, walks, strict=True) for u in w.unreadable],
        "scanned_files": sum(len(docs) for _, docs in found), "scanned_bytes": scanned_bytes,
        "truncated": candidates > limit,
        "parts": [{"mount": p.label, "scanned_files": len(docs), "incomplete_reasons": walks[i].reasons}
                  for p, (i, docs) in zip(parts, sorted(found), strict=True)],
    }
    errors = sorted({e for w in walks for e in w.storage_errors})
    if errors:
        result["storage_errors"] = errors
    size = packed_size(result)
    for _, label, hay, index, matched in ranked[:limit]:
        match = _match(hay, index, matched, keywords, folded_str, folded_kws, limits)
        match["path"] = label + match["path"]
        grow = packed_size(match) + 2
        if size + grow > limits.response_max_bytes - limits.response_envelope_bytes:
            result["truncated"] = True
            break
        result["matches"].append(match)
        size += grow
    return result


def _labelled(result: dict[str, Any], label: str) -> dict[str, Any]:
    """A one-part answer with its paths under ``label`` (unchanged for the root)."""
    if label:
        for match in result["matches"]:
            match["path"] = label + match["path"]
        result["unreadable"] = [label + u for u in result["unreadable"]]
    return result
