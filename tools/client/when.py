"""Durations and times people type: the one parser of every command's ``--ttl``, ``--timeout`` and ``--since``.

A *duration* (:func:`duration`, :func:`wait_seconds`) is one or more
``<number><unit>`` parts, units ``w`` (weeks), ``d`` (days), ``h`` (hours),
``m`` (minutes), ``s`` (seconds), e.g. ``30d``, ``12h``, ``90m``, ``45s``,
``1h30m``, or plain seconds (``3600``); case and surrounding spaces do not
matter (:data:`DURATION_FORMS` says so in ``--help``).  ``amux hub token
issue --ttl`` and ``amux hub connect --ttl`` take it as a token's lifetime,
``amux hub start|stop|restart --timeout`` as a wait (there plain seconds may
have a fraction, ``0.5``).

``--since WHEN`` (:func:`parse_since`) becomes the ISO 8601 UTC time the
``log`` method takes (DESIGN.md §15).  ``WHEN`` is either

* a duration back from now, as above; or
* an ISO 8601 date or date and time: ``2026-12-01``, ``2026-12-01T08:00``,
  ``2026-12-01 08:00:00+02:00``, ``2026-12-01T08:00:00Z``.  A date alone means
  its midnight; a time without an offset is local time, as ``date`` prints it.
  Digits that form a date (``20261201``) are that date, not seconds.

Either way the answer is UTC with microseconds and a ``Z``, the form every
time on the wire has: ``"2026-12-01T08:40:37.123456Z"``.  A value that is
none of these is ``bad_request`` naming the option, raised before anything
is asked or changed.  Pure: the clock is a parameter.
"""

from __future__ import annotations

import datetime as dt
import re

from amux_memory.protocol.errors import ErrorCode, HubError

UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
"""Seconds per duration unit."""

MAX_DURATION_SECONDS = 100 * 366 * 86400
"""The longest duration accepted (about 100 years): anything longer is surely a typo."""

DURATION_FORMS = "30d, 12h, 90m, 45s or 1h30m (units w d h m s), or plain seconds (3600)"
"""The accepted forms of a duration, as ``--help`` and the errors word them."""

_DURATION_PART = re.compile(r"(\d{1,9})([wdhms])")
_DURATION = re.compile(r"(?:\d{1,9}[wdhms])+")
_SECONDS = re.compile(r"\d{1,12}")
_FRACTIONAL_SECONDS = re.compile(r"\d{1,12}(?:\.\d{1,6})?|\.\d{1,6}")


def wire_time(moment: dt.datetime) -> str:
    """``moment`` (timezone-aware) as the wire's UTC text: ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def duration_seconds(text: str) -> int | None:
    """Seconds in a duration with units such as ``24h``, ``7d`` or ``1h30m`` (lower case), or ``None`` when
    ``text`` is not one (plain seconds included: :func:`duration` reads those)."""
    if not _DURATION.fullmatch(text):
        return None
    return sum(int(number) * UNITS[unit] for number, unit in _DURATION_PART.findall(text))


def duration(text: str, *, option: str, maximum: int = MAX_DURATION_SECONDS) -> int:
    """Whole seconds in ``text``, a duration (:data:`DURATION_FORMS`: ``30d``, ``12h``, ``90m``, ``45s``,
    ``1h30m`` or plain seconds ``3600``), as ``option`` (``"--ttl"``) takes it.

    Raises :class:`HubError` ``bad_request`` naming ``option`` (``data.field``: the option without its dashes)
    for anything else, for zero and for more than ``maximum`` seconds.
    """
    return int(_duration(text, option, maximum, fractions=False))


def wait_seconds(text: str, *, option: str, maximum: int = MAX_DURATION_SECONDS) -> float:
    """Seconds in ``text`` as :func:`duration` reads it, where plain seconds may also have a fraction
    (``0.5``): how long a command waits (``--timeout``).  Raises as :func:`duration` does."""
    return float(_duration(text, option, maximum, fractions=True))


def _duration(text: str, option: str, maximum: int, *, fractions: bool) -> float:
    value = text.strip().lower()
    seconds: float | None = duration_seconds(value)
    if seconds is None and (_FRACTIONAL_SECONDS if fractions else _SECONDS).fullmatch(value):
        seconds = float(value)
    if seconds is None:
        raise _bad_duration(option, text, f"not a duration; use {DURATION_FORMS}")
    if not 0 < seconds <= maximum:
        raise _bad_duration(option, text, f"a duration must be more than 0 and at most {_span(maximum)}")
    return seconds


def _span(seconds: int) -> str:
    """``seconds`` as a round span for an error message: ``100 years``, ``30 days``, ``3600 seconds``."""
    if seconds >= 365 * 86400:
        return f"{round(seconds / (365.25 * 86400))} years"
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{seconds // 86400} days"
    return f"{seconds} seconds"


def _bad_duration(option: str, text: str, why: str) -> HubError:
    shown = text if len(text) <= 40 else text[:40] + "..."
    return HubError(ErrorCode.BAD_REQUEST, f"{option} {shown!r}: {why}", {"field": option.lstrip("-")})


def parse_since(text: str, *, now: dt.datetime | None = None) -> str:
    """``WHEN`` as the wire's UTC time text (see the module docstring for the forms).

    ``now`` (timezone-aware; default the current time) is what a duration
    counts back from.  Raises :class:`HubError` ``bad_request`` with
    ``data.field`` = ``"since"`` for anything else: an empty value, an unknown
    unit, a duration of zero or over :data:`MAX_DURATION_SECONDS`, a date that
    does not exist.
    """
    value = text.strip()
    moment = _iso_moment(value)
    if moment is None and (_DURATION.fullmatch(value.lower()) or _SECONDS.fullmatch(value)):
        seconds = duration(value, option="--since")
        start = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(seconds=seconds)
        return wire_time(start)
    if moment is None:
        raise _bad(text, "not an ISO date/time (2026-12-01, 2026-12-01T08:00, ...Z or +02:00) nor a duration "
                   f"back from now: {DURATION_FORMS}")
    try:
        if moment.tzinfo is None:
            moment = moment.astimezone()  # local time, as a person reads the clock
        return wire_time(moment)
    except (OverflowError, ValueError):  # year 1 or 9999 pushed out of range by the offset
        raise _bad(text, "out of range") from None


def _iso_moment(value: str) -> dt.datetime | None:
    """``value`` as an ISO 8601 date or date and time, or ``None`` when it is not one."""
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        return None


def _bad(text: str, why: str) -> HubError:
    shown = text if len(text) <= 40 else text[:40] + "..."
    return HubError(ErrorCode.BAD_REQUEST, f"--since {shown!r}: {why}", {"field": "since"})
