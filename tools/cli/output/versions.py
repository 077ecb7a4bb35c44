"""Terminal renderers of the history (DESIGN.md §15, §17): ``history`` and ``log``, their table of versions
fitted to the terminal, and the cells it is made of (who, when, what).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from amux_memory.tools.cli.output.fitted_table import FittedTable
from amux_memory.tools.cli.output.pieces import command, group, notice, short_revision, text
from amux_memory.tools.client.inert import inert
from amux_memory.tools.client.wording import counted

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.text import Text


SHORT_SESSION = 8
"""Characters of a session id a narrow table shows (``67e5f0a8…``); the whole id is in ``--json``."""

ActorForm = Literal["full", "short", "brief", "compact", "bare"]
"""How much of an actor a "by" cell shows, widest first (:func:`actor`)."""


def actor(version: dict[str, Any], *, form: ActorForm = "full") -> str:
    """Who made a change, in one cell, in one of five forms, widest first (DESIGN.md §17):

    ``full`` ``root via amux-cli session 67e5f0a8-7ff6-458d-a94c-d01912345678``;
    ``short`` the session cut to :data:`SHORT_SESSION` characters and ``…``;
    ``brief`` without the word ``session`` (``root via amux-cli 67e5f0a8…``);
    ``compact`` ``root/cli 67e5f0a8…`` (an ``amux-`` client prefix dropped);
    ``bare`` ``root/cli``, no session (the narrowest terminals; the rest is in ``--json``).
    """
    who = version.get("actor") or {}
    principal = inert(who.get("principal") or "-")
    client = inert(who.get("client") or "")
    session = inert(who.get("session") or "")
    if form != "full" and len(session) > SHORT_SESSION + 1:
        session = session[:SHORT_SESSION] + "…"
    if form in ("compact", "bare"):
        short_client = client.removeprefix("amux-") or client
        head = f"{principal}/{short_client}" if client else principal
        return f"{head} {session}" if session and form == "compact" else head
    parts = [principal]
    if client:
        parts.append(f"via {client}")
    if session:
        parts.append(session if form == "brief" else f"session {session}")
    return " ".join(parts)


def when(version: dict[str, Any]) -> str:
    """A version's UTC time to the second, ``2026-12-01 08:40:37Z``."""
    stamp = inert(version.get("time") or "")
    return stamp[:19].replace("T", " ") + "Z" if len(stamp) >= 19 else stamp


WIRE_TIME = re.compile(r"(\d{4})-(\d{2}-\d{2})T(\d{2}:\d{2}):(\d{2})")
"""The start of a version's wire time (``2026-12-01T08:40:37``): year, month-day, hours:minutes, seconds."""


def short_times(versions: list[dict[str, Any]], now: datetime.datetime) -> tuple[str, list[str]] | None:
    """The header and the cells of a narrower time column, one form for the whole table (DESIGN.md §17).

    ``now`` is an aware UTC time.  Every change today (UTC): ``today UTC``
    and ``08:40:37``; all this year: ``time (UTC)`` and ``12-01 08:40``;
    else ``2025-12-01 08:40``.  ``None`` when a time is not the Hub's wire
    form (the full cells are kept).
    """
    matches = [WIRE_TIME.match(str(v.get("time") or "")) for v in versions]
    found = [m for m in matches if m is not None]
    if len(found) != len(matches):
        return None
    today = now.strftime("%Y-%m-%d")
    if all(f"{m[1]}-{m[2]}" == today for m in found):
        return "today UTC", [f"{m[3]}:{m[4]}" for m in found]
    if all(m[1] == str(now.year) for m in found):
        return "time (UTC)", [f"{m[2]} {m[3]}" for m in found]
    return "time (UTC)", [f"{m[1]}-{m[2]} {m[3]}" for m in found]


BY_FLOORS = (20, 9)
"""Once its shorter forms are used, the "by" cell narrows to one ``principal via client`` line over the session,
later to its longest word."""

TIME_FLOOR = 10
"""A time cell wraps to ``2026-12-01`` over ``08:40:37Z``."""

PATH_FLOORS = (16, 10)
"""A path column narrows to 16, then 10 cells (the path folds over lines, never cut)."""

ACTION_FLOOR = 12
"""``restore of REV`` wraps after ``of``."""


def reviewed(version: dict[str, Any]) -> str | None:
    """The id of the proposal a version approved (its ``review`` member, DESIGN.md §21), made inert; else None."""
    review = version.get("review")
    return inert(review.get("proposal") or "?") if isinstance(review, dict) else None


def origin_words(version: dict[str, Any]) -> str:
    """Where a copied or moved version's text came from or went (its ``origin``, DESIGN.md §15.7), for a person:
    `` (copied from @ops/secret.md)``, `` (moved to notes/a.md)``; a side the caller may not read is
    ``another memory`` (an older Hub's side without ``mounted``: ``DOCUMENT in SCOPE``).  ``""`` for a version
    without an origin."""
    origin = version.get("origin")
    if not isinstance(origin, dict):
        return ""
    words = []
    for side, verb in (("from", "copied from"), ("to", "moved to")):
        named = origin.get(side)
        if not isinstance(named, dict):
            continue
        if named.get("mounted"):
            where = inert(named["mounted"])
        elif named.get("document") and named.get("scope"):
            where = f"{inert(named['document'])} in {inert(named['scope'])}"
        else:
            where = "another memory"
        words.append(f"{verb} {where}")
    return f" ({'; '.join(words)})" if words else ""


def by_cell(version: dict[str, Any], form: ActorForm = "full") -> str:
    """The "by" cell of a version: :func:`actor` in ``form`` and, for an approved proposal, ``, proposed by``
    the agent (``principal/client session``, cut as ``form`` says; ``bare`` drops its session too); for a scope
    copy, ``, written by`` the text's author (``principal/client``)."""
    who = actor(version, form=form)
    review = version.get("review")
    if isinstance(review, dict) and isinstance(review.get("proposed_by"), dict):
        who += ", proposed by " + actor({"actor": review["proposed_by"]},
                                        form="bare" if form == "bare" else "compact")
    origin = version.get("origin")
    if isinstance(origin, dict) and isinstance(origin.get("author"), dict):  # a scope copy (DESIGN.md §15.7)
        who += ", written by " + actor({"actor": origin["author"]}, form="bare")
    return who


def version_table(versions: list[dict[str, Any]], *, with_path: bool,
                  now: datetime.datetime | None = None) -> FittedTable:
    """The rows of ``history`` or ``log``: time, (path,) action, revision, actor, size, lines changed.

    Fits the terminal (:class:`FittedTable`, DESIGN.md §17): revisions
    always show :data:`~tools.cli.output.pieces.SHORT_REVISION` hex digits (enough to paste back) and
    bytes and +/- are never narrowed.  While the table is too wide, shorter
    forms come first, so an 80-column terminal shows each change on one line:
    the "by" cell's session cut to :data:`SHORT_SESSION` characters, then
    without the word "session" (:func:`actor`), then the time without
    seconds or date (:func:`short_times`, ``now`` the current UTC time, by
    default the clock's), then "by" as ``principal/client session``, then an
    approved proposal's action as ``update (review)`` without its id, then
    "by" without the session.  An approved proposal's action says ``(review
    ID)`` and its "by" ``, proposed by`` the agent (:func:`by_cell`, DESIGN.md
    §21); a copy's or move's, where its text came from or went (:func:`origin_words`).  Only then do "by", the
    path and the action wrap or fold, never cut.
    """
    def action_cell(v: dict[str, Any], short: bool) -> Text:
        action = inert(v.get("action"))
        if v.get("restored_from"):
            action += f" of {short_revision(v.get('restored_from'))}"
        action += origin_words(v)  # a copy's or move's other side (DESIGN.md §15.7)
        proposal = reviewed(v)
        if proposal is not None:  # an approved proposal (DESIGN.md §21)
            action += " (review)" if short else f" (review {proposal})"
        if v.get("secret_override"):  # a person let credentials in (DESIGN.md §16.4)
            action += f" [secret override: {', '.join(inert(rule) for rule in v.get('secret_override') or [])}]"
        return text(action)

    actions = [action_cell(v, False) for v in versions]
    columns: list[tuple[str, str, list[Text], bool]] = [("time (UTC)", "left", [text(when(v)) for v in versions], True)]
    if with_path:
        columns.append(("path", "left", [text((inert(v.get("path")), "cyan")) for v in versions], True))
    action_column, by = len(columns), len(columns) + 2
    columns += [
        ("action", "left", actions, True),
        ("revision", "left", [text((short_revision(v.get("revision")), "bold")) for v in versions], False),
        ("by", "left", [text(by_cell(v)) for v in versions], True),
        ("bytes", "right", [text(str(v.get("bytes"))) for v in versions], False),
        ("+/-", "right", [text((f"+{v.get('added', 0)}", "green"), " ", (f"-{v.get('removed', 0)}", "red"))
                          for v in versions], False),
    ]

    def by_cells(form: ActorForm) -> tuple[int, list[Text], str | None]:
        return by, [text(by_cell(v, form)) for v in versions], None

    alternatives = [by_cells("short"), by_cells("brief")]
    times = short_times(versions, now or datetime.datetime.now(datetime.UTC))
    if times is not None:
        alternatives.append((0, [text(cell) for cell in times[1]], times[0]))
    alternatives.append(by_cells("compact"))
    if any(reviewed(v) is not None for v in versions):  # "(review)" without the proposal's id
        alternatives.append((action_column, [action_cell(v, True) for v in versions], None))
    alternatives.append(by_cells("bare"))
    steps = [(by, BY_FLOORS[0]), (0, TIME_FLOOR), (by, BY_FLOORS[1])]
    if with_path:
        steps.append((1, PATH_FLOORS[0]))
    steps.append((action_column, ACTION_FLOOR))
    if with_path:
        steps.append((1, PATH_FLOORS[1]))
    return FittedTable(columns, steps, alternatives, snap=frozenset({0}))


def more(next_cursor: Any, again: Iterable[str]) -> list[RenderableType]:
    """The "older entries: COMMAND --cursor C" line of a paged history view, when there is a next page.

    ``again`` is the command that made this page with every option but
    ``--cursor`` (``amux memory log --since 24h --path-prefix notes/ --limit
    2``), so following the hint keeps the same filters and page size.
    """
    if not next_cursor:
        return []
    return [notice(f"older entries: {command(*again, '--cursor', next_cursor)}")]


def render_history(r: dict[str, Any], *, again: list[str] | None = None) -> RenderableType:
    """A ``history`` result: the path, then an aligned table of its versions, newest first, and the next page.

    ``again``: the command with its options but ``--cursor`` (:func:`more`);
    by default ``amux memory history PATH``.
    """
    versions = r.get("versions") or []
    head = text((inert(r.get("path")), "bold cyan"), f": {counted(len(versions), 'version')} shown, newest first")
    return group([head, version_table(versions, with_path=False),
                  *more(r.get("next_cursor"), again or ["amux", "memory", "history", str(r.get("path"))])])


def render_log(r: dict[str, Any], *, again: list[str] | None = None) -> RenderableType:
    """A ``log`` result: an aligned table of changes across the scope, newest first, and the next page.

    ``again``: the command with its options but ``--cursor`` (:func:`more`);
    by default ``amux memory log``.
    """
    changes = r.get("changes") or []
    if not changes:
        return text(("no changes", "bold"))
    return group([version_table(changes, with_path=True),
                  *more(r.get("next_cursor"), again or ["amux", "memory", "log"])])
