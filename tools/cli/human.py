"""Readable terminal output: one renderer per result shape, and the one error view (DESIGN.md §17).

:func:`tools.cli.output.emit` imports this module and calls a renderer
(:data:`RENDERERS`, keyed by a :class:`tools.cli.view.View`'s
:data:`~tools.cli.view.Renderer` name) only when stdout is a terminal and
no ``--json`` was given; piped output never comes here.  Each renderer
imports rich when it runs and returns a rich renderable built from
:class:`rich.text.Text` objects (never markup strings, so ``[red]`` in a
note is just text); :mod:`tools.cli.console` prints it.

Everything shown from memory (paths, snippets, content, actors, error
messages) was written by an agent and is hostile: it goes through
:func:`tools.client.inert.inert` first, which makes terminal control
sequences visible instead of letting the terminal act on them.
"""

from __future__ import annotations

import datetime
import json
import re
import shlex
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

from amux_memory.protocol.errors import ERRORS, ErrorCode, HubError
from amux_memory.protocol.params import ABSENT
from amux_memory.tools.cli.console import print_err
from amux_memory.tools.cli.view import Renderer, View
from amux_memory.tools.client.inert import inert
from amux_memory.tools.client.wording import counted

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.table import Table
    from rich.text import Text

SHORT_REVISION = 12
"""Hex digits of a revision shown in tables and headers (the full one is in ``--json``)."""


def short_revision(revision: Any) -> str:
    """The first :data:`SHORT_REVISION` characters of a revision; ``absent`` (or a non-string) as it is."""
    text = inert(revision)
    return text if text == ABSENT else text[:SHORT_REVISION]


def command(*words: Any) -> str:
    """A command line a user can paste: each word made inert and shell-quoted (``'a b.md'``)."""
    return " ".join(shlex.quote(inert(word)) for word in words)


def text(*parts: str | Text | tuple[str, str]) -> Text:
    """A :class:`rich.text.Text` from plain parts, ``Text`` pieces and ``(text, style)`` pairs (used as is)."""
    from rich.text import Text

    out = Text()
    for part in parts:
        if isinstance(part, tuple):
            out.append(part[0], style=part[1])
        else:
            out.append(part)
    return out


def group(items: Iterable[RenderableType]) -> RenderableType:
    """Several renderables printed one after the other."""
    from rich.console import Group

    return Group(*items)


def notice(message: str) -> Text:
    """A warning line (yellow): incomplete results, cut fragments, how to go on."""
    return text((message, "yellow"))


def render_search(r: dict[str, Any], words: list[str] | None = None) -> RenderableType:
    """A search result: one line per ranked document (path, line, matched keywords), its snippet below.

    Says plainly when the scan was incomplete (a missing match is no proof
    of absence) and when more matches were left out; ``words`` are
    highlighted in the snippets, ignoring case.
    """
    matches = r.get("matches") or []
    lines: list[RenderableType] = []
    scanned = f"scanned {counted(int(r.get('scanned_files') or 0), 'file')}"
    if not matches:
        lines.append(text(("no matches", "bold"), f" ({scanned})"))
    else:
        candidates = int(r.get("candidates", len(matches)) or 0)
        lines.append(text((f"{len(matches)} of {counted(candidates, 'matching document')}", "bold"),
                          f" ({scanned})"))
    for rank, m in enumerate(matches, 1):
        matched = ", ".join(inert(word) for word in m.get("matched") or [])
        lines.append(text(f"{rank:>2}. ", (inert(m.get("path")), "bold cyan"), (f":{m.get('line')}", "cyan"),
                          (f"  rev {short_revision(m.get('revision'))}", "dim"), (f"  matched: {matched}", "dim")))
        snippet = text("    ", inert(m.get("snippet", "")), ("…" if m.get("truncated") else ""))
        if words:
            snippet.highlight_words([inert(word) for word in words], style="bold yellow", case_sensitive=False)
        lines.append(snippet)
    if r.get("incomplete"):
        reasons = ", ".join(inert(x) for x in r.get("incomplete_reasons") or []) or "a scan limit"
        lines.append(notice(f"incomplete: the scan stopped early ({reasons}); a missing match is not proof of "
                            "absence: narrow --path-prefix or change the keywords"))
        for name in r.get("unreadable") or []:
            lines.append(notice(f"unreadable: {inert(name)} (file permissions on the Hub's host)"))
    if r.get("truncated"):
        lines.append(notice("more matches were left out: raise --limit (at most 20), narrow --path-prefix or add "
                            "keywords"))
    if matches:
        lines.append(text(("read one with: ", "dim"), (command("amux", "memory", "show", matches[0].get("path")),
                                                       "dim")))
    return group(lines)


def fragment_lines(content: str, start_line: int, offset: int) -> str:
    """The ``lines A-B`` (or ``from byte N``) part of a ``show`` header, from the request and the content."""
    first = max(start_line, 1)
    count = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    if offset:
        return f"continued from byte {offset}"
    if count == 0:
        return "no lines"
    return f"lines {first}-{first + count - 1}"


def render_get(r: dict[str, Any], *, start_line: int = 0, end_line: int = 0, offset: int = 0,
               revision: str | None = None) -> RenderableType:
    """A ``show`` result: one header line (path, line range of total, short revision, bytes), then the fragment.

    A missing document says how to create it; a cut fragment ends with the
    exact command that continues it (``--offset``, same lines, same
    ``--revision``); a stored version (``revision``) says so in the header.
    """
    path = r.get("path")
    if not r.get("exists"):
        return text((inert(path), "bold cyan"), " does not exist (revision \"absent\"); create it with: ",
                    (command("amux", "memory", "upsert", path, "--expected-revision", ABSENT), "bold"))
    content = str(r.get("content", ""))
    head = text((inert(path), "bold cyan"),
                f"  {fragment_lines(content, start_line, offset)} of {r.get('total_lines')}",
                ("  rev ", "dim"), (short_revision(r.get("revision")), "bold"),
                (f"  {counted(int(r.get('total_bytes') or 0), 'byte')}", "dim"),
                ("  (a stored version, from the history)" if revision is not None else "", "yellow"))
    parts: list[RenderableType] = [head, text(inert(content.removesuffix("\n"), multiline=True))]
    if r.get("truncated"):
        again = ["amux", "memory", "show", path]
        if start_line:
            again += ["--start-line", str(start_line)]
        if end_line:
            again += ["--end-line", str(end_line)]
        if revision is not None:
            again += ["--revision", revision]
        again += ["--offset", str(r.get("next_offset"))]
        parts.append(notice(f"cut at the response limit; continue with: {command(*again)}"))
    return group(parts)


def render_list(r: dict[str, Any]) -> RenderableType:
    """A ``list`` result: an aligned table of path and bytes, a total, and whether the walk was incomplete."""
    entries = r.get("entries") or []
    table = new_table(("path", "left"), ("bytes", "right"))
    for entry in entries:
        table.add_row(text((inert(entry.get("path")), "cyan")), text(str(entry.get("bytes"))))
    total = sum(int(entry.get("bytes") or 0) for entry in entries)
    summary = f"{counted(len(entries), 'document')}, {counted(total, 'byte')}"
    parts: list[RenderableType] = [table, text((summary, "dim"))]
    if r.get("incomplete"):
        reasons = ", ".join(inert(x) for x in r.get("incomplete_reasons") or []) or "a bound"
        parts.append(notice(f"incomplete: the listing stopped early ({reasons}); narrow --path-prefix"))
    for name in r.get("unreadable") or []:
        parts.append(notice(f"unreadable: {inert(name)} (file permissions on the Hub's host)"))
    return group(parts)


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


class FittedTable:
    """A borderless table that fits the terminal's width by narrowing the columns that can take it, in order.

    Each column is ``(header, justify, cells, narrowable)``; a column that
    is not narrowable (a revision, a count) keeps its natural width (its
    longest cell) and never wraps.  ``alternatives`` are ``(column, cells,
    header)`` triples, shorter forms of a column tried in turn first while the
    table is too wide (the short session of the "by" cell, the short time;
    ``header`` ``None`` keeps the column's).  ``steps`` are ``(column,
    floor)`` pairs tried in turn next: the column is narrowed, at most down
    to ``floor`` (its cells then wrap at spaces or fold, so nothing more is
    cut); a column in ``snap`` goes straight to its floor once narrowed (a
    time cell wraps at its one space, so any width between is wasted).
    Widths are terminal cells.  Built at print time, for the console's width
    (rich's renderable protocol), DESIGN.md §17.
    """

    GAP = 2
    """Spaces between two columns: the cell's right padding and the box's column separator."""

    def __init__(self, columns: list[tuple[str, str, list[Text], bool]], steps: list[tuple[int, int]],
                 alternatives: list[tuple[int, list[Text], str | None]] | None = None,
                 snap: frozenset[int] = frozenset()) -> None:
        self.columns = columns
        self.steps = steps
        self.alternatives = alternatives or []
        self.snap = snap

    def widths(self, available: int) -> tuple[list[int], list[list[Text]], list[str]]:
        """The width of each column (terminal cells, padding excluded), the cells and the headers to show, for
        ``available``."""
        cells = [list(column[2]) for column in self.columns]
        headers = [column[0] for column in self.columns]

        def natural(index: int) -> int:
            return max([len(headers[index]), *(cell.cell_len for cell in cells[index])])

        widths = [natural(i) for i in range(len(self.columns))]
        budget = available - self.GAP * (len(self.columns) - 1)
        for index, shorter, header in self.alternatives:
            if sum(widths) > budget:
                cells[index] = shorter
                headers[index] = header if header is not None else headers[index]
                widths[index] = natural(index)
        for index, floor in self.steps:
            excess = sum(widths) - budget
            if excess <= 0:
                break
            if index in self.snap:
                widths[index] = min(floor, widths[index])
            else:
                widths[index] = max(min(floor, widths[index]), widths[index] - excess)
        return widths, cells, headers

    def table(self, available: int) -> Table:
        """The rich table for a terminal ``available`` cells wide."""
        from rich import box
        from rich.table import Table

        widths, cells, headers = self.widths(available)
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0),
                      header_style="bold")
        for (_, justify, _, narrowable), header, width in zip(self.columns, headers, widths, strict=True):
            table.add_column(header, justify="right" if justify == "right" else "left", width=width,
                             no_wrap=not narrowable, overflow="fold")
        for row in zip(*cells, strict=True):
            table.add_row(*row)
        return table

    def __rich_console__(self, console: Console, options: Any) -> Any:
        """Yield the table built for the width rich gives (rich's renderable protocol)."""
        yield self.table(options.max_width)


def new_table(*columns: tuple[str, str]) -> Table:
    """A borderless aligned table with a bold header row: ``(header, "left"|"right")`` per column."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for header, justify in columns:
        table.add_column(header, justify="right" if justify == "right" else "left", no_wrap=header != "path",
                         overflow="fold")
    return table


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


def by_cell(version: dict[str, Any], form: ActorForm = "full") -> str:
    """The "by" cell of a version: :func:`actor` in ``form`` and, for an approved proposal, ``, proposed by``
    the agent (``principal/client session``, cut as ``form`` says; ``bare`` drops its session too)."""
    who = actor(version, form=form)
    review = version.get("review")
    if isinstance(review, dict) and isinstance(review.get("proposed_by"), dict):
        who += ", proposed by " + actor({"actor": review["proposed_by"]},
                                        form="bare" if form == "bare" else "compact")
    return who


def version_table(versions: list[dict[str, Any]], *, with_path: bool,
                  now: datetime.datetime | None = None) -> FittedTable:
    """The rows of ``history`` or ``log``: time, (path,) action, revision, actor, size, lines changed.

    Fits the terminal (:class:`FittedTable`, DESIGN.md §17): revisions
    always show :data:`SHORT_REVISION` hex digits (enough to paste back) and
    bytes and +/- are never narrowed.  While the table is too wide, shorter
    forms come first, so an 80-column terminal shows each change on one line:
    the "by" cell's session cut to :data:`SHORT_SESSION` characters, then
    without the word "session" (:func:`actor`), then the time without
    seconds or date (:func:`short_times`, ``now`` the current UTC time, by
    default the clock's), then "by" as ``principal/client session``, then an
    approved proposal's action as ``update (review)`` without its id, then
    "by" without the session.  An approved proposal's action says ``(review
    ID)`` and its "by" ``, proposed by`` the agent (:func:`by_cell`, DESIGN.md
    §21).  Only then do "by", the path and the action wrap or
    fold, never cut.
    """
    def action_cell(v: dict[str, Any], short: bool) -> Text:
        action = inert(v.get("action"))
        if v.get("restored_from"):
            action += f" of {short_revision(v.get('restored_from'))}"
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


def render_proposed(r: dict[str, Any]) -> RenderableType:
    """A write kept for review (``proposed: true``, DESIGN.md §21), one line: nothing is in memory yet.

    ``proposed p1a2b3c4d5e6f for MEMORY.md: pending review, not yet in memory ('amux memory review show ID')``;
    a deletion says the deletion is proposed.  The path is an agent's and made :func:`inert`.
    """
    pid = inert(r.get("proposal"))
    path = (inert(r.get("path")), "bold cyan")
    again = (command("amux", "memory", "review", "show", r.get("proposal")), "dim")
    if r.get("action") == "forget":
        return text(f"proposed {pid} to delete ", path, ": pending review, nothing deleted yet (", again, ")")
    return text(f"proposed {pid} for ", path, ": pending review, not yet in memory (", again, ")")


def render_upsert(r: dict[str, Any]) -> RenderableType:
    """An ``upsert`` (or ``restore``) result, one line: created/replaced/restored, bytes, the new short revision;
    a write kept for review says so instead (:func:`render_proposed`)."""
    if r.get("proposed"):
        return render_proposed(r)
    if r.get("restored_from"):
        how = f"restored {short_revision(r.get('restored_from'))} as"
    else:
        how = "created" if r.get("created") else "replaced"
    return text(f"{how} ", (inert(r.get("path")), "bold cyan"), f" ({counted(int(r.get('bytes') or 0), 'byte')}); "
                "revision now ",
                (short_revision(r.get("revision")), "bold"))


def render_edit(r: dict[str, Any]) -> RenderableType:
    """An ``edit`` result, one line: saved (created or updated) with the new short revision, or no change; a
    write kept for review says so instead (:func:`render_proposed`)."""
    if r.get("proposed"):
        return render_proposed(r)
    path = (inert(r.get("path")), "bold cyan")
    if not r.get("changed"):
        if r.get("revision") == ABSENT:
            return text("no change: ", path, " does not exist and was not created; nothing written")
        return text("no change: nothing written (", path, " stays at revision ",
                    (short_revision(r.get("revision")), "bold"), ")")
    how = "created" if r.get("created") else "saved"
    return text(f"{how} ", path, f" ({counted(int(r.get('bytes') or 0), 'byte')}); revision now ",
                (short_revision(r.get("revision")), "bold"))


def render_forget(r: dict[str, Any]) -> RenderableType:
    """A ``forget`` result, one line: deleted (undo with restore), or already absent; a deletion kept for review
    says so instead (:func:`render_proposed`)."""
    if r.get("proposed"):
        return render_proposed(r)
    path = r.get("path")
    if r.get("already_absent"):
        return text((inert(path), "bold cyan"), " was already absent; nothing was deleted")
    return text("deleted ", (inert(path), "bold cyan"), ("; its versions stay in the history (",
                                                         "dim"), (command("amux", "memory", "history", path), "dim"),
                (")", "dim"))


def render_copy(r: dict[str, Any], *, move: bool = False) -> RenderableType:
    """A ``copy`` result (``amux memory copy`` or, ``move``, ``amux memory move``; DESIGN.md §7.8): one line saying
    what went where, with the new short revision and the source's revision read; a destination kept for review
    names the proposal; a move that kept its source says why (``source_kept``); the Hub's warnings follow.  Every
    path comes from memory and is made :func:`inert`."""
    source, destination = (inert(r.get("source")), "bold cyan"), (inert(r.get("path")), "bold cyan")
    read = (f" (source revision {short_revision(r.get('source_revision'))})", "dim")
    if r.get("proposed"):
        pid = r.get("proposal")
        again = (command("amux", "memory", "review", "show", pid), "dim")
        lines: list[RenderableType] = [text(("proposed ", "yellow"), (inert(pid), "bold"), ": a copy of ", source,
                                            " to ", destination, read, ": pending review, not yet in memory (", again,
                                            ")")]
    else:
        how = "moved" if r.get("moved") else "copied"
        lines = [text(f"{how} ", source, " to ", destination, f" ({r.get('bytes')} bytes); revision now ",
                      (short_revision(r.get("revision")), "bold"), read)]
        if r.get("moved"):
            lines.append(text((f"{inert(r.get('source'))} was forgotten; its versions stay in the history (", "dim"),
                              (command("amux", "memory", "history", r.get("source")), "dim"), (")", "dim")))
    if move and not r.get("moved"):
        lines.append(notice(f"{inert(r.get('source'))} was kept: {inert(r.get('source_kept') or 'not moved')}"))
    lines.extend(notice(inert(warning)) for warning in r.get("warnings") or [])
    return group(lines)


def render_purge(r: dict[str, Any]) -> RenderableType:
    """A ``purge`` result: how many stored versions were erased for good, with their short revisions."""
    erased = r.get("erased") or []
    revisions = ", ".join(short_revision(v.get("revision")) for v in erased)
    line = text(f"erased {counted(len(erased), 'stored version')} of ", (inert(r.get("path")), "bold cyan"),
                " from the history", (f" ({revisions})" if revisions else ""),
                ("; the live document was not touched", "dim"))
    return line


def finding_cells(finding: dict[str, Any]) -> list[Text]:
    """A ``scan`` finding as table cells: where (line, or ``path``), rule, redacted preview."""
    where = "path" if finding.get("in") == "path" else f"line {finding.get('line')}"
    return [text(where), text((inert(finding.get("rule")), "bold red")), text(inert(finding.get("preview")))]


def render_scan(r: dict[str, Any]) -> RenderableType:
    """A ``scan`` result (DESIGN.md §16.5): a table of the documents, then of the stored versions, holding
    credentials (path, revision, where, rule, redacted preview), then each entry's clean-up commands (already
    shell-quoted by the Hub; made inert here) and each value's ``memory.secret_allow`` digest."""
    documents, versions = r.get("documents") or [], r.get("versions") or []
    rules = len(r.get("rules") or [])
    if not documents and not versions:
        return text(("no credentials found", "bold"), f" ({counted(rules, 'rule')})")
    parts: list[RenderableType] = []
    digests: list[Text] = []
    seen: set[Any] = set()
    for title, entries in (("document", documents), ("stored version", versions)):
        if not entries:
            continue
        parts.append(text((counted(len(entries), title, "holding credentials"), "bold")))
        table = new_table(("path", "left"), ("revision", "left"), ("where", "left"), ("rule", "left"),
                          ("preview", "left"))
        for entry in entries:
            for finding in entry.get("findings") or []:
                table.add_row(text((inert(entry.get("path")), "cyan")), text(short_revision(entry.get("revision"))),
                              *finding_cells(finding))
                if finding.get("sha256") and finding.get("sha256") not in seen:
                    seen.add(finding.get("sha256"))
                    digests.append(text(f"  {inert(finding.get('preview'))}: ", (inert(finding.get("sha256")),
                                                                                  "dim")))
        parts.append(table)
    steps: list[RenderableType] = [text(("to clean up:", "bold"))]
    for entry in [*documents, *versions]:
        if entry.get("advice"):
            steps.append(text(inert(entry.get("path")), ": ", (inert(entry.get("advice")), "dim")))
        steps.extend(text("  ", (inert(c), "bold")) for c in entry.get("commands") or [])
    parts.extend(steps)
    if digests:
        parts.append(text(("not a credential? let that exact value through with its digest "
                           "('amux system config set memory.secret_allow DIGEST,...'):", "dim")))
        parts.extend(digests)
    if r.get("truncated"):
        parts.append(notice("more entries were found than fit: clean these up and scan again"))
    return group(parts)


def _index_outcome(index: dict[str, Any]) -> Text:
    """``; index PATH updated|unchanged (revision …)``, or ``… proposed for review (pID)``."""
    if index.get("proposal"):
        return text(f"; index {inert(index.get('path'))} proposed for review (", (inert(index["proposal"]), "bold"),
                    ")")
    how = "updated" if index.get("changed") else "unchanged"
    return text(f"; index {inert(index.get('path'))} {how}",
                (f" (revision {short_revision(index.get('revision'))})" if index.get("revision") else "", "dim"))


def _proposed(r: dict[str, Any], removal: bool) -> RenderableType:
    """A typed command the Hub kept for review (DESIGN.md §21): what waits, and what a person does next."""
    outcome = ": pending review, nothing deleted yet" if removal else ": pending review, not yet in memory"
    return group([text(("proposed ", "yellow"), (inert(r.get("proposal")), "bold"),
                       " to delete " if removal else " for ", (inert(r.get("proposed")), "bold cyan"), outcome),
                  text("next: ", (command("amux", "memory", "review", "show", r.get("proposal")), "bold"),
                       "; once it is decided, ", (command("amux", "memory", "index"), "bold"),
                       " brings the index up to date")])


def render_typed_new(r: dict[str, Any]) -> RenderableType:
    """A ``memory new`` result, one line: the topic created, its short revision, and the index's update
    (or, kept for review, the proposal and the next step)."""
    if r.get("proposed"):
        return _proposed(r, removal=False)
    return text("created ", (inert(r.get("created")), "bold cyan"), "; revision now ",
                (short_revision(r.get("revision")), "bold"), _index_outcome(r.get("index") or {}))


def render_typed_index(r: dict[str, Any]) -> RenderableType:
    """A ``memory index`` result, one line: rebuilt, already up to date, or (``--check``) out of date."""
    path = (inert(r.get("path")), "bold cyan")
    topics = ", ".join(f"{inert(kind)} {count}" for kind, count in (r.get("topics") or {}).items()) or "no topics"
    proposal = r.get("proposal") or (r.get("pointer") or {}).get("proposal")
    if proposal:
        return text("rebuild of ", path, f" ({topics}) proposed for review (", (inert(proposal), "bold"),
                    "); a person approves it with: ", (command("amux", "memory", "review"), "bold"))
    if not r.get("up_to_date"):
        return text(path, (" is out of date", "yellow"), f" ({topics}); rebuild it with: ",
                    (command("amux", "memory", "index"), "bold"))
    if not r.get("changed"):
        return text(path, f" is up to date ({topics}); nothing written")
    size = f"{counted(int(r.get('bytes') or 0), 'byte')}, {counted(int(r.get('lines') or 0), 'line')}"
    return text("rebuilt ", path, f" ({size}; {topics}); revision now ",
                (short_revision(r.get("revision")), "bold"))


def render_typed_remove(r: dict[str, Any]) -> RenderableType:
    """A ``memory remove`` result, one line: the topic deleted and what became of the index (or, kept
    for review, the proposal)."""
    if r.get("proposed"):
        return _proposed(r, removal=True)
    return text("removed ", (inert(r.get("removed")), "bold cyan"), _index_outcome(r.get("index") or {}))


def setting_shown(value: Any) -> str:
    """A setting's value as a person types it: ``true``/``false``, a number, a bare string, ``''`` for empty."""
    if value == "":
        return "''"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render_settings(r: dict[str, Any]) -> RenderableType:
    """A ``system config list`` result (DESIGN.md §13.2): the file, a table of key, value, source and default,
    then each setting's description."""
    rows = r.get("settings") or []
    table = new_table(("key", "left"), ("value", "left"), ("from", "left"), ("default", "left"))
    for row in rows:
        table.add_row(text((inert(row["key"]), "cyan")), text(inert(setting_shown(row["value"]))),
                      text(inert(row["source"])), text((inert(setting_shown(row["default"])), "dim")))
    return group([
        text((f"settings of {inert(r.get('file'))}", "bold"), " (applied when the Hub starts)"),
        table, text(""),
        *(text((f"{inert(row['key'])}: ", "bold"), inert(row["description"])) for row in rows)])


def render_document(data: bytes) -> RenderableType:
    """A whole document (``export`` to a terminal): its text, decoded, control sequences made visible."""
    return text(inert(data.decode("utf-8", "replace").removesuffix("\n"), multiline=True))


DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))
"""How a unified diff line is coloured, by its first characters (the first match wins)."""


def render_diff(data: bytes) -> RenderableType:
    """A unified diff (``diff`` to a terminal): headers bold, hunk heads cyan, added green, removed red; inert."""
    out = text()
    for line in data.decode("utf-8", "replace").splitlines():
        style = next((s for prefix, s in DIFF_STYLES if line.startswith(prefix)), "")
        if len(out):
            out.append("\n")
        out.append(inert(line.replace("\t", "  ")), style=style)
    return out


RENDERERS: dict[Renderer, Callable[..., RenderableType]] = {
    "document": render_document,
    "diff": render_diff,
    "search": render_search,
    "get": render_get,
    "list": render_list,
    "history": render_history,
    "log": render_log,
    "upsert": render_upsert,
    "edit": render_edit,
    "forget": render_forget,
    "copy": render_copy,
    "purge": render_purge,
    "scan": render_scan,
    "settings": render_settings,
    "typed_new": render_typed_new,
    "typed_index": render_typed_index,
    "typed_remove": render_typed_remove,
}
"""Renderer name (a :class:`tools.cli.view.View`'s) → the function: result map and options in, renderable out.

Keyed by the :data:`tools.cli.view.Renderer` literal, so mypy refuses a key
that is not a renderer's name; ``tests/test_human_output.py`` checks that
every name has one and that each runs on a sample."""


def render(view: View, result: Any) -> RenderableType:
    """``result`` rendered as ``view`` says.  Raises ``KeyError`` for a name not in :data:`RENDERERS` (a bug)."""
    return RENDERERS[view.renderer](result, **view.options)


TOOL_COMMANDS = {
    "memory_get": "'amux memory show'",
    "memory_search": "'amux memory search'",
    "memory_upsert": "'amux memory upsert'",
    "memory_forget": "'amux memory forget'",
    "allow_shrink=true": "--allow-shrink",
}
"""MCP tool names in a next step (:attr:`HubError.next_step`) and the CLI command a person types instead."""


PERSON_NEXT_STEPS = {
    ErrorCode.INTERNAL: "The Hub failed; do not assume the call took effect: check with 'amux memory show' "
                        "and see the Hub's log.",
    ErrorCode.DISABLED: "Memory is switched off on this Hub: 'amux system config set memory.enabled true' "
                        "(with the Hub's --home if it is not the default), then restart the Hub.",
    ErrorCode.UNAUTHORIZED: "This caller may not use this memory: check AMUX_TOKEN, or ask the Hub's operator "
                            "('amux hub principal list', 'amux hub token list').",
    ErrorCode.BINDING_MISMATCH: "AMUX_MEMORY_BINDING no longer matches the scope the Hub gives you: unset it, or "
                                "start the agent again with 'amux launch'.",
    ErrorCode.UNAVAILABLE: "Start a Hub with 'amux hub start' (or point AMUX_HOME / AMUX_HUB at a running one), "
                           "then run the command again.",
}
"""Next steps for a person where the MCP one (:data:`protocol.errors.ERRORS`) speaks to an agent ("tell the user")."""


def terminal_next_step(exc: HubError) -> str:
    """What a person should do after ``exc``: the raise site's own next step (:attr:`HubError.refined`), else
    :data:`PERSON_NEXT_STEPS`, else the MCP next step, with tool names spelled as the commands a person types
    (``memory_get`` → ``'amux memory show'``).  Made :func:`inert`: a refinement may come from the Hub."""
    if exc.code in PERSON_NEXT_STEPS and exc.next_step == ERRORS[exc.code].next_step:
        return PERSON_NEXT_STEPS[exc.code]
    step = exc.next_step
    for tool, cli in TOOL_COMMANDS.items():
        step = step.replace(tool, cli)
    return inert(step)


def print_error(exc: HubError) -> None:
    """Print ``exc`` once on stderr: ``amux: CODE: MESSAGE``, the next step, then each ``data`` member (lists and
    maps as compact JSON).

    The message and data come from the Hub and may quote hostile input, so
    they are made :func:`inert`; long values are cut to 200 characters.
    """
    lines: list[RenderableType] = [
        text("amux: ", (exc.code.value, "bold red"), ": ", inert(exc.message)),
        text(("  next: ", "bold"), terminal_next_step(exc)),
    ]
    for key, value in exc.data.items():
        shown = inert(json.dumps(value, ensure_ascii=False, default=str) if isinstance(value, dict | list) else value)
        lines.append(text((f"  {inert(key)}: ", "dim"), shown if len(shown) <= 200 else shown[:200] + "…"))
    print_err(group(lines))

