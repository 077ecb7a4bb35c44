"""The Hub's home directory at start-up: the one-Hub lock, the memory root, the registry check.

One Hub is the only online writer of a memory root (DESIGN.md §4): it holds
an exclusive ``flock`` on ``<AMUX_HOME>/hub.lock`` for as long as it runs, and
the OS drops the lock if the process dies, so a crashed Hub never blocks the
next one.  Before it listens, the Hub makes ``memory/``, ``memory/global/``
and ``memory/users/`` private directories and refuses a principal registry
it could not use (DESIGN.md §7, §13).  A refusal is :class:`protocol.errors.HubStartError` (also
importable from here).

Everything here is blocking and runs once, before the Hub serves anyone.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from amux_memory.hub.access.registry import RegistryFileError, read_registry, registry_path
from amux_memory.hub.storage.fsio import make_directories
from amux_memory.protocol.config_file import home_option
from amux_memory.protocol.errors import HubStartError as HubStartError

LOCK_RETRY_SECONDS = 0.25
"""How long :meth:`HomeLock.acquire` retries a held lock before refusing: the clients' lock probe (``amux hub
status``) holds it, shared, for microseconds, and must never make a starting Hub refuse (DESIGN.md §19.1)."""


@dataclass
class HomeLock:
    """An exclusive ``flock`` on ``<AMUX_HOME>/hub.lock``; the OS drops it if the Hub dies.

    ``fd`` is the open lock file while held, -1 otherwise.
    """

    path: Path
    fd: int = -1

    def acquire(self) -> None:
        """Take the lock (creating the home ``0700`` and the file ``0600``) and write our pid into it.

        Raises :class:`HubStartError` naming the holder's pid when another Hub
        holds it, and naming the errno and path when the home or the lock file
        cannot be created, opened, locked or written (a read-only home, a full
        disk: DESIGN.md §13.3).
        """
        with start_step("create the home", self.path.parent):
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with start_step("open the lock file", self.path):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            lock_with_retry(fd)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                home = home_option(self.path.parent)
                raise HubStartError(
                    f"another Hub (pid {holder}) is already serving {self.path.parent}; "
                    f"one Hub is the only online writer of a memory root: use that one ('amux hub status{home}'), "
                    f"or stop it first ('amux hub stop{home}')"
                ) from None
            raise start_error("lock", self.path, exc) from exc
        try:
            with start_step("write the pid into", self.path):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except HubStartError:
            os.close(fd)
            raise
        self.fd = fd

    def release(self) -> None:
        """Drop the lock (close the file); does nothing when it is not held."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def lock_with_retry(fd: int) -> None:
    """``flock(fd, LOCK_EX | LOCK_NB)``, retried every 10 ms for :data:`LOCK_RETRY_SECONDS` while it is held.

    Raises the last ``OSError`` (``EWOULDBLOCK`` when another process still
    holds it; any other errno at once).
    """
    deadline = time.monotonic() + LOCK_RETRY_SECONDS
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN) or time.monotonic() >= deadline:
                raise
        time.sleep(0.01)


def prepare_memory_root(root: Path) -> None:
    """Create ``memory/``, ``global/``, ``users/`` and ``teams/`` as private (``0700``) directories, durably
    (:func:`hub.storage.fsio.make_directories`: the parent of each new one is fsynced, DESIGN.md §4.5).

    Raises :class:`HubStartError` when ``global``, ``users`` or ``teams`` is a symlink or
    a file: the Hub never follows a symlink into a scope (DESIGN.md §4); and,
    naming the errno and path, when a missing one cannot be made or a wrong
    mode cannot be fixed.  Nothing is written when all four exist with mode
    ``0700``, so a Hub starts on a read-only memory root and serves reads
    (writes then answer ``storage_read_only``, DESIGN.md §4.8).
    """
    with start_step("create", root):
        make_directories(str(root), 0o700)
        if os.stat(root).st_mode & 0o7777 != 0o700:
            os.chmod(root, 0o700)
    for sub in (root / "global", root / "users", root / "teams"):
        if sub.is_symlink() or (sub.exists() and not sub.is_dir()):
            raise HubStartError(f"{sub} must be a plain directory, not a symlink or file; fix it by hand")
        with start_step("create", sub):
            make_directories(str(sub), 0o700)


def start_error(operation: str, path: Path, exc: OSError) -> HubStartError:
    """The :class:`HubStartError` for ``exc`` raised while doing ``operation`` on ``path`` at start-up:
    one line naming the errno, its text and the path, and for a permission error the account and the fix
    (DESIGN.md §13.3)."""
    name = errno.errorcode.get(exc.errno or 0, "E?")
    text = exc.strerror or os.strerror(exc.errno or 0)
    fix = ""
    if exc.errno in (errno.EACCES, errno.EPERM):  # a root-owned /run/amux, say
        import pwd

        try:
            me = pwd.getpwuid(os.geteuid()).pw_name
        except KeyError:
            me = str(os.geteuid())
        folder = path if operation.startswith("create") else path.parent
        fix = (f"; the Hub's account ({me}) may not write there: give it the folder (e.g. 'sudo install -d -o {me} "
               f"-g {me} -m 0750 {folder}': its group keeps the socket; under /run, again after each reboot, or "
               "rerun 'amux hub setup --team' with the same options) or choose a place it owns")
    return HubStartError(f"cannot {operation} {path} ({name}: {text}){fix}")


class start_step:  # noqa: N801 - used like a function: ``with start_step("create", path):``
    """Turn an ``OSError`` raised inside the block into :func:`start_error` (chained); others pass through."""

    def __init__(self, operation: str, path: Path) -> None:
        self.operation = operation
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if isinstance(exc, OSError):
            raise start_error(self.operation, self.path, exc) from exc


def check_registry(home: Path) -> None:
    """Refuse to start on a principal registry that cannot be used (it would authenticate nobody).

    Raises :class:`HubStartError` with the registry's own message (DESIGN.md §7).
    """
    try:
        read_registry(registry_path(home))
    except RegistryFileError as exc:
        raise HubStartError(exc.message) from None
