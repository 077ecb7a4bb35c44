"""What a person sees of review before write (DESIGN.md §21) through the real CLI and a real Hub, in a terminal.

An agent's write kept for review must never read as saved; ``approve --edit`` on a changed document merges
(three-way, base → current vs base → proposed) and writes against the current revision; errors point at the
review commands; log and history mark an approved change and its proposer; decided proposals say who decided.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode
from tests.conftest import HubProcess, amux_argv
from tests.helpers import agent, ok, person
from tests.terminal import run_in_terminal

REVIEW = {"memory.review": "agents"}

AGENT = {"AMUX_SESSION_ID": "x"}
"""The environment of a CLI run inside an agent session: its writes are proposals."""


def screen(h: HubProcess, *args: str, env: dict[str, str] | None = None, input: bytes = b"",
           columns: int = 120) -> tuple[int, str, str]:
    """Run ``amux ARGS`` with stdout on a terminal ``columns`` wide: exit status, screen text, stderr."""
    out = run_in_terminal([*amux_argv(), *args], env={**h.env, **(env or {})}, input=input, columns=columns)
    return out.returncode, re.sub(r"\x1b\[[0-9;]*m", "", out.screen), out.stderr


def test_terminal_says_an_agents_write_is_proposed_not_saved(hub_factory: Any, tmp_path: Path) -> None:
    h: HubProcess = hub_factory(settings=REVIEW)
    with person(h) as p:
        rev = p.call("upsert", {"path": "MEMORY.md", "content": b"# Prefs\n",
                            "expected_revision": "absent"})["revision"]
        p.call("upsert", {"path": "notes/deploy.md", "content": b"deploy\n", "expected_revision": "absent"})
        deploy = p.call("get", {"path": "notes/deploy.md"})["revision"]
    body = tmp_path / "p.md"
    body.write_bytes(b"# Prefs\n- tabs\n")
    code, out, err = screen(h, "memory", "upsert", "MEMORY.md", "--expected-revision", rev, "--file", str(body),
                            env=AGENT)
    assert code == 0, err
    assert "replaced" not in out and "revision now" not in out, out
    assert "proposed p" in out and "for MEMORY.md: pending review, not yet in memory" in out, out
    assert "amux memory review show p" in out, out
    code, out, err = screen(h, "memory", "upsert", "new.md", "--expected-revision", "absent", "--file", str(body),
                            env=AGENT)
    assert code == 0 and "created" not in out and "pending review" in out, (out, err)
    code, out, err = screen(h, "memory", "forget", "notes/deploy.md", "--expected-revision", deploy, env=AGENT)
    assert code == 0, err
    assert "deleted notes" not in out and "to delete notes/deploy.md: pending review, nothing deleted yet" in out, out
    assert (h.scope_dir / "notes" / "deploy.md").read_bytes() == b"deploy\n"
    assert (h.scope_dir / "MEMORY.md").read_bytes() == b"# Prefs\n" and not (h.scope_dir / "new.md").exists()


def test_an_agents_restore_is_a_proposal_too(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(settings=REVIEW)
    with person(h) as p:
        first = p.call("upsert", {"path": "MEMORY.md", "content": b"one\n", "expected_revision": "absent"})["revision"]
        now = p.call("upsert", {"path": "MEMORY.md", "content": b"two\n", "expected_revision": first})["revision"]
    code, out, err = screen(h, "memory", "restore", "MEMORY.md", "--revision", first[:12], "--expected-revision", now,
                            env=AGENT)
    assert code == 0, err
    assert "restored" not in out and "pending review, not yet in memory" in out, out
    assert (h.scope_dir / "MEMORY.md").read_bytes() == b"two\n"


def _editor(tmp_path: Path, name: str, script: str) -> dict[str, str]:
    editor = tmp_path / name
    editor.write_text("#!/bin/sh\n" + script + "\n")
    editor.chmod(0o755)
    return {"EDITOR": str(editor), "VISUAL": ""}


def test_approve_edit_merges_a_change_made_after_the_proposal(hub_factory: Any, tmp_path: Path) -> None:
    h: HubProcess = hub_factory(settings=REVIEW)
    with person(h) as p:
        rev = p.call("upsert", {"path": "t.md", "content": b"one\ntwo\nthree\n", "expected_revision": "absent"})
    with agent(h) as a:
        pid = a.call("upsert", {"path": "t.md", "content": b"one\ntwo\nthree\nagent\n",
                                "expected_revision": rev["revision"]})["proposal"]
    with person(h) as p:
        p.call("upsert", {"path": "t.md", "content": b"ONE\ntwo\nthree\n", "expected_revision": rev["revision"]})
    seen = tmp_path / "seen.txt"
    done = ok(h.cli("memory", "review", "approve", pid, "--edit", "--json",
                    env=_editor(tmp_path, "keep.sh", f"cp \"$1\" {seen}")))
    assert seen.read_bytes() == b"ONE\ntwo\nthree\nagent\n"  # both changes, no markers: they did not overlap
    assert done[0]["status"] == "approved"
    assert (h.scope_dir / "t.md").read_bytes() == b"ONE\ntwo\nthree\nagent\n"  # the person's change kept


def test_approve_edit_with_overlapping_changes_refuses_markers_left(hub_factory: Any, tmp_path: Path) -> None:
    h: HubProcess = hub_factory(settings=REVIEW)
    with person(h) as p:
        rev = p.call("upsert", {"path": "t.md", "content": b"a\nb\n", "expected_revision": "absent"})["revision"]
    with agent(h) as a:
        pid = a.call("upsert", {"path": "t.md", "content": b"a\nagent\n", "expected_revision": rev})["proposal"]
    with person(h) as p:
        p.call("upsert", {"path": "t.md", "content": b"a\nperson\n", "expected_revision": rev})
    r = h.cli("memory", "review", "approve", pid, "--edit", "--json", env=_editor(tmp_path, "noop.sh", "true"))
    assert r.returncode != 0, (r.stdout, r.stderr)
    assert "conflict markers" in r.stdout.decode() + r.stderr
    assert (h.scope_dir / "t.md").read_bytes() == b"a\nperson\n"
    assert [e["id"] for e in ok(h.cli("memory", "review", "--json"))["proposals"]] == [pid]
    fix = _editor(tmp_path, "fix.sh", "grep -v -e '^<<<<<<<' -e '^=======' -e '^>>>>>>>' \"$1\" > \"$1.x\"; "
                  "mv \"$1.x\" \"$1\"")
    ok(h.cli("memory", "review", "approve", pid, "--edit", "--json", env=fix))
    assert (h.scope_dir / "t.md").read_bytes() == b"a\nperson\nagent\n"


def test_next_steps_point_at_the_review_commands(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(settings=REVIEW)
    for verb in ("show", "approve", "reject"):
        code, _, err = screen(h, "memory", "review", verb, "p000000000000")
        assert code == EXIT_CODES[ErrorCode.NOT_FOUND], err
        assert "next: List the pending proposals with 'amux memory review'" in err, err
        assert "document does not exist" not in err, err
    with person(h) as p:
        rev = p.call("upsert", {"path": "t.md", "content": b"a\n", "expected_revision": "absent"})["revision"]
    with agent(h) as a:
        pid = a.call("upsert", {"path": "t.md", "content": b"a\nb\n", "expected_revision": rev})["proposal"]
    code, _, err = screen(h, "memory", "review", "approve", pid, env=AGENT)
    assert code == EXIT_CODES[ErrorCode.UNAUTHORIZED], err
    assert "A person must decide" in err and "outside the agent session" in err and "AMUX_TOKEN, or ask" not in err
    with person(h) as p:
        p.call("upsert", {"path": "t.md", "content": b"c\n", "expected_revision": rev})
    code, _, err = screen(h, "memory", "review", "approve", pid)
    assert code == EXIT_CODES[ErrorCode.CONFLICT], err
    assert f"next: Merge both changes with 'amux memory review approve {pid} --edit'" in err, err
    assert (h.scope_dir / "t.md").read_bytes() == b"c\n"


def test_deciding_the_other_way_no_match_and_one_failed_id(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(settings=REVIEW)
    with agent(h) as a:
        pid = a.call("upsert", {"path": "t.md", "content": b"a\n", "expected_revision": "absent"})["proposal"]
    ok(h.cli("memory", "review", "reject", pid, "--json"))
    r = h.cli("memory", "review", "approve", pid)  # piped: the documented error shape
    assert r.returncode == EXIT_CODES[ErrorCode.CONFLICT], (r.stdout, r.stderr)
    assert r.json["error"]["code"] == "conflict" and r.json["error"]["data"]["status"] == "rejected"
    assert not (h.scope_dir / "t.md").exists()
    again = ok(h.cli("memory", "review", "reject", pid, "--json"))  # the same decision twice: applied once
    assert again[0]["already_decided"] is True
    r = h.cli("memory", "review", "approve", "p000000000000")
    assert r.returncode == EXIT_CODES[ErrorCode.NOT_FOUND] and r.json["error"]["code"] == "not_found"
    code, out, err = screen(h, "memory", "review", "approve", "--path-prefix", "nothing/")
    assert code == 0 and "no pending proposals under nothing/" in out + err, (out, err)
    code, out, _ = screen(h, "memory", "review", "approve", "--help")
    assert "[PROPOSAL...]" in out and "[ARGS...]" not in out, out


def test_review_table_shows_the_session_within_80_columns(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(settings=REVIEW)
    long_session = "67e5f0a8-7ff6-458d-a94c-d01912345678"
    with agent(h, session=long_session) as a:
        a.call("upsert", {"path": "a.md", "content": b"a\n", "expected_revision": "absent"})
    with agent(h, session="s2") as a:
        a.call("upsert", {"path": "b.md", "content": b"b\n", "expected_revision": "absent"})
    code, out, err = screen(h, "memory", "review", columns=80)
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.strip()]
    assert all(len(line) <= 80 for line in lines), lines
    assert [line for line in lines if line.startswith("ID ") and "SESSION" in line], lines
    assert any("67e5f0a8…" in line and "a.md" in line for line in lines), lines
    assert any(" s2 " in line and "b.md" in line for line in lines), lines
    # Rows shorten the session; each change set's header names it whole once, to copy into --session.
    header = f"change set {long_session}: 1 document, +1/-0 lines"
    assert [line for line in lines if long_session in line] == [header]


def test_log_and_history_mark_an_approved_proposal_and_show_says_who_decided(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(settings=REVIEW)
    with agent(h, session="x") as a:
        pid = a.call("upsert", {"path": "MEMORY.md", "content": b"# Prefs\n",
                                "expected_revision": "absent"})["proposal"]
        other = a.call("upsert", {"path": "notes/n.md", "content": b"n\n", "expected_revision": "absent"})["proposal"]
    ok(h.cli("memory", "review", "approve", pid, "--json"))
    for args in (("memory", "log"), ("memory", "history", "MEMORY.md")):
        code, out, err = screen(h, *args, columns=120)
        assert code == 0, err
        row = next(line for line in out.splitlines() if "create" in line or "update" in line)
        assert f"(review {pid})" in row and "proposed by" in row and "x" in row.split("proposed by")[1], out
    code, out, err = screen(h, "memory", "log", columns=80)
    assert code == 0 and "(review" in out, out
    assert all(len(line) <= 80 for line in out.splitlines()), out
    ok(h.cli("memory", "review", "reject", other, "--reason", "not <b>needed</b>", "--json"))
    code, out, err = screen(h, "memory", "review", "show", other)
    assert code == 0, err
    decided = next(line for line in out.splitlines() if line.startswith("decided:"))
    assert "rejected by" in decided and "reason: not <b>needed</b>" in decided and "20" in decided, out


def test_typed_commands_in_an_agent_session_report_a_proposal_not_a_topic(hub_factory: Any) -> None:
    """``memory new``/``remove``/``index`` from an agent session under review: the Hub keeps each write as a
    proposal, so the command says so (JSON and terminal) and never claims a topic it did not write."""
    h: HubProcess = hub_factory(settings={**REVIEW, "memory.review_paths": "user/**"})
    args = ["memory", "new", "user", "likes-tea", "--tags", "pref", "--description", "prefers tea", "--body", "Tea."]
    made = ok(h.cli(*args, "--json", env=AGENT))
    assert made["proposed"] == "user/likes-tea.md" and made["proposal"].startswith("p") and made["index"] is None
    assert "created" not in made and not (h.scope_dir / "user" / "likes-tea.md").exists()
    assert not (h.scope_dir / "index.md").exists()  # the index waits for the topic: nothing was written
    code, out, err = screen(h, *args[:3], "likes-milk", *args[4:], env=AGENT)
    assert code == 0, err
    assert "created" not in out and "for user/likes-milk.md: pending review, not yet in memory" in out, out
    assert "amux memory review show p" in out and "amux memory index" in out, out
    # A person approves the first one and rebuilds the index; an agent's removal is then a proposal too.
    ok(h.cli("memory", "review", "approve", made["proposal"], "--json"))
    assert ok(h.cli("memory", "index", "--json"))["changed"] is True
    gone = ok(h.cli("memory", "remove", "likes-tea", "--json", env=AGENT))
    assert gone["proposed"] == "user/likes-tea.md" and "removed" not in gone, gone
    assert (h.scope_dir / "user" / "likes-tea.md").exists()
    # With the index itself under review, a person's topic is written and only the agent's index rebuild waits.
    h2: HubProcess = hub_factory(settings={**REVIEW, "memory.review_paths": "index.md"})
    ok(h2.cli(*args, "--json"))  # a person: written, index built
    ok(h2.cli("memory", "new", "user", "likes-milk", "--tags", "pref", "--description", "milk", "--body", "Milk.",
              "--json"))
    (h2.scope_dir / "user" / "likes-tea.md").unlink()  # the index is now stale
    rebuilt = ok(h2.cli("memory", "index", "--json", env=AGENT))
    assert rebuilt["proposal"].startswith("p") and rebuilt["changed"] is False and rebuilt["up_to_date"] is False
    assert "likes-tea" in (h2.scope_dir / "index.md").read_text()  # unchanged until approved
