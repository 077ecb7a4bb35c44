"""The closed set of error codes shared by the Hub, the CLI and the MCP server.

Each code has a fixed CLI exit status, so scripts can branch on it without
parsing text, and a next step an agent is told with every MCP tool error.
``data`` carries what a caller needs to act: ``conflict`` the observed
revision, quota errors the current and maximum sizes, storage errors the errno
name and the failing operation.  DESIGN.md §8.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Any

from amux_memory.protocol.limits import ENTRY_NAME


class ErrorCode(StrEnum):
    """Wire value of ``error.code`` in a response."""

    BAD_REQUEST = "bad_request"
    INVALID_PATH = "invalid_path"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    QUOTA_EXCEEDED = "quota_exceeded"
    DISABLED = "disabled"
    UNAUTHORIZED = "unauthorized"
    BINDING_MISMATCH = "binding_mismatch"
    FRAME_TOO_LARGE = "frame_too_large"
    UNAVAILABLE = "unavailable"
    BUSY = "busy"
    DESTRUCTIVE_REWRITE = "destructive_rewrite"
    STORAGE_FULL = "storage_full"
    STORAGE_READ_ONLY = "storage_read_only"
    STORAGE_ERROR = "storage_error"
    PERMISSION_DENIED = "permission_denied"
    SECRET_DETECTED = "secret_detected"
    REVIEW_BACKLOG = "review_backlog"
    INTERNAL = "internal"


class ExitStatus(IntEnum):
    """CLI exit statuses that are not an error code's (DESIGN.md §8)."""

    OK = 0
    PROBLEMS_FOUND = 20
    """A check ran and found problems (``amux memory lint``, ``index --check``, ``amux doctor``): not a failure of the
    tool."""
    HUB_START_FAILED = 21
    """``amux hub serve`` or ``amux hub start`` could not start the Hub (home locked by another Hub, socket in use, bad
    settings; ``start``: it exited or did not answer in time)."""
    NOT_SAVED = 22
    """``amux memory edit`` wrote nothing: the editor failed or conflict markers were left; the text is kept."""
    HUB_NOT_RUNNING = 23
    """``amux hub status``: no Hub runs for this home (a state, reported on stdout; as ``systemctl status`` exits 3
    for a stopped unit, but 3 is ``invalid_path`` here)."""
    BROKEN_PIPE = 141
    """The reader of standard output went away (``| head``): 128 + SIGPIPE, as a shell reports it."""


@dataclass(frozen=True)
class ErrorSpec:
    """What every frontend needs to know about one error code."""

    exit_status: int
    """The CLI's exit status (unique per code; 2 is also cyclopts' usage error)."""
    next_step: str
    """What an agent should do next, given with every MCP tool error."""


ERRORS: dict[ErrorCode, ErrorSpec] = {
    ErrorCode.INTERNAL: ErrorSpec(1, "The Hub failed; do not assume the call took effect. Tell the user."),
    ErrorCode.BAD_REQUEST: ErrorSpec(2, "Fix the arguments as the message says, then call again."),
    ErrorCode.INVALID_PATH: ErrorSpec(3, f"Use a relative path ending in .md inside memory, such as {ENTRY_NAME} or "
                                      "projects/NAME/notes.md (no '..', no absolute paths)."),
    ErrorCode.NOT_FOUND: ErrorSpec(4, "The document does not exist; search for the right path with memory_search."),
    ErrorCode.CONFLICT: ErrorSpec(5, "Nothing was changed. Read the document again with memory_get, merge your "
                                  "change into the current text, and retry with its revision "
                                  "(data.observed_revision)."),
    ErrorCode.QUOTA_EXCEEDED: ErrorSpec(6, "Nothing was written. Make it smaller (data.current vs data.maximum, in "
                                        f"data.unit): keep {ENTRY_NAME} short and move details into topic documents, "
                                        "or remove stale documents."),
    ErrorCode.DISABLED: ErrorSpec(7, "Memory is switched off on this Hub. Carry on without memory; if the user asked "
                                  "you to remember or recall something, tell them memory is off (the message names the "
                                  "command that enables it; then the Hub is restarted)."),
    ErrorCode.UNAUTHORIZED: ErrorSpec(8, "This caller may not use this memory; tell the user."),
    ErrorCode.BINDING_MISMATCH: ErrorSpec(9, "This conversation's memory no longer matches the Hub's: tell the user "
                                          "to start a new conversation."),
    ErrorCode.FRAME_TOO_LARGE: ErrorSpec(10, "The request is too large; send less content."),
    ErrorCode.UNAVAILABLE: ErrorSpec(11, "The memory Hub cannot be reached. Carry on without memory and tell the "
                                     "user if it matters (a Hub is started with 'amux hub start')."),
    ErrorCode.BUSY: ErrorSpec(12, "The Hub is busy with this connection's other calls; wait and call again."),
    ErrorCode.DESTRUCTIVE_REWRITE: ErrorSpec(13, "Nothing was written: the content looked like a lossy rewrite (a "
                                             "placeholder such as '[rest unchanged]', or most lines dropped). Read "
                                             "the document with memory_get and write the complete new text; pass "
                                             "allow_shrink=true only if the cut is deliberate."),
    ErrorCode.STORAGE_FULL: ErrorSpec(14, "Nothing was written: the Hub's disk is full. Do not retry now; tell the "
                                      "user (the Hub's operator must free space). Reading and searching still work."),
    ErrorCode.STORAGE_READ_ONLY: ErrorSpec(15, "Nothing was written: the Hub's memory is on a read-only file system. "
                                           "Do not retry now; tell the user. Reading and searching still work."),
    ErrorCode.STORAGE_ERROR: ErrorSpec(16, "The Hub's file system failed (data.errno, data.operation). If "
                                       "data.uncertain is true the write may have happened: read the document with "
                                       "memory_get before retrying; otherwise nothing was written. Tell the user if "
                                       "it persists."),
    ErrorCode.PERMISSION_DENIED: ErrorSpec(17, "The Hub may not read or write data.path (file permissions on the "
                                           "Hub's host). Nothing was changed; use other documents and tell the user."),
    ErrorCode.SECRET_DETECTED: ErrorSpec(18, "Nothing was written: the content holds a credential (data.findings: "
                                         "rule, line, redacted preview). Remove the credential and write again; "
                                         "store where it lives instead, e.g. 'the deploy token is in 1Password, "
                                         "item X'. Never try to get around the check."),
    ErrorCode.REVIEW_BACKLOG: ErrorSpec(19, "Nothing was proposed: too many memory changes await the user's review. "
                                        "Do not retry now; ask the user to review pending memory changes: amux "
                                        "memory review."),
}
"""The closed set, with each code's exit status and next step (DESIGN.md §8)."""

EXIT_CODES: dict[ErrorCode, int] = {code: spec.exit_status for code, spec in ERRORS.items()}
"""CLI exit status per error code (0 is success; 2 is also cyclopts' usage error)."""

NEXT_STEP_KEY = "next_step"
"""The member of a wire error (beside ``code``, ``message``, ``data``) in which a raise site refines its code's
next step (:attr:`HubError.refined`); present only then.

So it crosses the wire with the error (a Hub's missing version reaches the
CLI with its own next step), and scripts reading the CLI's JSON see it, while
``data`` stays what a caller needs to act on.  DESIGN.md §8."""

UNCERTAIN_NEXT_STEP = "Whether the write happened is unknown: read the document with memory_get before retrying."
"""The next step for ``unavailable`` with ``data.uncertain``: the connection broke after a write was sent."""


def encodable(text: str) -> str:
    """``text`` with each lone surrogate replaced by a visible backslash escape (``'\\udcff'``).

    Python decodes undecodable bytes in argv, environment variables and file
    names to lone surrogates (``surrogateescape``), which strict UTF-8 cannot
    encode.  Text that is valid UTF-8 comes back unchanged (the same object).
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def encodable_value(value: Any) -> Any:
    """``value`` with :func:`encodable` applied to every string in it (through dicts, lists and tuples)."""
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, dict):
        return {encodable_value(k): encodable_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [encodable_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(encodable_value(v) for v in value)
    return value


class HubError(Exception):
    """An error with a wire code, a human message and the data a caller needs.

    ``data`` is a small map of plain values, e.g. ``{"observed_revision": ...}``
    for ``conflict`` or ``{"current": ..., "maximum": ..., "unit": "bytes"}``
    for ``quota_exceeded``.

    The message and every string in ``data`` are made encodable on the way
    in (:func:`encodable`): a caller's argument that is not valid UTF-8 (a
    file name, a socket path) shows as ``\\udcff`` instead of making the
    error unprintable, unsendable as msgpack and unserializable as MCP JSON.

    ``next_step`` refines the code's next step (:data:`ERRORS`) where the
    generic one does not fit this raise site (a missing agent program is
    ``not_found`` too, but no search finds it): :meth:`to_wire` sends it as
    the error's ``next_step`` member (:data:`NEXT_STEP_KEY`) and
    :meth:`from_wire` reads it back.  The code, its exit status and the set
    of codes stay closed; only the advice is the raise site's.
    """

    def __init__(self, code: ErrorCode, message: str, data: dict[str, Any] | None = None, *,
                 next_step: str | None = None) -> None:
        message = encodable(message)
        super().__init__(message)
        self.code = code
        self.message = message
        self.data: dict[str, Any] = {encodable(k) if isinstance(k, str) else k: encodable_value(v)
                                     for k, v in (data or {}).items()}
        self.refined: str | None = encodable(next_step) if next_step and next_step.strip() else None
        """The raise site's own next step, or ``None`` (the code's own from :data:`ERRORS` applies)."""

    def to_wire(self) -> dict[str, Any]:
        """The ``error`` member of a response: ``{code, message, data}``, plus ``next_step`` when refined."""
        wire = {"code": self.code.value, "message": self.message, "data": self.data}
        if self.refined is not None:
            wire[NEXT_STEP_KEY] = self.refined
        return wire

    @classmethod
    def from_wire(cls, error: Any) -> HubError:
        """Rebuild from a response's ``error`` member; unknown shapes become ``internal``."""
        if not isinstance(error, dict):
            return cls(ErrorCode.INTERNAL, f"malformed error from Hub: {error!r}")
        try:
            code = ErrorCode(str(error.get("code")))
        except ValueError:
            code = ErrorCode.INTERNAL
        message = error.get("message")
        data = error.get("data")
        step = error.get(NEXT_STEP_KEY)
        return cls(
            code,
            message if isinstance(message, str) else str(error.get("code")),
            data if isinstance(data, dict) else {},
            next_step=step if isinstance(step, str) else None,
        )

    @property
    def exit_code(self) -> int:
        """The CLI exit status for this error's code."""
        return ERRORS[self.code].exit_status

    @property
    def next_step(self) -> str:
        """What to do next (the MCP tool error's ``next_step``, the CLI's ``next:`` line).

        :data:`UNCERTAIN_NEXT_STEP` for ``unavailable`` with ``data.uncertain``;
        else the raise site's refinement (:attr:`refined`);
        else the code's own from :data:`ERRORS`.
        """
        if self.code is ErrorCode.UNAVAILABLE and self.data.get("uncertain"):
            return UNCERTAIN_NEXT_STEP
        return self.refined or ERRORS[self.code].next_step

    def __repr__(self) -> str:
        return f"HubError({self.code.value!r}, {self.message!r}, {self.data!r})"


class HubStartError(HubError):
    """The Hub did not start: ``unavailable``, with a one-line ``message`` for a person (DESIGN.md §13.3, §19.2).

    Raised in the Hub before it serves anyone (another Hub holds the home or the socket, a setting or a
    file is unusable; ``data`` empty): ``amux hub serve`` prints the message and exits 21
    (:attr:`ExitStatus.HUB_START_FAILED`).  Raised too by what starts a Hub and waits for it
    (``tools/lifecycle/``): ``data.exit_status`` (:attr:`exit_status`) when the child exited before
    answering; ``amux hub start`` adds ``{home, socket, log, pid, log_tail}`` and exits 21 as well.
    """

    def __init__(self, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(ErrorCode.UNAVAILABLE, message, data)

    @property
    def exit_status(self) -> int | None:
        """The child's exit status when it exited before answering; None otherwise (it did not answer in
        time, or the Hub itself refused to start)."""
        status = self.data.get("exit_status")
        return status if isinstance(status, int) else None


def names_for_error(names: Iterable[Any]) -> str:
    """A short, bounded rendering of caller-supplied names for an error message."""
    names = list(names)
    shown = [repr(str(n)[:40]) for n in sorted(names, key=str)[:5]]
    return ", ".join(shown) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
