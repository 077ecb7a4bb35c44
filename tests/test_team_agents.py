"""A team member's real agent writes to the team's memory, a maintainer decides (DESIGN.md §7.8, §21, §22.3).

A Hub with isolation ``user`` serves MCP over HTTP on loopback (``hub.mcp_listen``).  Team ``web`` reviews
agents' writes (review ``agents``): ``wren`` is a writer, ``max`` its maintainer, and ``@web/deploy.md`` holds
a note ``max`` wrote through the CLI.  The real Claude Code and the real Codex, registered with ``wren``'s
bearer token as a plain HTTP MCP server (no ``amux launch``, no ``amux mcp``), are driven by the fake model:
``memory_search`` finds the team note, ``memory_get`` reads its revision, ``memory_upsert`` at that revision
comes back as a proposal and leaves the file as it was.  ``max`` approves it with ``amux memory review approve``;
the team's file then holds the agent's text and its history names both: ``max`` wrote the version, ``wren``'s
agent (client ``amux-mcp``) proposed it.

The proposal must also fit the output schema ``tools/list`` published to ``wren``: with ``memory.review`` off
the Hub used to publish the schemas of a Hub without review to everyone, which an MCP SDK client (the Python
and TypeScript SDKs check structured content) refuses for a team's proposal.  The last test holds both
transports to the per-caller listing.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import trio

from amux_memory.hub.access import registry as reg
from amux_memory.hub.access.identity import team_scope
from amux_memory.hub.mcp.schemas import OUTPUT_SCHEMAS, REVIEW_OUTPUT_SCHEMAS
from bench.capacity import PROTOCOL
from bench.mcp_http import rpc_message
from tests.agent_clients import client_env
from tests.conftest import HubProcess, make_hub
from tests.fakemodel import (
    FakeModel,
    Text,
    ToolCall,
    anthropic_tool_results,
    codex_provider,
    responses_tool_outputs,
)
from tests.mcp_session import call, mcp_session, ok

pytestmark = pytest.mark.slow  # real agent clients

NOTE = b"# Deploy\n\nRun make deploy-web from main, never from a branch.\n"
AGENT_TEXT = ("# Deploy\n\nRun make deploy-web from main, never from a branch.\n"
              "Tag the release (vYYYY.MM.DD) before deploying; the agent learned this today.\n")
AGENT_TIMEOUT = 180
"""Seconds an agent run may take before it is killed (a run takes a few seconds; a busy 2-core machine more)."""


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class WebHub:
    """The Hub, its MCP URL, the team's folder on disk and each principal's token."""

    hub: HubProcess
    url: str
    team_dir: Path
    tokens: dict[str, str]

    def cli_as(self, who: str, *args: str, input: bytes | None = None) -> Any:
        """The CLI as ``who`` (its token in ``AMUX_TOKEN``), piped: the JSON it printed; it must succeed."""
        r = self.hub.cli(*args, input=input, env={"AMUX_TOKEN": self.tokens[who]})
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r.json


@pytest.fixture
def web(tmp_path: Path) -> Iterator[WebHub]:
    """A Hub (isolation ``user``, ``memory.review`` off, MCP on ``127.0.0.1:0``) with team ``web`` (review
    ``agents``): ``wren`` writer, ``max`` maintainer, ``ann`` in no team; ``@web/deploy.md`` written by ``max``
    through the CLI (a person's write: applied)."""
    h = make_hub(tmp_path, isolation="user", settings={"hub.mcp_listen": "127.0.0.1:0"})
    try:
        assert h.log is not None
        found = re.findall(r"serving MCP on (http://\S+)", h.log.read_text())
        assert found, h.log.read_text()
        tokens: dict[str, str] = {}
        for name in ("wren", "max", "ann"):
            reg.modify(h.home, lambda r, now, n=name: r.add_principal(n, "user", now))
            tokens[name] = reg.modify(h.home, lambda r, now, n=name: r.issue_token(n, now, None, None)[:2])
        reg.modify(h.home, lambda r, now: r.add_team("web", "agents", now))
        for name, role in (("wren", "writer"), ("max", "maintainer")):
            reg.modify(h.home, lambda r, now, n=name, ro=role: r.add_member("web", n, ro))
        w = WebHub(h, found[-1], h.home / "memory" / team_scope("web").relpath, tokens)
        written = w.cli_as("max", "memory", "upsert", "@web/deploy.md", "--expected-revision", "absent", input=NOTE)
        assert written["revision"] == sha(NOTE) and "proposed" not in written
        assert (w.team_dir / "deploy.md").read_bytes() == NOTE
        yield w
    finally:
        h.stop()


# -- running a real agent -------------------------------------------------------------------------------


@dataclass
class Run:
    returncode: int
    out: str
    err: str


def run_agent(argv: list[str], env: dict[str, str], cwd: Path) -> Run:
    """Run ``argv`` with stdin closed, output to files (an agent printing more than a pipe holds never blocks);
    killed after :data:`AGENT_TIMEOUT` seconds."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=err, text=True,
                                stdin=subprocess.DEVNULL)
        try:
            proc.wait(AGENT_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        out.seek(0)
        err.seek(0)
        return Run(proc.returncode, out.read(), err.read())


def agent_home(tmp_path: Path) -> Path:
    home = tmp_path / "agent-home"
    for sub in (".claude", ".codex"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    return home


def run_claude(bins: Path, w: WebHub, model: FakeModel, tmp_path: Path) -> tuple[Run, list[Any]]:
    """A plain ``claude -p`` with the Hub as an HTTP MCP server (``--mcp-config``, ``wren``'s bearer token in a
    0600 file, as ``amux hub connect claude`` registers it): the run and, per agent turn after the first, the
    newest tool result the model received."""
    home = agent_home(tmp_path)
    config = tmp_path / "mcp.json"
    config.touch(mode=0o600)
    config.write_text(json.dumps({"mcpServers": {"amux": {
        "type": "http", "url": w.url, "headers": {"Authorization": f"Bearer {w.tokens['wren']}"}}}}))
    env = client_env(HOME=str(home), CLAUDE_CONFIG_DIR=str(home / ".claude"), ANTHROPIC_BASE_URL=model.url,
                     ANTHROPIC_API_KEY="dummy", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                     DISABLE_AUTOUPDATER="1")
    tools = ",".join(f"mcp__amux__{n}" for n in ("memory_search", "memory_get", "memory_upsert"))
    run = run_agent([str(bins / "claude"), "-p", "Update the team's deploy note: tag the release first.",
                     f"--mcp-config={config}", "--strict-mcp-config", "--output-format", "stream-json",
                     "--verbose", "--no-session-persistence", f"--allowedTools={tools}"], env, tmp_path)
    return run, [anthropic_tool_results(t)[-1] for t in model.turns("/v1/messages")[1:]]


def run_codex(bins: Path, w: WebHub, model: FakeModel, tmp_path: Path) -> tuple[Run, list[Any]]:
    """A plain ``codex exec`` with the Hub as an HTTP MCP server (``wren``'s token in the variable named by
    ``bearer_token_env_var``, as ``amux hub connect codex`` registers it; tool calls pre-approved with ``-c``,
    as Codex's exec requires): the run and, per agent turn after the first, the newest tool output."""
    home = agent_home(tmp_path)
    env = client_env(HOME=str(home), CODEX_HOME=str(home / ".codex"), WREN_TOKEN=w.tokens["wren"])
    run = run_agent([str(bins / "codex"), "exec", "--skip-git-repo-check", "--ephemeral",
                     "-c", f'mcp_servers.amux.url="{w.url}"',
                     "-c", 'mcp_servers.amux.bearer_token_env_var="WREN_TOKEN"',
                     "-c", 'mcp_servers.amux.default_tools_approval_mode="approve"',
                     *codex_provider(model), "Update the team's deploy note: tag the release first."], env, tmp_path)
    return run, [responses_tool_outputs(t)[-1] for t in model.turns("/v1/responses")[1:]]


RUNNERS = {"claude": run_claude, "codex": run_codex}


def hub_result(result: Any) -> dict[str, Any]:
    """The Hub's result map inside a tool result the model received: the first JSON object in its text.  Both
    clients hand the model the structured content as JSON text (Claude Code as the ``tool_result``'s content,
    Codex after its ``Wall time``/``Output:`` lines), not the text rendering."""
    text = result.get("content") if "content" in result else result.get("output")
    if isinstance(text, list):
        text = "".join(block.get("text", "") for block in text if isinstance(block, dict))
    assert isinstance(text, str), result
    found, _ = json.JSONDecoder().raw_decode(text, text.index("{"))
    assert isinstance(found, dict), text
    return found


def published_output_schema(url: str, token: str, tool: str) -> dict[str, Any]:
    """The output schema the listener's ``tools/list`` publishes for ``tool`` to the caller of ``token`` (a raw MCP
    session over HTTP, as an agent opens one)."""
    u = urlsplit(url)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "Authorization": f"Bearer {token}"}

    def post(body: dict[str, Any], sid: str | None = None) -> tuple[dict[str, str], bytes]:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        extra = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": PROTOCOL} if sid else {}
        conn.request("POST", u.path, body=json.dumps(body).encode(), headers={**headers, **extra})
        resp = conn.getresponse()
        out = {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        conn.close()
        assert resp.status in (200, 202), (resp.status, out[1])
        return out

    init = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "schema-check", "version": "1"}}
    sid = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})[0]["mcp-session-id"]
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    listed = rpc_message(post({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}, sid)[1])
    (schema,) = [t["outputSchema"] for t in listed["result"]["tools"] if t["name"] == tool]
    assert isinstance(schema, dict)
    return schema


# -- the tests --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_writers_agent_proposes_a_team_note_that_the_maintainer_approves(
        agent: str, web: WebHub, bin_dir: Path, fake_model: FakeModel, tmp_path: Path) -> None:
    """``wren``'s agent finds ``@web/deploy.md`` by search, reads its revision and writes at it: the team
    reviews agents, so the answer is a pending proposal and the file is unchanged (DESIGN.md §21, §7.8).  Only
    ``max`` sees it in the queue; approved with the CLI, the file holds the agent's text and the version names
    ``max`` as actor and ``wren``'s MCP client as proposer."""
    revision = sha(NOTE)
    fake_model.script(
        ToolCall("mcp__amux__memory_search", {"query": "deploy-web"}),
        ToolCall("mcp__amux__memory_get", {"path": "@web/deploy.md"}),
        ToolCall("mcp__amux__memory_upsert", {"path": "@web/deploy.md", "content": AGENT_TEXT,
                                              "expected_revision": revision}),
        Text("The change awaits the team's review."))
    run, results = RUNNERS[agent](bin_dir, web, fake_model, tmp_path)
    assert run.returncode == 0, run.err[-3000:] + run.out[-2000:]
    assert len(results) == 3, (results, run.err[-2000:])  # one tool result per call, then the final text
    searched, read, upserted = (hub_result(r) for r in results)
    assert [m["path"] for m in searched["matches"]] == ["@web/deploy.md"], searched
    assert (read["path"], read["revision"]) == ("@web/deploy.md", revision), read  # what the upsert passes
    assert results[2].get("is_error") is not True, results[2]
    assert (upserted["proposed"], upserted["status"], upserted["path"]) == (True, "pending", "@web/deploy.md")
    assert upserted["base_revision"] == revision and upserted["proposed_revision"] == sha(AGENT_TEXT.encode())
    proposal = upserted["proposal"]
    # The answer fits the output schema the Hub publishes to wren (MCP SDK clients validate structured content
    # against it and refuse a result that does not fit, DESIGN.md §9.2, §21).
    jsonschema.validate(upserted, published_output_schema(web.url, web.tokens["wren"], "memory_upsert"))
    assert (web.team_dir / "deploy.md").read_bytes() == NOTE, "a proposal writes nothing to the team's files"
    assert sorted(p.name for p in web.team_dir.iterdir()) == ["deploy.md"]

    # The maintainer's queue holds exactly the agent's proposal, by wren through MCP.
    queue = web.cli_as("max", "memory", "review", "--path-prefix", "@web/")
    assert [(p["id"], p["path"]) for p in queue["proposals"]] == [(proposal, "@web/deploy.md")], queue
    approved = web.cli_as("max", "memory", "review", "approve", proposal)
    assert [(a["proposal"], a["status"], a["path"]) for a in approved] == [(proposal, "approved", "@web/deploy.md")]
    assert (web.team_dir / "deploy.md").read_bytes() == AGENT_TEXT.encode()

    versions = web.cli_as("wren", "memory", "history", "@web/deploy.md")["versions"]
    assert [v["revision"] for v in versions] == [sha(AGENT_TEXT.encode()), revision], versions
    newest = versions[0]
    assert newest["actor"]["principal"] == "max" and newest["actor"]["client"] != "amux-mcp", newest
    proposer = newest["review"]["proposed_by"]
    assert (proposer["principal"], proposer["client"]) == ("wren", "amux-mcp"), newest
    assert newest["review"]["proposal"] == proposal
    assert versions[1]["actor"]["principal"] == "max" and "review" not in versions[1], versions[1]
    # Decided: nothing is pending any more.
    assert web.cli_as("max", "memory", "review", "--path-prefix", "@web/")["proposals"] == []


async def test_a_reviewed_teams_members_get_the_proposal_schemas_over_http_and_the_relay(
        web: WebHub, tmp_path: Path) -> None:
    """``memory.review`` is off, yet team ``web`` reviews agents' writes (DESIGN.md §7.8): ``tools/list`` gives
    ``wren`` the output schemas of a reviewing Hub, over HTTP and over ``amux mcp``, so an MCP SDK client (which
    checks structured content against them) takes the proposal; ``ann``, in no reviewing team, gets the listing
    of a Hub without review (DESIGN.md §21), and so learns nothing of ``web``."""
    assert published_output_schema(web.url, web.tokens["wren"], "memory_upsert") == REVIEW_OUTPUT_SCHEMAS[
        "memory_upsert"]
    assert published_output_schema(web.url, web.tokens["ann"], "memory_upsert") == OUTPUT_SCHEMAS["memory_upsert"]
    with trio.fail_after(120):
        async with mcp_session(web.hub.home, tmp_path / "mcp.log", AMUX_TOKEN=web.tokens["wren"]) as s:
            # call() checks the result against the schema this session listed; the SDK checks it too.
            proposed = ok(await call(s, "memory_upsert", path="@web/relay.md", content="# Relay\n",
                                     expected_revision="absent"))
        async with mcp_session(web.hub.home, tmp_path / "mcp.log", AMUX_TOKEN=web.tokens["ann"]) as s:
            listed = {t.name: t.output_schema for t in (await s.list_tools()).tools}
            written = ok(await call(s, "memory_upsert", path="notes.md", content="# Ann\n",
                                    expected_revision="absent"))
    assert (proposed["proposed"], proposed["status"], proposed["path"]) == (True, "pending", "@web/relay.md")
    assert not (web.team_dir / "relay.md").exists()
    assert listed["memory_upsert"] == OUTPUT_SCHEMAS["memory_upsert"]
    assert "proposed" not in written and written["created"] is True
