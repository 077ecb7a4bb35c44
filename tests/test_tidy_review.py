"""A tidy run's writes are proposals the Hub forces, and its proposals are one change set (DESIGN.md §21).

A real Hub with ``memory.review = off``.  A stand-in for ``amux memory tidy`` (:data:`LAUNCHER`: it begins the
Hub's review-forced run with ``review_run`` from its own process, as the command does, then runs the real CLI
as its child processes, as an agent's shell would) shows that every way an agent of the run writes becomes a
proposal of the run's session: with the session, with another session claimed, and with no session at all.
Such a caller may not decide a review, end its run or purge history.  A person then sees the change set as
one diff, and ``approve --session`` applies it by compare-and-swap: the document changed in between stays
pending as a conflict, the rest is applied, and history names the session; the web page shows the same
change set on one page and decides it the same way.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from amux_memory.protocol.errors import HubError
from amux_memory.protocol.requests import review_run_params
from tests.conftest import HubProcess, amux_argv
from tests.helpers import agent, ok, put, sha
from tests.terminal import run_in_terminal
from tests.ui_helpers import csrf_of, request, start_ui

LAUNCHER = r"""
import json, os, subprocess, sys
from amux_memory.protocol.requests import review_run_params
from amux_memory.tools.client.blocking import HubClient
session, calls = sys.argv[1], json.loads(sys.stdin.read())
with HubClient() as c:
    began = c.call("review_run", review_run_params(session))
out = []
for argv, env, data in calls:
    e = {k: v for k, v in os.environ.items() if k != "AMUX_SESSION_ID"}
    e.update(env)
    p = subprocess.run(argv, input=data.encode(), capture_output=True, env=e)
    out.append([p.returncode, p.stdout.decode(), p.stderr.decode()])
with HubClient() as c:
    ended = c.call("review_run", review_run_params(session, end=True))
print(json.dumps({"began": began, "ended": ended, "calls": out}))
"""
"""Begin the run of ``argv[1]``, run each ``[argv, env, stdin]`` of stdin's JSON as a child, end the run."""

SESSION = "tidy-0c1f"
NOTE_A = b"# Deploy\n\nRun make deploy from main.\nNever deploy on Fridays.\n"
NOTE_B = b"# Release\n\nNever deploy on Fridays.\nRun make deploy from main.\n"
MERGED = b"# Deploy\n\nRun make deploy from main.\nNever deploy on Fridays.\nSee also release notes.\n"


def run_as_tidy(h: HubProcess, session: str, calls: list[tuple[list[str], dict[str, str], bytes]]) -> Any:
    """Run ``calls`` (``amux`` arguments, extra environment, stdin) as children of a process that began the
    review-forced run of ``session``; returns ``{began, ended, calls: [[status, stdout, stderr]]}``."""
    payload = json.dumps([[[*amux_argv(), *argv], env, data.decode()] for argv, env, data in calls])
    proc = subprocess.run([sys.executable, "-c", LAUNCHER, session], input=payload.encode(), capture_output=True,
                          env=h.env, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)


pytestmark = pytest.mark.slow  # each runs a dozen CLI processes (15-25 s on a loaded 2-core machine)


@pytest.fixture
def hub(hub_factory: Any) -> HubProcess:
    h: HubProcess = hub_factory(settings={"memory.review": "off"})
    return h


def test_every_write_of_a_tidy_run_is_a_proposal_and_its_agent_cannot_escape(hub: HubProcess) -> None:
    h = hub
    rev_a = put(h, "deploy.md", NOTE_A)
    rev_b = put(h, "release.md", NOTE_B)
    on_disk = {p.name: p.read_bytes() for p in h.scope_dir.iterdir()}
    done = run_as_tidy(h, SESSION, [
        (["memory", "upsert", "deploy.md", "--expected-revision", rev_a], {"AMUX_SESSION_ID": SESSION}, MERGED),
        # The agent's shell drops the session: still the run's (the Hub walks its process tree).
        (["memory", "forget", "release.md", "--expected-revision", rev_b], {}, b""),
        # ... or claims another session: the run's, again.
        (["memory", "upsert", "new.md", "--expected-revision", "absent"], {"AMUX_SESSION_ID": "other"}, b"x\n"),
        # It may not decide its own change set, purge history, or end its run.
        (["memory", "review", "approve", "--session", SESSION], {}, b""),
        (["memory", "purge", "deploy.md", "--all"], {}, b""),
    ])
    assert done["began"]["began"] is True and done["began"]["session"] == SESSION and done["began"]["pid"]
    assert done["ended"] == {"session": SESSION, "ended": True}
    answers = [json.loads(out) if out.strip() else None for _, out, _ in done["calls"]]
    for status, out, err in done["calls"][:3]:
        assert status == 0, (out, err)
    assert all(a["proposed"] is True and a["status"] == "pending" for a in answers[:3]), answers
    approve_status, approve_out, _ = done["calls"][3]
    assert approve_status != 0
    refused = json.loads(approve_out)["errors"]
    assert len(refused) == 3 and {e["error"]["data"]["agent"] for e in refused} == {"tidy"}
    assert done["calls"][4][0] != 0 and json.loads(done["calls"][4][1])["error"]["code"] == "unauthorized"
    # Nothing on disk changed, with review off.
    assert {p.name: p.read_bytes() for p in h.scope_dir.iterdir()} == on_disk
    listed = ok(h.cli("memory", "review", "--json"))["proposals"]
    assert sorted(e["path"] for e in listed) == ["deploy.md", "new.md", "release.md"]
    assert {e["session"] for e in listed} == {SESSION}
    # A caller with the run's session from outside its tree is forced too while it runs; once ended it is not
    # (review is off: its write applies), and an agent may neither begin nor end a run.
    with agent(h, session="tidy-live") as outsider:
        with pytest.raises(HubError) as refused_run:
            outsider.call("review_run", review_run_params("tidy-live"))
        assert refused_run.value.code.value == "unauthorized"
    with h.client() as person:
        person.call("review_run", review_run_params("tidy-live"))
        with agent(h, session="tidy-live") as during:
            r = during.call("upsert", {"path": "during.md", "content": b"d\n", "expected_revision": "absent"})
            assert r["proposed"] is True
        assert person.call("review_run", review_run_params("tidy-live", end=True))["ended"] is True
        with agent(h, session="tidy-live") as after:
            r = after.call("upsert", {"path": "after.md", "content": b"a\n", "expected_revision": "absent"})
            assert "proposed" not in r and (h.scope_dir / "after.md").read_bytes() == b"a\n"
    # The run survives a Hub restart while it lasts.
    with h.client() as person:
        person.call("review_run", review_run_params("tidy-restart"))
    h.restart()
    with agent(h, session="tidy-restart") as again:
        r = again.call("upsert", {"path": "restart.md", "content": b"r\n", "expected_revision": "absent"})
        assert r["proposed"] is True
    with h.client() as person:
        assert person.call("review_run", review_run_params("tidy-restart", end=True))["ended"] is True


def test_a_change_set_is_shown_as_one_diff_and_decided_at_once(hub: HubProcess, tmp_path: Path) -> None:
    h = hub
    rev_a = put(h, "deploy.md", NOTE_A)
    rev_b = put(h, "release.md", NOTE_B)
    rev_c = put(h, "ops.md", b"# Ops\n\nPage the on-call.\n")
    run_as_tidy(h, SESSION, [
        (["memory", "upsert", "deploy.md", "--expected-revision", rev_a], {}, MERGED),
        (["memory", "forget", "release.md", "--expected-revision", rev_b], {}, b""),
        (["memory", "upsert", "ops.md", "--expected-revision", rev_c], {}, b"# Ops\n\nPage the on-call first.\n"),
    ])
    other = "tidy-<b>x</b>"  # a hostile session name: inert in every view
    run_as_tidy(h, other, [(["memory", "upsert", "extra.md", "--expected-revision", "absent"], {}, b"e\n")])
    shown = ok(h.cli("memory", "review", "show", "--session", SESSION, "--json"))
    assert [e["path"] for e in shown["proposals"]] == ["deploy.md", "release.md", "ops.md"] and not shown["conflicts"]
    diff = shown["diff"]
    assert "+++ b/deploy.md" in diff and "+See also release notes." in diff
    assert "--- a/release.md" in diff and "+++ /dev/null" in diff and "-Never deploy on Fridays." in diff
    text = run_in_terminal([*amux_argv(), "memory", "review"], env=h.env)
    # A person changes ops.md in between: that proposal must stay pending as a conflict.
    put(h, "ops.md", b"# Ops\n\nPage the on-call; a person wrote this.\n", expected=rev_c)
    r = h.cli("memory", "review", "approve", "--session", SESSION, "--json")
    assert r.returncode == 5, r.stderr  # conflict's status: something was left pending
    result = r.json
    assert sorted(a["path"] for a in result["applied"]) == ["deploy.md", "release.md"]
    assert [c["path"] for c in result["conflicts"]] == ["ops.md"] and not result["errors"]
    assert (h.scope_dir / "deploy.md").read_bytes() == MERGED and not (h.scope_dir / "release.md").exists()
    assert b"a person wrote this" in (h.scope_dir / "ops.md").read_bytes()
    pending = ok(h.cli("memory", "review", "--json"))["proposals"]
    assert sorted((e["path"], e["session"]) for e in pending) == [("extra.md", other), ("ops.md", SESSION)]
    for path in ("deploy.md", "release.md"):
        newest = ok(h.cli("memory", "history", path, "--json"))["versions"][0]
        assert newest["review"]["proposed_by"]["session"] == SESSION, newest
        assert newest["actor"]["session"] is None  # the person approved
    assert sha(MERGED) == ok(h.cli("memory", "get", "deploy.md", "--json"))["revision"]
    # Rejecting the rest of the set decides what is left.
    rejected = ok(h.cli("memory", "review", "reject", "--session", SESSION, "--json"))
    assert [a["status"] for a in rejected["applied"]] == ["rejected"] and not rejected["conflicts"]
    missing = h.cli("memory", "review", "show", "--session", SESSION, "--json")
    assert missing.returncode != 0 and missing.json["error"]["code"] == "not_found"
    # The web page: the hostile session's change set on one page, escaped, decided with one form.
    ui = start_ui(h.env, tmp=tmp_path)
    try:
        cookie = ui.sign_in()
        status, _, page = request(ui, "GET", "/review", cookie=cookie)
        assert status == 200 and 'href="/review/session/tidy-%3Cb%3Ex%3C/b%3E"' in page and "<b>x</b>" not in page
        status, _, page = request(ui, "GET", "/review/session/tidy-%3Cb%3Ex%3C/b%3E", cookie=cookie)
        assert status == 200 and "extra.md" in page and "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x" not in page
        assert 'id="approve-all"' in page and 'id="reject-all"' in page
        form = {"csrf": csrf_of(page), "session": other, "decision": "approve"}
        status, _, body = request(ui, "POST", "/review/session", cookie=cookie, form={**form, "csrf": "0"})
        assert status == 403 and not (h.scope_dir / "extra.md").exists()
        status, _, body = request(ui, "POST", "/review/session", cookie=cookie, form=form)
        assert status == 200 and re.search(r"1 applied, 0 left pending", body), body
        assert (h.scope_dir / "extra.md").read_bytes() == b"e\n"
    finally:
        ui.stop()
    assert "change set tidy-0c1f: 3 documents" in text.plain, text.plain
    assert "change set tidy-<b>x</b>: 1 document" in text.plain


def test_a_person_signed_in_by_token_can_end_their_run_and_then_decide_it(hub_factory: Any) -> None:
    """``amux memory tidy`` run with ``AMUX_TOKEN`` (the launch forwards that token to the agent, so the run names
    it): the launcher's own process still ends the run (it is the person, not the agent), and afterwards the
    person, by that token, decides the change set; an agent of the run holding the same token still may not."""
    h: HubProcess = hub_factory(settings={"memory.review": "off"}, isolation="user")
    ok(h.cli("hub", "principal", "add", "ana"))
    token = ok(h.cli("hub", "token", "issue", "ana"))["token"]
    env = {**h.env, "AMUX_TOKEN": token}
    calls = [
        (["memory", "upsert", "a.md", "--expected-revision", "absent"], {}, b"a\n"),
        (["memory", "review", "approve", "--session", "tidy-tok"], {}, b""),
    ]
    payload = json.dumps([[[*amux_argv(), *argv], e, data.decode()] for argv, e, data in calls])
    proc = subprocess.run([sys.executable, "-c", LAUNCHER, "tidy-tok"], input=payload.encode(), capture_output=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    done = json.loads(proc.stdout)
    assert done["ended"] == {"session": "tidy-tok", "ended": True}
    (s0, out0, _), (s1, out1, _) = done["calls"]
    assert s0 == 0 and json.loads(out0)["proposed"] is True
    assert s1 != 0 and {e["error"]["data"]["agent"] for e in json.loads(out1)["errors"]} == {"tidy"}
    decided = h.cli("memory", "review", "approve", "--session", "tidy-tok", "--json", env={"AMUX_TOKEN": token})
    assert decided.returncode == 0, (decided.stdout, decided.stderr)
    assert decided.json["applied"] and not decided.json.get("errors"), decided.json
    shown = ok(h.cli("memory", "show", "a.md", "--json", env={"AMUX_TOKEN": token}))
    assert shown["content"] == "a\n", shown
