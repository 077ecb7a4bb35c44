"""Is a Hub running for a home, and which: the lock probe (DESIGN.md §19.1).

A Hub serves a home while it holds an exclusive ``flock`` on
``<home>/hub.lock`` (:mod:`hub.serve.home`); the kernel drops it when the process
dies.  :func:`serving_hub` asks the kernel instead of trusting the pid in the
file, so a killed Hub's leftover pid (perhaps reused by another process) never
counts.  Used by ``amux hub start|stop|status``, ``amux system config set``
(``restart_required``) and ``amux doctor``; imports nothing of the Hub, so
those commands stay off Trio (DESIGN.md §13.6).
"""

from __future__ import annotations

import errno
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from amux_memory.protocol.config_file import LOCK_NAME


@dataclass(frozen=True)
class ServingHub:
    """The Hub that holds a home's lock: its ``pid`` and when it took the lock (``started``, Unix seconds)."""

    pid: int
    started: float


def serving_hub(home: Path) -> ServingHub | None:
    """The Hub serving ``home`` (it holds ``hub.lock``), or ``None`` when none does (DESIGN.md §19.1).

    Asks the kernel, not the pid in the file: it tries a shared, non-blocking
    ``flock`` on ``hub.lock`` and drops it at once, so a stale pid left by a
    killed Hub never counts.  ``started`` is the file's modification time (the
    Hub writes its pid there when it takes the lock).  ``pid`` is 0 when the
    holder wrote none yet.  Never creates the file; an unreadable home or lock
    file counts as no Hub.  Blocking, microseconds.
    """
    try:
        fd = os.open(home / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                return None
            text = os.pread(fd, 32, 0).decode(errors="replace").strip()
            return ServingHub(int(text) if text.isdigit() else 0, os.fstat(fd).st_mtime)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
