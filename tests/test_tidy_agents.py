"""``amux memory tidy AGENT --print`` with the real Claude Code and the real Codex, offline (DESIGN.md §21).

A real Hub with ``memory.review = off`` holds two notes repeating one paragraph (a ``duplicate`` finding).  The
fake model, scripted as the tidy protocol asks, merges them: it upserts the kept note and forgets the other.
Nothing on disk changes: both writes are proposals of the run's session, forced by the Hub although review is
off.  A person then changes the forgotten note; ``amux memory review approve --session`` applies the merge,
reports the changed note as a conflict and leaves it pending; history names the run's session.
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
from tests.fakemodel import FakeModel, Text, ToolCall, codex_provider
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


def run_tidy(agent: str, bins: Path, hub: HubProcess, model: FakeModel, tmp: Path) -> subprocess.CompletedProcess[str]:
    """``amux memory tidy AGENT --print -- ARGS`` to completion, the model requests sent to ``model``."""
    home = tmp / "agent-home"
    if agent == "claude":
        env = tidy_env(bins, hub, home, ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="dummy-fake-key")
        args = ["--output-format", "stream-json", "--verbose", "--no-session-persistence"]
    else:
        env = tidy_env(bins, hub, home)
        args = ["--skip-git-repo-check", "--ephemeral", *codex_provider(model)]
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run([*amux_argv(), "memory", "tidy", agent, "--print", "--", *args], env=env, cwd=work,
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
