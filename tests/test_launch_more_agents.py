"""``amux launch`` and ``amux hub connect`` with the real OpenCode, Copilot CLI, Qwen Code and Gemini CLI, offline.

Each agent comes from ``tests/clients/install.sh`` (pinned npm packages) and
talks to :class:`tests.fakemodel.FakeModel` (OpenAI Chat Completions; the
Gemini API for Gemini CLI) on 127.0.0.1; the Hub serves MCP over HTTP on
loopback, so a launch attaches each agent with a delegated token.  What the
agent sent to the model is the evidence:

* through ``amux launch``: the first agent turn carries the protocol exactly
  once (OpenCode: an ``instructions`` file in the system prompt; Copilot CLI: a
  custom-instructions file; Qwen Code: ``--append-system-prompt``) and the five
  tools; the model's ``memory_search`` comes back with the Hub's stored fact,
  its ``memory_upsert`` is in history with the launch's session; the agent's
  own memory is absent (Copilot's ``session_store_sql``, Qwen's auto memory
  section); the person's config files are byte-identical; the token is
  revoked after the run;
* the control, the same agent run plainly with the set-up ``amux hub connect``
  prints pasted into its home: what the launch removed (Qwen's auto memory and
  its tool search hiding the amux tools, Copilot's ``session_store_sql``; for
  Copilot and Qwen no protocol at all, since both drop MCP server instructions).

Without Node/npm these tests skip with a message, except with ``CI=true``.
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amux_memory.protocol.agent_protocol import render
from tests.agent_clients import CLIENTS, client_env, unavailable
from tests.conftest import HubProcess, amux_argv
from tests.fakemodel import (
    FakeModel,
    Text,
    ToolCall,
    chat_system,
    chat_tool_names,
    chat_tool_results,
    chat_turns,
    gemini_tool_names,
    gemini_tool_results,
    gemini_turns,
    strings,
)
from tests.helpers import mcp_http_hub

pytestmark = pytest.mark.slow  # the real npm-installed agent clients

ME = getpass.getuser()
PROTOCOL = render("mcp").strip()
FACT_PATH = "notes/build.md"
FACT = "The build of project quokka runs with morefactword enabled; never without it."
TOOLS = ("memory_search", "memory_get", "memory_upsert", "memory_forget", "result_continue")
NAMES = {"opencode": "amux_{}", "copilot": "amux-{}", "qwen": "mcp__amux__{}", "gemini": "mcp_amux_{}"}
"""How each agent names an MCP tool of the server ``amux`` to the model."""
QWEN_AUTO_MEMORY = "# auto memory"
COPILOT_MEMORY_TOOL = "session_store_sql"


@pytest.fixture(scope="session")
def more_agents(bin_dir: Path) -> Path:
    """``node_modules/.bin`` with opencode, copilot, qwen and gemini (installed by ``bin_dir``)."""
    for tool in ("opencode", "copilot", "qwen", "gemini"):
        if not os.access(bin_dir / tool, os.X_OK):
            unavailable(f"{tool} is not installed in {bin_dir}; run 'bash tests/clients/install.sh' first")
    return bin_dir


@pytest.fixture
def http_hub(tmp_path: Path) -> Iterator[tuple[HubProcess, str]]:
    """A Hub serving MCP on a loopback port, this user registered, the fact stored: ``(hub, url)``."""
    (tmp_path / "hub").mkdir()
    h, url = mcp_http_hub(tmp_path / "hub")
    for args in (("hub", "principal", "add", ME),):
        r = h.cli(*args)
        assert r.returncode == 0, r.stderr
    r = h.cli("memory", "upsert", FACT_PATH, "--expected-revision", "absent", input=f"# Build\n\n{FACT}\n".encode())
    assert r.returncode == 0, r.stderr
    yield h, url
    h.stop()


def copies(body: Any) -> int:
    """How often the protocol appears in a request, whitespace aside (OpenCode indents the server's instructions)."""
    protocol = " ".join(PROTOCOL.split())
    return sum(" ".join(s.split()).count(protocol) for s in strings(body))


def name(agent: str, tool: str) -> str:
    return NAMES[agent].format(tool)


def script(model: FakeModel, agent: str, path: str) -> None:
    """The fake model searches for the fact, writes ``path``, then ends its turn."""
    model.script(ToolCall(name(agent, "memory_search"), {"query": "morefactword"}),
                 ToolCall(name(agent, "memory_upsert"), {"path": path, "content": "# Learned\n",
                                                         "expected_revision": "absent"}), Text("finished"))


# -- each agent's offline set-up: a throwaway home, the fake model, the person's own config files ---------------


def agent_env(agent: str, bins: Path, home: Path, model: FakeModel, **extra: str) -> dict[str, str]:
    """The agent's environment: an isolated HOME, the fake model, nothing of the developer's own settings."""
    env = client_env(HOME=str(home), **{f"AMUX_LAUNCH_{agent.upper()}": str(bins / agent)}, **extra)
    for key in [k for k in env if k.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
                or k.startswith(("COPILOT", "OPENCODE", "QWEN", "GEMINI", "GOOGLE"))]:
        del env[key]  # Qwen Code ignores NO_PROXY: a proxy would swallow the loopback model
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d and not os.access(os.path.join(d, "amux"), os.X_OK))
    if agent == "opencode":
        env.update(OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_AUTOUPDATE="1")
    elif agent == "copilot":
        # The unpacked package (235 MB) is shared by the tests, like the npm folder: it is no person's config.
        env.update(COPILOT_OFFLINE="true", COPILOT_PROVIDER_BASE_URL=f"{model.url}/v1", COPILOT_PROVIDER_TYPE="openai",
                   COPILOT_MODEL="fake-model", COPILOT_AUTO_UPDATE="false",
                   COPILOT_PKG_CACHE_HOME=str(CLIENTS / ".install" / "copilot-cache"))
    elif agent == "qwen":
        env.update(OPENAI_BASE_URL=f"{model.url}/v1", OPENAI_API_KEY="dummy-fake-key", OPENAI_MODEL="fake-model")
    else:
        env.update(GEMINI_API_KEY="dummy-fake-key", GOOGLE_GEMINI_BASE_URL=model.url)
    env.update(extra)
    return env


DEAD_URL = "http://127.0.0.1:9/mcp"
"""Where the person's own ``amux`` registration points in the launch tests: the launch's server must replace it."""


def own_files(agent: str, home: Path, model: FakeModel, url: str = "") -> dict[str, Path]:
    """The person's own config files for ``agent`` (the fake model's provider where the agent needs one) and, with
    ``url``, their own ``amux`` registration there, with the token from ``$AMUX_TOKEN`` and nothing else changed
    (the agent's own memory as it comes)."""
    if agent == "opencode":
        provider = {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "fake",
                             "options": {"baseURL": f"{model.url}/v1", "apiKey": "x"},
                             "models": {"fake-model": {"name": "fake", "tool_call": True}}}}
        config: dict[str, Any] = {"$schema": "https://opencode.ai/config.json", "provider": provider,
                                  "model": "fake/fake-model", "small_model": "fake/fake-model"}
        if url:
            config["mcp"] = {"amux": {"type": "remote", "url": url,
                                      "headers": {"Authorization": "Bearer {env:AMUX_TOKEN}"}}}
        files = {home / ".config/opencode/opencode.json": config}
    elif agent == "copilot":
        # (Copilot rewrites its own state file ~/.copilot/config.json on every run: not the person's settings.)
        files = {home / ".copilot/settings.json": {"memory": True}}
        if url:
            files[home / ".copilot/mcp-config.json"] = {"mcpServers": {"amux": {
                "type": "http", "url": url, "headers": {"Authorization": "Bearer ${AMUX_TOKEN}"}, "tools": ["*"]}}}
    elif agent == "qwen":
        settings: dict[str, Any] = {"$version": 4, "security": {"auth": {"selectedType": "openai"}},
                                    "model": {"name": "fake-model"}}
        if url:
            settings["mcpServers"] = {"amux": {"httpUrl": url, "headers": {"Authorization": "Bearer $AMUX_TOKEN"},
                                               "trust": True}}
        files = {home / ".qwen/settings.json": settings}
    else:
        files = {home / ".gemini/settings.json": {"security": {"auth": {"selectedType": "gemini-api-key"}}}}
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content, indent=2) + "\n")
    return {str(p.relative_to(home)): p for p in files}


def paste(path: Path, content: dict[str, Any]) -> None:
    """Merge a printed JSON object into ``path``, as a person pastes it into the file they have."""
    current = json.loads(path.read_text()) if path.exists() else {}
    for key, value in content.items():
        current[key] = {**current[key], **value} if isinstance(value, dict) and isinstance(current.get(key),
                                                                                             dict) else value
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2) + "\n")


def connected(h: HubProcess, agent: str, url: str, home: Path) -> str:
    """Paste what ``amux hub connect AGENT`` prints into ``home``; the token it printed."""
    r = h.cli("hub", "connect", agent, "--principal", ME, "--url", url, "--json")
    assert r.returncode == 0, r.stderr
    doc = r.json
    assert doc["env"] == [f"export AMUX_TOKEN={doc['token']}"]
    for entry in doc["files"]:
        assert entry["path"].startswith("~/")
        paste(home / entry["path"][2:], entry["content"])
        assert doc["token"] not in json.dumps(entry["content"]), "the token stays in the variable"
    return str(doc["token"])


def argv(agent: str, prompt: str) -> list[str]:
    """The agent's own non-interactive command line (the prompt first: Qwen's list options swallow one after)."""
    return {"opencode": ["opencode", "run", "--format", "json", prompt], "copilot": ["copilot", "-p", prompt],
            "qwen": ["qwen", prompt], "gemini": ["gemini", "-p", prompt, "-m", "gemini-2.5-flash",
                                                  "--skip-trust"]}[agent]


def run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=240,
                          stdin=subprocess.DEVNULL)


def explain(proc: subprocess.CompletedProcess[str], model: FakeModel) -> str:
    return (f"exit {proc.returncode}\nstdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-3000:]}\n"
            f"model requests: {[(r.method, r.path) for r in model.requests]}")


def snapshot(files: dict[str, Path]) -> dict[str, bytes]:
    return {rel: path.read_bytes() for rel, path in files.items()}


def tokens(h: HubProcess) -> list[dict[str, Any]]:
    r = h.cli("hub", "token", "list")
    assert r.returncode == 0, r.stderr
    doc = r.json
    return list(doc["tokens"] if isinstance(doc, dict) else doc)


# -- amux launch ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", ["opencode", "copilot", "qwen"])
def test_launch_gives_the_protocol_once_the_five_tools_and_its_own_memory_off(
        more_agents: Path, http_hub: tuple[HubProcess, str], tmp_path: Path, fake_model: FakeModel,
        agent: str) -> None:
    h, url = http_hub
    home = tmp_path / "home"
    files = own_files(agent, home, fake_model, DEAD_URL)  # a registration of their own, replaced for the run
    before = snapshot(files)
    env = agent_env(agent, more_agents, home, fake_model, AMUX_HOME=str(h.home))
    session = str(uuid.uuid4())
    script(fake_model, agent, "notes/launched.md")

    proc = run([*amux_argv(), "launch", "--session-id", session, *argv(agent, "How is quokka built?")], env,
               tmp_path / "work")
    assert proc.returncode == 0, explain(proc, fake_model)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("amux:")]
    assert lines and "HTTP listener" in lines[0], proc.stderr[-2000:]

    turns = chat_turns(fake_model)
    assert len(turns) == 3, explain(proc, fake_model)
    first = turns[0]
    assert copies(first) == 1, "the protocol once in the whole request"
    assert chat_system(first).count(PROTOCOL) == 1, "in the system prompt"
    offered = chat_tool_names(first)
    assert {name(agent, t) for t in TOOLS} <= set(offered), offered
    assert FACT in "\n".join(chat_tool_results(turns[1])), chat_tool_results(turns[1])
    (version,) = h.cli("memory", "history", "notes/launched.md").json["versions"]
    assert version["actor"]["session"] == session and version["actor"]["client"] == "amux-mcp"
    assert COPILOT_MEMORY_TOOL not in offered and "store_memory" not in offered
    assert QWEN_AUTO_MEMORY not in chat_system(first).lower()
    assert snapshot(files) == before, "the person's config files are untouched"
    assert [t["state"] for t in tokens(h) if t["binding"] == "global"] == ["revoked"], "the launch's token is revoked"
    assert not list((tmp_path / "work").iterdir()), "nothing written where the agent worked"


@pytest.mark.parametrize("agent", ["opencode", "copilot", "qwen"])
def test_control_run_without_the_launch_shows_what_the_launch_removes(
        more_agents: Path, http_hub: tuple[HubProcess, str], tmp_path: Path, fake_model: FakeModel,
        agent: str) -> None:
    """A plain run with the person's own ``amux`` registration (the agent's own memory as it comes): the tools
    reach the Hub; the protocol and the agent's own memory are as the agent has them (Copilot's
    ``session_store_sql`` offered, Qwen's auto memory in its prompt and the amux tools behind its tool search;
    Copilot and Qwen drop the server's instructions, OpenCode passes them on)."""
    h, url = http_hub
    home = tmp_path / "home"
    own_files(agent, home, fake_model, url)
    r = h.cli("hub", "token", "issue", ME, "--ttl", "600")
    assert r.returncode == 0, r.stderr
    env = agent_env(agent, more_agents, home, fake_model, AMUX_TOKEN=r.json["token"])
    fake_model.script(ToolCall(name(agent, "memory_search"), {"query": "morefactword"}), Text("finished"))
    extra = ["--allow-tool=amux"] if agent == "copilot" else []
    proc = run([str(more_agents / agent), *argv(agent, "How is quokka built?")[1:], *extra], env, tmp_path / "work")
    assert proc.returncode == 0, explain(proc, fake_model)
    turns = chat_turns(fake_model)
    assert len(turns) >= 2, explain(proc, fake_model)
    assert FACT in "\n".join(chat_tool_results(turns[1])), "a tool call reaches the Hub"
    first, offered = turns[0], chat_tool_names(turns[0])
    protocol_copies = copies(first)
    if agent == "opencode":
        assert protocol_copies == 1 and "<mcp_instructions>" in chat_system(first), "OpenCode passes them on"
        assert {name(agent, t) for t in TOOLS} <= set(offered)
    elif agent == "copilot":
        assert protocol_copies == 0, "Copilot CLI drops the server's instructions"
        assert COPILOT_MEMORY_TOOL in offered, "Copilot's own search over past sessions"
    else:
        assert protocol_copies == 0, "Qwen Code drops the server's instructions"
        assert QWEN_AUTO_MEMORY in chat_system(first).lower(), "Qwen's own auto memory"
        assert name(agent, "memory_search") not in offered and "tool_search" in offered, "behind its tool search"


# -- amux hub connect -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", ["opencode", "copilot", "qwen", "gemini"])
def test_the_connect_setup_pasted_as_printed_connects_the_real_agent(
        more_agents: Path, http_hub: tuple[HubProcess, str], tmp_path: Path, fake_model: FakeModel,
        agent: str) -> None:
    """What ``amux hub connect AGENT`` prints, pasted into a throwaway home: the real agent's tool call reaches the
    Hub; Qwen's auto memory is off by the printed switch; Gemini CLI keeps its own memory, as the output says."""
    h, url = http_hub
    home = tmp_path / "home"
    own_files(agent, home, fake_model)
    token = connected(h, agent, url, home)
    env = agent_env(agent, more_agents, home, fake_model, AMUX_TOKEN=token)
    fake_model.script(ToolCall(name(agent, "memory_search"), {"query": "morefactword"}), Text("finished"))
    extra = ["--allow-tool=amux"] if agent == "copilot" else []
    proc = run([str(more_agents / agent), *argv(agent, "How is quokka built?")[1:], *extra], env, tmp_path / "work")
    assert proc.returncode == 0, explain(proc, fake_model)
    if agent == "gemini":
        turns = gemini_turns(fake_model)
        assert len(turns) >= 2, explain(proc, fake_model)
        assert {name(agent, t) for t in TOOLS} <= set(gemini_tool_names(turns[0]))
        assert FACT in json.dumps(gemini_tool_results(turns[1])), "a tool call reaches the Hub"
        assert "GEMINI.md" in json.dumps(turns[0]), "its own memory instructions stay in the prompt"
        printed = h.cli("hub", "connect", agent, "--principal", ME, "--url", url).stdout.decode()
        assert "cannot be switched off" in printed, printed
        return
    turns = chat_turns(fake_model)
    assert len(turns) >= 2, explain(proc, fake_model)
    assert FACT in "\n".join(chat_tool_results(turns[1])), "a tool call reaches the Hub"
    if agent == "qwen":
        assert QWEN_AUTO_MEMORY not in chat_system(turns[0]).lower(), "the printed switch turns it off"


@pytest.mark.parametrize("agent", ["opencode", "copilot", "qwen"])
def test_launch_uses_the_amux_mcp_relay_when_the_hub_serves_no_http(
        more_agents: Path, hub: HubProcess, tmp_path: Path, fake_model: FakeModel, agent: str) -> None:
    """No ``hub.mcp_listen``: the agent starts ``amux mcp`` from its launch-local server entry; the search and
    the write reach the Hub, the write with the launch's session."""
    r = hub.cli("memory", "upsert", FACT_PATH, "--expected-revision", "absent", input=f"# Build\n\n{FACT}\n".encode())
    assert r.returncode == 0, r.stderr
    home = tmp_path / "home"
    own_files(agent, home, fake_model)
    env = agent_env(agent, more_agents, home, fake_model, AMUX_HOME=str(hub.home))
    session = str(uuid.uuid4())
    script(fake_model, agent, "notes/relayed.md")
    proc = run([*amux_argv(), "launch", "--session-id", session, *argv(agent, "How is quokka built?")], env,
               tmp_path / "work")
    assert proc.returncode == 0, explain(proc, fake_model)
    assert "(amux mcp)" in proc.stderr, proc.stderr[-2000:]
    turns = chat_turns(fake_model)
    assert len(turns) == 3, explain(proc, fake_model)
    assert copies(turns[0]) == 1
    assert FACT in "\n".join(chat_tool_results(turns[1]))
    (version,) = hub.cli("memory", "history", "notes/relayed.md").json["versions"]
    assert version["actor"]["session"] == session
