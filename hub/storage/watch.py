"""The kernel's change notifications, so a warm search need not ``lstat`` every file (DESIGN.md §5.5).

People edit the Markdown files by hand, so the content cache checks each
document against the file before a search uses it.  With :class:`Watcher`
(Linux ``inotify``, one instance a Hub), every folder a search plans is watched
from before its files are ``lstat``-ed; a document found fresh (or read) after
that stays trusted until an event names it, and a warm search takes it with a
dictionary look-up instead of a system call (figures: ``bench/reach.py``'s
rows in ``bench/results/notes.md``).

Trust is only ever lost, never guessed.  An event on a name untrusts that
document; an event on the folder itself (deleted, moved, ``chmod``-ed), a queue
overflow (``IN_Q_OVERFLOW``), a mount or unmount anywhere (``/proc/self/mountinfo``
polls ``POLLPRI``), or more than :data:`PENDING_MAX` events waiting for one scope
untrust the folder or every scope.  Events are read at the start of each search,
under the scope's lock; those of other scopes wait in their scope's list and are
applied by that scope's next search, under its lock, so a change made before a
search started is always seen by it.  Some changes send the folder no event: a
file with a second hard link is never trusted, a folder on a file system that is
not local is never watched (:func:`local_file_system`: NFS, SMB, FUSE... do not
report changes made elsewhere), and for the rest (a hard link made after the file
was trusted and written through, a shared ``mmap``) a folder's trust lasts
:data:`TRUST_SECONDS` while it is searched.  Without ``inotify`` (another OS, no
instance left, ``hub.watch_files`` false) every file is ``lstat``-ed, as before.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

WATCH_MASK = 0x2 | 0x4 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800 | 0x1000000
"""``IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF |
IN_MOVE_SELF | IN_ONLYDIR``: a change to a file's bytes, metadata or name, and the folder's own end."""
FOLDER_GONE_MASK = 0x400 | 0x800 | 0x2000 | 0x8000
"""``IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED``: the watch no longer stands for the folder."""
OVERFLOW_MASK = 0x4000
"""``IN_Q_OVERFLOW``: events were lost."""

PENDING_MAX = 1024
"""Events kept for one scope between its searches, at most (about 150 KiB); past it the scope trusts nothing until
its next search has ``lstat``-ed every file again (about 5 ms for 1,000 notes): a bound on memory for a scope
that changes while nobody searches it.  Only events that can name a document (``*.md``) or the folder are kept,
so the Hub's own temporary files cost none."""

TRUST_SECONDS = 30.0
"""A folder's documents are ``lstat``-ed again at least this often while searched (a new :class:`FolderWatch` each
time): a change that sends the folder no event (a write through a hard link made after the file was trusted, a
shared ``mmap``) shows within this time.  Costs one ``lstat`` a document every 30 s of searching."""

UNVISITED_SECONDS = 300.0
"""A folder no search has visited for this long stops being watched (looked for at most every
:data:`TRUST_SECONDS` a scope): a folder whose parent was moved out of the scope gets no event of its own."""

WATCHES_MAX = 4096
"""Folders one Hub watches at most (each costs the kernel about 1 KiB): other programs of the same user (editors,
build tools) share ``fs.inotify.max_user_watches``, 8,192 on older kernels.  A folder past it is ``lstat``-ed."""

LOCAL_FILE_SYSTEMS = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs", "bcachefs", "jfs", "reiserfs", "nilfs2", "tmpfs",
    "ramfs", "overlay", "hfsplus", "vfat", "exfat", "ntfs3",
})
"""File systems whose every change goes through this kernel, so ``inotify`` reports it."""


class FolderWatch:
    """One watched folder of a scope: its watch descriptor, its absolute path, the logical path before its files'
    names (``""`` at the top, else ``"dir/"``) and its ``(st_dev, st_ino)``.  ``live`` turns false, under the
    scope's lock, when the watch stops standing for the folder or its :data:`TRUST_SECONDS` end (``renew_at``,
    monotonic seconds); a cached document is trusted while its ``watch`` is this object.  ``visited``: when a
    search last took it (monotonic seconds)."""

    __slots__ = ("wd", "absdir", "prefix", "identity", "live", "renew_at", "visited")

    def __init__(self, wd: int, absdir: str, prefix: str, identity: tuple[int, int], now: float) -> None:
        self.wd = wd
        self.absdir = absdir
        self.prefix = prefix
        self.identity = identity
        self.live = True
        self.renew_at = now + TRUST_SECONDS
        self.visited = now


@dataclass(eq=False)
class ScopeWatch:
    """One scope's watched folders (absolute path → :class:`FolderWatch`, changed under the scope's lock) and
    what the kernel said about them since the scope's last search (``pending``: ``(folder, name)``, ``name``
    None when the folder itself went; ``lost``: trust nothing), both kept under the :class:`Watcher`'s lock.
    ``key`` names it in its watcher, which holds it only weakly (no cycle keeps a Hub's instance open)."""

    watcher: Watcher
    key: int
    folders: dict[str, FolderWatch] = field(default_factory=dict)
    pending: list[tuple[FolderWatch, str | None]] = field(default_factory=list)
    lost: bool = False
    sweep_at: float = 0.0
    """When (monotonic seconds) to look for folders unvisited for :data:`UNVISITED_SECONDS`."""

    def refresh(self) -> list[str]:
        """Read the kernel's events and apply this scope's (caller holds the scope's lock): folders that went
        are no longer live.  Returns the logical paths whose documents are no longer trusted."""
        return self.watcher.refresh(self)

    def folder(self, absdir: str, dir_fd: int, prefix: str) -> FolderWatch | None:
        """The live watch of the folder open as ``dir_fd`` (caller holds the scope's lock), added now when it
        has none; None when its files cannot be trusted (see :meth:`Watcher.folder`)."""
        return self.watcher.folder(self, absdir, dir_fd, prefix)

    def forget(self, absdir: str | None = None) -> None:
        """Stop watching one folder (``absdir``), or all of this scope's when None."""
        self.watcher.forget(self, absdir)


class Watcher:
    """The Hub's one ``inotify`` instance and what each watch descriptor stands for (DESIGN.md §5.5).

    Thread-safe: searches of different scopes run in worker threads at once.
    ``lock`` guards the instance, the map of descriptors and every scope's
    ``pending`` and ``lost``.  The instance is made by the first folder to
    watch (a Hub that never searches holds none; an instance refused, as when
    ``max_user_instances`` is used up, means nothing is trusted) and closed by
    :meth:`close` (the Hub's shutdown) or with the watcher.  :meth:`start`
    returns None where ``inotify`` does not exist.
    """

    def __init__(self) -> None:
        """Raises ``ImportError`` (or ``OSError``) off Linux, where there is no ``inotify``."""
        import inotify_simple  # type: ignore[import-untyped]  # no stubs; a literal ctypes wrapper

        self.make_instance: Any = inotify_simple.INotify
        """Makes the instance (``inotify_simple.INotify``; tests stand in a refusal)."""
        self.inotify: Any = None
        """The instance once made (an ``inotify_simple.INotify``, a file object)."""
        self.closed = False
        self.lock = threading.Lock()
        self.by_wd: dict[int, tuple[int, FolderWatch]] = {}
        """Watch descriptor → ``(ScopeWatch.key, folder)``."""
        self._scopes: weakref.WeakValueDictionary[int, ScopeWatch] = weakref.WeakValueDictionary()
        self._keys = itertools.count()
        self.local: dict[int, bool] = {}
        """``st_dev`` → whether :func:`local_file_system` says so (read once a device, again after a mount)."""
        self.mounts: Any = None
        """``/proc/self/mountinfo``, open with the instance: it polls ``POLLPRI`` when a mount or unmount changes
        what a path names (a file bind-mounted over a note sends no ``inotify`` event), and then nothing is
        trusted."""
        self._mounts_poll = select.poll()

    @classmethod
    def start(cls) -> Watcher | None:
        """A watcher, or None where the system has no ``inotify`` (another OS)."""
        try:
            return cls()
        except (OSError, ImportError, AttributeError):
            return None

    def scope(self) -> ScopeWatch:
        """A new scope's watch set (registered, so a queue overflow reaches it)."""
        with self.lock:
            watch = ScopeWatch(self, next(self._keys))
            self._scopes[watch.key] = watch
        return watch

    def close(self) -> None:
        """Close the instance (every watch goes with it); from then on nothing is trusted."""
        with self.lock:
            self.closed = True
            for scope in self._scopes.values():
                scope.lost = True
            self.by_wd.clear()
            if self.inotify is not None:
                self.inotify.close()
            if self.mounts is not None:
                self.mounts.close()

    def _instance(self) -> Any:
        """The instance, made now if need be; None once closed or when the system refuses one (caller holds
        :attr:`lock`)."""
        if self.inotify is None and not self.closed:
            try:
                self.mounts = open("/proc/self/mountinfo", "rb")  # noqa: SIM115 (kept open, closed by close())
                self.mounts.read()
                self._mounts_poll.register(self.mounts, select.POLLPRI)
                self.inotify = self.make_instance(nonblocking=True)
            except (OSError, AttributeError):
                self.closed = True  # EMFILE, no /proc: searches lstat every file, as without a watcher
                if self.mounts is not None:
                    self.mounts.close()
        return None if self.closed else self.inotify

    def _mounts_changed(self) -> bool:
        """Whether a mount or unmount happened since the last look (caller holds :attr:`lock`); re-arms it."""
        if self.mounts is None or not self._mounts_poll.poll(0):
            return False
        self.mounts.seek(0)
        self.mounts.read()
        return True

    def drain(self) -> None:
        """Read every waiting event and give each to its scope (caller holds :attr:`lock`)."""
        if self.inotify is None or self.closed:
            return
        if self._mounts_changed():
            self.local.clear()
            for every in self._scopes.values():
                every.lost = True
                every.pending.clear()
        for event in self.inotify.read(timeout=0):
            if event.mask & OVERFLOW_MASK:
                for every in self._scopes.values():
                    every.lost = True
                    every.pending.clear()
                continue
            owner = self.by_wd.get(event.wd)
            if owner is None:
                continue
            key, folder = owner
            gone = bool(event.mask & FOLDER_GONE_MASK) or not event.name  # no name: the folder itself (chmod)
            if event.mask & 0x8000:  # IN_IGNORED: the kernel dropped the watch
                del self.by_wd[event.wd]
            scope = self._scopes.get(key)
            if scope is None or scope.lost or not (gone or event.name.endswith(".md")):
                continue
            if len(scope.pending) >= PENDING_MAX:
                scope.lost = True
                scope.pending.clear()
                continue
            scope.pending.append((folder, None if gone else event.name))

    def refresh(self, scope: ScopeWatch) -> list[str]:
        """:meth:`ScopeWatch.refresh`."""
        with self.lock:
            self.drain()
            events, scope.pending = scope.pending, []
            lost, scope.lost = scope.lost, False
            if lost:
                for folder in list(scope.folders.values()):
                    self._drop(scope, folder)
                return []
            stale: list[str] = []
            for folder, name in events:
                if name is not None:
                    stale.append(folder.prefix + name)
                    continue
                current = scope.folders.get(folder.absdir)  # the folder's watch, renewed since the event perhaps
                if current is not None and current.wd == folder.wd:
                    self._drop(scope, current)
            now = time.monotonic()
            if now >= scope.sweep_at:
                scope.sweep_at = now + TRUST_SECONDS
                for folder in [f for f in scope.folders.values() if f.visited < now - UNVISITED_SECONDS]:
                    self._drop(scope, folder)
            return stale

    def _drop(self, scope: ScopeWatch, folder: FolderWatch) -> None:
        """Stop watching one of ``scope``'s folders: its documents are ``lstat``-ed again (caller holds
        :attr:`lock` and the scope's)."""
        folder.live = False
        self._unwatch(folder)
        if scope.folders.get(folder.absdir) is folder:
            del scope.folders[folder.absdir]

    def folder(self, scope: ScopeWatch, absdir: str, dir_fd: int, prefix: str) -> FolderWatch | None:
        """:meth:`ScopeWatch.folder`: None when the folder is on a file system that is not local, its watch
        cannot be added (``ENOSPC``: ``max_user_watches`` used up; :data:`WATCHES_MAX` reached) or another scope
        watches the same folder;
        a folder now another directory than the one watched gets a new watch."""
        try:
            st = os.fstat(dir_fd)
        except OSError:
            return None
        identity = (st.st_dev, st.st_ino)
        now = time.monotonic()
        known = scope.folders.get(absdir)
        if known is not None and known.live and known.identity == identity:
            if now < known.renew_at:
                known.visited = now
                return known
            with self.lock:  # its trust has run out: the same kernel watch, a new object to trust on
                known.live = False
                renewed = FolderWatch(known.wd, absdir, prefix, identity, now)
                if self.by_wd.get(known.wd, (0, None))[1] is known:
                    self.by_wd[known.wd] = (scope.key, renewed)
                    scope.folders[absdir] = renewed
                    return renewed
        with self.lock:
            if known is not None:
                self._drop(scope, known)
            if self._scopes.get(scope.key) is not scope:
                return None  # dropped from the cache (ContentCache.trim) while its search waited: not watched
            inotify = self._instance()
            if inotify is None or len(self.by_wd) >= WATCHES_MAX:
                return None
            local = self.local.get(st.st_dev)
            if local is None:
                local = self.local[st.st_dev] = local_file_system(absdir)
            if not local:
                return None
            try:  # the folder open as dir_fd, whatever its path names now
                wd = inotify.add_watch(f"/proc/self/fd/{dir_fd}", WATCH_MASK)
            except OSError:
                return None
            if wd in self.by_wd:
                return None  # another scope's folder (a bind mount): its events go there
            made = FolderWatch(wd, absdir, prefix, identity, now)
            self.by_wd[wd] = (scope.key, made)
            scope.folders[absdir] = made
            return made

    def forget(self, scope: ScopeWatch, absdir: str | None) -> None:
        """:meth:`ScopeWatch.forget`; forgetting a whole scope also unregisters it."""
        with self.lock:
            chosen = list(scope.folders) if absdir is None else [absdir]
            for key in chosen:
                folder = scope.folders.get(key)
                if folder is not None:
                    self._drop(scope, folder)
            if absdir is None:
                self._scopes.pop(scope.key, None)

    def _unwatch(self, folder: FolderWatch) -> None:
        """Remove ``folder``'s kernel watch if it still stands for it (caller holds :attr:`lock`)."""
        owner = self.by_wd.get(folder.wd)
        if owner is not None and owner[1] is folder:
            del self.by_wd[folder.wd]
            if self.inotify is not None and not self.closed:
                with contextlib.suppress(OSError):  # already gone with its folder
                    self.inotify.rm_watch(folder.wd)

    @property
    def watches(self) -> int:
        """How many folders are watched now."""
        with self.lock:
            return len(self.by_wd)


def _unescape(field_text: str) -> str:
    r"""A ``/proc/self/mountinfo`` path field: ``\040`` and the like back to their characters."""
    if "\\" not in field_text:
        return field_text
    out, i = [], 0
    while i < len(field_text):
        if field_text[i] == "\\" and field_text[i + 1 : i + 4].isdigit():
            out.append(chr(int(field_text[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field_text[i])
            i += 1
    return "".join(out)


def file_system_of(path: str, mountinfo: str) -> str:
    """The type of the file system ``path`` (absolute, symlinks resolved) lies on, by the longest mount point of
    ``mountinfo`` (the text of ``/proc/self/mountinfo``) that holds it; ``""`` when none does."""
    best, kind = -1, ""
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if " - " not in line or len(fields) < 5:
            continue
        point = _unescape(fields[4])
        inside = path == point or point == "/" or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best:
            best, kind = len(point), line.split(" - ", 1)[1].split(" ", 1)[0]
    return kind


def local_file_system(path: str) -> bool:
    """Whether ``path`` lies on one of :data:`LOCAL_FILE_SYSTEMS` (False when that cannot be told)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
    except OSError:
        return False
    return file_system_of(os.path.realpath(path), text) in LOCAL_FILE_SYSTEMS
