"""``amux memory log`` and ``history`` tables in 80- and 120-column terminals (DESIGN.md §17).

Through the real CLI against a real Hub, stdout a pseudo-terminal
(``tests/terminal.py``), with the actors a real table holds: the OS
principal, the ``amux-cli`` client and a 36-character launch session id.  At
80 columns every change is one line (a shorter time, a narrower "by" cell);
at 120 the full time, the client and the session's prefix are kept.  The
shorter time forms for older changes are checked on the renderer with a
fixed clock.
"""

from __future__ import annotations

import datetime as dt
import io
import os
import pwd
import re

import pytest

from amux_memory.tools.cli.output.versions import version_table
from tests.conftest import HubProcess, amux_argv
from tests.terminal import run_in_terminal

SESSION = "67e5f0a8-7ff6-458d-a94c-d01912345678"
"""A 36-character session id, as ``amux launch`` gives an agent."""

PATHS = ("MEMORY.md", "notes/deploy.md", "projects/amux/plan.md")
"""Paths of the lengths an ordinary scope holds (the index, a topic, a project's topic)."""

FULL_TIME = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}Z  ")
SHORT_TIME = re.compile(r"^(\d{2}:\d{2}:\d{2}|\d{2}-\d{2} \d{2}:\d{2})  ")  # today, or this year past midnight


def table_lines(hub: HubProcess, columns: int, *args: str) -> list[str]:
    """The lines of ``amux ARGS`` printed to a terminal ``columns`` wide (asserting it exited 0)."""
    env = {k: v for k, v in hub.env.items() if k not in ("NO_COLOR", "AMUX_OUTPUT", "FORCE_COLOR")}
    r = run_in_terminal([*amux_argv(), *args], env={**env, "TERM": "xterm-256color", "COLUMNS": str(columns)},
                        columns=columns)
    assert r.returncode == 0, r.stderr
    lines = [line.rstrip() for line in r.plain.splitlines() if line.strip()]
    assert all(len(line) <= columns for line in lines), lines
    return lines


def rows_after_rule(lines: list[str]) -> list[str]:
    """The lines under the table's header rule (each a change's row or a continuation of one)."""
    rule = next(i for i, line in enumerate(lines) if set(line) == {"─"})
    return lines[rule + 1:]


@pytest.fixture
def changes(hub: HubProcess) -> list[tuple[str, str]]:
    """Five changes: each path created from the CLI, two updated under a launch session; ``(path, revision)``
    newest first."""
    made: list[tuple[str, str]] = []
    for path in PATHS:
        r = hub.cli("memory", "upsert", path, "--expected-revision", "absent", input=f"# {path}\n".encode())
        assert r.returncode == 0, r.stderr
        made.append((path, r.json["revision"]))
    for path, revision in list(made[1:]):
        r = hub.cli("memory", "upsert", path, "--expected-revision", revision, input=f"# {path}\n\nmore\n".encode(),
                    env={"AMUX_SESSION_ID": SESSION})
        assert r.returncode == 0, r.stderr
        made.append((path, r.json["revision"]))
    return made[::-1]


@pytest.mark.slow
def test_at_80_columns_every_change_is_one_line(hub: HubProcess, changes: list[tuple[str, str]]) -> None:
    me = pwd.getpwuid(os.getuid()).pw_name
    rows = rows_after_rule(table_lines(hub, 80, "memory", "log"))
    assert len(rows) == len(changes), rows  # no time, actor or path split over two lines
    for row, (path, revision) in zip(rows, changes, strict=True):
        assert SHORT_TIME.match(row), row
        assert f" {path} " in row and revision[:12] in row and f" {me}/cli " in row, row

    history = table_lines(hub, 80, "memory", "history", "notes/deploy.md")
    rows = rows_after_rule(history)
    assert len(rows) == 2, history
    assert all(SHORT_TIME.match(row) for row in rows), rows
    assert f"{me} via amux-cli 67e5f0a8…" in rows[0] and f"{me} via amux-cli  " in rows[1], rows


@pytest.mark.slow
def test_at_120_columns_nothing_is_lost(hub: HubProcess, changes: list[tuple[str, str]]) -> None:
    me = pwd.getpwuid(os.getuid()).pw_name
    lines = table_lines(hub, 120, "memory", "log")
    assert lines[0].split() == ["time", "(UTC)", "path", "action", "revision", "by", "bytes", "+/-"]
    rows = rows_after_rule(lines)
    assert len(rows) == len(changes), rows
    for row, (path, revision) in zip(rows, changes, strict=True):
        assert FULL_TIME.match(row), row
        assert f" {path} " in row and revision[:12] in row and f" {me} via amux-cli" in row, row
    assert sum(f"{SESSION[:8]}…" in row for row in rows) == 2, rows  # the session's prefix

    rows = rows_after_rule(table_lines(hub, 120, "memory", "history", "notes/deploy.md"))
    assert len(rows) == 2 and all(FULL_TIME.match(row) for row in rows), rows
    assert f"{me} via amux-cli session {SESSION}" in rows[0], rows  # the whole session id


def render(versions: list[dict[str, object]], now: dt.datetime, width: int) -> list[str]:
    """``version_table(versions, with_path=True, now=now)`` printed by rich at ``width`` columns, as lines."""
    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(version_table(versions, with_path=True, now=now))
    return [line.rstrip() for line in out.getvalue().splitlines()]


@pytest.mark.parametrize(("now", "header", "cell"), [
    (dt.datetime(2026, 12, 1, 23, 0, tzinfo=dt.UTC), "today UTC", "18:19:25"),
    (dt.datetime(2026, 12, 2, 0, 1, tzinfo=dt.UTC), "time (UTC)", "12-01 18:19"),
    (dt.datetime(2027, 1, 3, 9, 0, tzinfo=dt.UTC), "time (UTC)", "2026-12-01 18:19"),
])
def test_the_short_time_is_one_form_for_the_table_and_never_ambiguous(now: dt.datetime, header: str,
                                                                     cell: str) -> None:
    version = {"time": "2026-12-01T18:19:25.123456Z", "path": "notes/deploy.md", "action": "update",
               "revision": "e6e238deb720" + "0" * 52, "bytes": 13, "added": 1, "removed": 0,
               "actor": {"principal": "root", "client": "amux-cli", "session": SESSION}}
    lines = render([version, version], now, 80)
    assert lines[0].startswith(header), lines
    assert [line.startswith(cell + "  ") for line in lines[2:]] == [True, True], lines
    wide = render([version], now, 160)
    assert wide[2].startswith("2026-12-01 18:19:25Z  ") and f"session {SESSION}" in wide[2], wide
