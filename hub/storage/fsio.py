"""Symlink-safe, durable file primitives for the store (DESIGN.md §4).

Every lookup walks the logical path one segment at a time with
``openat(..., O_NOFOLLOW)`` from the scope root, so a symlink anywhere on the
way is refused without ever being followed, even if it appears between a
check and the use.  Writes go to a uniquely named temporary file in the
destination directory, are fsynced, renamed over the target, and the
directory is fsynced; only then is a write acknowledged.

Each step runs inside :func:`hub.storage.faults.step`, so a failure of the file system
(a full disk, a read-only mount, a folder the Hub may not read) is a
``storage_*`` or ``permission_denied`` error naming the errno, the operation
and the logical path, never ``internal`` (DESIGN.md §4.8).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from amux_memory.hub.storage.faults import SCOPE_ROOT, from_os_error, step
from amux_memory.protocol.errors import ErrorCode, HubError

TEMP_SUFFIX = ".amux-tmp"
"""Temporary files end with this (never ``.md``), so search and get never see them."""

CHUNK = 1 << 20

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _invalid(logical: str, why: str) -> HubError:
    return HubError(ErrorCode.INVALID_PATH, f"invalid path {logical!r}: {why}", {"path": logical, "reason": why})


def _explain(dir_fd: int, name: str, logical: str, exc: OSError) -> HubError:
    """Turn an open() failure on one segment into a clear ``invalid_path``."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return from_os_error(exc, "open", logical)
    if stat.S_ISLNK(st.st_mode):
        return _invalid(logical, f"'{name}' is a symlink; symlinks are never followed")
    if stat.S_ISDIR(st.st_mode):
        return _invalid(logical, f"'{name}' is a directory")
    return _invalid(logical, f"'{name}' is not a directory or regular file")


@dataclass
class OpenedParent:
    """An open directory fd for a document's parent, plus the directories created on the way.

    ``created`` lists ``(parent_fd, name)`` pairs, outermost first, for
    fsyncing parents and for undoing a failed write.
    """

    fd: int
    created: list[tuple[int, str]] = field(default_factory=list)
    _owned: list[int] = field(default_factory=list)

    def close(self) -> None:
        """Close the directory descriptors this walk opened (``fd`` among them); safe to call twice."""
        for fd in self._owned:
            os.close(fd)
        self._owned.clear()


@contextmanager
def open_parent(root: str, segments: list[str], logical: str, *, create: bool,
                dir_mode: int = 0o700) -> Iterator[OpenedParent | None]:
    """Open the directory holding ``segments[-1]`` under ``root`` without following symlinks.

    Yields None when a directory on the way is missing and ``create`` is
    False.  With ``create`` the missing directories are made (``dir_mode``,
    default 0700; the process umask applies too).
    Raises ``invalid_path`` for a symlink or a file where a directory belongs,
    and ``permission_denied`` / ``storage_*`` (:mod:`hub.storage.faults`) naming the
    folder for other failures (DESIGN.md §4.8).
    """
    opened = OpenedParent(fd=-1)
    yielded = False
    try:
        fd = _open_root(root, create, dir_mode)
        if fd is None:
            yielded = True
            yield None
            return
        opened._owned.append(fd)
        for depth, name in enumerate(segments[:-1]):
            folder = "/".join(segments[: depth + 1]) + "/"
            try:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    yielded = True
                    yield None
                    return
                with step("create directory", folder):
                    os.mkdir(name, dir_mode, dir_fd=fd)
                opened.created.append((fd, name))
                with step("open directory", folder):
                    nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _explain(fd, name, logical, exc) from None
                if exc.errno == errno.ENAMETOOLONG:
                    raise _invalid(logical, "a segment is too long for the file system") from None
                raise from_os_error(exc, "open directory", folder) from exc
            opened._owned.append(nfd)
            fd = nfd
        opened.fd = fd
        yielded = True
        yield opened
    except BaseException:
        if not yielded:
            remove_created(opened)  # a failed walk leaves no new directories behind
        raise
    finally:
        opened.close()


def _open_root(root: str, create: bool, dir_mode: int = 0o700) -> int | None:
    """Open a scope directory; it must be a real directory, never a symlink."""
    try:
        return os.open(root, _DIR_FLAGS)
    except FileNotFoundError:
        if not create:
            return None
        with step("create scope directory", SCOPE_ROOT):
            make_directories(root, dir_mode)
            return os.open(root, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise HubError(
                ErrorCode.INTERNAL,
                f"the memory scope directory {root} is not a plain directory (a symlink?); "
                "the Hub refuses to follow it — fix the memory root by hand",
            ) from None
        raise from_os_error(exc, "open scope directory", SCOPE_ROOT) from exc


def make_directories(path: str, mode: int = 0o700) -> list[str]:
    """Create directory ``path`` and its missing ancestors durably, like ``os.makedirs(exist_ok=True)``.

    One level at a time, outermost first: ``mkdir(name, mode)`` in the parent's descriptor, then
    ``fsync`` of that parent, so the new name survives a crash before anything is written inside it
    (DESIGN.md §4.5).  ``mode`` is masked by the umask.  A directory someone else makes meanwhile counts
    as existing.  Returns the absolute paths created (empty when ``path`` already exists).
    Raises :class:`OSError` (e.g. ``ENOTDIR`` when an ancestor is a file); callers map it with
    :func:`hub.storage.faults.step`.
    """
    head = os.path.abspath(path)
    missing: list[str] = []
    while not os.path.lexists(head):
        head, name = os.path.split(head)
        if not name:  # reached "/"
            break
        missing.append(name)
    created: list[str] = []
    for name in reversed(missing):
        parent_fd = os.open(head, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            try:
                os.mkdir(name, mode, dir_fd=parent_fd)
            except FileExistsError:
                pass
            else:
                os.fsync(parent_fd)
                created.append(os.path.join(head, name))
        finally:
            os.close(parent_fd)
        head = os.path.join(head, name)
    return created


def open_document(dir_fd: int, name: str, logical: str) -> tuple[int, os.stat_result] | None:
    """Open an existing regular file read-only without following a symlink: ``(fd, its fstat)``; None if missing.

    ``O_NONBLOCK`` keeps a hand-placed FIFO from hanging the Hub; anything but a
    regular file is ``invalid_path``; a file the Hub may not read is
    ``permission_denied`` and other failures ``storage_*`` (DESIGN.md §4.8).
    """
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise _explain(dir_fd, name, logical, exc) from None
        if exc.errno == errno.ENAMETOOLONG:
            raise _invalid(logical, "the name is too long for the file system") from None
        raise from_os_error(exc, "open", logical) from exc
    try:
        with step("stat", logical):
            st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _invalid(logical, "not a regular file")
    return fd, st


def read_all(fd: int, logical: str = "", size: int = -1) -> bytes:
    """Read an open file from the start to its end; a failure is ``storage_error`` etc. naming ``logical``.

    ``size`` (bytes, from the file's ``fstat``): a short read that reaches it ends the read without
    asking again for the end of the file; a file grown since is still read to its end.
    """
    parts: list[bytes] = []
    pos = 0
    while True:
        with step("read", logical):
            chunk = os.pread(fd, CHUNK, pos)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        pos += len(chunk)
        if len(chunk) < CHUNK and 0 <= size <= pos:
            return b"".join(parts)


def atomic_write(parent: OpenedParent, name: str, data: bytes | Iterable[bytes], mode: int = 0o600,
                 logical: str = "", *, operation: str | None = None,
                 renamed: Callable[[], None] | None = None) -> None:
    """Durably replace ``name`` in ``parent`` with ``data`` (bytes, or an iterable of byte strings written
    in turn, so a large file need not be held at once).

    Order: write a new temp file (``mode``, default 0600, ``O_EXCL``) → fsync(file) → rename over
    the target → ``renamed()`` when given → fsync(dir) → fsync the parent of every directory created for
    this write.  The temp file is removed if any step before the rename fails.
    A failing step raises ``storage_full`` / ``storage_read_only`` /
    ``permission_denied`` / ``storage_error`` naming the step (or ``operation``, when given, for every
    step) and ``logical``; a failing fsync after the rename says ``uncertain`` (DESIGN.md §4.8).
    ``renamed`` runs once the new file has the name, before anything else can fail (the directory is
    fsynced even when it raises); an exception raised while iterating ``data`` is mapped as a ``write``.
    """
    tmp = f".{secrets.token_hex(8)}{TEMP_SUFFIX}"  # fixed length: any legal name still fits
    with step(operation or "create temporary file", logical):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                     dir_fd=parent.fd)
    try:
        try:
            with step(operation or "write", logical):
                for part in (data,) if isinstance(data, bytes | bytearray | memoryview) else data:
                    view = memoryview(part)
                    while view:
                        view = view[os.write(fd, view) :]
            with step(operation or "fsync", logical):
                os.fsync(fd)
        finally:
            os.close(fd)
        with step(operation or "rename", logical):
            os.rename(tmp, name, src_dir_fd=parent.fd, dst_dir_fd=parent.fd)
    except BaseException:
        _unlink_quietly(parent.fd, tmp)
        raise
    try:
        if renamed is not None:
            renamed()
    finally:
        with step(operation or "fsync directory", logical, uncertain=True):
            os.fsync(parent.fd)
            for created_in, _ in reversed(parent.created):
                os.fsync(created_in)


def replace_file(path: str, data: bytes | Iterable[bytes], *, logical: str | None = None,
                 operation: str | None = None, renamed: Callable[[], None] | None = None) -> None:
    """Durably replace the file at ``path`` (mode 0600) the same way documents are written:
    temp file, fsync, rename, fsync(dir) (:func:`atomic_write`, whose ``data``, ``operation`` and
    ``renamed`` these are).  For the Hub's own settings, registry, proposal and history files.

    A failure is the storage error of :func:`atomic_write` naming ``logical`` (default ``path``; the
    history passes ``""`` so no folder of the home is named) and ``operation`` (DESIGN.md §4.8)."""
    folder = os.path.dirname(path) or "."
    shown = path if logical is None else logical
    with step(operation or "open directory", folder if logical is None else logical):
        parent = OpenedParent(fd=os.open(folder, _DIR_FLAGS))
    try:
        atomic_write(parent, os.path.basename(path), data, logical=shown, operation=operation, renamed=renamed)
    finally:
        os.close(parent.fd)


def remove_created(parent: OpenedParent) -> None:
    """Undo directories made by :func:`open_parent` for a write that did not happen."""
    for created_in, name in reversed(parent.created):
        try:
            os.rmdir(name, dir_fd=created_in)
        except OSError:
            break


def unlink_durably(dir_fd: int, name: str, logical: str = "") -> None:
    """Remove ``name`` and fsync its directory; failures are mapped as in :func:`atomic_write`."""
    with step("unlink", logical):
        os.unlink(name, dir_fd=dir_fd)
    with step("fsync directory", logical, uncertain=True):
        os.fsync(dir_fd)


def _unlink_quietly(dir_fd: int, name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)


def remove_stale_temps(root: str) -> int:
    """Delete temp files left by a Hub that died mid-write; returns how many were removed.

    Only called at start-up while holding the home's lock, so no write is in progress.
    """
    removed = 0
    for dirpath, _dirnames, filenames in os.walk(root, followlinks=False):
        for fname in filenames:
            if fname.endswith(TEMP_SUFFIX):
                try:
                    os.unlink(os.path.join(dirpath, fname))
                    removed += 1
                except OSError:
                    pass
    return removed
