"""``amux launch`` attached to the Hub's own MCP HTTP listener instead of ``amux mcp`` (DESIGN.md §10, §7.5).

A real Hub with ``hub.mcp_listen`` on a free loopback port answers its URL in
``hello`` (``mcp_url``).  A launch of Claude Code or Codex then issues a
delegated token (bound to the session's binding, 12 h), hands it over
without a command line (Claude: a 0600 ``--mcp-config`` file; Codex: the
``AMUX_MCP_BEARER`` variable named by ``bearer_token_env_var``) and revokes
it when the agent exits.  The fast tests use a stand-in agent program that
records what it got and sleeps, so a SIGTERM to the launcher can be sent
while it runs; the slow ones run the real Claude Code and Codex against the
fake model and watch the agent's process tree for an ``amux mcp`` that must
not be there.
"""

from __future__ import annotations

import getpass
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from bench.mcp_http import rpc_message
from tests.conftest import HubProcess, amux_argv, make_hub
from tests.fakemodel import (
    FakeModel,
    Text,
    ToolCall,
    anthropic_system,
    anthropic_tool_results,
    codex_provider,
    responses_tool_names,
    responses_tool_outputs,
    strings,
)
from tests.helpers import mcp_url, wait_until

PROTOCOL = "2025-06-18"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
ME = getpass.getuser()
TOKEN_TEXT = re.compile(r"amux_[0-9a-f]{12}_")
REAL_TOOLS = ("memory_search", "memory_get", "memory_upsert", "memory_forget", "result_continue")
FACT_PATH = "notes/build.md"
FACT = "The build of project quokka runs with httpfactword enabled; never without it."
"""A stored fact the fake model asks the Hub for; it must come back in the tool results the agent sends."""


def seed_fact(h: HubProcess) -> None:
    """Store :data:`FACT` in ``FACT_PATH`` through the CLI (a person's write)."""
    r = h.cli("memory", "upsert", FACT_PATH, "--expected-revision", "absent", input=f"# Build\n\n{FACT}\n".encode())
    assert r.returncode == 0, r.stderr


def script_lookup(model: FakeModel) -> None:
    """The fake model searches for the fact, reads its document, then ends its turn."""
    model.script(ToolCall("mcp__amux__memory_search", {"query": "httpfactword"}),
                 ToolCall("mcp__amux__memory_get", {"path": FACT_PATH}), Text("finished"))


# -- helpers ----------------------------------------------------------------------------------------


def http_hub(tmp: Path, *, register: bool = True, **settings: str) -> tuple[HubProcess, str]:
    """A Hub serving MCP on ``127.0.0.1:0``; ``(hub, url)``, the URL from its log (the port is the kernel's)."""
    tmp.mkdir(parents=True, exist_ok=True)
    h = make_hub(tmp, settings={"hub.mcp_listen": "127.0.0.1:0", **settings})
    url = mcp_url(h, "http")
    if register:
        r = h.cli("hub", "principal", "add", ME)
        assert r.returncode == 0, r.stderr
    return h, url


def post(url: str, token: str, binding: str, body: Any = INIT) -> int:
    """One raw MCP POST with ``token`` and ``binding``: the HTTP status."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.request("POST", u.path, body=json.dumps(body).encode(), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}", "Amux-Binding": binding})
    status = conn.getresponse().status
    conn.close()
    return status


def listener_tools(h: HubProcess, url: str) -> list[str]:
    """The tool names the Hub's listener serves now (the stand-in's ``whoami`` or the real ones)."""
    r = h.cli("hub", "token", "issue", ME, "--ttl", "600")
    assert r.returncode == 0, r.stderr
    token = r.json["token"]
    u = urlsplit(url)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "Authorization": f"Bearer {token}"}

    def call(body: Any, sid: str | None = None) -> tuple[dict[str, str], bytes]:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        extra = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": PROTOCOL} if sid else {}
        conn.request("POST", u.path, body=json.dumps(body).encode(), headers={**headers, **extra})
        resp = conn.getresponse()
        out = {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        conn.close()
        return out

    hdrs, _ = call(INIT)
    sid = hdrs["mcp-session-id"]
    call({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    _, body = call({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}, sid)
    data = rpc_message(body)
    h.cli("hub", "token", "revoke", r.json["id"])
    return [t["name"] for t in data["result"]["tools"]]


def tokens(h: HubProcess) -> list[dict[str, Any]]:
    r = h.cli("hub", "token", "list")
    assert r.returncode == 0, r.stderr
    doc = r.json
    return list(doc["tokens"] if isinstance(doc, dict) else doc)


def env_for(h: HubProcess, home: Path, **extra: str) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return {**h.env, "HOME": str(home), **extra}


STANDIN = r'''#!{python}
import json, os, stat, sys, time
args = sys.argv[1:]
cfg = next((a.split("=", 1)[1] for a in args if a.startswith("--mcp-config=")), None)
doc = {{"argv": args, "env": {{k: v for k, v in os.environ.items() if k.startswith(("AMUX_", "CLAUDE"))}}}}
if cfg and os.path.isfile(cfg):
    doc["config_path"] = cfg
    doc["config_mode"] = stat.S_IMODE(os.stat(cfg).st_mode)
    doc["config"] = json.load(open(cfg))
tmp = {record!r} + ".tmp"
with open(tmp, "w") as f:
    json.dump(doc, f)
os.rename(tmp, {record!r})
time.sleep(float(os.environ.get("STANDIN_SLEEP", "0")))  # an agent still at work, for the launcher to signal
'''


def standin(tmp: Path) -> tuple[Path, Path]:
    """A stand-in agent program that records its argv, amux environment and ``--mcp-config`` file, then sleeps
    ``$STANDIN_SLEEP`` seconds: ``(program, record file)``."""
    program, record = tmp / "agent", tmp / "record.json"
    program.write_text(STANDIN.format(python=sys.executable, record=str(record)))
    program.chmod(0o755)
    return program, record


# -- fast: the plan, the hand-over, the revocation -----------------------------------------------


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_print_spec_says_http_with_the_token_redacted_and_issues_nothing(tmp_path: Path) -> None:
    """``--print-spec`` for claude and codex shows the HTTP attachment: Claude's config is a 0600 file (not
    argv), Codex's token a variable; every token is ``<redacted>`` and no token is issued for a printed spec."""
    h, url = http_hub(tmp_path)
    try:
        hello = h.cli("hub", "status", "--json").json
        assert hello["mcp_url"] == url
        env = env_for(h, tmp_path / "home")
        before = tokens(h)
        r = subprocess.run([*amux_argv(), "launch", "--print-spec", "claude", "-p", "hi"], capture_output=True,
                           text=True, env=env, timeout=60)
        assert r.returncode == 0, r.stderr
        spec = json.loads(r.stdout)
        assert spec["mcp_transport"] == "http" and spec["token_id"] is None
        assert spec["mcp_servers"] == {"amux": {"type": "http", "url": url, "headers": {
            "Authorization": "Bearer <redacted>", "Amux-Binding": "global", "Amux-Instructions": "off",
            "Amux-Session": spec["session_id"]}}}
        (config,) = spec["files"]
        assert config["mode"] == 0o600 and config["path"].endswith("/agent-config/memory/mcp.json")
        assert f"--mcp-config={config['path']}" in spec["argv"]
        assert json.loads(config["content"])["mcpServers"]["amux"]["type"] == "http"
        assert not TOKEN_TEXT.search(r.stdout) and "mcp" not in spec["argv"]
        assert url in spec["notices"][0] and "HTTP" in spec["notices"][0]

        r = subprocess.run([*amux_argv(), "launch", "--print-spec", "codex", "exec", "hi"], capture_output=True,
                           text=True, env=env, timeout=60)
        assert r.returncode == 0, r.stderr
        spec = json.loads(r.stdout)
        assert spec["mcp_transport"] == "http" and spec["env_set"]["AMUX_MCP_BEARER"] == "<redacted>"
        argv = " ".join(spec["argv"])
        assert f'mcp_servers.amux.url="{url}"' in argv
        assert 'mcp_servers.amux.bearer_token_env_var="AMUX_MCP_BEARER"' in argv
        assert ('mcp_servers.amux.http_headers={Amux-Binding = "global", Amux-Instructions = "off", '
                f'Amux-Session = "{spec["session_id"]}"}}') in argv
        assert "mcp_servers.amux.command" not in argv and spec["files"] == []
        assert not TOKEN_TEXT.search(r.stdout), "no token text anywhere"
        assert tokens(h) == before, "a printed spec issues no token"
    finally:
        h.stop()


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_relay_when_the_principal_is_unregistered_or_the_hub_serves_no_http(tmp_path: Path) -> None:
    """No registered principal: the relay, saying why and how to change it; no HTTP listener: the relay, quietly."""
    h, _ = http_hub(tmp_path / "a", register=False)
    try:
        r = subprocess.run([*amux_argv(), "launch", "--print-spec", "claude", "-p", "hi"], capture_output=True,
                           text=True, env=env_for(h, tmp_path / "home"), timeout=60)
        assert r.returncode == 0, r.stderr
        spec = json.loads(r.stdout)
        assert spec["mcp_transport"] == "relay" and spec["mcp_servers"]["amux"]["args"] == ["mcp"]
        assert any(f"amux hub principal add {ME}" in n for n in spec["notices"]), spec["notices"]
    finally:
        h.stop()
    (tmp_path / "b").mkdir()
    plain = make_hub(tmp_path / "b")
    try:
        assert plain.cli("hub", "status", "--json").json["mcp_url"] is None
        r = subprocess.run([*amux_argv(), "launch", "--print-spec", "codex", "exec", "hi"], capture_output=True,
                           text=True, env=env_for(plain, tmp_path / "home"), timeout=60)
        spec = json.loads(r.stdout)
        assert spec["mcp_transport"] == "relay" and len(spec["notices"]) == 1, spec["notices"]
        assert any(a.startswith("mcp_servers.amux.command=") for a in spec["argv"])
    finally:
        plain.stop()


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_the_token_works_during_the_run_and_is_revoked_after_sigterm(tmp_path: Path, agent: str) -> None:
    """The stand-in agent gets a working delegated token (0600 file for Claude, variable for Codex; never in
    argv); SIGTERM to ``amux launch`` ends the agent, the token is then revoked (401) and the file is gone."""
    h, url = http_hub(tmp_path)
    try:
        program, record = standin(tmp_path)
        env = env_for(h, tmp_path / "home", **{f"AMUX_LAUNCH_{agent.upper()}": str(program), "STANDIN_SLEEP": "60"})
        args = ["-p", "hi"] if agent == "claude" else ["exec", "hi"]
        proc = subprocess.Popen([*amux_argv(), "launch", agent, *args], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            wait_until(record.exists, 30, f"the stand-in agent to write {record}")
            got = json.loads(record.read_text())
            if agent == "claude":
                assert got["config_mode"] == 0o600
                server = got["config"]["mcpServers"]["amux"]
                assert server["url"] == url and server["headers"]["Amux-Binding"] == "global"
                token = server["headers"]["Authorization"].removeprefix("Bearer ")
            else:
                token = got["env"]["AMUX_MCP_BEARER"]
            assert token.startswith("amux_") and not any(token in a for a in got["argv"])
            assert post(url, token, "global") == 200, "the token opens an MCP session while the agent runs"
            assert post(url, token, "principal:other") == 401, "only with its own binding"
            (live,) = [t for t in tokens(h) if t["state"] == "active"]
            assert live["binding"] == "global" and live["principal"] == ME and live["expires"]
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert post(url, token, "global") == 401, "revoked when the agent ended"
        assert [t["state"] for t in tokens(h)] == ["revoked"]
        if agent == "claude":
            assert not os.path.exists(got["config_path"]), "the token file is removed after the run"
    finally:
        h.stop()


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_the_delegated_token_acts_with_the_launchers_teams(tmp_path: Path) -> None:
    """A launcher in a team (DESIGN.md §7.8): its agent's instructions end with the team line, and the delegated
    token reads and searches the team's memory at ``@web/`` (the view is built from the token's principal)."""
    from amux_memory.protocol.agent_protocol import render

    h, url = http_hub(tmp_path)
    try:
        for args in (("hub", "team", "add", "web", "--review", "off"),
                     ("hub", "team", "member", "add", "web", ME, "--role", "writer"),
                     ("memory", "upsert", "@web/deploy.md", "--expected-revision", "absent")):
            r = h.cli(*args, input=b"# Deploy\n\nteamdeployword: from main only.\n")
            assert r.returncode == 0, r.stderr
        program, record = standin(tmp_path)
        env = env_for(h, tmp_path / "home", AMUX_LAUNCH_CLAUDE=str(program), STANDIN_SLEEP="60")
        proc = subprocess.Popen([*amux_argv(), "launch", "claude", "-p", "hi"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=tmp_path)  # outside a repository (§24)
        try:
            wait_until(record.exists, 30, f"the stand-in agent to write {record}")
            got = json.loads(record.read_text())
            prompt = got["argv"][got["argv"].index("--append-system-prompt") + 1]
            assert prompt == render("mcp", [{"mount": "@web/", "role": "writer"}])
            token = got["config"]["mcpServers"]["amux"]["headers"]["Authorization"].removeprefix("Bearer ")
            headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                       "Authorization": f"Bearer {token}", "Amux-Binding": "global", "Amux-Instructions": "off"}
            u = urlsplit(url)

            def rpc(body: Any, sid: str | None = None) -> tuple[dict[str, str], bytes]:
                conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
                extra = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": PROTOCOL} if sid else {}
                conn.request("POST", u.path, body=json.dumps(body).encode(), headers={**headers, **extra})
                resp = conn.getresponse()
                out = {k.lower(): v for k, v in resp.getheaders()}, resp.read()
                conn.close()
                return out

            sid = rpc(INIT)[0]["mcp-session-id"]
            rpc({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
            _, body = rpc({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "memory_search", "arguments": {"query": "teamdeployword"}}}, sid)
            found = rpc_message(body)
            structured = found["result"]["structuredContent"]
            assert [m["path"] for m in structured["matches"]] == ["@web/deploy.md"], found
            assert [p["mount"] for p in structured["parts"]] == ["", "@web/"]
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    finally:
        h.stop()


# -- slow: the real agents ----------------------------------------------------------------------------


def descendants(pid: int) -> dict[int, list[str]]:
    """Every live descendant of ``pid``: its command line (from ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    out: dict[int, list[str]] = {}
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        try:
            out[p] = Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
        except OSError:
            continue
        todo += children.get(p, [])
    return out


def is_amux_mcp(cmd: list[str]) -> bool:
    return len(cmd) >= 2 and "mcp" in cmd[1:3] and any(
        os.path.basename(c).startswith("amux") or c == "amux_memory.tools.cli" for c in cmd[:3])


def watch(proc: subprocess.Popen[str], environ_key: str | None = None,
          timeout: float = 120) -> tuple[list[list[str]], str | None]:
    """Sample ``proc``'s process tree every 20 ms until it exits (or ``timeout`` seconds pass): every command
    line seen, and the token (from a descendant's ``--mcp-config`` file, or from its variable ``environ_key``)."""
    seen: list[list[str]] = []
    token: str | None = None
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        for pid, cmd in descendants(proc.pid).items():
            if cmd not in seen:
                seen.append(cmd)
            if token is None:
                try:
                    if environ_key:
                        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                        found = [e.split(b"=", 1)[1].decode() for e in env if e.startswith(environ_key.encode() + b"=")]
                        token = found[0] if found else None
                    cfg = next((a.split("=", 1)[1] for a in cmd if a.startswith("--mcp-config=")), None)
                    if cfg and os.path.isfile(cfg):
                        token = json.loads(Path(cfg).read_text())["mcpServers"]["amux"]["headers"][
                            "Authorization"].removeprefix("Bearer ")
                except (OSError, ValueError, KeyError):
                    pass
        time.sleep(0.02)  # the sampling interval: what is seen is the finding, nothing is waited for
    return seen, token


@dataclass
class Watched:
    """A finished agent run: exit status, its whole stdout and stderr, the command lines seen in its
    process tree and the token found there (:func:`watch`)."""

    returncode: int
    out: str
    err: str
    seen: list[list[str]]
    token: str | None


def run_watched(argv: list[str], env: dict[str, str], cwd: Path, environ_key: str | None = None) -> Watched:
    """Run ``argv`` (stdin closed) while :func:`watch` samples its tree; killed after 120 s.  Output goes to
    files, so an agent printing more than a pipe holds is never blocked while it is watched."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=err, text=True,
                                stdin=subprocess.DEVNULL)
        try:
            seen, token = watch(proc, environ_key)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        out.seek(0)
        err.seek(0)
        return Watched(proc.returncode, out.read(), err.read(), seen, token)


@pytest.fixture
def agents(bin_dir: Path) -> Path:
    return bin_dir


@pytest.fixture
def http_hub_process(tmp_path: Path) -> Iterator[tuple[HubProcess, str]]:
    h, url = http_hub(tmp_path)
    yield h, url
    h.stop()


def agent_env(agents: Path, h: HubProcess, home: Path, **extra: str) -> dict[str, str]:
    from tests.agent_clients import client_env

    for sub in (".claude", ".codex"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not os.access(os.path.join(d, "amux"), os.X_OK))
    return client_env(PATH=path, AMUX_HOME=str(h.home), HOME=str(home), AMUX_LAUNCH_CLAUDE=str(agents / "claude"),
                      AMUX_LAUNCH_CODEX=str(agents / "codex"), CLAUDE_CONFIG_DIR=str(home / ".claude"),
                      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
                      CODEX_HOME=str(home / ".codex"), **extra)


@pytest.mark.slow
def test_real_claude_connects_over_http_with_no_amux_mcp_process(
        agents: Path, http_hub_process: tuple[HubProcess, str], tmp_path: Path, fake_model: FakeModel) -> None:
    """Claude Code's ``init`` message lists ``amux`` connected with the listener's tools; the fake model's
    ``memory_search`` and ``memory_get`` are answered by the Hub with the stored fact; the system prompt holds
    the protocol once (the server's instructions are off: ``Amux-Instructions``); its ``memory_upsert`` is
    recorded with the launch's session (``Amux-Session``); no ``amux mcp`` ever runs under the launch; the
    token it used is refused (401) after the run."""
    from amux_memory.protocol.agent_protocol import render

    h, url = http_hub_process
    served = listener_tools(h, url)
    seed_fact(h)
    fake_model.script(ToolCall("mcp__amux__memory_search", {"query": "httpfactword"}),
                      ToolCall("mcp__amux__memory_get", {"path": FACT_PATH}),
                      ToolCall("mcp__amux__memory_upsert", {"path": "notes/learned.md", "content": "# Learned\n",
                                                            "expected_revision": "absent"}), Text("finished"))
    env = agent_env(agents, h, tmp_path / "home", ANTHROPIC_BASE_URL=fake_model.url, ANTHROPIC_API_KEY="dummy")
    work = tmp_path / "work"
    work.mkdir()
    session = str(uuid.uuid4())
    run = run_watched([*amux_argv(), "launch", "--session-id", session, "claude", "-p", "hello",
                       "--output-format", "stream-json", "--verbose", "--no-session-persistence"], env, work)
    seen, token, out, err = run.seen, run.token, run.out, run.err
    assert run.returncode == 0, err[-3000:]
    assert any("HTTP listener" in line for line in err.splitlines() if line.startswith("amux:")), err[-2000:]
    assert any(os.path.basename(c[0]) == "claude" for c in seen if c), seen
    assert not [c for c in seen if is_amux_mcp(c)], "no amux mcp process in the agent's tree"
    init = next(json.loads(line) for line in out.splitlines()
                if line.startswith("{") and json.loads(line).get("subtype") == "init")
    assert {"name": "amux", "status": "connected"} in init["mcp_servers"], init["mcp_servers"]
    assert sorted(t for t in init["tools"] if t.startswith("mcp__amux__")) == sorted(f"mcp__amux__{n}"
                                                                                       for n in served)
    turns = fake_model.turns("/v1/messages")
    assert len(turns) == 4, [r.path for r in fake_model.requests]
    assert "notes/build.md" in json.dumps(anthropic_tool_results(turns[1]))
    assert FACT in json.dumps(anthropic_tool_results(turns[2])), json.dumps(anthropic_tool_results(turns[2]))[:2000]
    # The agent's write names the launch's session in history (Amux-Session), as the relay's hello does.
    (version,) = h.cli("memory", "history", "notes/learned.md").json["versions"]
    assert version["actor"] == {"principal": ME, "client": "amux-mcp", "binding": "global", "session": session}
    assert sum(t.count(render("mcp")) for t in strings(turns[0])) == 1, "one protocol block"
    assert anthropic_system(turns[0]).count(render("mcp")) == 1
    assert token is not None and token.startswith("amux_")
    assert post(url, token, "global") == 401, "the delegated token is revoked after exit"
    assert [t["state"] for t in tokens(h) if t["binding"] == "global"] == ["revoked"]


@pytest.mark.slow
def test_real_codex_connects_over_http_with_no_amux_mcp_process(
        agents: Path, http_hub_process: tuple[HubProcess, str], tmp_path: Path, fake_model: FakeModel) -> None:
    """``codex exec`` with the server ``required`` runs to the end (it connected), offers the listener's amux
    tools to the model, answers the fake model's ``memory_search`` and ``memory_get`` with the Hub's stored
    fact, holds the protocol once, never runs ``amux mcp``, and its token is refused (401) after the run."""
    from amux_memory.protocol.agent_protocol import render

    h, url = http_hub_process
    served = [n for n in listener_tools(h, url) if n in REAL_TOOLS]  # the launch enables the real tools only
    seed_fact(h)
    script_lookup(fake_model)
    env = agent_env(agents, h, tmp_path / "home")
    work = tmp_path / "work"
    work.mkdir()
    run = run_watched([*amux_argv(), "launch", "codex", "exec", "--skip-git-repo-check",
                       *codex_provider(fake_model), "hello"], env, work, "AMUX_MCP_BEARER")
    seen, token, err = run.seen, run.token, run.err
    assert run.returncode == 0, err[-3000:]
    assert not [c for c in seen if is_amux_mcp(c)], "no amux mcp process in the agent's tree"
    assert any("codex" in " ".join(c) for c in seen), seen
    assert token is not None and not any(token in " ".join(c) for c in seen), "the token is never in a command line"
    turns = fake_model.turns("/v1/responses")
    assert turns, err[-2000:]
    names = responses_tool_names(turns[0])
    assert {f"mcp__amux__{n}" for n in served} <= set(names), names
    assert len(turns) == 3, err[-2000:]
    assert FACT in json.dumps(responses_tool_outputs(turns[2])), json.dumps(responses_tool_outputs(turns[2]))[:2000]
    assert sum(t.count(render("mcp")) for t in strings(turns[0])) == 1, "one protocol block"
    assert post(url, token, "global") == 401, "the delegated token is revoked after exit"
    assert [t["state"] for t in tokens(h) if t["binding"] == "global"] == ["revoked"]


@pytest.mark.slow
def test_real_claude_registered_with_hub_connect_reads_a_fact_over_http(
        agents: Path, http_hub_process: tuple[HubProcess, str], tmp_path: Path, fake_model: FakeModel) -> None:
    """The persistent form ``amux hub connect claude`` prints (the token into a 0600 file, ``claude mcp add-json
    -s user`` with a headersHelper reading it), run into a temporary ``CLAUDE_CONFIG_DIR``; then a plain
    ``claude -p`` (no launch, no ``amux mcp`` anywhere) gets the Hub's stored fact for the fake model's
    ``memory_search`` and ``memory_get``, with the server's own instructions (the protocol once, from
    ``initialize``)."""
    from amux_memory.protocol.agent_protocol import render

    h, url = http_hub_process
    seed_fact(h)
    r = h.cli("hub", "connect", "claude", "--principal", ME, "--url", url, "--json")
    assert r.returncode == 0, r.stderr
    env = agent_env(agents, h, tmp_path / "home", ANTHROPIC_BASE_URL=fake_model.url, ANTHROPIC_API_KEY="dummy")
    work = tmp_path / "work"
    work.mkdir()
    command = " && ".join([*r.json["env"], *(c.replace("claude ", f"{agents / 'claude'} ", 1)
                                             if c.startswith("claude ") else c for c in r.json["commands"])])
    added = subprocess.run(command, shell=True, env=env, cwd=work, capture_output=True, text=True, timeout=120)
    assert added.returncode == 0, added.stderr
    script_lookup(fake_model)
    run = run_watched([str(agents / "claude"), "-p", "How is quokka built?", "--output-format", "stream-json",
                       "--verbose", "--no-session-persistence",
                       "--allowedTools=mcp__amux__memory_search,mcp__amux__memory_get"], env, work)
    seen = run.seen
    assert run.returncode == 0, run.err[-3000:] + run.out[-2000:]
    assert not [c for c in seen if is_amux_mcp(c)], "no amux mcp process"
    turns = fake_model.turns("/v1/messages")
    assert len(turns) == 3, [r.path for r in fake_model.requests]
    assert FACT in json.dumps(anthropic_tool_results(turns[2])), json.dumps(anthropic_tool_results(turns[2]))[:2000]
    assert sum(t.count(render("mcp")) for t in strings(turns[0])) == 1, "the server's instructions, once"


@pytest.mark.slow
def test_real_codex_registered_with_hub_connect_reads_a_fact_over_http(
        agents: Path, http_hub_process: tuple[HubProcess, str], tmp_path: Path, fake_model: FakeModel) -> None:
    """The persistent form ``amux hub connect codex`` prints (``codex mcp add amux --url … --bearer-token-env-var
    AMUX_TOKEN``) into a temporary ``CODEX_HOME``, the token in ``AMUX_TOKEN``; a plain ``codex exec`` (tool
    calls pre-approved with ``-c``, as Codex's exec requires) gets the Hub's stored fact for the fake model's
    ``memory_search`` and ``memory_get``; no ``amux mcp`` runs."""
    h, url = http_hub_process
    seed_fact(h)
    r = h.cli("hub", "connect", "codex", "--principal", ME, "--url", url, "--json")
    assert r.returncode == 0, r.stderr
    env = agent_env(agents, h, tmp_path / "home", AMUX_TOKEN=r.json["token"])
    work = tmp_path / "work"
    work.mkdir()
    (command,) = r.json["commands"]
    added = subprocess.run(command.replace("codex ", f"{agents / 'codex'} ", 1), shell=True, env=env, cwd=work,
                           capture_output=True, text=True, timeout=120)
    assert added.returncode == 0, added.stderr
    config = (tmp_path / "home" / ".codex" / "config.toml").read_text()
    assert url in config and "AMUX_TOKEN" in config and r.json["token"] not in config, config
    script_lookup(fake_model)
    run = run_watched([str(agents / "codex"), "exec", "--skip-git-repo-check", "--ephemeral",
                       "-c", 'mcp_servers.amux.default_tools_approval_mode="approve"',
                       *codex_provider(fake_model), "How is quokka built?"], env, work)
    seen, err = run.seen, run.err
    assert run.returncode == 0, err[-3000:]
    assert not [c for c in seen if is_amux_mcp(c)], "no amux mcp process"
    turns = fake_model.turns("/v1/responses")
    assert len(turns) == 3, err[-2000:]
    assert {"mcp__amux__memory_search", "mcp__amux__memory_get"} <= set(responses_tool_names(turns[0]))
    assert FACT in json.dumps(responses_tool_outputs(turns[2])), json.dumps(responses_tool_outputs(turns[2]))[:2000]


def test_the_http_plan_refuses_what_it_cannot_hand_over_safely() -> None:
    """Pure planning: only plain-HTTP loopback URLs qualify; Claude over HTTP needs a run directory for its 0600
    file, Pi and ``--as-user`` never get an HTTP attachment, and the spec's server data never holds the token."""
    from amux_memory.launch import plan
    from amux_memory.launch.attach import HttpMcp, loopback_http_url
    from amux_memory.launch.errors import LaunchError
    from amux_memory.launch.spec import RunAs

    assert loopback_http_url("http://127.0.0.1:8765/mcp") and loopback_http_url("http://[::1]:1/mcp")
    assert not loopback_http_url("https://127.0.0.1:8765/mcp") and not loopback_http_url("http://0.0.0.0:1/mcp")
    assert not loopback_http_url("http://example.org:1/mcp") and not loopback_http_url("http://127.0.0.1:x/mcp")
    secret = "amux_0123456789ab_" + "s" * 43
    http = HttpMcp("http://127.0.0.1:9/mcp", secret, "0123456789ab", "global")
    with pytest.raises(LaunchError, match="run directory"):
        plan("claude", ["-p", "hi"], binding="global", hub="/h.sock", http=http)
    for agent, run_as in (("pi", None), ("codex", RunAs(uid=1, gid=1, home="/tmp/x"))):
        with pytest.raises(LaunchError, match="HTTP attachment"):
            plan(agent, [], binding="global", hub="/h.sock", http=http, run_dir="/tmp/r", run_as=run_as)
    spec = plan("claude", ["-p", "hi"], binding="global", hub="/h.sock", http=http, run_dir="/tmp/r")
    assert secret not in json.dumps(spec.mcp_servers) and secret not in " ".join(spec.argv)
    assert secret in spec.files[0].content and spec.files[0].mode == 0o600 and spec.token_id == "0123456789ab"
    assert spec.cleanup == ["/tmp/r/agent-config/memory"]
    spec = plan("codex", ["exec", "hi"], binding="global", hub="/h.sock", http=http)
    assert secret not in " ".join(spec.argv) and spec.env_set["AMUX_MCP_BEARER"] == secret and spec.files == []
