"""The settings page's "Restart the Hub", as ``amux hub restart`` or the service manager does it (DESIGN.md §20.1).

:func:`restart_hub` runs in a Trio worker thread (blocking, up to about
:data:`tools.lifecycle.control.TIMEOUT_SECONDS` twice over) and calls
:func:`tools.lifecycle.control.restart_hub` in this process, no CLI in between.  When this
home's per-user systemd unit (``amux hub service install --user``,
:func:`tools.lifecycle.units.unit_name`: ``amux-hub.service`` for the default home) runs
and is active, systemd restarts it (``systemctl --user restart UNIT``), since it would otherwise
restart or fight a Hub stopped behind its back; else it is what ``amux hub restart --home HOME``
does: SIGTERM to the process holding ``hub.lock``, then a detached ``amux hub serve``
(:func:`tools.lifecycle.spawn.spawn_serve`, a new session) that outlives the page.  On
cancellation the worker finishes the restart and the answer is dropped.
"""

from __future__ import annotations

from pathlib import Path

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.lifecycle.control import TIMEOUT_SECONDS
from amux_memory.tools.lifecycle.control import restart_hub as restart_lifecycle


def restart_hub(home: Path) -> str:
    """Restart the Hub serving ``home`` (or start it when none runs); returns a sentence for the page.

    Raises :class:`HubError` with the life cycle's own error (``busy``, ``permission_denied``,
    ``bad_request`` for a Hub another service manager runs, ``unavailable`` with the log's path...)
    when it failed; a start command that cannot run at all is ``unavailable`` too.
    """
    try:
        done = restart_lifecycle(home.resolve(), timeout=TIMEOUT_SECONDS, through_user_unit=True)
    except OSError as exc:
        raise HubError(ErrorCode.UNAVAILABLE, f"the Hub could not be restarted: {exc}") from None
    if done.manager_command is not None:
        return f"the Hub was restarted by systemd ('{' '.join(done.manager_command)}')"
    started = done.started or {}
    return f"the Hub was restarted (pid {started.get('pid')}; log {started.get('log')})"
