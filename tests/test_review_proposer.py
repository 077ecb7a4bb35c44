"""Proposals for the proposer, and the isolation switch that strands nothing silently (DESIGN.md §7.1, §7.8,
§15.7, §21).

Through a real Hub and the real CLI (each person calling with their own ``AMUX_TOKEN``), the agent's proposal
made on an agent's connection (``tests.helpers.agent``): a writer's agent proposes in team ``web`` (review
``agents``); the writer lists and shows his own proposal and is told the team reviews agents' writes, but his
approval is ``unauthorized`` (reason ``role``); a reader who did not propose it gets, for that id, exactly the
answer of an id never issued, and learns nothing of it from his list; a maintainer sees and decides everything
as before.  ``amux system config set memory.isolation user`` with documents in ``global`` warns at once with
their count and the command; ``amux hub scope copy --path-prefix`` copies only those documents, and the
history of a copy names the text's author beside the operator who copied it.
"""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path
from typing import Any

import pytest

from amux_memory.hub.access.identity import team_scope
from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, HubError
from amux_memory.tools.client.blocking import HubClient
from tests.conftest import CliResult, HubProcess, amux_argv, make_hub
from tests.helpers import agent
from tests.terminal import run_in_terminal

UNKNOWN_ID = "p0123456789ab"
DEPLOY = b"# Deploy\n\nTag the release, then run make deploy-web from main.\n"
PLAN = b"# Plan\n\nThe maintainer's own agent drafted this; nobody else should see it.\n"


def me() -> str:
    """This process's OS account: the Hub's operator on its socket."""
    return pwd.getpwuid(os.getuid()).pw_name


def ok(r: CliResult) -> Any:
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.json


def refused(r: CliResult, code: ErrorCode) -> dict[str, Any]:
    assert r.returncode == EXIT_CODES[code], (r.stdout, r.stderr)
    error: dict[str, Any] = r.json["error"]
    assert error["code"] == code.value, error
    return error


def as_(tokens: dict[str, str], name: str) -> dict[str, str]:
    return {"AMUX_TOKEN": tokens[name]}


def propose(h: HubProcess, token: str, path: str, content: bytes, session: str) -> str:
    """An agent's write (a ``hello`` with a session) that the team keeps as a proposal; its id."""
    with agent(h, session, token=token) as c:
        r = c.call("upsert", {"path": path, "content": content, "expected_revision": "absent"})
    assert r["proposed"] is True, r
    return str(r["proposal"])


def without_id(error: dict[str, Any], pid: str) -> str:
    """An error as JSON with the proposal id it names replaced, to compare two answers but for the id."""
    return json.dumps(error, sort_keys=True).replace(pid, "<id>")


def test_a_proposer_sees_his_own_proposal_and_nobody_else_learns_of_it(
        team_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, tokens = team_hub
    mine = propose(h, tokens["alice"], "@web/deploy.md", DEPLOY, "sess-alice")
    theirs = propose(h, tokens["mia"], "@web/plans/q3.md", PLAN, "sess-mia")  # the maintainer's own agent
    team_file = h.home / "memory" / team_scope("web").relpath / "deploy.md"

    # The writer: his own proposal, the team's rule and his role, nothing of the maintainer's agent's.
    listed = ok(h.cli("memory", "review", env=as_(tokens, "alice")))
    assert [p["id"] for p in listed["proposals"]] == [mine] and listed["pending"] == 1, listed
    assert listed["proposals"][0]["path"] == "@web/deploy.md"
    assert {"mount": "@web/", "review": "agents", "role": "writer"} in listed["reviews"], listed
    assert theirs not in json.dumps(listed) and "q3" not in json.dumps(listed)
    shown = run_in_terminal([*amux_argv(), "memory", "review"], env={**h.env, **as_(tokens, "alice"),
                                                                     "TERM": "dumb"})
    assert shown.returncode == 0, shown.stderr
    assert "in team @web/ agents' writes wait for review" in shown.stderr and "a maintainer decides" in \
        shown.stderr, shown.stderr
    assert "review is off" not in shown.stderr + shown.plain
    assert mine in shown.plain and "1 of them wait for a team's maintainer" in shown.plain, shown.plain
    # The hint printed with the proposal works for him.
    detail = ok(h.cli("memory", "review", "show", mine, env=as_(tokens, "alice")))
    assert (detail["proposal"]["id"], detail["proposal"]["path"]) == (mine, "@web/deploy.md")
    assert detail["proposed"] == DEPLOY.decode()
    # Deciding is the maintainer's: unauthorized, with the reason; nothing written, still pending.
    for decision in ("approve", "reject"):
        error = refused(h.cli("memory", "review", decision, mine, env=as_(tokens, "alice")), ErrorCode.UNAUTHORIZED)
        assert error["data"] == {"reason": "role", "mount": "@web/", "role": "writer", "needs": "maintainer"}, error
    assert not team_file.exists()

    # A reader who proposed nothing: for that id exactly the answer of an id never issued; an empty list.
    for caller in ("bob", "carol"):  # a reader of the team, and someone in no team
        for args in (("show",), ("approve",), ("reject",)):
            seen = refused(h.cli("memory", "review", *args, mine, env=as_(tokens, caller)), ErrorCode.NOT_FOUND)
            never = refused(h.cli("memory", "review", *args, UNKNOWN_ID, env=as_(tokens, caller)),
                            ErrorCode.NOT_FOUND)
            assert without_id(seen, mine) == without_id(never, UNKNOWN_ID), (caller, args, seen, never)
        empty = ok(h.cli("memory", "review", env=as_(tokens, caller)))
        assert (empty["proposals"], empty["pending"]) == ([], 0), empty
        assert mine not in json.dumps(empty) and "deploy" not in json.dumps(empty), empty
    # Over the protocol too: the reader's review_show of the id equals an unknown id's, but for the id.
    with HubClient(h.socket, token=tokens["bob"]) as bob:
        answers = []
        for pid in (mine, UNKNOWN_ID):
            with pytest.raises(HubError) as exc:
                bob.call("review_show", {"id": pid})
            answers.append(json.dumps(exc.value.to_wire(), sort_keys=True).replace(pid, "<id>"))
        assert answers[0] == answers[1]

    # The maintainer: both, as before; her approval writes alice's proposal.
    everything = ok(h.cli("memory", "review", env=as_(tokens, "mia")))
    assert sorted(p["id"] for p in everything["proposals"]) == sorted([mine, theirs]) and everything["pending"] == 2
    assert {"mount": "@web/", "review": "agents", "role": "maintainer"} in everything["reviews"]
    approved = ok(h.cli("memory", "review", "approve", mine, env=as_(tokens, "mia")))
    assert approved[0]["status"] == "approved" and team_file.read_bytes() == DEPLOY
    # Decided, it is still alice's to see (and what became of it).
    after = ok(h.cli("memory", "review", "show", mine, env=as_(tokens, "alice")))
    assert after["proposal"]["status"] == "approved"
    assert ok(h.cli("memory", "review", env=as_(tokens, "alice")))["proposals"] == []


def test_review_with_no_rule_anywhere_says_it_is_off(tmp_path: Path) -> None:
    h = make_hub(tmp_path, isolation="user")
    try:
        shown = run_in_terminal([*amux_argv(), "memory", "review"], env={**h.env, "TERM": "dumb"})
        assert shown.returncode == 0 and "review is off" in shown.stderr, shown.stderr
        assert "no memory changes await review" in shown.plain
    finally:
        h.stop()


# -- the isolation switch ------------------------------------------------------------------------------


def test_switching_isolation_warns_at_once_of_stranded_documents(tmp_path: Path) -> None:
    h = make_hub(tmp_path, isolation="off")
    try:
        with HubClient(h.socket) as c:
            for path in ("MEMORY.md", "prefs/editor.md", "projects/web/deploy.md"):
                c.call("upsert", {"path": path, "content": b"# Note\n\nkept in global\n",
                                  "expected_revision": "absent"})
        r = h.cli("system", "config", "set", "memory.isolation", "user")
        doc = ok(r)
        command = f"amux hub scope copy --move global principal:{me()}"
        assert [(u["binding"], u["documents"]) for u in doc["unreached_scopes"]] == [("global", 3)], doc
        assert doc["unreached_scopes"][0]["command"].startswith(command)
        assert "memory/global (global) holds 3 documents nobody reaches with isolation user" in r.stderr, r.stderr
        assert command in r.stderr and "--path-prefix" in r.stderr, r.stderr
        # Back to off: the notes are reached again; nothing to warn of.
        back = h.cli("system", "config", "set", "memory.isolation", "off")
        assert ok(back)["unreached_scopes"] == [] and "nobody reaches" not in back.stderr, back.stderr
    finally:
        h.stop()


def test_scope_copy_takes_path_prefixes_and_history_names_the_author(
        team_hub: tuple[HubProcess, dict[str, str]]) -> None:
    h, tokens = team_hub
    notes = {"MEMORY.md": b"# Mine\n\nI like tabs.\n", "prefs/editor.md": b"# Editor\n\nvim, always.\n",
             "projects/web/deploy.md": DEPLOY, "runbooks/release.md": b"# Release\n\nTag, then deploy.\n"}
    with HubClient(h.socket, token=tokens["alice"]) as alice:
        for path, content in notes.items():
            alice.call("upsert", {"path": path, "content": content, "expected_revision": "absent"})
    moved = ok(h.cli("hub", "scope", "copy", "--move", "--path-prefix", "projects/", "--path-prefix", "runbooks/",
                     "principal:alice", "team:web"))
    assert sorted(c["path"] for c in moved["copied"]) == ["projects/web/deploy.md", "runbooks/release.md"], moved
    assert all(c["moved"] for c in moved["copied"]) and moved["path_prefixes"] == ["projects/", "runbooks/"]
    team = h.home / "memory" / team_scope("web").relpath
    assert sorted(str(p.relative_to(team)) for p in team.rglob("*.md")) == ["projects/web/deploy.md",
                                                                           "runbooks/release.md"]
    with HubClient(h.socket, token=tokens["alice"]) as alice:
        left = sorted(e["path"] for e in alice.call("list", {"path_prefix": ""})["entries"])
    assert [p for p in left if not p.startswith("@")] == ["MEMORY.md", "prefs/editor.md"]  # hers, still hers
    # History: the operator copied it, alice wrote it; a member who cannot read alice's memory still sees who.
    for name in ("bob", "alice"):
        with HubClient(h.socket, token=tokens[name]) as c:
            version = c.call("history", {"path": "@web/projects/web/deploy.md"})["versions"][0]
        assert version["actor"]["principal"] == me(), version
        author = version["origin"]["author"]
        assert (author["principal"], author["client"]) == ("alice", "amux-cli") and author["time"], version
    assert version["origin"]["from"]["mounted"] == "projects/web/deploy.md"  # alice reads her own side
    shown = run_in_terminal([*amux_argv(), "memory", "history", "@web/projects/web/deploy.md"],
                            env={**h.env, "AMUX_TOKEN": tokens["bob"], "TERM": "dumb"})
    assert shown.returncode == 0 and "written" in shown.plain and "alice/cli" in shown.plain, shown.plain
    # A copy of the copy passes the first author on.
    again = ok(h.cli("hub", "scope", "copy", "--path-prefix", "runbooks/", "team:web", "principal:carol"))
    assert [c["path"] for c in again["copied"]] == ["runbooks/release.md"]
    with HubClient(h.socket, token=tokens["carol"]) as carol:
        version = carol.call("history", {"path": "runbooks/release.md"})["versions"][0]
    assert version["origin"]["author"]["principal"] == "alice" and version["actor"]["principal"] == me()
    # A prefix matching nothing copies nothing, and says so.
    none = run_in_terminal([*amux_argv(), "hub", "scope", "copy", "--path-prefix", "nowhere/", "principal:alice",
                            "team:web"], env={**h.env, "TERM": "dumb"})
    assert none.returncode == 0 and "holds no documents under nowhere/" in none.plain, none.plain


def test_scope_copy_path_prefixes_are_checked() -> None:
    from amux_memory.protocol.params import parse_scope_copy
    from amux_memory.protocol.requests import scope_copy_params

    p = parse_scope_copy(scope_copy_params("global", "team:web", path_prefixes=["projects/", "runbooks"]))
    assert p.path_prefixes == ("projects/", "runbooks")
    assert parse_scope_copy(scope_copy_params("global", "team:web")).path_prefixes == ()
    for bad in ("projects/", [""], [3], None):
        with pytest.raises(HubError) as exc:
            parse_scope_copy({"source": "global", "destination": "team:web", "path_prefixes": bad})
        assert exc.value.code is ErrorCode.BAD_REQUEST and exc.value.data["field"] == "path_prefixes", bad
    with pytest.raises(HubError) as exc:
        parse_scope_copy({"source": "global", "destination": "team:web", "path_prefixes": ["../x"]})
    assert exc.value.code is ErrorCode.INVALID_PATH
