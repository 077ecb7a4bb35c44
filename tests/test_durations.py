"""Every command's ``--ttl``, ``--timeout`` and ``--since`` take one set of durations (tools/client/when.py).

Through the real ``amux`` CLI against a real Hub's home:

* ``amux hub token issue --ttl`` and ``amux hub connect --ttl`` accept ``30d``, ``12h``, ``90m``, ``45s``,
  ``1h30m`` and plain seconds alike, and the token lives that long;
* a value that is not a duration, zero or over the longest lifetime is ``bad_request`` (exit 2) naming the
  option and the accepted forms, and issues nothing;
* ``amux hub stop --timeout`` refuses a bad value before it stops anything, and ``amux memory log --since``
  takes plain seconds too;
* each of these commands' ``--help`` names the accepted forms.
"""

from __future__ import annotations

import calendar
import time
from typing import Any

import pytest

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode
from amux_memory.tools.client.when import DURATION_FORMS
from tests.conftest import CliResult, HubProcess, amux_argv

FORMS = [("30d", 30 * 86400), ("12h", 12 * 3600), ("90m", 90 * 60), ("45s", 45), ("3600", 3600),
         ("1h30m", 5400), (" 2W ", 14 * 86400)]
"""Durations as people type them, and their seconds."""

BAD = ["soon", "30x", "0", "0h", "-5", "1.5", "7 d", "", "3651d"]
"""Values every ``--ttl`` refuses (``3651d`` is over the ten-year bound)."""

URL = "http://127.0.0.1:8765/mcp"
"""A loopback URL for ``amux hub connect --url`` (an SSH tunnel's end): no MCP listener is needed."""


def ok(r: CliResult) -> Any:
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r.json


def lifetime(doc: dict[str, Any]) -> int:
    """Seconds from a token's ``created`` to its ``expires`` (both whole UTC seconds)."""
    def seconds(text: str) -> int:
        return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))

    return seconds(doc["expires"]) - seconds(doc["created"])


def tokens(h: HubProcess) -> list[str]:
    return [t["id"] for t in ok(h.cli("hub", "token", "list", "--json"))["tokens"]]


def test_token_issue_and_connect_take_the_same_durations(hub: HubProcess) -> None:
    ok(hub.cli("hub", "principal", "add", "alice"))
    for text, seconds in FORMS:
        issued = ok(hub.cli("hub", "token", "issue", "alice", "--ttl", text, "--json"))
        assert lifetime(issued) in (seconds, seconds + 1), (text, issued)
        connected = ok(hub.cli("hub", "connect", "claude", "--principal", "alice", "--url", URL, "--ttl", text,
                               "--json"))
        listed = {t["id"]: t for t in ok(hub.cli("hub", "token", "list", "--json"))["tokens"]}
        assert lifetime(listed[connected["token_id"]]) in (seconds, seconds + 1), (text, connected)
    delegated = ok(hub.cli("hub", "token", "issue", "alice", "--binding", "principal:alice", "--ttl", "90m"))
    assert lifetime(delegated) in (5400, 5401)


@pytest.mark.parametrize("command", [["hub", "token", "issue", "alice"],
                                     ["hub", "connect", "codex", "--principal", "alice", "--url", URL]])
def test_a_bad_ttl_is_a_clear_error_that_issues_nothing(hub: HubProcess, command: list[str]) -> None:
    ok(hub.cli("hub", "principal", "add", "alice"))
    before = tokens(hub)
    for value in BAD:
        r = hub.cli(*command, "--ttl", value, "--json")
        assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] == 2, (value, r.stdout, r.stderr)
        error = r.json["error"]
        assert error["code"] == "bad_request" and error["data"] == {"field": "ttl"}, (value, error)
        assert error["message"].startswith(f"--ttl {value!r}: "), error
        assert DURATION_FORMS in error["message"] or "more than 0" in error["message"], error
        assert "amux_" not in r.stdout.decode(), "no token may be printed"
    assert tokens(hub) == before


def test_timeout_and_since_take_the_same_durations(hub: HubProcess) -> None:
    r = hub.cli("hub", "stop", "--timeout", "soon", "--json")
    assert r.returncode == 2 and r.json["error"]["data"] == {"field": "timeout"}, (r.stdout, r.stderr)
    assert DURATION_FORMS in r.json["error"]["message"]
    assert hub.proc is not None and hub.proc.poll() is None, "a bad --timeout stops nothing"
    ok(hub.cli("memory", "upsert", "a.md", "--expected-revision", "absent", input=b"# a\n"))
    for since in ("3600", "1h", "60m"):
        assert [c["path"] for c in ok(hub.cli("memory", "log", "--since", since, "--json"))["changes"]] == ["a.md"]
    r = hub.cli("memory", "log", "--since", "0", "--json")
    assert r.returncode == 2 and r.json["error"]["data"] == {"field": "since"}


@pytest.mark.parametrize("command", [["hub", "token", "issue"], ["hub", "connect"], ["hub", "start"],
                                     ["hub", "stop"], ["hub", "restart"], ["memory", "log"]])
def test_help_names_the_accepted_durations(command: list[str]) -> None:
    import subprocess

    proc = subprocess.run([*amux_argv(), *command, "--help"], capture_output=True, timeout=60,
                          env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"})
    text = " ".join(proc.stdout.decode().split())
    assert proc.returncode == 0 and DURATION_FORMS in text, text
