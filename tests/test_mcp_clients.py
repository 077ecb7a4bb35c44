"""``amux mcp`` driven by real MCP clients installed from npm: the MCP Inspector CLI, Claude Code, Codex.

The clients come from ``tests/clients/install.sh`` (pinned versions, installed
into ``tests/clients/.install`` or ``$AMUX_CLIENTS_DIR``).  Outside CI these
tests run the (idempotent) install script themselves and skip with a message
when Node/npm is missing or the install fails; with ``CI=true`` they fail
instead of skipping.

No client reaches the internet: Claude Code and Codex are pointed at a fake
model endpoint on 127.0.0.1 (a stdlib HTTP server started here) that records
every request and, for Claude Code, answers with one call of
``mcp__amux__memory_search`` and then plain text, so the whole path
agent → ``amux mcp`` → Hub runs and can be checked from both ends.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amux_memory.hub.mcp.tools import TOOL_NAMES
from amux_memory.protocol.agent_protocol import render
from tests.agent_clients import client_env
from tests.conftest import HubProcess, amux_argv
from tests.fakemodel import FakeModel, ToolCall, anthropic_tool_results, codex_provider
from tests.fakemodel import strings as _strings
from tests.helpers import seeded

pytestmark = pytest.mark.slow  # the real npm-installed agent clients

FULL_NAMES = sorted(f"mcp__amux__{name}" for name in TOOL_NAMES)
ENTRY = "# Preferences\n- Indent with tabs.\n- Answer in English.\n"


def amux_command() -> tuple[str, list[str]]:
    argv = amux_argv()
    return argv[0], [*argv[1:], "mcp"]


# -- a fake model endpoint ------------------------------------------------------------------------------


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    """The fake model: asks for one memory search (Claude Code's turn), then says 'done'."""
    with FakeModel.running([ToolCall("mcp__amux__memory_search", {"query": "tabs"})]) as server:
        yield server


# -- MCP Inspector ----------------------------------------------------------------------------------------


def _inspector(bin_dir: Path, hub: HubProcess, *method: str) -> dict[str, Any]:
    command, args = amux_command()
    proc = subprocess.run(
        [str(bin_dir / "mcp-inspector"), "--cli", "-e", f"AMUX_HOME={hub.home}", command, *args, *method],
        capture_output=True, text=True, env=client_env(), timeout=120, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_inspector_lists_the_tools_and_calls_memory_search(bin_dir: Path, hub: HubProcess,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    seeded(hub, ENTRY)
    start = time.perf_counter()
    listing = _inspector(bin_dir, hub, "--method", "tools/list")
    elapsed = time.perf_counter() - start
    with capsys.disabled():
        print(f"\n[mcp-inspector] process start -> tools/list printed: {elapsed:.3f} s")
    tools = {t["name"]: t for t in listing["tools"]}
    assert sorted(tools) == sorted(TOOL_NAMES)
    assert tools["memory_search"]["annotations"]["readOnlyHint"] is True
    assert tools["memory_forget"]["annotations"]["destructiveHint"] is True

    result = _inspector(bin_dir, hub, "--method", "tools/call", "--tool-name", "memory_search",
                        "--tool-arg", "query=tabs")
    assert result.get("isError") is not True, result  # the Inspector exits 0 even for tool errors
    assert [m["snippet"] for m in result["structuredContent"]["matches"]] == ["- Indent with tabs."], result
    match = result["structuredContent"]["matches"][0]
    assert (match["path"], match["line"], match["snippet"]) == ("MEMORY.md", 2, "- Indent with tabs.")
    assert "MEMORY.md line 2" in result["content"][0]["text"]

    conflict = _inspector(bin_dir, hub, "--method", "tools/call", "--tool-name", "memory_upsert",
                          "--tool-arg", "path=MEMORY.md", "--tool-arg", "content=x",
                          "--tool-arg", "expected_revision=absent")
    assert conflict["isError"] is True
    assert conflict["structuredContent"]["error"]["code"] == "conflict"
    assert conflict["structuredContent"]["error"]["data"]["observed_revision"] == \
        match["revision"]


# -- Claude Code ------------------------------------------------------------------------------------------


def _claude_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "claude-home"
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    return client_env(HOME=str(home), CLAUDE_CONFIG_DIR=str(home / ".claude"),
                      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1", **extra)


def test_claude_code_adds_the_server_with_one_command_and_connects(bin_dir: Path, hub: HubProcess,
                                                                   tmp_path: Path) -> None:
    env = _claude_env(tmp_path)
    command, args = amux_command()
    work = tmp_path / "work"
    work.mkdir()
    added = subprocess.run([str(bin_dir / "claude"), "mcp", "add", "-s", "user", "amux", "-e",
                            f"AMUX_HOME={hub.home}", "--", command, *args],
                           capture_output=True, text=True, env=env, cwd=work, timeout=120, stdin=subprocess.DEVNULL)
    assert added.returncode == 0, added.stdout + added.stderr
    listed = subprocess.run([str(bin_dir / "claude"), "mcp", "list"], capture_output=True, text=True, env=env,
                            cwd=work, timeout=120, stdin=subprocess.DEVNULL)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith("amux:"))
    assert "Connected" in line and "Failed" not in line, listed.stdout


def test_claude_code_sees_the_tools_and_instructions_and_calls_memory(bin_dir: Path, hub: HubProcess,
                                                                      tmp_path: Path, fake_model: FakeModel) -> None:
    seeded(hub, ENTRY)
    command, args = amux_command()
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"amux": {"command": command, "args": args,
                                                           "env": {"AMUX_HOME": str(hub.home)}}}}))
    work = tmp_path / "work"
    work.mkdir()
    env = _claude_env(tmp_path, ANTHROPIC_BASE_URL=fake_model.url, ANTHROPIC_API_KEY="dummy-key-for-a-fake-endpoint")
    proc = subprocess.run(
        [str(bin_dir / "claude"), "-p", "What do I prefer for indentation?", "--mcp-config", str(config),
         "--strict-mcp-config", "--allowedTools", "mcp__amux__memory_search", "--output-format", "stream-json",
         "--verbose", "--no-session-persistence"],
        capture_output=True, text=True, env=env, cwd=work, timeout=180, stdin=subprocess.DEVNULL,
    )
    messages = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    init = next((m for m in messages if m.get("type") == "system" and m.get("subtype") == "init"), None)
    assert init is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert {"name": "amux", "status": "connected"} in init["mcp_servers"], init["mcp_servers"]
    assert sorted(t for t in init["tools"] if t.startswith("mcp__amux__")) == FULL_NAMES

    # What reached the model: the five tools, the protocol as server instructions, then the Hub's answer.
    bodies = [body for path, body in fake_model.requests if path.startswith("/v1/messages") and body]
    assert bodies, fake_model.requests
    first = bodies[0]
    assert sorted(t["name"] for t in first["tools"] if t["name"].startswith("mcp__amux__")) == FULL_NAMES
    protocol = render("mcp").strip()
    assert any(protocol in s for s in _strings(first)), "the MCP instructions reach the model"
    results = [r for body in bodies for r in anthropic_tool_results(body)]
    assert results, "Claude Code called memory_search and returned its result to the model"
    assert "- Indent with tabs." in json.dumps(results[0]) and "MEMORY.md" in json.dumps(results[0])
    final = messages[-1]
    assert final.get("type") == "result" and final.get("result") == "done", final
    assert proc.returncode == 0, proc.stderr[-3000:]


# -- Codex ------------------------------------------------------------------------------------------------


class JsonLines:
    """A JSONL peer over a subprocess's stdin/stdout, with a timeout on every read."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, stderr: Path) -> None:
        self._err = open(stderr, "w")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                     env=env, cwd=cwd, text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def reply(self, rid: int, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if line is None:
                raise AssertionError(f"the peer exited ({self.proc.poll()}) before answering request {rid}")
            message = json.loads(line)
            if message.get("id") == rid and "method" not in message:
                return dict(message)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._err.close()


def test_codex_adds_the_server_with_one_command_and_its_app_server_lists_and_calls_the_tools(
        bin_dir: Path, hub: HubProcess, tmp_path: Path, fake_model: FakeModel) -> None:
    seeded(hub, ENTRY)
    home = tmp_path / "codex-home"
    (home / ".codex").mkdir(parents=True)
    env = client_env(HOME=str(home), CODEX_HOME=str(home / ".codex"))
    work = tmp_path / "work"
    work.mkdir()
    command, args = amux_command()
    added = subprocess.run([str(bin_dir / "codex"), "mcp", "add", "amux", "--env", f"AMUX_HOME={hub.home}", "--",
                            command, *args], capture_output=True, text=True, env=env, cwd=work, timeout=120,
                           stdin=subprocess.DEVNULL)
    assert added.returncode == 0, added.stdout + added.stderr
    assert "[mcp_servers.amux]" in (home / ".codex" / "config.toml").read_text()

    # Any model traffic goes to the fake endpoint, never out.
    peer = JsonLines([str(bin_dir / "codex"), "app-server", *codex_provider(fake_model)], env, work,
                     tmp_path / "codex.err")
    try:
        peer.send({"id": 1, "method": "initialize",
                   "params": {"clientInfo": {"name": "amux-tests", "version": "1"},
                              "capabilities": {"experimentalApi": True}}})
        assert "result" in peer.reply(1), (tmp_path / "codex.err").read_text()[-3000:]
        peer.send({"method": "initialized"})
        peer.send({"id": 2, "method": "mcpServerStatus/list", "params": {}})
        status = peer.reply(2)
        servers = {s["name"]: s for s in status["result"]["data"]}
        assert "amux" in servers, status
        amux = servers["amux"]
        assert amux["serverInfo"]["name"] == "amux"
        assert sorted(amux["tools"]) == sorted(TOOL_NAMES)
        assert all(len(f"mcp__amux__{name}") <= 64 for name in amux["tools"])
        assert amux["tools"]["memory_get"]["annotations"]["readOnlyHint"] is True

        peer.send({"id": 3, "method": "thread/start",
                   "params": {"cwd": str(work), "approvalPolicy": "never", "sandbox": "read-only"}})
        thread_id = peer.reply(3)["result"]["thread"]["id"]
        peer.send({"id": 4, "method": "mcpServer/tool/call",
                   "params": {"threadId": thread_id, "server": "amux", "tool": "memory_search",
                              "arguments": {"query": "tabs"}}})
        called = peer.reply(4)["result"]
        assert called.get("isError") is not True, called
        assert called["structuredContent"]["matches"][0]["snippet"] == "- Indent with tabs."
    finally:
        peer.close()
