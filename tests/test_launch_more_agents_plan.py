"""The launch plans, ``hub connect`` set-ups and doctor checks for OpenCode, Copilot CLI, Qwen Code and Gemini CLI,
without running them (the real binaries: ``tests/test_launch_more_agents.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amux_memory.launch import plan
from amux_memory.launch.attach import TOKEN_ENV, HttpMcp
from amux_memory.launch.context import AgentContext
from amux_memory.launch.errors import LaunchError
from amux_memory.protocol.agent_protocol import render
from amux_memory.tools.cli.connect import plan as connect_plan
from amux_memory.tools.cli.doctor_agents import check_agent

SECRET = "amux_0123456789ab_" + "s" * 43
HTTP = HttpMcp("http://127.0.0.1:9/mcp", SECRET, "0123456789ab", "global")


@pytest.mark.parametrize("agent", ["opencode", "copilot", "qwen"])
@pytest.mark.parametrize("http", [None, HTTP])
def test_the_plan_hands_over_server_protocol_and_token_without_the_persons_files(agent: str,
                                                                                http: HttpMcp | None) -> None:
    spec = plan(agent, ["hi"], binding="global", hub="/h.sock", http=http, run_dir="/tmp/r", session_id="S1")
    assert spec.mcp_transport == ("http" if http else "relay")
    assert all(f.path.startswith("/tmp/r/agent-config/memory/") and f.mode == 0o600 for f in spec.files)
    assert spec.cleanup == ["/tmp/r/agent-config/memory"]
    text = json.dumps(spec.as_dict())
    assert SECRET not in json.dumps([f.content for f in spec.files]) + " ".join(spec.argv)
    assert (spec.env_set.get(TOKEN_ENV) == SECRET) if http else TOKEN_ENV not in spec.env_set
    assert text.count(json.dumps(render("mcp"))[1:-1]) >= 1 and spec.system_prompt_append is not None
    assert spec.argv[-1] == "hi", "the user's arguments come last, unchanged"


def test_each_agent_refuses_what_would_undo_the_launch() -> None:
    def refused(agent: str, args: list[str], environ: dict[str, str] | None = None) -> None:
        with pytest.raises(LaunchError):
            plan(agent, args, binding="global", hub="/h.sock", run_dir="/tmp/r", environ=environ or {})

    refused("copilot", ["--no-custom-instructions", "-p", "hi"])
    refused("copilot", ["--enable-memory", "-p", "hi"])
    refused("copilot", ["--disable-mcp-server", "amux"])
    refused("copilot", ["--additional-mcp-config", '{"mcpServers": {"amux": {"type": "http", "url": "x"}}}'])
    refused("qwen", ["--mcp-config", '{"mcpServers": {"amux": {"httpUrl": "x"}}}'])
    refused("qwen", ["--allowed-mcp-server-names", "other"])
    refused("opencode", ["run", "hi"], {"OPENCODE_CONFIG_CONTENT": '{"mcp": {"amux": {"type": "local"}}}'})
    with pytest.raises(LaunchError, match="run directory"):
        plan("qwen", ["hi"], binding="global", hub="/h.sock")


def test_the_users_own_values_are_merged_not_replaced() -> None:
    env = {"OPENCODE_CONFIG_CONTENT": '{"instructions": ["mine.md"], "theme": "x"}',
           "OPENCODE_PERMISSION": '{"bash": "ask"}', "COPILOT_CUSTOM_INSTRUCTIONS_DIRS": "/a,/b"}
    oc = plan("opencode", [], binding="global", hub="/h.sock", run_dir="/tmp/r", environ=env)
    content = json.loads(oc.env_set["OPENCODE_CONFIG_CONTENT"])
    assert content["instructions"] == ["mine.md", "/tmp/r/agent-config/memory/amux-protocol.md"]
    assert content["theme"] == "x"
    assert json.loads(oc.env_set["OPENCODE_PERMISSION"]) == {"bash": "ask", "amux_*": "allow"}
    cp = plan("copilot", [], binding="global", hub="/h.sock", run_dir="/tmp/r", environ=env,
              context=AgentContext(agent_settings={"memory": True}, agent_settings_path="/h/.copilot/settings.json"))
    assert cp.env_set["COPILOT_CUSTOM_INSTRUCTIONS_DIRS"] == "/tmp/r/agent-config/memory/instructions,/a,/b"
    assert any('"memory": false' in line for line in cp.notices), "interactive: the setting still recalls"
    qw = plan("qwen", ["--append-system-prompt", "MINE", "hi"], binding="global", hub="/h.sock", run_dir="/tmp/r",
              context=AgentContext(agent_settings={"mcpServers": {"corp": {"httpUrl": "y"}}, "tools": {
                  "exclude": ["shell"]}}))
    settings = json.loads(qw.files[0].content)
    assert set(settings["mcpServers"]) == {"corp", "amux"} and settings["tools"]["exclude"] == ["shell", "tool_search"]
    assert settings["memory"]["enableManagedAutoMemory"] is False
    assert qw.argv[1] == "--append-system-prompt" and qw.argv[2].count("MINE") == 1 and qw.argv[3:] == ["hi"]


@pytest.mark.parametrize("agent", ["opencode", "copilot", "qwen", "gemini"])
def test_connect_prints_a_file_reading_the_token_from_the_variable(agent: str) -> None:
    steps = connect_plan(agent, "https://hub.example:8765/mcp", SECRET, '"$HOME/.amux/hub-ca.pem"', "")
    assert steps["env"] == [f"export AMUX_TOKEN={SECRET}", 'export NODE_EXTRA_CA_CERTS="$HOME/.amux/hub-ca.pem"']
    text = json.dumps(steps["files"])
    assert SECRET not in text and "AMUX_TOKEN" in text and "https://hub.example:8765/mcp" in text
    notes = " ".join(steps["notes"])
    assert ("cannot be switched off" in notes) == (agent == "gemini")


def test_doctor_reads_the_agents_files_and_warns_about_tokens_and_their_own_memory(tmp_path: Path) -> None:
    qwen = tmp_path / "settings.json"
    qwen.write_text(json.dumps({"mcpServers": {"amux": {"httpUrl": "u", "headers": {"Authorization":
                                                                                    f"Bearer {SECRET}"}}}}))
    before = qwen.read_bytes()
    found = {c.name: c for c in check_agent("qwen", {"mcp": qwen})}
    assert found["qwen_mcp"].status == "warn" and "token written" in found["qwen_mcp"].summary
    assert found["qwen_memory"].status == "warn"
    assert qwen.read_bytes() == before, "read, never written"
    qwen.write_text(json.dumps({"mcpServers": {"amux": {"httpUrl": "u", "headers": {"Authorization":
                                                                                    "Bearer $AMUX_TOKEN"}}},
                                "memory": {"enableManagedAutoMemory": False}}))
    assert [c.status for c in check_agent("qwen", {"mcp": qwen})] == ["ok", "ok"]
    gemini = tmp_path / "gemini.json"
    gemini.write_text(json.dumps({"mcpServers": {"amux": {"httpUrl": "u"}}}))
    assert [c.status for c in check_agent("gemini", {"mcp": gemini})] == ["ok", "warn"]
    assert check_agent("opencode", {"mcp": tmp_path / "none.json"}, which=lambda _: None) == []


@pytest.mark.parametrize("agent", ["opencode", "copilot", "qwen"])
def test_without_memory_or_program_they_behave_as_the_other_agents(agent: str) -> None:
    from amux_memory.launch.runner import find_executable

    spec = plan(agent, ["hi"], binding=None, hub="/h.sock", off_reason="the Hub is unreachable", run_dir="/tmp/r")
    assert spec.argv == [agent, "hi"] and spec.files == [] and not spec.memory
    assert not any(k.startswith(("OPENCODE", "COPILOT", "QWEN")) for k in spec.env_set)
    assert "starts without amux memory" in spec.notices[0]
    with pytest.raises(LaunchError) as err:
        find_executable(agent, {"PATH": "/nonexistent"})
    assert "npm install -g" in str(err.value.next_step) and f"AMUX_LAUNCH_{agent.upper()}" in str(err.value.next_step)
