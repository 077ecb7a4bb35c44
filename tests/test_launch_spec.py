"""The launch spec as plain data (issue #6 §0, §3–§7): :func:`launch.plan` and its pure helpers.

No processes here: these tests check what a Runtime would get from the Python
API.  The real CLI with a real Hub is ``test_launch_cli.py``; the real agents
are ``test_launch_agents.py``.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from launch import AgentContext, LaunchError, LaunchSpec, RunAs, plan, read_context
from launch.agent_args import merge_instructions, take_codex_override, take_value_option, toml_value
from launch.agents import MEMORY_DIR, codex_user_instructions
from launch.codex_app_server import confirm_memory_off
from protocol.agent_protocol import render

MCP = render("mcp")
CLI = render("cli")
HUB = "/srv/amux/hub.sock"
AMUX = "/opt/amux/bin/amux"


def bound(agent: str, args: list[str] | None = None, **kw: Any) -> LaunchSpec:
    kw.setdefault("environ", {"PATH": "/usr/bin:/bin"})
    return plan(agent, args or [], binding="global", hub=HUB, amux_command=[AMUX], executable=f"/bin/{agent}",
                session_id="s1", **kw)


def after(argv: list[str], flag: str) -> list[str]:
    """Every value that follows ``flag`` in argv."""
    return [argv[i + 1] for i, tok in enumerate(argv[:-1]) if tok == flag]


def codex_overrides(argv: list[str]) -> dict[str, Any]:
    """The ``-c`` overrides in a Codex argv, each value parsed as TOML (as Codex does)."""
    out = {}
    for item in after(argv, "-c"):
        key, _, raw = item.partition("=")
        out[key] = tomllib.loads(f"v = {raw}")["v"]
    return out


# -- Claude Code ---------------------------------------------------------------------------------


def test_claude_merges_append_text_with_the_protocol_once_and_configures_mcp() -> None:
    spec = bound("claude", ["-p", "hello", "--append-system-prompt", "Be terse.", "--model", "x"])
    appends = after(spec.argv, "--append-system-prompt")
    assert appends == ["Be terse.\n\n" + MCP]
    assert spec.system_prompt_append == appends[0]
    assert spec.argv[-4:] == ["-p", "hello", "--model", "x"]  # the user's arguments, in order, after ours
    [config_arg] = [a for a in spec.argv if a.startswith("--mcp-config=")]
    server = json.loads(config_arg.split("=", 1)[1])["mcpServers"]["amux"]
    assert server == {"command": AMUX, "args": ["mcp"], "env": {"AMUX_HUB": HUB, "AMUX_MEMORY_BINDING": "global",
                                                                  "AMUX_MCP_INSTRUCTIONS": "off"}}
    assert spec.env_set["CLAUDE_CODE_DISABLE_AUTO_MEMORY"] == "1"
    assert spec.env_set["AMUX_MEMORY_BINDING"] == "global" and spec.env_set["AMUX_HUB"] == HUB
    assert spec.memory and spec.binding == "global" and spec.files == [] and spec.cleanup == []


@pytest.mark.parametrize("args", [
    ["--append-system-prompt=" + "Mine.\n\n" + MCP],          # already merged (a re-plan): not added twice
    ["--append-system-prompt", "Mine.", "--append-system-prompt=" + MCP],
])
def test_claude_never_duplicates_the_protocol(args: list[str]) -> None:
    spec = bound("claude", args)
    [text] = after(spec.argv, "--append-system-prompt")
    assert text.count(MCP.strip()) == 1 and text.startswith("Mine.")
    assert not any(a.startswith("--append-system-prompt=") for a in spec.argv)


def test_claude_leaves_positional_text_after_double_dash_alone() -> None:
    spec = bound("claude", ["-p", "--", "--append-system-prompt", "literal"])
    assert spec.argv[-3:] == ["--", "--append-system-prompt", "literal"]
    assert after(spec.argv[:-3], "--append-system-prompt") == [MCP]


def test_claude_append_file_is_merged_from_context_or_refused() -> None:
    spec = bound("claude", ["--append-system-prompt-file", "extra.md"], context=AgentContext(files={"extra.md": "From file."}))
    assert after(spec.argv, "--append-system-prompt") == ["From file.\n\n" + MCP]
    assert "--append-system-prompt-file" not in spec.argv
    with pytest.raises(LaunchError, match="append-system-prompt-file"):
        bound("claude", ["--append-system-prompt-file", "extra.md"])


def test_without_binding_the_agent_is_untouched_and_warned() -> None:
    args = ["-p", "hi", "--append-system-prompt", "Mine."]
    for agent in ("claude", "codex", "pi"):
        spec = plan(agent, args, binding=None, hub=HUB, executable=f"/bin/{agent}", session_id="s9",
                    off_reason="Hub unreachable: no socket", environ={"AMUX_MEMORY_BINDING": "global", "PATH": "/bin"})
        assert spec.argv == [f"/bin/{agent}", *args]
        assert spec.env_set == {} and spec.env_unset == ["AMUX_MEMORY_BINDING"]
        assert not spec.memory and spec.binding is None and spec.system_prompt_append is None
        assert len(spec.notices) == 1 and spec.notices[0].startswith("amux: warning: session s9 ")
        assert "Hub unreachable" in spec.notices[0]


# -- Codex -------------------------------------------------------------------------------------------


def test_codex_overrides_come_before_the_subcommand_and_parse_as_toml() -> None:
    spec = bound("codex", ["exec", "--skip-git-repo-check", "do it"], environ={"PATH": "/bin", "AMUX_TOKEN": "amux_x_secret"})
    exec_at = spec.argv.index("exec")
    assert spec.argv[exec_at:] == ["exec", "--skip-git-repo-check", "do it"]
    assert all(spec.argv[i] == "-c" for i in range(1, exec_at, 2))
    overrides = codex_overrides(spec.argv)
    assert overrides["features.memories"] is False
    assert overrides["memories.use_memories"] is False and overrides["memories.generate_memories"] is False
    assert overrides["mcp_servers.amux.command"] == AMUX
    assert overrides["mcp_servers.amux.args"] == ["mcp"]
    assert overrides["mcp_servers.amux.env"] == {"AMUX_HUB": HUB, "AMUX_MEMORY_BINDING": "global",
                                                 "AMUX_MCP_INSTRUCTIONS": "off"}
    assert overrides["mcp_servers.amux.default_tools_approval_mode"] == "approve"
    assert overrides["mcp_servers.amux.env_vars"] == ["AMUX_TOKEN"]  # forwarded by name ...
    assert not any("amux_x_secret" in a for a in spec.argv)       # ... never on the command line
    assert overrides["developer_instructions"] == MCP == spec.developer_instructions
    assert spec.system_prompt_append is None


def test_codex_merges_the_users_developer_instructions_once() -> None:
    config = {"developer_instructions": "Top level.", "profiles": {"work": {"developer_instructions": "Work."}}}
    ctx = AgentContext(codex_config=config)
    assert codex_overrides(bound("codex", ["exec", "x"], context=ctx).argv)["developer_instructions"] == \
        "Top level.\n\n" + MCP
    assert codex_overrides(bound("codex", ["--profile", "work", "exec"], context=ctx).argv)["developer_instructions"] \
        == "Work.\n\n" + MCP
    # A -c of the user's own wins, is removed from its place and merged: one developer_instructions in argv.
    spec = bound("codex", ["exec", "-c", 'developer_instructions="Flag."', "x"], context=ctx)
    assert [a for a in spec.argv if a.startswith("developer_instructions=")] == [
        "developer_instructions=" + toml_value("Flag.\n\n" + MCP)]
    assert spec.argv[-2:] == ["exec", "x"]
    # The config already holding the protocol (a user who merged it by hand): still once.
    again = AgentContext(codex_config={"developer_instructions": "Mine.\n\n" + MCP})
    assert codex_overrides(bound("codex", [], context=again).argv)["developer_instructions"].count(MCP.strip()) == 1


@pytest.mark.parametrize("args", [["-c", "features.memories=true"], ["exec", "--config=memories.use_memories=true"],
                                  ["-cmcp_servers.amux.command=other"], ["--enable", "memories"]])
def test_codex_refuses_arguments_that_would_undo_the_launch(args: list[str]) -> None:
    with pytest.raises(LaunchError) as err:
        bound("codex", args)
    assert err.value.step == "agent"


def test_codex_user_instructions_precedence_helpers() -> None:
    rest, text = codex_user_instructions(["-c", "developer_instructions=raw words", "exec"], {})
    assert rest == ["exec"] and text == "raw words"  # not TOML: Codex takes the raw text
    assert codex_user_instructions([], {"profile": "p", "profiles": {"p": {"developer_instructions": "P"}}})[1] == "P"
    assert codex_user_instructions([], {})[1] is None
    assert take_codex_override(["--", "-c", "developer_instructions=x"], "developer_instructions") == \
        (["--", "-c", "developer_instructions=x"], [])


# -- Pi --------------------------------------------------------------------------------------------------


def test_pi_gets_the_cli_protocol_and_amux_first_on_path() -> None:
    spec = bound("pi", ["-p", "--append-system-prompt", "Mine.", "hi"],
                 environ={"PATH": "/usr/bin:/opt/amux/bin:/usr/bin"})
    assert after(spec.argv, "--append-system-prompt") == ["Mine.\n\n" + CLI]
    assert spec.argv[-2:] == ["-p", "hi"]
    assert spec.env_set["PATH"] == "/opt/amux/bin:/usr/bin"  # amux's directory first, each directory once
    assert spec.env_set["AMUX_HUB"] == HUB and spec.env_set["AMUX_MEMORY_BINDING"] == "global"
    assert spec.system_prompt_append == "Mine.\n\n" + CLI
    assert "mcp" not in " ".join(spec.argv).lower().replace("amux memory", "")  # no MCP for Pi


def test_pi_merges_file_values_and_its_append_system_md() -> None:
    ctx = AgentContext(files={"notes.md": "From notes."})
    assert after(bound("pi", ["--append-system-prompt", "notes.md"], context=ctx).argv, "--append-system-prompt") == \
        ["From notes.\n\n" + CLI]
    ctx = AgentContext(pi_append_file="From APPEND_SYSTEM.md.")
    assert after(bound("pi", [], context=ctx).argv, "--append-system-prompt") == ["From APPEND_SYSTEM.md.\n\n" + CLI]


def test_pi_without_a_plain_amux_program_needs_a_wrapper(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="amux"):
        plan("pi", [], binding="global", hub=HUB, amux_command=["/usr/bin/python3", "-m", "tools.cli"])
    spec = plan("pi", [], binding="global", hub=HUB, amux_command=["/usr/bin/python3", "-m", "tools.cli"],
                run_dir=str(tmp_path), environ={"PATH": "/bin"})
    [wrapper] = spec.files
    assert wrapper.path == str(tmp_path / MEMORY_DIR / "amux") and wrapper.mode == 0o700
    assert "exec /usr/bin/python3 -m tools.cli \"$@\"" in wrapper.content
    assert spec.env_set["PATH"].split(os.pathsep)[0] == str(tmp_path / MEMORY_DIR)
    assert spec.cleanup == [str(tmp_path / MEMORY_DIR)]


# -- other agents, isolation, serialisation ------------------------------------------------------------------


@pytest.mark.parametrize("agent", ["aider", "gemini", ""])
def test_unknown_agent_names_the_missing_capability(agent: str) -> None:
    with pytest.raises(LaunchError) as err:
        plan(agent, [], binding="global", hub=HUB)
    assert err.value.step == "agent" and err.value.exit_code == 2
    assert "MCP tool configuration" in err.value.message and "system-prompt slot" in err.value.message
    assert err.value.data["missing"] == ["mcp_tool_config", "system_prompt_slot"]


def test_isolated_spec_points_everything_at_the_users_copy() -> None:
    run_as = RunAs(uid=4242, gid=4242, groups=(), name="alice", home="/home/alice")
    run = "/run/amux-1"
    copy = f"{run}/{MEMORY_DIR}/amux-entry"
    environ = {"PATH": "/usr/bin:/bin:/usr/bin", "CODEX_HOME": "/root/.codex", "PI_CODING_AGENT_DIR": "/root/.pi/agent",
               "CLAUDE_CONFIG_DIR": "/root/.claude", "AMUX_TOKEN": "amux_root_token", "HOME": "/root"}
    spec = plan("claude", ["-p", "hi"], binding="principal:alice", hub=HUB, amux_command=[copy], run_as=run_as,
                run_dir=run, environ=environ, executable="/usr/bin/claude")
    wrapper = f"{run}/{MEMORY_DIR}/amux"
    [file] = spec.files
    assert (file.path, file.mode, file.owner) == (wrapper, 0o700, 4242)
    assert "AMUX_MEMORY_BINDING=principal:alice; export AMUX_MEMORY_BINDING" in file.content
    assert file.content.rstrip().endswith(f'exec {copy} "$@"')
    server = json.loads(next(a for a in spec.argv if a.startswith("--mcp-config=")).split("=", 1)[1])
    assert server["mcpServers"]["amux"]["command"] == wrapper
    env = spec.environment(environ)
    assert env["PATH"] == f"{run}/{MEMORY_DIR}:/usr/bin:/bin"
    assert (env["HOME"], env["USER"], env["LOGNAME"]) == ("/home/alice", "alice", "alice")
    assert env["CODEX_HOME"] == "/home/alice/.codex" and env["PI_CODING_AGENT_DIR"] == "/home/alice/.pi/agent"
    assert "CLAUDE_CONFIG_DIR" not in env and "AMUX_TOKEN" not in env
    assert spec.cleanup == [f"{run}/{MEMORY_DIR}"] and spec.run_as == run_as
    assert not set(spec.env_set) & set(spec.env_unset)


def test_spec_is_plain_json_and_deterministic() -> None:
    a = bound("codex", ["exec", "x"])
    b = bound("codex", ["exec", "x"])
    assert a == b
    data = json.loads(a.to_json())
    assert data == a.as_dict()
    assert set(data) >= {"agent", "argv", "env_set", "env_unset", "files", "cleanup", "system_prompt_append",
                         "binding", "memory", "notices"}
    assert len(a.notices) == 1 and a.notices[0].startswith("amux: session s1: memory global")
    assert "features.memories" in a.notices[0]
    iso = bound("pi", [], run_as=RunAs(uid=7, gid=7, groups=(5,), name=None, home="/h"), run_dir="/r")
    assert json.loads(iso.to_json())["run_as"] == {"uid": 7, "gid": 7, "groups": [5], "name": None, "home": "/h"}


def test_resume_warnings_make_a_second_notice_line() -> None:
    spec = bound("pi", [], warnings=["no Hub answers at /x now; memory calls fail until it is back"])
    assert len(spec.notices) == 2 and spec.notices[1].startswith("amux: warning: no Hub answers")
    assert spec.memory  # a stored binding keeps memory installed


# -- helpers ---------------------------------------------------------------------------------------------------


def test_take_value_option_and_merge() -> None:
    assert take_value_option(["a", "--x", "1", "--x=2", "--x"], ["--x"]) == (["a", "--x"], ["1", "2"])
    assert merge_instructions([None, "", "  "], "P\n") == "P\n"
    assert merge_instructions(["A\n", "B"], "P\n") == "A\n\nB\n\nP\n"


def test_toml_values_survive_any_text() -> None:
    text = 'quote " backslash \\ newline \n tab \t emoji \U0001f600 control \x01'
    assert tomllib.loads(f"v = {toml_value(text)}")["v"] == text
    assert tomllib.loads(f"v = {toml_value(['a', 'b'])}")["v"] == ["a", "b"]


def test_read_context_reads_but_never_writes(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text('developer_instructions = "From config."\n')
    agent_dir = tmp_path / "pi-agent"
    agent_dir.mkdir()
    (agent_dir / "APPEND_SYSTEM.md").write_text("Global append.")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    env = {"CODEX_HOME": str(codex_home), "PI_CODING_AGENT_DIR": str(agent_dir)}
    assert read_context("codex", [], env, cwd=str(tmp_path)).codex_config["developer_instructions"] == "From config."
    assert read_context("pi", [], env, cwd=str(tmp_path)).pi_append_file == "Global append."
    (tmp_path / ".pi").mkdir()
    (tmp_path / ".pi" / "APPEND_SYSTEM.md").write_text("Project append.")
    assert read_context("pi", [], env, cwd=str(tmp_path)).pi_append_file == "Project append."
    assert read_context("pi", ["--append-system-prompt", "x" * 5000], env, cwd=str(tmp_path)).files == {}
    assert {p: p.read_bytes() for p in before} == before


def test_confirm_memory_off() -> None:
    ok = {"config": {"features": {"memories": False}, "memories": {"use_memories": False, "generate_memories": False}}}
    assert confirm_memory_off(ok) == {"features.memories": False, "memories.use_memories": False,
                                      "memories.generate_memories": False}
    for broken in ({"config": {"features": {"memories": False}, "memories": {"use_memories": True,
                                                                             "generate_memories": False}}},
                   {"config": {"features": {}, "memories": {"use_memories": False, "generate_memories": False}}},
                   {}):
        with pytest.raises(LaunchError) as err:
            confirm_memory_off(broken)
        assert err.value.step == "config/read"
