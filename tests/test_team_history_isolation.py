"""History names a copy's or move's other side only to a caller who may read it (DESIGN.md §15.7).

A real Hub (isolation ``user``), team ``web`` (alice maintainer, bob writer) and team ``ops`` (alice alone),
review off.  alice copies ``@ops/secret.md`` to ``@web/incoming.md``, moves ``@web/tomove.md`` into ``@ops/``, copies
her own ``priv2.md`` into ``@web/`` and moves ``@web/takeaway.md`` into her own memory.  bob, in ``web`` only,
reads ``amux memory history`` and ``amux memory log --path-prefix @web/`` through the real CLI (JSON and in a
terminal) and ``history``/``log`` on the Hub's socket (no MCP tool returns history): every other side is
``{"memory": "another"}``, with no scope, path or revision.  alice, who reads both sides, sees them named as she
names them; once she leaves ``ops``, ``ops`` is another memory to her too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amux_memory.hub.access import registry as reg
from amux_memory.tools.client.blocking import HubClient
from tests.conftest import HubProcess, amux_argv, make_hub
from tests.helpers import with_teams
from tests.terminal import run_in_terminal
from tests.ui_helpers import request, start_ui

SECRET = b"# Ops secret\n\nThe break-glass runbook lives in the ops vault.\n"
TOMOVE = b"# To move\n\nA web note that goes to ops.\n"
PRIVATE = b"# Private\n\nalice's own note.\n"
TAKEAWAY = b"# Mine now\n\nA web note alice takes into her own memory.\n"
ANOTHER = {"memory": "another"}
LEAKS = ("ops", "secret.md", "moved-in-secret", "principal:alice", "priv2", "kept-private.md")
"""What bob may never read in an answer about ``@web/`` (his own answers name ``@web/`` and web's documents)."""


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[tuple[HubProcess, dict[str, str]]]:
    """The Hub of the issue's reproduction, and each principal's token."""
    h = make_hub(tmp_path, isolation="user")
    tokens = with_teams(h.home, ("alice", "bob"), {"web": "off", "ops": "off"},
                        (("web", "alice", "maintainer"), ("web", "bob", "writer"), ("ops", "alice", "writer")))
    yield h, tokens
    h.stop()


def call(h: HubProcess, token: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One call on the Hub's Unix socket as the principal of ``token``."""
    with HubClient(h.socket, token=token) as client:
        return client.call(method, params)


def cli(h: HubProcess, token: str, *args: str) -> Any:
    """``amux ARGS`` as the principal of ``token``, piped: its JSON."""
    r = h.cli(*args, env={"AMUX_TOKEN": token})
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.json


def shown(h: HubProcess, token: str, *args: str) -> str:
    """``amux ARGS`` as the principal of ``token`` in a terminal: what a person reads."""
    r = run_in_terminal([*amux_argv(), *args], env={**h.env, "AMUX_TOKEN": token, "TERM": "xterm"})
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return r.plain


def origins(h: HubProcess, token: str) -> dict[str, Any]:
    """The origin each of web's four documents' newest versions shows to ``token``'s principal, by CLI."""
    return {path: cli(h, token, "memory", "history", path)["versions"][0].get("origin")
            for path in ("@web/incoming.md", "@web/tomove.md", "@web/shared.md", "@web/takeaway.md")}


def copies_and_moves(h: HubProcess, alice: str) -> None:
    """alice's copies and moves through the CLI: ops → web, web → ops, her own → web, web → her own."""
    for path, content in (("@ops/secret.md", SECRET), ("@web/tomove.md", TOMOVE), ("priv2.md", PRIVATE),
                          ("@web/takeaway.md", TAKEAWAY)):
        call(h, alice, "upsert", {"path": path, "content": content, "expected_revision": "absent"})
    cli(h, alice, "memory", "copy", "@ops/secret.md", "@web/incoming.md")
    assert cli(h, alice, "memory", "move", "@web/tomove.md", "@ops/moved-in-secret.md")["moved"] is True
    cli(h, alice, "memory", "copy", "priv2.md", "@web/shared.md")
    assert cli(h, alice, "memory", "move", "@web/takeaway.md", "kept-private.md")["moved"] is True


def test_history_and_log_name_the_other_side_only_to_who_may_read_it(
        hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, t = hub
    alice, bob = t["alice"], t["bob"]
    copies_and_moves(h, alice)

    # bob, in web only: every other side is another memory, through the CLI ...
    assert origins(h, bob) == {"@web/incoming.md": {"from": ANOTHER}, "@web/tomove.md": {"to": ANOTHER},
                               "@web/shared.md": {"from": ANOTHER}, "@web/takeaway.md": {"to": ANOTHER}}
    log = cli(h, bob, "memory", "log", "--path-prefix", "@web/")
    by_path = {c["path"]: c.get("origin") for c in log["changes"] if c.get("origin")}
    assert by_path == {"@web/incoming.md": {"from": ANOTHER}, "@web/tomove.md": {"to": ANOTHER},
                       "@web/shared.md": {"from": ANOTHER}, "@web/takeaway.md": {"to": ANOTHER}}
    # ... and on the socket, his whole view too (his own memory, then web).
    answers = [call(h, bob, "history", {"path": "@web/incoming.md"}),
               call(h, bob, "history", {"path": "@web/tomove.md"}), call(h, bob, "log", {"path_prefix": "@web/"}), log]
    cursor: str | None = ""
    while cursor is not None:
        page = call(h, bob, "log", {"cursor": cursor} if cursor else {})
        answers.append(page)
        cursor = page["next_cursor"]
    for path in ("@web/incoming.md", "@web/tomove.md", "@web/shared.md", "@web/takeaway.md"):
        answers.append(cli(h, bob, "memory", "history", path))
    text = json.dumps(answers)
    for leak in LEAKS:
        assert leak not in text, (leak, text)
    assert sha(SECRET) not in json.dumps(by_path) and "revision" not in json.dumps(by_path)
    # For a person, readably: the other side is "another memory".
    for args in (("memory", "history", "@web/incoming.md"), ("memory", "history", "@web/tomove.md"),
                 ("memory", "log", "--path-prefix", "@web/")):
        screen = shown(h, bob, *args)
        assert "another memory" in screen, screen
        for leak in LEAKS:
            assert leak not in screen, (leak, screen)

    # alice reads both sides: each named as she names it, the recorded shape kept.
    assert origins(h, alice) == {
        "@web/incoming.md": {"from": {"scope": "team:ops", "document": "secret.md", "revision": sha(SECRET),
                                     "mounted": "@ops/secret.md"}},
        "@web/tomove.md": {"to": {"scope": "team:ops", "document": "moved-in-secret.md",
                                  "mounted": "@ops/moved-in-secret.md"}},
        "@web/shared.md": {"from": {"scope": "principal:alice", "document": "priv2.md", "revision": sha(PRIVATE),
                                      "mounted": "priv2.md"}},
        "@web/takeaway.md": {"to": {"scope": "principal:alice", "document": "kept-private.md",
                                    "mounted": "kept-private.md"}}}
    moved_in = call(h, alice, "history", {"path": "@ops/moved-in-secret.md"})["versions"][0]["origin"]
    assert moved_in == {"from": {"scope": "team:web", "document": "tomove.md", "revision": sha(TOMOVE),
                                 "mounted": "@web/tomove.md"}}
    mine = call(h, alice, "history", {"path": "kept-private.md"})["versions"][0]["origin"]
    assert mine == {"from": {"scope": "team:web", "document": "takeaway.md", "revision": sha(TAKEAWAY),
                             "mounted": "@web/takeaway.md"}}
    screen = shown(h, alice, "memory", "log", "--path-prefix", "@web/")
    assert "@ops/secret.md" in screen and "@ops/moved-in-secret.md" in screen and "priv2.md" in screen, screen

    # Out of ops, alice no longer reads it: ops is another memory to her from her next call.
    reg.modify(h.home, lambda r, now: r.remove_member("ops", "alice"))
    seen = origins(h, alice)
    assert seen["@web/incoming.md"] == {"from": ANOTHER} and seen["@web/tomove.md"] == {"to": ANOTHER}
    assert seen["@web/shared.md"]["from"]["mounted"] == "priv2.md"


def test_the_web_page_shows_another_memory_to_who_may_not_read_it(hub: tuple[HubProcess, dict[str, str]],
                                                                  tmp_path: Path) -> None:
    h, t = hub
    copies_and_moves(h, t["alice"])
    pages = ("/history/@web/incoming.md", "/history/@web/tomove.md", "/log", "/team/web", "/")
    ui = start_ui({**h.env, "AMUX_TOKEN": t["bob"]}, tmp=tmp_path)
    try:
        ui.sign_in()
        for page in pages:
            status, _, body = request(ui, "GET", page, cookie=ui.cookie)
            assert status == 200, (page, body)
            for leak in LEAKS:
                assert leak not in body, (page, leak)
        _, _, history = request(ui, "GET", "/history/@web/incoming.md", cookie=ui.cookie)
        assert "(copied from another memory)" in history, history
        _, _, log = request(ui, "GET", "/log", cookie=ui.cookie)
        assert "(moved to another memory)" in log and "(copied from another memory)" in log, log
    finally:
        ui.stop()
    ui = start_ui({**h.env, "AMUX_TOKEN": t["alice"]}, tmp=tmp_path)
    try:
        ui.sign_in()
        _, _, history = request(ui, "GET", "/history/@web/incoming.md", cookie=ui.cookie)
        assert '(copied from <a href="/doc/%40ops/secret.md" class="path">@ops/secret.md</a>)' in history, history
        _, _, moved = request(ui, "GET", "/history/@web/tomove.md", cookie=ui.cookie)
        assert '(moved to <a href="/doc/%40ops/moved-in-secret.md" class="path">@ops/moved-in-secret.md</a>)' in moved
        _, _, shared = request(ui, "GET", "/history/@web/shared.md", cookie=ui.cookie)
        assert '(copied from <a href="/doc/priv2.md" class="path">priv2.md</a>)' in shared, shared
    finally:
        ui.stop()
