"""The one bounded walker over a scope's tree: which entries count, and the orders callers need.

Every walk of a scope (and of a project library, which has a scope's rules)
goes through here (DESIGN.md §4.6, §5.4, §5.8):

* the per-entry rule, :func:`entry_kind`: only a real directory (``DIR``) or
  a regular ``*.md`` file (``MARKDOWN``) can be or lead to a document.
  Symlinks are never followed nor counted, and FIFOs, devices, images,
  ``.txt`` files and the Hub's ``.amux-tmp`` temporaries are dropped at no
  cost to any entry bound (a raw-entry bound, :data:`hub.storage.cache.RAW_ENTRIES_FACTOR`
  times the folder bound, still caps what one folder costs to list);
* the search's order, :func:`breadth_first`: the top level, then depth 1 in
  name order, then depth 2, ..., over cached listings (:func:`cached_listing`,
  DESIGN.md §5.4.1, §5.5);
* the depth-first order of ``list``, ``log``, ``scan`` and the project
  library (:func:`walk_documents`, whose callers sort the paths) and of the
  quota count (:func:`count_documents`, DESIGN.md §4.7), both over
  :func:`depth_first`.

Each walk is bounded and never raises for the tree's contents: a folder or
file that cannot be read is reported and the rest is still walked.
Blocking: run it in a worker thread.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from amux_memory.hub.storage.cache import DIR, MARKDOWN, RAW_ENTRIES_FACTOR, Listing, ScopeCache, is_racy
from amux_memory.hub.storage.faults import MAX_REPORTED_PATHS, SCOPE_ROOT, short_path
from amux_memory.protocol.limits import ENTRY_NAME, Limits
from amux_memory.protocol.paths import is_canonical_path, is_reserved

FileEntry = tuple[str, str]
"""``(logical path, file name)`` of one Markdown file."""

Batch = tuple[str, list[FileEntry]]
"""``(absolute directory, its files)``: the Markdown files of one directory, in name order."""


# -- the per-entry rule ----------------------------------------------------------------------


def entry_kind(entry: os.DirEntry[str]) -> int | None:
    """``DIR`` for a directory, ``MARKDOWN`` for a regular ``*.md`` file, None for anything else.

    Never follows a symlink (a link is None whatever it points at, DESIGN.md
    §4.6); None entries cost no entry budget (DESIGN.md §5.4).  Uses the
    directory entry's type, so it costs a ``stat`` only where the file system
    does not report one.
    """
    if entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
        return MARKDOWN
    return DIR if entry.is_dir(follow_symlinks=False) else None


def leads_to(folder: str, prefix: str) -> bool:
    """Whether the logical ``folder`` (ending in ``/``, or ``""``) can hold a path starting with ``prefix``."""
    return folder.startswith(prefix) or prefix.startswith(folder)


# -- listings (the search's walk) ----------------------------------------------------------------


def read_listing(absdir: str, st: os.stat_result, max_entries: int) -> Listing:
    """List ``absdir`` (``st``: its ``lstat``): its :func:`entry_kind` entries, sorted by name.

    At most ``max_entries`` entries are kept, and at most
    :data:`hub.storage.cache.RAW_ENTRIES_FACTOR` times that many raw entries read;
    ``truncated`` says a bound cut the listing.  Raises OSError.
    """
    entries: list[tuple[str, int]] = []
    truncated = False
    raw_left = max_entries * RAW_ENTRIES_FACTOR
    with os.scandir(absdir) as it:
        for entry in it:
            raw_left -= 1
            if raw_left < 0:
                truncated = True
                break
            kind = entry_kind(entry)
            if kind is None:
                continue
            if len(entries) >= max_entries:
                truncated = True
                break
            entries.append((entry.name, kind))
    entries.sort()
    return Listing(st.st_mtime_ns, st.st_ino, st.st_ctime_ns, entries, truncated, is_racy(st.st_mtime_ns))


def cached_listing(cache: ScopeCache, absdir: str, max_entries: int) -> Listing:
    """The directory's listing, from ``cache`` while the directory is unchanged (:meth:`Listing.fresh`), else
    read again and cached (DESIGN.md §5.5).  Raises OSError (``NotADirectoryError`` for anything but a
    directory, a symlink included)."""
    st = os.lstat(absdir)
    cached = cache.listings.get(absdir)
    if cached is not None and cached.fresh(st):
        return cached
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(absdir)
    listing = cache.listings[absdir] = read_listing(absdir, st, max_entries)
    return listing


def split_listing(listing: Listing, rel: str) -> tuple[list[FileEntry], list[tuple[int, str]]]:
    """``listing``'s entries under the logical folder ``rel`` as the search's walk reads them, computed once per
    listing (:attr:`hub.storage.cache.Listing.split`): the ``*.md`` files ``[(logical path, name)]`` and the
    subfolders ``[(how many of those files come before it, name)]``, in name order.  At the top level a reserved
    name (a mount's, DESIGN.md §7.8) is neither."""
    memo = listing.split.get(rel)
    if memo is None:
        files: list[FileEntry] = []
        folders: list[tuple[int, str]] = []
        for name, kind in listing.entries:
            if not rel and is_reserved(name):
                continue
            if kind == MARKDOWN:
                files.append((rel + name, name))
            elif kind == DIR:
                folders.append((len(files), name))
        memo = listing.split[rel] = (files, folders)
    return memo


class Tracker(Protocol):
    """What :func:`breadth_first` reports to: the scan's budget state (``hub.methods.search``)."""

    entries: int
    """Entries counted toward ``scan_max_total_entries`` so far."""

    def skip(self, reason: str) -> None:
        """The result is incomplete for ``reason``; the walk goes on."""

    def stop(self, reason: str) -> None:
        """The result is incomplete for ``reason`` and the scan ends."""

    def cannot_list(self, logical: str, exc: OSError) -> None:
        """The folder ``logical`` (:data:`hub.storage.faults.SCOPE_ROOT` for the scope's own) could not be listed."""


@dataclass
class _BreadthFirst:
    """One breadth-first listing of a scope (state of :func:`breadth_first`)."""

    root: str
    prefix: str
    cache: ScopeCache
    tracker: Tracker
    limits: Limits
    work_left: int
    queue: deque[tuple[str, str]] = field(default_factory=deque)
    listed: list[Batch] = field(default_factory=list)

    def run(self, seen_dirs: set[str], out_of_time: Callable[[], bool]) -> list[Batch]:
        """List folders until the queue is empty or a bound or ``out_of_time`` stops the walk."""
        self.queue.append((self.root, ""))
        count = 0
        while self.queue:
            absdir, rel = self.queue.popleft()
            count += 1
            if count % 16 == 0 and out_of_time():
                self.tracker.stop("time")
                break
            listing = self.listing(absdir, rel)
            if listing is None:
                continue
            seen_dirs.add(absdir)
            if not self.folder(absdir, rel, listing):
                break
        return self.listed

    def listing(self, absdir: str, rel: str) -> Listing | None:
        """The folder's listing, or None when it is gone or cannot be read (then reported)."""
        try:
            return cached_listing(self.cache, absdir, self.limits.scan_max_dir_entries)
        except (FileNotFoundError, NotADirectoryError):
            return None  # gone (or replaced by a file or symlink) since its parent was listed
        except OSError as exc:
            self.tracker.cannot_list(rel or SCOPE_ROOT, exc)
            return None

    def folder(self, absdir: str, rel: str, listing: Listing) -> bool:
        """Note one folder's ``*.md`` names and queue its subfolders; False when the walk must stop."""
        if listing.truncated:
            self.tracker.skip("directory entries")
        self.work_left -= len(listing.entries)
        every, folders = split_listing(listing, rel)
        cut, full = len(every), False
        for before, name in folders:
            if not self.subfolder(absdir + "/" + name, rel + name + "/"):
                cut, full = before, True  # the files listed after this folder are not reached
                break
        files = [f for f in every[:cut] if f[0].startswith(self.prefix)] if self.prefix else every[:cut]
        if not rel:
            self.entry_first(listing, files)
        self.listed.append((absdir, files))
        if full:
            return False
        if self.work_left <= 0 and self.queue:
            self.tracker.skip("total entries")
            return False
        return True

    def subfolder(self, absdir: str, sub: str) -> bool:
        """Queue a subfolder that can lead to the prefix (one total entry); False once the total bound is passed."""
        if not leads_to(sub, self.prefix):
            return True
        self.tracker.entries += 1
        if self.tracker.entries > self.limits.scan_max_total_entries:
            self.tracker.skip("total entries")
            return False
        self.queue.append((absdir, sub))
        return True

    def entry_first(self, listing: Listing, files: list[FileEntry]) -> None:
        """Put ``MEMORY.md`` first among the top level's files, looking it up directly (one ``lstat``) when the
        listing was cut, so it is always a candidate (DESIGN.md §5.4.1)."""
        if listing.truncated and ENTRY_NAME.startswith(self.prefix) and (ENTRY_NAME, ENTRY_NAME) not in files:
            try:
                if stat.S_ISREG(os.lstat(self.root + "/" + ENTRY_NAME).st_mode):
                    files.append((ENTRY_NAME, ENTRY_NAME))  # cut from the listing, but always scanned
            except OSError:
                pass
        # MEMORY.md is read first of all: it is always scanned, whatever else the scope holds.
        files.sort(key=lambda f: f[0] != ENTRY_NAME)


def breadth_first(root: str, prefix: str, limits: Limits, cache: ScopeCache, tracker: Tracker,
                  seen_dirs: set[str], out_of_time: Callable[[], bool], max_names: int) -> list[Batch]:
    """Every folder's ``*.md`` names under ``root`` starting with ``prefix``, breadth-first (DESIGN.md §5.4.1).

    Returns ``(absolute folder, [(logical path, name)])`` in walk order: the
    top level first (``MEMORY.md`` first in it), then each folder at depth 1
    in name order, then depth 2, ...; folders that cannot lead to ``prefix``
    are pruned.  Listings come from ``cache`` (:func:`cached_listing`); each
    folder listed is added to ``seen_dirs``.  Only folders count toward
    ``limits.scan_max_total_entries`` here (``tracker.entries``; the ``*.md``
    names are shared out by the caller); at most ``max_names`` names are
    listed in all.  ``out_of_time`` is checked every 16 folders (then
    ``tracker.stop("time")``).  A folder that cannot be read goes to
    ``tracker.cannot_list`` and the rest is still listed.
    """
    walk = _BreadthFirst(root, prefix, cache, tracker, limits, max_names)
    return walk.run(seen_dirs, out_of_time)


# -- depth first (list, log, scan, the quota count) --------------------------------------------


@dataclass
class Folder:
    """One folder of a :func:`depth_first` walk.

    ``entries`` is its open directory listing (empty when ``error`` says it
    could not be listed); ``logical`` is ``""`` for the root, else ends in
    ``/``; ``mtime_ns`` is its ``lstat`` mtime when asked for (None
    otherwise or when that failed).
    """

    path: str
    logical: str
    entries: Iterator[os.DirEntry[str]]
    error: OSError | None = None
    mtime_ns: int | None = None
    stack: list[tuple[str, str]] = field(default_factory=list, repr=False)

    def descend(self, entry: os.DirEntry[str]) -> None:
        """Walk the subfolder ``entry`` too (after the folders entered since, depth first)."""
        self.stack.append((entry.path, self.logical + entry.name + "/"))


def depth_first(root: str, *, folder_mtimes: bool = False) -> Iterator[Folder]:
    """The folders under ``root`` (itself first) that callers :meth:`Folder.descend` into, depth first.

    A folder gone since its parent was listed (or a file there now) is left
    out; one that cannot be listed is yielded with ``error`` set.  With
    ``folder_mtimes`` each folder is ``lstat``-ed first (``mtime_ns``).  Each
    listing is closed when the caller moves to the next folder.
    """
    stack: list[tuple[str, str]] = [(root, "")]
    while stack:
        absdir, rel = stack.pop()
        mtime_ns: int | None = None
        try:
            if folder_mtimes:
                mtime_ns = os.stat(absdir, follow_symlinks=False).st_mtime_ns
            it = os.scandir(absdir)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            yield Folder(absdir, rel, iter(()), exc, mtime_ns, stack)
            continue
        with it:
            yield Folder(absdir, rel, it, None, mtime_ns, stack)


def entry_stat(entry: os.DirEntry[str]) -> os.stat_result | None:
    """The entry's ``lstat``, or None when it is gone since the listing (a write's temporary renamed, a
    ``forget``); raises any other OSError (``EACCES``, ``EIO``: the caller reports it)."""
    try:
        return entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        return None


@dataclass
class Walked:
    """What :func:`walk_documents` found: ``(logical path, bytes)`` entries (unsorted) and what it missed.

    ``reasons`` are the search's incomplete reasons that apply (``directory
    entries``, ``total entries``, ``unreadable``); ``unreadable`` names the
    folders and files that could not be read (logical, at most
    :data:`hub.storage.faults.MAX_REPORTED_PATHS`).
    """

    found: list[tuple[str, int]] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    mtimes: dict[str, int] = field(default_factory=dict)
    """Each found document's mtime in epoch nanoseconds (the history's reconcile, DESIGN.md §15.1)."""
    stats: dict[str, os.stat_result] = field(default_factory=dict)
    """Each found document's ``lstat`` (``health`` checks its cached entry against it, :meth:`CachedDoc.fresh`)."""
    seen: int = 0
    """Entries counted toward ``scan_max_total_entries`` so far."""

    def miss(self, reason: str, path: str | None = None) -> None:
        """Record that the walk missed something (``reason``), naming ``path`` if it was unreadable."""
        if reason not in self.reasons:
            self.reasons.append(reason)
        if path is not None and len(self.unreadable) < MAX_REPORTED_PATHS:
            self.unreadable.append(short_path(path))


def walk_documents(root: str, prefix: str, limits: Limits) -> Walked:
    """All ``(logical path, bytes)`` of regular ``.md`` files under ``root`` starting with ``prefix``, depth first.

    Only :func:`entry_kind` entries count toward the directory-entry bounds
    (``scan_max_dir_entries`` per folder, ``scan_max_total_entries`` in all,
    DESIGN.md §5.4, §5.8); names that are not valid logical paths are
    skipped; a folder or file that cannot be read is reported and the rest is
    still walked.  Never raises for the tree's contents.
    """
    walked = Walked()
    for folder in depth_first(root):
        if folder.error is not None:
            walked.miss("unreadable", folder.logical or "/")
            continue
        _walk_folder(folder, prefix, limits, walked)
        if walked.seen > limits.scan_max_total_entries:
            break
    return walked


def _walk_folder(folder: Folder, prefix: str, limits: Limits, walked: Walked) -> None:
    """One folder of :func:`walk_documents`: its documents into ``walked``, its subfolders descended into."""
    raw_max = limits.scan_max_dir_entries * RAW_ENTRIES_FACTOR
    kept = 0
    for raw, entry in enumerate(folder.entries):
        if entry_kind(entry) is None:
            if raw >= raw_max:
                walked.miss("directory entries")
                break
            continue  # cannot be a document: costs no entry budget
        kept += 1
        walked.seen += 1
        if kept > limits.scan_max_dir_entries or raw >= raw_max:
            walked.miss("directory entries")
            break
        if walked.seen > limits.scan_max_total_entries:
            walked.miss("total entries")
            break
        _take(folder, entry, prefix, walked)


def _take(folder: Folder, entry: os.DirEntry[str], prefix: str, walked: Walked) -> None:
    """One counted entry of :func:`walk_documents`: a document under ``prefix`` is found, a folder that can
    lead to it descended into; one that cannot be ``lstat``-ed is reported, one gone since is left out."""
    logical = folder.logical + entry.name
    if is_reserved(logical):
        return  # a mount's name: no document of the scope (DESIGN.md §7.8)
    try:
        st = entry_stat(entry)
    except OSError:
        walked.miss("unreadable", logical)
        return
    if st is None:
        return
    if stat.S_ISDIR(st.st_mode):
        if leads_to(logical + "/", prefix):
            folder.descend(entry)
    elif (stat.S_ISREG(st.st_mode) and entry.name.endswith(".md")
          and logical.startswith(prefix) and is_canonical_path(logical)):
        walked.found.append((logical, st.st_size))
        walked.mtimes[logical] = st.st_mtime_ns
        walked.stats[logical] = st


@dataclass
class Counted:
    """What :func:`count_documents` found: documents, their bytes, and what the count could not see.

    ``unreadable`` names (logical, at most :data:`hub.storage.faults.MAX_REPORTED_PATHS`)
    what could not be read; ``complete`` is False when the entry bound stopped
    the walk; ``folders`` maps each folder walked (absolute) to its
    ``mtime_ns``.
    """

    documents: int = 0
    bytes: int = 0
    unreadable: list[str] = field(default_factory=list)
    complete: bool = True
    folders: dict[str, int] = field(default_factory=dict)

    def cannot_read(self, logical: str) -> None:
        """Name ``logical`` as unreadable (up to the bound)."""
        if len(self.unreadable) < MAX_REPORTED_PATHS:
            self.unreadable.append(short_path(logical))


def count_documents(scope_dir: str, max_entries: int) -> Counted:
    """Count the regular ``*.md`` files under ``scope_dir`` and their bytes, depth first (DESIGN.md §4.7).

    At most ``max_entries`` raw directory entries are read in all (stray
    files included, though they cost no ``stat``); past that ``complete`` is
    False and what was seen is counted.  Symlinks are not followed; names are
    not checked against the path rules (every ``*.md`` byte counts toward the
    quota), but a top-level entry reserved for mounts (``@…``) is passed over: no caller can reach what it
    holds, so it must not fill the quota (``amux doctor`` reports it).  Never raises for the tree's contents.
    """
    counted = Counted()
    entries_left = max_entries
    for folder in depth_first(scope_dir, folder_mtimes=True):
        if folder.mtime_ns is not None:
            counted.folders[folder.path] = folder.mtime_ns
        if folder.error is not None:
            counted.cannot_read(folder.logical or "/")
            continue
        entries_left = _count_folder(folder, entries_left, counted)
        if entries_left < 0:
            counted.complete = False
            break
    return counted


def _count_folder(folder: Folder, entries_left: int, counted: Counted) -> int:
    """One folder of :func:`count_documents`; returns the entries left (negative: the bound was passed)."""
    for entry in folder.entries:
        entries_left -= 1
        if entries_left < 0:
            break
        if entry_kind(entry) is None:
            continue  # a stray file (image, .txt, temporary): no stat, not counted
        if not folder.logical and is_reserved(entry.name):
            continue  # an '@' entry no caller can reach (DESIGN.md §7.8): not counted, 'amux doctor' names it
        try:
            st = entry_stat(entry)
        except OSError:
            counted.cannot_read(folder.logical + entry.name)
            continue
        if st is None:
            continue  # removed or renamed since the directory was read
        if stat.S_ISDIR(st.st_mode):
            folder.descend(entry)
        elif stat.S_ISREG(st.st_mode) and entry.name.endswith(".md"):
            counted.documents += 1
            counted.bytes += st.st_size
    return entries_left
