"""Parameters several commands share, defined once: ``--home``, ``--project``, ``--today``, ``--json``, ``--ttl``
and ``--timeout``.

Each is an ``Annotated`` type carrying its cyclopts :class:`Parameter`
(name and help), so a command declares ``home: Home = None`` and gets the
same option, help text and resolution as every other command.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

from cyclopts import Parameter

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.client.when import DURATION_FORMS

Home = Annotated[Path | None, Parameter(name="--home", help="The Hub's home (default: AMUX_HOME, else ~/.amux).")]
"""``--home DIR``: the Hub's home directory; ``None`` means the default (see :func:`resolve_home`)."""

Project = Annotated[Path | None, Parameter(
    name="--project", help="Work on DIR/.agent/memory/ (a project library, no Hub needed) instead of the Hub scope.")]
"""``--project DIR``: a project library instead of the caller's Hub scope (DESIGN.md §11)."""


AsJson = Annotated[bool, Parameter(
    name="--json", negative="",
    help="Print JSON even when stdout is a terminal (piped output always is JSON; so is AMUX_OUTPUT=json).")]
"""``--json``: JSON on stdout whatever stdout is (:func:`tools.cli.output.contract.human_output`, DESIGN.md §17)."""


TokenTtl = Annotated[str | None, Parameter(
    name="--ttl", help=f"How long the token stays valid: {DURATION_FORMS}. Default: no expiry; 12h for a "
                       "delegated token (--binding).")]
"""``--ttl`` of ``amux hub token issue``: a duration (:func:`tools.client.when.duration`), read before anything
is issued."""

ConnectTtl = Annotated[str | None, Parameter(
    name="--ttl", help=f"How long the token stays valid: {DURATION_FORMS}. Default: 180d (revoke it with "
                       "amux hub token revoke).")]
"""``--ttl`` of ``amux hub connect``: the same durations as :data:`TokenTtl`."""

Timeout = Annotated[str, Parameter(
    name="--timeout", help=f"How long to wait for the Hub: {DURATION_FORMS}; plain seconds may have a fraction "
                           "(0.5).")]
"""``--timeout`` of ``amux hub start|stop|restart``: a wait (:func:`tools.client.when.wait_seconds`)."""


def resolve_home(home: Path | None) -> Path:
    """``--home`` as a path: the given one, else ``AMUX_HOME``, else ``~/.amux``; ``~`` expanded, not resolved."""
    if home is not None:
        return home.expanduser()
    from amux_memory.tools.client.settings import default_home

    return default_home().expanduser()


def parse_today(text: str | None) -> dt.date:
    """``--today`` as a date (``None``: today's local date).

    Raises :class:`HubError` ``bad_request`` (``data.field`` = ``"today"``)
    unless ``text`` is a calendar date ``YYYY-MM-DD`` (ISO week dates and
    times are refused).
    """
    if text is None:
        return dt.date.today()
    from amux_memory.tools.typed.model import parse_date

    day = parse_date(text)
    if day is None:
        raise HubError(ErrorCode.BAD_REQUEST, f"--today {text!r} is not a date (YYYY-MM-DD)", {"field": "today"})
    return day
