"""A bounded in-memory cache of document contents for the scan (DESIGN.md §5).

The Hub is the only online writer of its memory root, but people may edit the
files with a text editor, so every cached document is checked against the file
on every search: size, ``mtime_ns``, ``ctime_ns`` (a ``chmod`` changes only
that) and inode from the ``lstat`` the walk does anyway.  Any difference and
the file is read again.  Nothing here is an index: a search still tests every
document's full text, only without re-reading and re-folding unchanged files.

Memory is bounded: each scope's entry holds the raw bytes and one folded copy
(the scan's haystack), within ``max_bytes`` in all (``hub.cache_max_bytes``,
256 MiB by default).  Past it, documents are evicted from the least recently
used scopes first, largest first and only as many as needed
(:meth:`ContentCache.trim`), never from a scope a search is scanning: the
scopes in use stay warm, and one left behind keeps the rest of its documents.
The cache counts the documents a search took from it fresh (hits) and those
it read (misses): ``amux_search_cache_hits_total`` and ``..._misses_total``.

Thresholds (DESIGN.md §5.4, §5.5): a file or folder changed less than
:data:`RACY_NS` (2 s) before it was read is read again, since coarse
timestamps could hide a same-size edit; a listing reads at most
:data:`RAW_ENTRIES_FACTOR` (16) times its entry bound in raw entries, stray
files included (16 x 4,096 = 65,536 for one directory of a scan), so a
folder of stray files costs bounded work while they cost no budget.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from amux_memory.hub.storage.watch import FolderWatch, ScopeWatch, Watcher


def fold(text: str) -> str:
    """The matching form of text: NFC, then Unicode casefold (newlines preserved)."""
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    return text.casefold()


def title_line(text: str) -> str:
    """The document's first Markdown heading (after any frontmatter) in its first 400 lines, or ""."""
    first_end = text.find("\n")
    first = text if first_end < 0 else text[:first_end]
    if first.strip() == "---":
        lines = text.split("\n", 400)[1:400]
        for j, line in enumerate(lines):
            if line.strip() in ("---", "..."):
                lines = lines[j + 1 :]
                break
        return next((line for line in lines if line.startswith("#")), "")
    if first.startswith("#"):
        return first
    # The first line starting with "#", found at C speed; it must be one of the first 400 lines.
    at = text.find("\n#") + 1
    if at == 0 or text.count("\n", 0, at) >= 400:
        return ""
    end = text.find("\n", at)
    return text[at:] if end < 0 else text[at:end]


_ASCII = bytes(range(128))


def fold_document(data: bytes) -> bytes:
    """A file's bytes folded for matching: ``fold`` of the text decoded (invalid UTF-8 replaced), as UTF-8.

    Fast path, same result: when the bytes are valid UTF-8, already NFC, and
    none of their non-ASCII characters changes under casefold (dashes, quotes,
    emoji, CJK...), folding only lowercases ASCII letters, which ``bytes.lower``
    does in place (multi-byte UTF-8 sequences contain no ASCII bytes).

    The NFC test runs on the non-ASCII characters alone (a third of the work on
    the corpus) unless the bytes hold a lead byte ``0xCC``/``0xCD`` (U+0300 to
    U+037F): an ASCII character is a starter that never decomposes, and the only
    characters that compose with one are 26 combining marks in that range (with
    no later composite, by Unicode's stability policy), so the text is NFC when
    they are absent and the non-ASCII characters are.  ``tests/test_fold.py``
    checks both the claim and the result.
    """
    if data.isascii():  # ASCII is valid UTF-8 and NFC: no text to decode
        return data.lower()
    text = data.decode("utf-8", "replace")
    if "\ufffd" not in text:
        others = data.translate(None, _ASCII).decode("utf-8")
        if others.casefold() == others and unicodedata.is_normalized(
                "NFC", others if b"\xcc" not in data and b"\xcd" not in data else text):
            return data.lower()
    return fold(text).encode("utf-8")


@dataclass
class CachedDoc:
    """One document as the scan needs it.

    ``folded`` is the UTF-8 of :func:`fold` of the text (its lines correspond
    one to one with the file's lines).  :attr:`where` (the folded path and
    title, the ranking's second key) and :attr:`revision` are computed on first
    use: a cold search reads and folds every file, but ranks only candidates.
    """

    path: str
    size: int
    mtime_ns: int
    inode: int
    ctime_ns: int
    data: bytes
    folded: bytes | memoryview
    racy: bool = False
    nlink: int = 1
    """Hard links of the file when read: one with more is never trusted on a watch (:mod:`hub.storage.watch`)."""
    watch: FolderWatch | None = None
    """The live watch of its folder when a check after that watch began found it fresh, until an event names it
    (:mod:`hub.storage.watch`): a search then takes it without an ``lstat``."""
    _revision: str | None = None
    _where: str | None = None
    derived: Any = None
    """What another check derives from these bytes and keeps while they are fresh (``hub.methods.health``'s paragraphs
    and links, DESIGN.md §23); its size counts in :attr:`cost` through :attr:`derived_bytes`."""
    derived_bytes: int = 0

    @classmethod
    def load(cls, path: str, st: os.stat_result, data: bytes) -> CachedDoc:
        """Build an entry from a file's ``lstat`` and the bytes read after it."""
        return cls(path, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, data, fold_document(data),
                   racy=is_racy(st.st_mtime_ns), nlink=st.st_nlink)

    @property
    def where(self) -> str:
        """The folded path and title (:func:`title_line`), ``"path\ntitle"``, for the ranking (computed once)."""
        if self._where is None:
            self._where = fold(self.path) + "\n" + fold(title_line(self.data.decode("utf-8", "replace")))
        return self._where

    def trust(self, watch: FolderWatch | None, nlink: int | None = None) -> None:
        """Trust this entry on ``watch`` (its folder's, begun before the ``lstat`` that found it fresh, whose
        ``st_nlink`` is ``nlink``) until an event names it; not when the file has other hard links or was read
        too soon after a change (racy)."""
        if nlink is not None:
            self.nlink = nlink
        self.watch = watch if watch is not None and self.nlink == 1 and not self.racy else None

    def fresh(self, st: os.stat_result) -> bool:
        """True if the file still has the size, mtime, ctime and inode this entry was read with (a ``chmod``
        changes only the ctime: a document made unreadable is read again, and reported, DESIGN.md §5.5).

        An entry read within :data:`RACY_NS` of the file's last change is never
        fresh: file timestamps are coarse, so a second same-size edit in the same
        tick would otherwise go unseen.
        """
        return (not self.racy and self.size == st.st_size and self.mtime_ns == st.st_mtime_ns
                and self.inode == st.st_ino and self.ctime_ns == st.st_ctime_ns)

    @property
    def revision(self) -> str:
        """The document's revision: SHA-256 of its bytes, hex (computed once, on first use; DESIGN.md §4)."""
        if self._revision is None:
            self._revision = hashlib.sha256(self.data).hexdigest()
        return self._revision

    @property
    def cost(self) -> int:
        """Bytes this entry keeps alive: raw plus folded plus :attr:`derived_bytes`."""
        return len(self.data) + len(self.folded) + self.derived_bytes


RACY_NS = 2_000_000_000
"""A file or directory changed less than this long ago (ns) is re-read rather than trusted."""


def is_racy(mtime_ns: int) -> bool:
    """True for a change (``mtime_ns``, epoch ns) less than :data:`RACY_NS` ago: what was read then is not trusted."""
    return mtime_ns >= time.time_ns() - RACY_NS


DIR, MARKDOWN = 0, 1

RAW_ENTRIES_FACTOR = 16
"""A listing reads at most this many times its entry bound in raw entries (stray files included)."""


@dataclass(frozen=True)
class Listing:
    """A directory's sorted candidate entries ``(name, kind)`` (kind: DIR or MARKDOWN), valid
    while the directory keeps its mtime and inode.

    Only entries that can be or lead to a document are kept: directories and
    regular ``*.md`` files (:func:`hub.storage.walk.entry_kind`, which reads it:
    :func:`hub.storage.walk.read_listing`).  Symlinks, other files and the Hub's temporary
    files are left out and do not count toward the entry bound (DESIGN.md
    §5.4); ``truncated`` says the bound (or :data:`RAW_ENTRIES_FACTOR` times
    it in raw entries) cut the listing.
    """

    mtime_ns: int
    inode: int
    ctime_ns: int
    entries: list[tuple[str, int]]
    truncated: bool
    racy: bool
    split: dict[str, tuple[list[tuple[str, str]], list[tuple[int, str]]]] = field(
        default_factory=dict, compare=False, repr=False)
    """The search walk's reading of :attr:`entries` under a logical folder (``""``, ``"a/"``...), kept while the
    listing is: ``([(logical path, name)] of the ``*.md`` files, [(files before it, name)] of the folders)``
    (:func:`hub.storage.walk.split_listing`; a reserved name at the top level is neither)."""

    def fresh(self, st: os.stat_result) -> bool:
        """True while ``st`` (a new ``stat`` of the directory) shows the same inode, mtime and ctime (a ``chmod``
        changes only the ctime), and the listing
        was not taken in the same timestamp tick as a change (``racy``): then it can be used as is."""
        return (not self.racy and self.mtime_ns == st.st_mtime_ns and self.inode == st.st_ino
                and self.ctime_ns == st.st_ctime_ns and stat.S_ISDIR(st.st_mode))


@dataclass
class Haystack:
    """All scanned documents' folded text joined by ``\\n`` (no keyword contains one),
    with each document's start offset, in scan order."""

    docs: list[CachedDoc]
    blob: bytes
    starts: list[int]


@dataclass
class ScopeCache:
    """Cached documents of one scope and the last haystack built from them.

    ``lock`` serialises updates for the scope (searches run in worker threads);
    ``bytes`` is the sum of the entries' costs.
    """

    docs: dict[str, CachedDoc] = field(default_factory=dict)
    listings: dict[str, Listing] = field(default_factory=dict)
    haystack: Haystack | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    bytes: int = 0
    hits: int = 0
    """Documents a search took from this cache fresh (counted by the scan under :attr:`lock`)."""
    misses: int = 0
    """Documents a search had to read: absent from this cache or changed since."""
    derived: dict[str, Any] = field(default_factory=dict)
    """What another check keeps between calls for this scope's caller (``hub.methods.health``'s duplicate memo)."""
    watch: ScopeWatch | None = None
    """The scope's watched folders (:mod:`hub.storage.watch`); None: every file is ``lstat``-ed."""

    def refresh_watch(self) -> None:
        """Apply the kernel's events since the last search (caller holds :attr:`lock`): every document an event
        names, and every one in a folder no longer watched, is ``lstat``-ed again by the next scan."""
        if self.watch is not None:
            for path in self.watch.refresh():
                doc = self.docs.get(path)
                if doc is not None:
                    doc.watch = None

    def put(self, doc: CachedDoc) -> None:
        """Insert or replace one document."""
        self.drop(doc.path)
        self.docs[doc.path] = doc
        self.bytes += doc.cost

    def drop(self, path: str) -> None:
        """Forget one document, if cached."""
        old = self.docs.pop(path, None)
        if old is not None:
            self.bytes -= old.cost

    def evict(self, want: int) -> int:
        """Drop documents, largest first, until ``want`` bytes are freed or none is left (caller holds
        :attr:`lock`); returns the bytes freed.  The haystack is dropped and the documents kept get their own
        folded copy, so the joined text of the evicted ones is really freed."""
        freed = 0
        for doc in sorted(self.docs.values(), key=lambda d: d.cost, reverse=True):
            if freed >= want:
                break
            self.drop(doc.path)
            freed += doc.cost
        if freed:
            self.haystack = None
            for doc in self.docs.values():
                if isinstance(doc.folded, memoryview):
                    doc.folded = bytes(doc.folded)
        return freed

    def prune(self, prefix: str, seen: list[CachedDoc], seen_dirs: set[str]) -> None:
        """After a complete walk under ``prefix`` that took the documents ``seen`` (all of them entries of this
        cache): drop entries of files and directories that are gone.  When the walk covered the whole scope and
        took every entry, there is nothing to look for."""
        if prefix or len(seen) != len(self.docs):
            paths = {doc.path for doc in seen}
            for path in [p for p in self.docs if p.startswith(prefix) and p not in paths]:
                self.drop(path)
        if not prefix:
            for absdir in [d for d in self.listings if d not in seen_dirs]:
                del self.listings[absdir]
                if self.watch is not None:
                    self.watch.forget(absdir)

    def haystack_for(self, docs: list[CachedDoc]) -> Haystack:
        """The joined text of ``docs``; reused while the same document objects are scanned.

        A new one replaces the last: the documents of the last still cached but not in ``docs`` (a search under
        a narrower prefix) get their own folded copy, so no document keeps a replaced joined text alive (only
        the current one is counted in :attr:`bytes`, through its documents)."""
        old = self.haystack
        if old is not None and len(old.docs) == len(docs) and all(a is b for a, b in zip(old.docs, docs, strict=True)):
            return old
        if old is not None:
            taking = {id(doc) for doc in docs}
            for doc in old.docs:
                if id(doc) not in taking and isinstance(doc.folded, memoryview) and self.docs.get(doc.path) is doc:
                    doc.folded = bytes(doc.folded)
        starts = []
        pos = 0
        for doc in docs:
            starts.append(pos)
            pos += len(doc.folded) + 1
        blob = b"\n".join(doc.folded for doc in docs)
        view = memoryview(blob)
        for doc, start in zip(docs, starts, strict=True):
            # Share the blob's memory instead of keeping a second folded copy.
            doc.folded = view[start : start + len(doc.folded)]
        self.haystack = Haystack(docs, blob, starts)
        return self.haystack


class ContentCache:
    """Per-scope document caches with a total bound of ``max_bytes`` (DESIGN.md §5.5).

    :meth:`trim` evicts documents, not whole scopes: from the least recently used scope first, the largest
    documents first, as few as bring the total within the bound; a scope whose lock is held (a scan is using
    it) or that the caller is using is passed over while others can give.  :meth:`counts` sums the hits and
    misses of every scope the cache has held.
    """

    def __init__(self, max_bytes: int, watcher: Watcher | None = None) -> None:
        self.max_bytes = max_bytes
        self.watcher = watcher
        """Where each scope's watched folders come from (:mod:`hub.storage.watch`); None: none are watched."""
        self._scopes: OrderedDict[str, ScopeCache] = OrderedDict()
        self._lock = threading.Lock()
        self._retired = (0, 0)

    def scope(self, key: str) -> ScopeCache:
        """The cache of one scope (created empty), marked most recently used."""
        with self._lock:
            cache = self._scopes.get(key)
            if cache is None:
                cache = self._scopes[key] = ScopeCache(
                    watch=self.watcher.scope() if self.watcher is not None else None)
            self._scopes.move_to_end(key)
            return cache

    def held(self, key: str) -> ScopeCache | None:
        """The cache of one scope if it holds one, without marking it used."""
        with self._lock:
            return self._scopes.get(key)

    def trim(self, in_use: Collection[ScopeCache] = ()) -> int:
        """Evict documents until the total is within the bound; returns the bytes held.

        Least recently used scopes give first, the scopes ``in_use`` (the caller's search, which just ran) and
        those a scan holds now last: when only they are left over the bound, ``in_use`` give too (a search
        larger than the cache), a held one never (it is skipped, not waited for).  A scope left empty is
        forgotten (its counts kept in :meth:`counts`)."""
        with self._lock:
            total = sum(c.bytes for c in self._scopes.values())
            if total <= self.max_bytes:
                return total
            kept = {id(c) for c in in_use}
            order = list(self._scopes.items())
            order = [kc for kc in order if id(kc[1]) not in kept] + [kc for kc in order if id(kc[1]) in kept]
            for key, cache in order:
                if total <= self.max_bytes:
                    break
                if not cache.lock.acquire(blocking=False):
                    continue  # a scan is using it: it stays warm
                try:
                    total -= cache.evict(total - self.max_bytes)
                    if not cache.docs:
                        del self._scopes[key]
                        if cache.watch is not None:
                            cache.watch.forget()
                        hits, misses = self._retired
                        self._retired = (hits + cache.hits, misses + cache.misses)
                finally:
                    cache.lock.release()
            return total

    def held_bytes(self) -> int:
        """Bytes the scopes' entries hold now (:attr:`CachedDoc.cost` summed), at most ``max_bytes`` after a
        :meth:`trim` (a search still running may hold more until its own trim)."""
        with self._lock:
            return sum(c.bytes for c in self._scopes.values())

    def counts(self) -> tuple[int, int]:
        """``(hits, misses)``: documents searches took from the cache fresh, and read, since the Hub started."""
        with self._lock:
            hits, misses = self._retired
            for cache in self._scopes.values():
                hits += cache.hits
                misses += cache.misses
            return hits, misses

    def close(self) -> None:
        """Close the watcher's ``inotify`` instance, if any (the Hub's shutdown); searches then ``lstat`` every
        file again."""
        if self.watcher is not None:
            self.watcher.close()

    def watched_folders(self) -> int:
        """How many folders the kernel watches for the scopes' searches (0 without a watcher)."""
        return self.watcher.watches if self.watcher is not None else 0

    @property
    def scopes(self) -> int:
        """How many scopes have an entry in the cache now."""
        return len(self._scopes)
