"""The one error type of ``launch/``: a :class:`~protocol.errors.HubError` that says which launch step failed.

It reuses the closed error-code set (so the CLI prints and exits with it like
any other command) and adds ``step``: ``agent`` (unknown agent or a
capability it lacks), ``session`` (unknown or clashing session id),
``executable`` (agent or ``amux`` entry point missing), ``isolation``
(``--as-user`` preparation), ``files`` (a spec's directories or files could
not be made) or a ``codex app-server`` method name.
"""

from __future__ import annotations

from typing import Any

from amux_memory.protocol.errors import ErrorCode, HubError


class LaunchError(HubError):
    """A launch could not be prepared or started; nothing was run.

    ``code`` is one of :class:`~protocol.errors.ErrorCode` (``bad_request``
    for a wrong request, ``not_found`` for a missing session or executable),
    ``step`` names the launch step, and ``data`` always carries ``step``.
    ``next_step`` refines the code's next step for this failure (a missing
    agent program is ``not_found``, but no memory search finds it), as
    :class:`~protocol.errors.HubError` takes it (DESIGN.md §8).
    """

    def __init__(self, step: str, message: str, data: dict[str, Any] | None = None,
                 code: ErrorCode = ErrorCode.BAD_REQUEST, *, next_step: str | None = None) -> None:
        super().__init__(code, message, {"step": step, **(data or {})}, next_step=next_step)
        self.step = step
