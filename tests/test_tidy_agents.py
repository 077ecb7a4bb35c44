"""``amux memory tidy AGENT --print`` with the real Claude Code and the real Codex, offline (DESIGN.md §21).

A real Hub with ``memory.review = off`` holds two notes repeating one paragraph (a ``duplicate`` finding).  The
fake model, scripted as the tidy protocol asks, merges them: it upserts the kept note and forgets the other.
Nothing on disk changes: both writes are proposals of the run's session, forced by the Hub although review is
off.  A person then changes the forgotten note; ``amux memory review approve --session`` applies the merge,
reports the changed note as a conflict and leaves it pending; history names the run's session.

A note citing code that changed (DESIGN.md §24) is fixed the same way: in a real git repository, a committed edit
inside one cited range (``source_changed``) and lines inserted above another (``source_moved``); ``amux memory tidy
claude --repo`` hands the findings with their diff and new citations to the agent, whose corrected note is one
proposal; once a person approves it, ``amux memory health --repo`` finds nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.agent_clients import client_env
from tests.conftest import HubProcess, amux_argv, make_hub
from tests.fakemodel import FakeModel, Text, ToolCall, anthropic_tool_results, codex_provider
from tests.helpers import ok, put, sha

pytestmark = pytest.mark.slow  # real agent clients

PARAGRAPH = "Deploy from main with make deploy.\nNever deploy on a Friday afternoon.\n"
DEPLOY = f"# Deploy\n\n{PARAGRAPH}".encode()
RELEASE = f"# Release\n\nTag the release first.\n\n{PARAGRAPH}".encode()
MERGED = f"# Deploy\n\n{PARAGRAPH}\nTag the release first.\n".encode()
AGENT_TIMEOUT = 240
"""Seconds a tidy run may take before it is killed (a run takes seconds; a loaded 2-core machine more)."""


def tidy_env(bins: Path, hub: HubProcess, home: Path, **extra: str) -> dict[str, str]:
    """The environment of ``amux memory tidy``: the Hub, the agent executables, an isolated HOME per agent."""
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not os.access(os.path.join(d, "amux"), os.X_OK))
    return client_env(PATH=path, AMUX_HOME=str(hub.home), HOME=str(home), AMUX_LAUNCH_CLAUDE=str(bins / "claude"),
                      AMUX_LAUNCH_CODEX=str(bins / "codex"), CLAUDE_CONFIG_DIR=str(home / ".claude"),
                      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
                      CODEX_HOME=str(home / ".codex"), **extra)


def run_tidy(agent: str, bins: Path, hub: HubProcess, model: FakeModel, tmp: Path,
             *tidy_args: str) -> subprocess.CompletedProcess[str]:
    """``amux memory tidy AGENT --print TIDY_ARGS -- ARGS`` to completion, the model requests sent to ``model``."""
    home = tmp / "agent-home"
    if agent == "claude":
        env = tidy_env(bins, hub, home, ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="dummy-fake-key")
        args = ["--output-format", "stream-json", "--verbose", "--no-session-persistence"]
    else:
        env = tidy_env(bins, hub, home)
        args = ["--skip-git-repo-check", "--ephemeral", *codex_provider(model)]
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run([*amux_argv(), "memory", "tidy", agent, "--print", *tidy_args, "--", *args], env=env,
                          cwd=work,
                          capture_output=True, text=True, timeout=AGENT_TIMEOUT, stdin=subprocess.DEVNULL)


def requests_text(model: FakeModel) -> str:
    """Every string of every request the model received, joined (the task is in the first agent turn)."""
    from tests.fakemodel import strings

    bodies: list[Any] = [r.body for r in model.requests]
    return "\n".join(strings(bodies))


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_tidy_run_merges_two_duplicates_as_one_change_set_a_person_approves(
        agent: str, bin_dir: Path, fake_model: FakeModel, tmp_path: Path) -> None:
    h = make_hub(tmp_path, settings={"memory.review": "off"})
    put(h, "deploy.md", DEPLOY)
    put(h, "release.md", RELEASE)
    health = h.cli("memory", "health", "--json")
    assert health.returncode == 20 and health.json["counts"].get("duplicate"), health.stdout
    before = {p.name: p.read_bytes() for p in h.scope_dir.iterdir()}
    fake_model.script(
        ToolCall("mcp__amux__memory_upsert", {"path": "deploy.md", "content": MERGED.decode(),
                                              "expected_revision": sha(DEPLOY)}),
        ToolCall("mcp__amux__memory_forget", {"path": "release.md", "expected_revision": sha(RELEASE)}),
        Text("Merged release.md into deploy.md; both changes await your review."))
    proc = run_tidy(agent, bin_dir, h, fake_model, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    task = requests_text(fake_model)
    assert "Never invent content" in task and "[duplicate]" in task and "deploy.md" in task, task[:2000]
    # Nothing on disk changed; both writes are proposals of one session, the run's.
    assert {p.name: p.read_bytes() for p in h.scope_dir.iterdir()} == before
    pending = ok(h.cli("memory", "review", "--json"))["proposals"]
    assert sorted((e["path"], e["action"]) for e in pending) == [("deploy.md", "upsert"), ("release.md", "forget")]
    sessions = {e["session"] for e in pending}
    assert len(sessions) == 1 and None not in sessions, pending
    session = sessions.pop()
    assert f"review show --session {session}" in proc.stderr and "2 proposals await your review" in proc.stderr
    shown = ok(h.cli("memory", "review", "show", "--session", session, "--json"))
    assert "+Tag the release first." in shown["diff"] and "+++ /dev/null" in shown["diff"]
    # A person changes release.md in between: the merge applies, the forget stays pending as a conflict.
    changed = RELEASE + b"A person added this line.\n"
    put(h, "release.md", changed, expected=sha(RELEASE))
    r = h.cli("memory", "review", "approve", "--session", session, "--json")
    assert r.returncode == 5, (r.stdout, r.stderr)
    assert [a["path"] for a in r.json["applied"]] == ["deploy.md"]
    assert [c["path"] for c in r.json["conflicts"]] == ["release.md"]
    assert (h.scope_dir / "deploy.md").read_bytes() == MERGED and (h.scope_dir / "release.md").read_bytes() == changed
    left = ok(h.cli("memory", "review", "--json"))["proposals"]
    assert [(e["path"], e["session"]) for e in left] == [("release.md", session)]
    newest = ok(h.cli("memory", "history", "deploy.md", "--json"))["versions"][0]
    assert newest["review"]["proposed_by"]["session"] == session and newest["revision"] == sha(MERGED)
    print(json.dumps({"agent": agent, "session": session, "diff": shown["diff"]}))


MAKEFILE = ("# Makefile of web\n\nSTAGE ?= staging\nREGISTRY := registry.acme.example\n\nbuild:\n"
            "\tdocker build -t $(REGISTRY)/web .\n\ntest:\n\tpytest -q\n\ndeploy-web: build\n"
            "\tdocker push $(REGISTRY)/web\n\tkubectl rollout restart deploy/web -n $(STAGE)\n\n"
            "clean:\n\trm -rf dist\n")
APP = '"""The web service."""\n\ndef port():\n    return int(os.environ.get("PORT", "8080"))\n'
NOTES = "projects/github.com/acme/web/"


def git(root: Path, *args: str) -> str:
    """``git ARGS`` in ``root`` with a fixed author and no user configuration; its standard output."""
    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True).stdout


def cite(hub: HubProcess, root: Path, location: str) -> str:
    """``amux memory cite LOCATION --json`` run in the work tree: the citation of those lines at HEAD."""
    done = subprocess.run([*amux_argv(), "memory", "cite", location, "--json"], cwd=root, env=hub.env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["citation"])


def test_a_tidy_run_recites_changed_and_moved_code_as_a_proposal_a_person_approves(
        bin_dir: Path, fake_model: FakeModel, tmp_path: Path) -> None:
    h = make_hub(tmp_path, settings={"memory.review": "off"})
    root = tmp_path / "web"
    (root / "deploy").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "deploy/Makefile").write_text(MAKEFILE)
    (root / "src/app.py").write_text(APP)
    git(root, "init", "-q", "-b", "main")
    git(root, "remote", "add", "origin", "git@github.com:acme/web.git")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "the service and its Makefile")
    (root / "README.md").write_text("web\n")
    git(root, "add", "README.md")
    git(root, "commit", "-q", "-m", "a readme")
    a = git(root, "rev-parse", "--short", "HEAD").strip()
    note_path = NOTES + "deploy.md"
    note = (f"# Deploy\n\n`make deploy-web` pushes the image and restarts the pods (`deploy/Makefile#L12-L14@{a}`).\n"
            f"The service reads its port from PORT (`src/app.py#L3-L4@{a}`).\n").encode()
    put(h, note_path, note)
    # The code changes after the note: an edit inside the first cited range, two lines inserted above the second.
    (root / "deploy/Makefile").write_text(MAKEFILE.replace("deploy-web: build\n", "deploy-web: build test\n"))
    (root / "src/app.py").write_text(APP.replace('"""\n\n', '"""\n\nimport os\n\n', 1))
    git(root, "commit", "-q", "-am", "deploy-web runs the tests; app imports os")
    b = git(root, "rev-parse", "--short", "HEAD").strip()
    make_now, app_now = cite(h, root, "deploy/Makefile:12-14"), cite(h, root, "src/app.py:5-6")
    assert (make_now, app_now) == (f"deploy/Makefile#L12-L14@{b}", f"src/app.py#L5-L6@{b}")
    report = h.cli("memory", "health", "--repo", str(root), "--json")
    assert report.returncode == 20, report.stderr
    found = {f["citation"]: f for f in report.json["findings"] if f["paths"] == [note_path]}
    assert {c: (f["code"], f["now"]) for c, f in found.items()} == {
        f"deploy/Makefile#L12-L14@{a}": ("source_changed", make_now),
        f"src/app.py#L3-L4@{a}": ("source_moved", app_now)}
    assert "-deploy-web: build\n+deploy-web: build test" in found[f"deploy/Makefile#L12-L14@{a}"]["diff"]
    # The agent corrects what the diff shows and re-cites both ranges as the findings give them.
    fixed = (f"# Deploy\n\n`make deploy-web` runs the tests, then pushes the image and restarts the pods "
             f"(`{make_now}`).\nThe service reads its port from PORT (`{app_now}`).\n").encode()
    on_disk = {p: p.read_bytes() for p in h.scope_dir.rglob("*") if p.is_file()}
    fake_model.script(
        ToolCall("mcp__amux__memory_upsert", {"path": note_path, "content": fixed.decode(),
                                              "expected_revision": sha(note)}),
        Text("Re-cited both ranges in deploy.md and said that deploy-web runs the tests; awaiting your review."))
    proc = run_tidy("claude", bin_dir, h, fake_model, tmp_path, "--repo", str(root))
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    task = requests_text(fake_model)
    assert f"[source_changed] {note_path} (lines [[3, 3]]): cites deploy/Makefile#L12-L14@{a}" in task, task[:4000]
    assert "    | -deploy-web: build\n    | +deploy-web: build test" in task and f"should read {make_now}" in task
    assert f"[source_moved] {note_path} (lines [[4, 4]])" in task and f"should now read {app_now}" in task
    # The agent was told its write is a pending proposal of exactly the bytes it sent.
    results = [json.loads(r["content"]) for body in fake_model.turns("/v1/messages")[-1:]
               for r in anthropic_tool_results(body)]
    assert [(r["proposed"], r["status"], r["proposed_revision"]) for r in results] == [(True, "pending", sha(fixed))]
    # The Hub kept the write as one proposal of the run's session, exactly as the agent sent it; nothing on disk.
    assert {p: p.read_bytes() for p in h.scope_dir.rglob("*") if p.is_file()} == on_disk
    pending = ok(h.cli("memory", "review", "--json"))["proposals"]
    assert [(e["path"], e["action"]) for e in pending] == [(note_path, "upsert")] and pending[0]["session"]
    session = pending[0]["session"]
    assert f"review show --session {session}" in proc.stderr and "1 proposal awaits your review" in proc.stderr
    assert ok(h.cli("memory", "review", "show", pending[0]["id"], "--json"))["proposed"] == fixed.decode()
    r = h.cli("memory", "review", "approve", "--session", session, "--json")
    assert r.returncode == 0 and [e["path"] for e in r.json["applied"]] == [note_path], (r.stdout, r.stderr)
    assert (h.scope_dir / note_path).read_bytes() == fixed
    after = h.cli("memory", "health", "--repo", str(root), "--json")
    assert after.returncode == 0 and after.json["findings"] == [], after.stdout
    assert after.json["citations"]["citations"] == 2 and after.json["citations"]["stale_notes"] == []
    newest = ok(h.cli("memory", "history", note_path, "--json"))["versions"][0]
    assert newest["review"]["proposed_by"]["session"] == session and newest["revision"] == sha(fixed)
