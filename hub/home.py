"""The Hub's home directory at start-up: the one-Hub lock, the memory root, the registry check.

One Hub is the only online writer of a memory root (DESIGN.md §4): it holds
an exclusive ``flock`` on ``<AMUX_HOME>/hub.lock`` for as long as it runs, and
the OS drops the lock if the process dies, so a crashed Hub never blocks the
next one.  Before it listens, the Hub makes ``memory/``, ``memory/global/``
and ``memory/users/`` private directories and refuses a principal registry
it could not use (DESIGN.md §7, §13).

Everything here is blocking and runs once, before the Hub serves anyone.
"""

from __future__ import annotations

import errno
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from hub.fsio import make_directories
from hub.registry import RegistryFileError, read_registry, registry_path

HOME_LOCK_NAME = "hub.lock"
"""The lock file's name under ``<AMUX_HOME>``; it holds the serving Hub's pid."""


class HubStartError(Exception):
    """The Hub cannot start: another Hub holds this home or socket, or a setting or file is unusable.

    The message is one line for a person (``amux hub serve`` prints it and exits
    with ``ExitStatus.HUB_START_FAILED``); nothing has been served yet.
    """


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
        holds it; other ``OSError`` from opening or locking the file propagate.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise HubStartError(
                    f"another Hub (pid {holder}) is already serving {self.path.parent}; "
                    "one Hub is the only online writer of a memory root"
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        """Drop the lock (close the file); does nothing when it is not held."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def prepare_memory_root(root: Path) -> None:
    """Create ``memory/``, ``global/`` and ``users/`` as private (``0700``) directories, durably
    (:func:`hub.fsio.make_directories`: the parent of each new one is fsynced, DESIGN.md §4.5).

    Raises :class:`HubStartError` when ``global`` or ``users`` is a symlink or
    a file: the Hub never follows a symlink into a scope (DESIGN.md §4).
    """
    make_directories(str(root), 0o700)
    os.chmod(root, 0o700)
    for sub in (root / "global", root / "users"):
        if sub.is_symlink() or (sub.exists() and not sub.is_dir()):
            raise HubStartError(f"{sub} must be a plain directory, not a symlink or file; fix it by hand")
        make_directories(str(sub), 0o700)


def check_registry(home: Path) -> None:
    """Refuse to start on a principal registry that cannot be used (it would authenticate nobody).

    Raises :class:`HubStartError` with the registry's own message (DESIGN.md §7).
    """
    try:
        read_registry(registry_path(home))
    except RegistryFileError as exc:
        raise HubStartError(exc.message) from None
