"""``--since WHEN`` as the ISO 8601 UTC time the ``log`` method takes (DESIGN.md §15).

``WHEN`` is either

* a duration back from now: one or more ``<number><unit>`` parts, units
  ``w`` (weeks), ``d`` (days), ``h`` (hours), ``m`` (minutes), ``s``
  (seconds), e.g. ``24h``, ``7d``, ``30m``, ``1h30m``; or
* an ISO 8601 date or date and time: ``2026-12-01``, ``2026-12-01T08:00``,
  ``2026-12-01 08:00:00+02:00``, ``2026-12-01T08:00:00Z``.  A date alone means
  its midnight; a time without an offset is local time, as ``date`` prints it.

Either way the answer is UTC with microseconds and a ``Z``, the form every
time on the wire has: ``"2026-12-01T08:40:37.123456Z"``.  Pure: the clock is
a parameter.
"""

from __future__ import annotations

import datetime as dt
import re

from amux_memory.protocol.errors import ErrorCode, HubError

UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
"""Seconds per duration unit."""

MAX_DURATION_SECONDS = 100 * 366 * 86400
"""The longest duration accepted (about 100 years): anything longer is surely a typo."""

_DURATION_PART = re.compile(r"(\d{1,9})([wdhms])")
_DURATION = re.compile(r"(?:\d{1,9}[wdhms])+")


def wire_time(moment: dt.datetime) -> str:
    """``moment`` (timezone-aware) as the wire's UTC text: ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def duration_seconds(text: str) -> int | None:
    """Seconds in a duration such as ``24h``, ``7d`` or ``1h30m``, or ``None`` when ``text`` is not one."""
    if not _DURATION.fullmatch(text):
        return None
    return sum(int(number) * UNITS[unit] for number, unit in _DURATION_PART.findall(text))


def parse_since(text: str, *, now: dt.datetime | None = None) -> str:
    """``WHEN`` as the wire's UTC time text (see the module docstring for the forms).

    ``now`` (timezone-aware; default the current time) is what a duration
    counts back from.  Raises :class:`HubError` ``bad_request`` with
    ``data.field`` = ``"since"`` for anything else: an empty value, an unknown
    unit, a duration of zero or over :data:`MAX_DURATION_SECONDS`, a date that
    does not exist.
    """
    value = text.strip()
    seconds = duration_seconds(value.lower())
    if seconds is not None:
        if not 0 < seconds <= MAX_DURATION_SECONDS:
            raise _bad(text, "a duration must be more than 0 and at most 100 years")
        start = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(seconds=seconds)
        return wire_time(start)
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise _bad(text, "not an ISO date/time (2026-12-01, 2026-12-01T08:00, ...Z or +02:00) nor a duration "
                   "(24h, 7d, 30m, 1h30m; units w d h m s)") from None
    try:
        if moment.tzinfo is None:
            moment = moment.astimezone()  # local time, as a person reads the clock
        return wire_time(moment)
    except (OverflowError, ValueError):  # year 1 or 9999 pushed out of range by the offset
        raise _bad(text, "out of range") from None


def _bad(text: str, why: str) -> HubError:
    shown = text if len(text) <= 40 else text[:40] + "..."
    return HubError(ErrorCode.BAD_REQUEST, f"--since {shown!r}: {why}", {"field": "since"})
