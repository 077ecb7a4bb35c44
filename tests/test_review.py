"""Review before it is remembered (DESIGN.md §21), through a real Hub, the real CLI and a real MCP client.

With ``memory.review = agents`` an agent's upsert or forget (an MCP client, a ``hello`` with a session, a
delegated token) on a path under review writes nothing and is kept as a proposal; a person lists, shows,
approves (a compare-and-swap write recorded with both actors) or rejects it; an agent can never decide.
With review off every answer is what it was.
"""

from __future__ import annotations

import json
import signal
import stat
from pathlib import Path
from typing import Any

import pytest
import trio

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, HubError
from tests.conftest import CliResult, HubProcess
from tests.helpers import agent, ok, person

REVIEW = {"memory.review": "agents"}


def failed(r: CliResult, code: ErrorCode) -> dict[str, Any]:
    assert r.returncode == EXIT_CODES[code], (r.returncode, r.stdout, r.stderr)
    return r.json if isinstance(r.json, list) else r.json["error"]


def pending(h: HubProcess) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = ok(h.cli("memory", "review", "--json"))["proposals"]
    return listed


def test_review_off_answers_exactly_as_before(hub: HubProcess) -> None:
    """memory.review = off (the default): an agent session's writes apply at once; no new fields anywhere."""
    with agent(hub) as a:
        up = a.call("upsert", {"path": "MEMORY.md", "content": b"# Prefs\n", "expected_revision": "absent"})
        assert set(up) == {"path", "revision", "created", "bytes"}
        got = a.call("get", {"path": "MEMORY.md"})
        assert set(got) == {"path", "exists", "revision", "content", "truncated", "next_offset", "total_bytes",
                            "total_lines"}
        gone = a.call("forget", {"path": "MEMORY.md", "expected_revision": up["revision"]})
        assert set(gone) == {"path", "deleted", "already_absent", "revision"} and gone["deleted"]
    assert not (hub.scope_dir / "MEMORY.md").exists()
    assert ok(hub.cli("memory", "review", "--json")) == {"proposals": [], "pending": 0, "review": "off"}


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_agent_write_is_a_proposal_and_approval_writes_exactly_it(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(settings=REVIEW)
    body = b"# Prefs\n- tabs, not spaces\n"
    with agent(h) as a:
        r = a.call("upsert", {"path": "MEMORY.md", "content": body, "expected_revision": "absent"})
        assert r["proposed"] is True and r["status"] == "pending" and r["path"] == "MEMORY.md"
        assert r["base_revision"] == "absent" and r["action"] == "upsert"
        assert not (h.scope_dir / "MEMORY.md").exists()  # nothing written
        got = a.call("get", {"path": "MEMORY.md"})  # reads return live memory, and say a proposal waits
        assert got["exists"] is False and got["pending_proposal"] == r["proposal"]
        # a decision from an agent is refused, whatever it asks
        e = pytest.raises(HubError, a.call, "review_decide",
                          {"id": r["proposal"], "decision": "approve", "expected_revision": "absent"}).value
        assert e.code is ErrorCode.UNAUTHORIZED and e.data["reason"] == "agent_caller"
    [entry] = pending(h)
    assert entry["id"] == r["proposal"] and entry["actor"]["session"] == "sess-1" and entry["added"] == 2
    assert entry["changed"] is False
    # no .md file anywhere a search would find; the proposal lives outside memory/
    assert [p.name for p in (h.home / "review" / "global").iterdir()] == [f"{r['proposal']}.json"]
    assert stat.S_IMODE((h.home / "review" / "global" / f"{r['proposal']}.json").stat().st_mode) == 0o600
    shown = ok(h.cli("memory", "review", "show", r["proposal"], "--json"))
    assert shown["proposed"] == body.decode() and shown["base"] is None and "+- tabs, not spaces" in shown["diff"]
    done = ok(h.cli("memory", "review", "approve", r["proposal"], "--json"))
    assert done[0]["status"] == "approved" and done[0]["created"] is True
    assert (h.scope_dir / "MEMORY.md").read_bytes() == body
    [version] = ok(h.cli("memory", "history", "MEMORY.md", "--json"))["versions"]
    assert version["actor"]["client"] == "amux-cli" and version["actor"]["session"] is None  # the approver
    assert version["review"] == {"proposal": r["proposal"], "proposed_by": entry["actor"]}
    assert ok(h.cli("memory", "log", "--json"))["changes"][0]["review"]["proposal"] == r["proposal"]
    again = ok(h.cli("memory", "review", "approve", r["proposal"], "--json"))  # approve twice: applied once
    assert again[0]["already_decided"] is True and again[0]["status"] == "approved"
    assert len(ok(h.cli("memory", "history", "MEMORY.md", "--json"))["versions"]) == 1
    assert pending(h) == []


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_reject_forget_proposal_and_path_prefix(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(settings=REVIEW)
    with person(h) as p:
        rev = p.call("upsert", {"path": "notes/a.md", "content": b"keep me\n",
                                "expected_revision": "absent"})["revision"]
    with agent(h) as a:
        f = a.call("forget", {"path": "notes/a.md", "expected_revision": rev})
        assert f["proposed"] and f["action"] == "forget" and f["proposed_revision"] == "absent"
        a.call("upsert", {"path": "notes/b.md", "content": b"b\n", "expected_revision": "absent"})
        a.call("upsert", {"path": "other.md", "content": b"o\n", "expected_revision": "absent"})
    assert (h.scope_dir / "notes" / "a.md").read_bytes() == b"keep me\n"
    out = ok(h.cli("memory", "review", "reject", "--path-prefix", "notes/", "--reason", "not needed", "--json"))
    assert sorted(r["status"] for r in out) == ["rejected", "rejected"]
    assert (h.scope_dir / "notes" / "a.md").read_bytes() == b"keep me\n" and not (h.scope_dir / "notes/b.md").exists()
    assert [e["path"] for e in pending(h)] == ["other.md"]
    log = (h.home / "review" / "global" / "decisions.log").read_text().splitlines()
    assert sorted(json.loads(line)["status"] for line in log) == ["rejected", "rejected"]
    assert json.loads(log[0])["reason"] == "not needed"


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_changed_base_is_never_applied_silently_and_edit_merges(hub_factory: Any, tmp_path: Path) -> None:
    h: HubProcess = hub_factory(settings=REVIEW)
    with person(h) as p:
        rev = p.call("upsert", {"path": "t.md", "content": b"one\ntwo\n", "expected_revision": "absent"})["revision"]
    with agent(h) as a:
        pid = a.call("upsert", {"path": "t.md", "content": b"one\ntwo\nagent\n", "expected_revision": rev})["proposal"]
    with person(h) as p:
        p.call("upsert", {"path": "t.md", "content": b"one\ntwo\nperson\n", "expected_revision": rev})
    [entry] = pending(h)
    assert entry["changed"] is True
    shown = ok(h.cli("memory", "review", "show", pid, "--json"))
    assert shown["base"] == "one\ntwo\n" and shown["current"] == "one\ntwo\nperson\n"
    assert "+agent" in shown["diff_current"] and "-person" in shown["diff_current"]
    e = failed(h.cli("memory", "review", "approve", pid, "--json"), ErrorCode.CONFLICT)
    assert e["data"]["proposal"] == pid and "--edit" in e["message"]
    assert (h.scope_dir / "t.md").read_bytes() == b"one\ntwo\nperson\n"
    editor = tmp_path / "merge.sh"
    editor.write_text("#!/bin/sh\nprintf 'one\\ntwo\\nperson\\nagent\\n' > \"$1\"\n")
    editor.chmod(0o755)
    done = ok(h.cli("memory", "review", "approve", pid, "--edit", "--json", env={"EDITOR": str(editor),
                                                                                   "VISUAL": ""}))
    assert done[0]["status"] == "approved"
    assert (h.scope_dir / "t.md").read_bytes() == b"one\ntwo\nperson\nagent\n"


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_delegated_token_is_an_agent_and_review_paths_limit_review(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(settings={**REVIEW, "memory.review_paths": "MEMORY.md,user/**"})
    ok(h.cli("hub", "principal", "add", "alice"))
    token = ok(h.cli("hub", "token", "issue", "alice", "--binding", "global", "--ttl", "300"))["token"]
    env = {"AMUX_TOKEN": token, "AMUX_MEMORY_BINDING": "global"}
    r = ok(h.cli("memory", "upsert", "user/prefs.md", "--expected-revision", "absent", input=b"x\n", env=env))
    assert r["proposed"] is True and not (h.scope_dir / "user").exists()
    r = ok(h.cli("memory", "upsert", "projects/p.md", "--expected-revision", "absent", input=b"p\n", env=env))
    assert "proposed" not in r and (h.scope_dir / "projects" / "p.md").read_bytes() == b"p\n"  # not under review
    r = ok(h.cli("memory", "upsert", "user/deep/x.md", "--expected-revision", "absent", input=b"d\n",
                 env={"AMUX_SESSION_ID": "pi-7"}))  # Pi's CLI: a session
    assert r["proposed"] is True
    e = failed(h.cli("memory", "review", "reject", r["proposal"], "--json", env=env), ErrorCode.UNAUTHORIZED)
    assert e["data"]["reason"] == "agent_caller"
    ok(h.cli("memory", "upsert", "MEMORY.md", "--expected-revision", "absent", input=b"# m\n"))  # a person: at once
    assert (h.scope_dir / "MEMORY.md").exists()
    assert sorted(e["path"] for e in pending(h)) == ["user/deep/x.md", "user/prefs.md"]


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_cap_replacement_and_the_backlog_error(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(settings={**REVIEW, "memory.review_max_pending": "2"})
    with agent(h) as a:
        first = a.call("upsert", {"path": "a.md", "content": b"1\n", "expected_revision": "absent"})
        second = a.call("upsert", {"path": "a.md", "content": b"2\n", "expected_revision": "absent"})
        assert second["replaced"] == first["proposal"]  # same session, same path: replaces
        a.call("upsert", {"path": "b.md", "content": b"b\n", "expected_revision": "absent"})
    r = h.cli("memory", "upsert", "c.md", "--expected-revision", "absent", input=b"c\n",
              env={"AMUX_SESSION_ID": "other"})
    e = failed(r, ErrorCode.REVIEW_BACKLOG)
    assert "amux memory review" in e["message"] and e["data"] == {"current": 2, "maximum": 2}
    assert sorted(e["path"] for e in pending(h)) == ["a.md", "b.md"]
    assert ok(h.cli("memory", "review", "show", first["proposal"], "--json"))["proposal"]["status"] == "superseded"


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_refusals_at_proposal_time_are_todays_errors(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(settings=REVIEW)
    key = "ghp_" + "Zx9" * 12
    r = h.cli("memory", "upsert", "s.md", "--expected-revision", "absent", input=f"token {key}\n".encode(),
              env={"AMUX_SESSION_ID": "s"})
    failed(r, ErrorCode.SECRET_DETECTED)
    assert key not in r.stdout.decode() + r.stderr
    failed(h.cli("memory", "upsert", "../x.md", "--expected-revision", "absent", input=b"x\n",
                 env={"AMUX_SESSION_ID": "s"}), ErrorCode.INVALID_PATH)
    failed(h.cli("memory", "upsert", "MEMORY.md", "--expected-revision", "absent", input=b"x" * 4096,
                 env={"AMUX_SESSION_ID": "s"}), ErrorCode.QUOTA_EXCEEDED)
    assert pending(h) == [] and not (h.home / "review" / "global").exists()


def _proposal_file(h: HubProcess, pid: str) -> Path:
    return h.home / "review" / "global" / f"{pid}.json"


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_kill_9_keeps_an_acknowledged_proposal_and_expiry(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(settings={**REVIEW, "memory.review_max_days": "30"})
    with agent(h) as a:
        pid = a.call("upsert", {"path": "k.md", "content": b"kept\n", "expected_revision": "absent"})["proposal"]
    h.stop(signal.SIGKILL)
    h.start()
    [entry] = pending(h)
    assert entry["id"] == pid
    h.stop()
    data = json.loads(_proposal_file(h, pid).read_text())
    data["time_ns"] -= 31 * 86_400 * 10**9  # the clock: proposed 31 days ago
    _proposal_file(h, pid).write_text(json.dumps(data))
    h.start()
    assert pending(h) == []
    assert ok(h.cli("memory", "review", "show", pid, "--json"))["proposal"]["status"] == "expired"
    assert not (h.scope_dir / "k.md").exists()
    assert json.loads((h.home / "review" / "global" / "decisions.log").read_text())["status"] == "expired"


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_crash_between_write_and_mark_is_shown_truthfully(hub_factory: Any) -> None:
    """An approval whose proposal was not marked decided (kill between the two) is found approved, not pending."""
    h: HubProcess = hub_factory(settings=REVIEW)
    with agent(h) as a:
        pid = a.call("upsert", {"path": "c.md", "content": b"c\n", "expected_revision": "absent"})["proposal"]
    ok(h.cli("memory", "review", "approve", pid, "--json"))
    h.stop()
    data = json.loads(_proposal_file(h, pid).read_text())
    data["status"], data["decision"] = "pending", None  # as if killed before the mark was written
    _proposal_file(h, pid).write_text(json.dumps(data))
    h.start()
    assert pending(h) == []
    decided = ok(h.cli("memory", "review", "show", pid, "--json"))["proposal"]
    assert decided["status"] == "approved" and decided["decision"]["recovered"] is True
    again = ok(h.cli("memory", "review", "approve", pid, "--json"))
    assert again[0]["already_decided"] is True
    assert len(ok(h.cli("memory", "history", "c.md", "--json"))["versions"]) == 1


def test_terminal_table_fits_80_columns_and_hostile_text_is_inert(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(settings=REVIEW)
    with agent(h) as a:
        a.call("upsert", {"path": "very/long/" + "n" * 120 + ".md", "content": b"\x1b[2J evil\n",
                          "expected_revision": "absent"})
    from tests.conftest import amux_argv
    from tests.terminal import run_in_terminal

    out = run_in_terminal([*amux_argv(), "memory", "review"], env=h.env, columns=80)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.screen.splitlines() if line.strip()]
    assert lines and all(len(line) <= 80 for line in lines), lines
    assert "\x1b[2J" not in out.screen


@pytest.mark.slow
def test_mcp_agent_write_is_a_proposal(hub_factory: Any, tmp_path: Path) -> None:
    """A real MCP client through ``amux mcp``: the upsert's answer is a proposal (schema-checked), with a text
    that says it is not saved; nothing is written until a person approves."""
    from tests.mcp_session import call, mcp_session, text
    from tests.mcp_session import ok as mcp_ok

    h: HubProcess = hub_factory(settings=REVIEW)

    async def run() -> None:
        with trio.fail_after(60):
            async with mcp_session(h.home, tmp_path / "mcp.log") as session:
                r = await call(session, "memory_upsert", path="MEMORY.md", content="# from MCP\n",
                               expected_revision="absent")
                result = mcp_ok(r)
                assert result["proposed"] is True and result["status"] == "pending"
                assert "Not saved yet" in text(r) and "amux memory review" in text(r)
                got = mcp_ok(await call(session, "memory_get", path="MEMORY.md"))
                assert got["exists"] is False and got["pending_proposal"] == result["proposal"]

    trio.run(run)
    assert not (h.scope_dir / "MEMORY.md").exists()
    [entry] = pending(h)
    assert entry["actor"]["client"] == "amux-mcp"
    ok(h.cli("memory", "review", "approve", entry["id"], "--json"))
    assert (h.scope_dir / "MEMORY.md").read_bytes() == b"# from MCP\n"


def test_only_pending_proposals_stay_in_memory(tmp_path: Path) -> None:
    """DESIGN.md §21: a decided proposal leaves the index and is read from its file when asked for again; the
    sweep deletes decided files older than its bound, at most once in ``DECIDED_SWEEP_SECONDS``."""
    import os

    from amux_memory.hub.storage.history import Actor
    from amux_memory.hub.storage.proposals import DECIDED_SWEEP_SECONDS, Proposal, ScopeProposals

    sp = ScopeProposals(str(tmp_path / "review"))
    sp.load()
    made = [Proposal(f"p{i:012x}", f"n{i}.md", "upsert", "absent", "r" * 64, b"text\n", {"principal": "a"}, 1)
            for i in range(3)]
    for p in made:
        sp.save(p)
    sp.decide(made[0], "rejected", Actor("bob", "amux-cli"), 2)
    assert set(sp.proposals) == {made[1].id, made[2].id}
    again = sp.get(made[0].id)
    assert (again.status, again.content) == ("rejected", b"text\n") and again is not made[0]
    with pytest.raises(HubError):
        sp.get("p" + "f" * 12)
    fresh = ScopeProposals(sp.directory)
    assert [p.id for p in fresh.pending()] == [made[1].id, made[2].id]
    decided_file = tmp_path / "review" / f"{made[0].id}.json"
    now = decided_file.stat().st_mtime_ns + 10**9
    fresh.forget_decided(now - 2 * 10**9, now)  # decided after the bound: kept
    fresh.forget_decided(now, now + 1)  # within the sweep period of the last look: not looked at
    assert decided_file.exists()
    fresh.forget_decided(now, now + DECIDED_SWEEP_SECONDS * 10**9)
    assert not decided_file.exists() and len(os.listdir(tmp_path / "review")) == 3  # 2 pending + the log
