"""Storage faults: what an ``OSError`` from the file system means to a caller (DESIGN.md §4.8, §8).

The store and :mod:`hub.storage.fsio` run each file-system step inside
:func:`step`, which turns an ``OSError`` into a :class:`HubError` naming the
errno, the failing operation and the logical path, and saying whether the
write may have happened:

* ``ENOSPC``, ``EDQUOT`` → ``storage_full``;
* ``EROFS`` → ``storage_read_only``;
* ``EACCES``, ``EPERM`` → ``permission_denied``;
* anything else (``EIO``, ``EMFILE``, ...) → ``storage_error``.

The answer holds the errno name and its short text, never a traceback; the
original exception stays chained (``__cause__``) so the Hub's log keeps it
whole (:func:`log_fault`).
"""

from __future__ import annotations

import errno
import logging
import os
from types import TracebackType
from typing import Any

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import MAX_REPORTED_PATH_CHARS as MAX_REPORTED_PATH_CHARS
from amux_memory.protocol.limits import MAX_REPORTED_PATHS as MAX_REPORTED_PATHS

_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
_DENIED = frozenset({errno.EACCES, errno.EPERM})

STORAGE_CODES = frozenset({ErrorCode.STORAGE_FULL, ErrorCode.STORAGE_READ_ONLY, ErrorCode.STORAGE_ERROR,
                           ErrorCode.PERMISSION_DENIED})
"""The codes :func:`from_os_error` gives (the Hub logs these with the chained exception)."""



SCOPE_ROOT = "/"
"""The logical path that names a scope's own folder in ``data.path`` and ``unreadable`` (DESIGN.md §4.8)."""


READ_OPERATIONS = frozenset({"open scope directory", "open directory", "open", "stat", "read"})
"""Steps a read does too: a message for them does not claim "nothing was changed" (a read changes nothing)."""


def errno_name(exc: OSError) -> str:
    """The symbolic errno of ``exc`` (``"ENOSPC"``), or ``"E?"`` when it has none."""
    return errno.errorcode.get(exc.errno or 0, "E?")


def short_path(path: str) -> str:
    """``path`` cut to :data:`MAX_REPORTED_PATH_CHARS` characters (``…`` marks a cut)."""
    return path if len(path) <= MAX_REPORTED_PATH_CHARS else path[: MAX_REPORTED_PATH_CHARS - 1] + "…"


def from_os_error(exc: OSError, operation: str, path: str, *, uncertain: bool = False) -> HubError:
    """The :class:`HubError` for ``exc`` raised by ``operation`` (e.g. ``"write"``) on logical ``path``.

    ``uncertain`` says the step failed after the new content was already in
    place (the directory fsync after a rename, or after an unlink), so the
    change may or may not last; otherwise nothing was changed (the message
    says so, except after a step of :data:`READ_OPERATIONS`, which reads and
    writes share: there nothing was read either).  ``data`` is
    ``{errno, operation, path, uncertain}``.  Never raises.
    """
    name = errno_name(exc)
    text = exc.strerror or os.strerror(exc.errno or 0)
    where = f"{operation} of {short_path(path)!r}" if path else operation
    data: dict[str, Any] = {"errno": name, "operation": operation, "path": short_path(path), "uncertain": uncertain}
    outcome = ("; the change was made but may not survive a crash; read it back" if uncertain
               else "" if operation in READ_OPERATIONS else "; nothing was changed")
    if exc.errno in _FULL:
        code, what = ErrorCode.STORAGE_FULL, "the Hub's disk is full"
    elif exc.errno == errno.EROFS:
        code, what = ErrorCode.STORAGE_READ_ONLY, "the Hub's memory is on a read-only file system"
    elif exc.errno in _DENIED:
        code, what = ErrorCode.PERMISSION_DENIED, "the Hub's user may not access " + (
            "the scope's folder" if path == SCOPE_ROOT else repr(short_path(path)) if path else "its memory")
        where = operation
    else:
        code, what = ErrorCode.STORAGE_ERROR, "the Hub's file system failed"
    return HubError(code, f"{what} ({name}: {text}) during {where}{outcome}", data)


class step:  # noqa: N801 - used like a function: ``with step("write", path):``
    """Run one file-system step; an ``OSError`` in it becomes :func:`from_os_error` (chained).

    ``with step("fsync", "notes/a.md"):`` — ``HubError`` and every other
    exception pass through unchanged; the mapped :class:`HubError` is raised
    from the ``OSError``.  A plain class rather than a generator context
    manager: it wraps every system call of a write, so it must cost next to
    nothing.
    """

    __slots__ = ("operation", "path", "uncertain")

    def __init__(self, operation: str, path: str, *, uncertain: bool = False) -> None:
        self.operation = operation
        self.path = path
        self.uncertain = uncertain

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if isinstance(exc, OSError):
            raise from_os_error(exc, self.operation, self.path, uncertain=self.uncertain) from exc


def log_fault(log: logging.Logger, method: str, exc: HubError) -> None:
    """Log a storage fault answered to a caller, with the chained ``OSError``'s traceback when there is one."""
    cause = exc.__cause__
    log.error("request %s failed: %s: %s", method, exc.code.value, exc.message,
              exc_info=(type(cause), cause, cause.__traceback__) if cause is not None else None)
