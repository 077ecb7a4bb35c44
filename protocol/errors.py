"""The closed set of error codes shared by the Hub, the CLI and the MCP server.

Each code has a fixed CLI exit status so scripts can branch on it without
parsing text.  Design record §2–§3 (conflict carries the observed revision),
§6 (quota errors carry current and maximum sizes), §7 (identity errors); ``destructive_rewrite`` is the
upsert guard against elided or mostly-dropped rewrites.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


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
    INTERNAL = "internal"


EXIT_CODES: dict[ErrorCode, int] = {
    ErrorCode.INTERNAL: 1,
    ErrorCode.BAD_REQUEST: 2,
    ErrorCode.INVALID_PATH: 3,
    ErrorCode.NOT_FOUND: 4,
    ErrorCode.CONFLICT: 5,
    ErrorCode.QUOTA_EXCEEDED: 6,
    ErrorCode.DISABLED: 7,
    ErrorCode.UNAUTHORIZED: 8,
    ErrorCode.BINDING_MISMATCH: 9,
    ErrorCode.FRAME_TOO_LARGE: 10,
    ErrorCode.UNAVAILABLE: 11,
    ErrorCode.BUSY: 12,
    ErrorCode.DESTRUCTIVE_REWRITE: 13,
}
"""CLI exit status per error code (0 is success; 2 is also cyclopts' usage error)."""


class HubError(Exception):
    """An error with a wire code, a human message and the data a caller needs.

    ``data`` is a small map of plain values, e.g. ``{"observed_revision": ...}``
    for ``conflict`` or ``{"current": ..., "maximum": ..., "unit": "bytes"}``
    for ``quota_exceeded``.
    """

    def __init__(self, code: ErrorCode, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data: dict[str, Any] = dict(data or {})

    def to_wire(self) -> dict[str, Any]:
        """The ``error`` member of a response: ``{code, message, data}``."""
        return {"code": self.code.value, "message": self.message, "data": self.data}

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
        return cls(
            code,
            message if isinstance(message, str) else str(error.get("code")),
            data if isinstance(data, dict) else {},
        )

    @property
    def exit_code(self) -> int:
        """The CLI exit status for this error's code."""
        return EXIT_CODES[self.code]

    def __repr__(self) -> str:
        return f"HubError({self.code.value!r}, {self.message!r}, {self.data!r})"
