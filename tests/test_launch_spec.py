"""The launch spec as plain data (DESIGN.md §10): :func:`launch.plan` and its pure helpers.

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

from amux_memory.launch import AgentContext, LaunchError, LaunchSpec, RunAs, plan, read_context
from amux_memory.launch.agent_args import (
    merge_instructions,
    take_codex_override,
    take_value_option,
    toml_value,
    variadic_values,
)
from amux_memory.launch.agents import (
    CLAUDE_TOOL_NAMES,
    ENTRY_NAME,
    MCP_TOOL_NAMES,
    MEMORY_DIR,
    SYSTEM_PATH,
    claude_settings,
    codex_user_instructions,
)
from amux_memory.launch.codex_app_server import THREAD_PARAMS_REFUSED, confirm_memory_off, start_memory_thread
from amux_memory.launch.native_resume import native_resume
from amux_memory.launch.spec import DirSpec, FileSpec
from amux_memory.protocol.agent_protocol import render

MCP = render("mcp")
CLI = render("cli")
HUB = "/srv/amux/hub.sock"
AMUX = "/opt/amux/bin/amux"
RUN = "/run/amux-1"
SERVER = {"command": AMUX, "args": ["mcp"], "env": {"AMUX_HUB": HUB, "AMUX_MEMORY_BINDING": "global",
                                                     "AMUX_MCP_INSTRUCTIONS": "off", "AMUX_SESSION_ID": "s1"}}


def bound(agent: str, args: list[str] | None = None, **kw: Any) -> LaunchSpec:
    kw.setdefault("environ", {"PATH": "/usr/bin:/bin"})
    if agent == "pi":
        kw.setdefault("run_dir", RUN)
    return plan(agent, args or [], binding="global", hub=HUB, amux_command=[AMUX], executable=f"/bin/{agent}",
                session_id="s1", **kw)


def option(argv: list[str], name: str) -> list[str]:
    """Every value of ``name`` in argv, in the ``NAME=VALUE`` form."""
    return [a.split("=", 1)[1] for a in argv if a.startswith(name + "=")]


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
    [config] = option(spec.argv, "--mcp-config")
    server = json.loads(config)["mcpServers"]["amux"]
    # alwaysLoad: Claude Code waits for this server before the first turn (measured: without it, a server that
    # takes 2 s to start has no tools in a -p turn).
    assert server == {**SERVER, "alwaysLoad": True}
    assert spec.mcp_servers == {"amux": SERVER}  # the same server as data, for an SDK Runtime
    # -p denies an MCP tool nobody allowed: the launch allows its own five (in the `=` form: no prompt swallowed).
    assert option(spec.argv, "--allowedTools") == [",".join(CLAUDE_TOOL_NAMES)]
    assert sorted(CLAUDE_TOOL_NAMES) == sorted(f"mcp__amux__{n}" for n in MCP_TOOL_NAMES)
    [settings] = option(spec.argv, "--settings")
    assert json.loads(settings) == {"autoMemoryEnabled": False, "env": {"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"}}
    assert spec.env_set["CLAUDE_CODE_DISABLE_AUTO_MEMORY"] == "1"
    assert spec.env_set["AMUX_MEMORY_BINDING"] == "global" and spec.env_set["AMUX_HUB"] == HUB
    assert spec.memory and spec.binding == "global" and spec.files == [] and spec.cleanup == []


def test_mcp_tool_names_match_the_server() -> None:
    from amux_memory.hub.mcp.tools import TOOL_NAMES

    assert MCP_TOOL_NAMES == TOOL_NAMES


def test_claude_settings_are_merged_into_one_that_keeps_auto_memory_off(tmp_path: Path) -> None:
    # The user's own --settings (JSON or a file) is kept, and ours is laid over it: Claude reads only the last one.
    settings = '{"model": "m", "env": {"MINE": "1", "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "0"}}'
    spec = bound("claude", ["--settings", settings, "-p", "hi"])
    assert after(spec.argv, "--settings") == [] and len(option(spec.argv, "--settings")) == 1
    merged = json.loads(option(spec.argv, "--settings")[0])
    assert merged == {"model": "m", "autoMemoryEnabled": False,
                      "env": {"MINE": "1", "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"}}
    assert spec.argv[-2:] == ["-p", "hi"]
    ctx = AgentContext(files={"s.json": '{"permissions": {"allow": ["Bash"]}}'})
    spec = bound("claude", ["--settings=s.json"], context=ctx)
    assert json.loads(option(spec.argv, "--settings")[0])["permissions"] == {"allow": ["Bash"]}
    with pytest.raises(LaunchError, match="was not read"):
        bound("claude", ["--settings", "s.json"])
    for bad in ('{"env": ', "[1]"):
        with pytest.raises(LaunchError, match="JSON"):
            claude_settings(bad, AgentContext(files={bad: bad}))
    (tmp_path / "s.json").write_text('{"model": "from-file"}')
    ctx = read_context("claude", ["--settings", "s.json"], {}, cwd=str(tmp_path))
    assert json.loads(option(bound("claude", ["--settings", "s.json"], context=ctx).argv, "--settings")[0])["model"] \
        == "from-file"


@pytest.mark.parametrize("args", [
    ["--mcp-config", '{"mcpServers": {"amux": {"command": "/bin/true"}}}', "-p", "hi"],
    ["--mcp-config={\"mcpServers\":{\"amux\":{\"command\":\"/bin/true\"}}}"],
    ["--mcp-config", '{"mcpServers": {"other": {"command": "x"}}}', "mine.json", "-p"],  # variadic: a second value
])
def test_claude_refuses_a_users_own_amux_mcp_server(args: list[str]) -> None:
    ctx = AgentContext(files={"mine.json": '{"mcpServers": {"amux": {"command": "/bin/true"}}}'})
    with pytest.raises(LaunchError) as err:
        bound("claude", args, context=ctx)
    assert err.value.step == "agent" and "named 'amux'" in err.value.message


def test_claude_keeps_a_users_other_mcp_servers() -> None:
    other = '{"mcpServers": {"other": {"command": "x"}}}'
    spec = bound("claude", ["--mcp-config", other, "-p", "hi"])
    assert spec.argv[-4:] == ["--mcp-config", other, "-p", "hi"]


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
    spec = bound("claude", ["--append-system-prompt-file", "extra.md"],
                 context=AgentContext(files={"extra.md": "From file."}))
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
        assert spec.mcp_servers == {} and spec.files == [] and spec.env_inherit is None
        assert len(spec.notices) == 1 and spec.notices[0].startswith("amux: warning: session s9 ")
        assert "Hub unreachable" in spec.notices[0]


def test_the_session_id_reaches_the_agent_the_mcp_server_and_the_pi_wrapper() -> None:
    # The clients send AMUX_SESSION_ID in hello, so the Hub's history names the launch that made a change.
    for agent in ("claude", "codex", "pi"):
        spec = bound(agent, ["-p", "hi"] if agent != "codex" else ["exec", "hi"])
        assert spec.env_set["AMUX_SESSION_ID"] == "s1"
        assert spec.environment({"AMUX_SESSION_ID": "stale"})["AMUX_SESSION_ID"] == "s1"
        if agent == "pi":
            assert "AMUX_SESSION_ID=s1; export AMUX_SESSION_ID" in spec.files[-1].content
        else:
            assert spec.mcp_servers["amux"]["env"]["AMUX_SESSION_ID"] == "s1"
    claude = bound("claude")
    config = json.loads(option(claude.argv, "--mcp-config")[0])
    assert config["mcpServers"]["amux"]["env"]["AMUX_SESSION_ID"] == "s1"
    assert codex_overrides(bound("codex").argv)["mcp_servers.amux.env"]["AMUX_SESSION_ID"] == "s1"
    unsessioned = plan("claude", [], binding="global", hub=HUB, amux_command=[AMUX])
    assert "AMUX_SESSION_ID" not in unsessioned.env_set
    assert "AMUX_SESSION_ID" not in unsessioned.mcp_servers["amux"]["env"]


def test_env_unset_does_not_depend_on_the_environ_given_to_plan() -> None:
    # The spec is applied to whatever environment the Runtime has: what it removes must be listed regardless.
    run_as = RunAs(uid=4242, gid=4242, name="alice", home="/home/alice")
    stale = {"AMUX_TOKEN": "amux_root", "CLAUDE_CONFIG_DIR": "/root/.claude", "AMUX_MEMORY_BINDING": "principal:x"}
    for binding in ("global", None):
        spec = plan("claude", [], binding=binding, hub=HUB, amux_command=[AMUX], run_as=run_as, run_dir=RUN)
        assert {"AMUX_TOKEN", "CLAUDE_CONFIG_DIR"} <= set(spec.env_unset)
        env = spec.environment(stale)
        assert "AMUX_TOKEN" not in env and "CLAUDE_CONFIG_DIR" not in env
        assert env.get("AMUX_MEMORY_BINDING") == binding
    spec = plan("claude", [], binding=None, hub=HUB)  # no environ at all
    assert spec.env_unset == ["AMUX_MEMORY_BINDING"]
    assert "AMUX_MEMORY_BINDING" not in spec.environment(stale)


# -- Codex -------------------------------------------------------------------------------------------


def test_codex_overrides_come_before_the_subcommand_and_parse_as_toml() -> None:
    spec = bound("codex", ["exec", "--skip-git-repo-check", "do it"],
                 environ={"PATH": "/bin", "AMUX_TOKEN": "amux_x_secret"})
    exec_at = spec.argv.index("exec")
    assert spec.argv[exec_at:] == ["exec", "--skip-git-repo-check", "do it"]
    assert all(spec.argv[i] == "-c" for i in range(1, exec_at, 2))
    overrides = codex_overrides(spec.argv)
    assert overrides["features.memories"] is False
    assert overrides["memories.use_memories"] is False and overrides["memories.generate_memories"] is False
    assert overrides["mcp_servers.amux.command"] == AMUX
    assert overrides["mcp_servers.amux.args"] == ["mcp"]
    assert overrides["mcp_servers.amux.env"] == SERVER["env"]
    assert overrides["mcp_servers.amux.default_tools_approval_mode"] == "approve"
    # Codex waits for a required server before the first turn (measured: an optional one that takes 2 s to
    # start is missing from `codex exec`'s turn), and whatever config.toml says of a server named amux is undone.
    assert overrides["mcp_servers.amux.required"] is True and overrides["mcp_servers.amux.enabled"] is True
    assert overrides["mcp_servers.amux.enabled_tools"] == list(MCP_TOOL_NAMES)
    assert overrides["mcp_servers.amux.disabled_tools"] == []
    assert overrides["mcp_servers.amux.env_vars"] == ["AMUX_TOKEN"]  # forwarded by name ...
    assert not any("amux_x_secret" in a for a in spec.argv)       # ... never on the command line
    assert overrides["developer_instructions"] == MCP == spec.developer_instructions
    assert spec.system_prompt_append is None
    assert spec.mcp_servers == {"amux": {**SERVER, "env_vars": ["AMUX_TOKEN"]}}


def test_codex_merges_the_users_developer_instructions_once() -> None:
    # Codex 0.171 keeps a profile in $CODEX_HOME/<name>.config.toml, layered over config.toml.
    ctx = AgentContext(codex_config={"developer_instructions": "Top level."},
                       codex_profiles={"work": {"developer_instructions": "Work."}, "bare": {}})
    assert codex_overrides(bound("codex", ["exec", "x"], context=ctx).argv)["developer_instructions"] == \
        "Top level.\n\n" + MCP
    for args in (["--profile", "work", "exec"], ["exec", "-p", "work"], ["-pwork", "exec"], ["--profile=work"]):
        assert codex_overrides(bound("codex", args, context=ctx).argv)["developer_instructions"] == "Work.\n\n" + MCP
    # A profile without its own developer_instructions keeps the top-level ones.
    assert codex_overrides(bound("codex", ["-p", "bare"], context=ctx).argv)["developer_instructions"] == \
        "Top level.\n\n" + MCP
    assert codex_overrides(bound("codex", ["exec", "--ignore-user-config"], context=ctx).argv)[
        "developer_instructions"] == MCP
    # A -c of the user's own wins, is removed from its place and merged: one developer_instructions in argv.
    spec = bound("codex", ["exec", "-c", 'developer_instructions="Flag."', "x"], context=ctx)
    assert [a for a in spec.argv if a.startswith("developer_instructions=")] == [
        "developer_instructions=" + toml_value("Flag.\n\n" + MCP)]
    assert spec.argv[-2:] == ["exec", "x"]
    # The config already holding the protocol (a user who merged it by hand): still once.
    again = AgentContext(codex_config={"developer_instructions": "Mine.\n\n" + MCP})
    assert codex_overrides(bound("codex", [], context=again).argv)["developer_instructions"].count(MCP.strip()) == 1
    with pytest.raises(LaunchError, match="was not read"):
        bound("codex", ["-p", "unread"], context=ctx)


@pytest.mark.parametrize("args", [
    ["-c", "features.memories=true"], ["exec", "--config=memories.use_memories=true"],
    ["-cmcp_servers.amux.command=other"], ["--enable", "memories"], ["--enable=memories"],
    # Whole tables replace the launch's keys too, and quoted or spaced keys are the same keys.
    ["-c", "features={memories=true}"], ["-c", "memories={use_memories=true}"], ["-c", "mcp_servers={}"],
    ["-c", 'mcp_servers.amux={command="/bin/true"}'], ["-c", '"features".memories=true'],
    ["-c", "mcp_servers . amux.required=false"],
])
def test_codex_refuses_arguments_that_would_undo_the_launch(args: list[str]) -> None:
    with pytest.raises(LaunchError) as err:
        bound("codex", args)
    assert err.value.step == "agent"


def test_codex_allows_the_users_timeouts_and_other_features() -> None:
    args = ["-c", "mcp_servers.amux.startup_timeout_sec=60", "-c", "mcp_servers.amux.tool_timeout_sec=120",
            "-c", "features.web_search=true", "--disable", "memories", "exec", "x"]
    spec = bound("codex", args)
    assert spec.argv[-len(args):] == args


def test_codex_user_instructions_precedence_helpers() -> None:
    rest, text = codex_user_instructions(["-c", "developer_instructions=raw words", "exec"], {})
    assert rest == ["exec"] and text == "raw words"  # not TOML: Codex takes the raw text
    assert codex_user_instructions(["-p", "p"], {}, {"p": {"developer_instructions": "P"}})[1] == "P"
    # The legacy selector and table are not Codex 0.171's layout (it refuses them): never read.
    assert codex_user_instructions([], {"profile": "p", "profiles": {"p": {"developer_instructions": "P"}}})[1] \
        is None
    assert codex_user_instructions([], {})[1] is None
    assert take_codex_override(["--", "-c", "developer_instructions=x"], "developer_instructions") == \
        (["--", "-c", "developer_instructions=x"], [])


# -- Pi --------------------------------------------------------------------------------------------------


def test_pi_gets_the_cli_protocol_and_only_an_amux_wrapper_first_on_path() -> None:
    spec = bound("pi", ["-p", "--append-system-prompt", "Mine.", "hi"],
                 environ={"PATH": "/usr/bin:/opt/amux/bin:/usr/bin"})
    assert after(spec.argv, "--append-system-prompt") == ["Mine.\n\n" + CLI]
    assert spec.argv[-2:] == ["-p", "hi"]
    memory_dir = f"{RUN}/{MEMORY_DIR}"
    # Not the directory of the real amux (a virtualenv's bin: its python3, pip, pytest): a wrapper of its own.
    assert spec.env_set["PATH"] == f"{memory_dir}:/usr/bin:/opt/amux/bin"
    [wrapper] = spec.files
    assert (wrapper.path, wrapper.mode, wrapper.owner) == (f"{memory_dir}/amux", 0o700, None)
    assert wrapper.content.rstrip().endswith(f'exec {AMUX} "$@"')
    assert spec.cleanup == [memory_dir]
    assert spec.env_set["AMUX_HUB"] == HUB and spec.env_set["AMUX_MEMORY_BINDING"] == "global"
    assert spec.system_prompt_append == "Mine.\n\n" + CLI
    assert spec.mcp_servers == {}
    assert "mcp" not in " ".join(spec.argv).lower().replace("amux memory", "")  # no MCP for Pi
    with pytest.raises(LaunchError, match="run directory"):
        plan("pi", [], binding="global", hub=HUB, amux_command=[AMUX])


def test_pi_arguments_are_read_the_way_pi_reads_them() -> None:
    # Pi has no `NAME=VALUE` and no `--`: `--append-system-prompt=X` is an unknown flag to it, left alone, and
    # a flag after `--` is still a flag.
    spec = bound("pi", ["--append-system-prompt=Eq.", "--", "--append-system-prompt", "After."])
    assert after(spec.argv, "--append-system-prompt") == ["After.\n\n" + CLI]
    assert spec.argv[-2:] == ["--append-system-prompt=Eq.", "--"]


def test_pi_merges_file_values_and_its_append_system_md() -> None:
    ctx = AgentContext(files={"notes.md": "From notes."})
    assert after(bound("pi", ["--append-system-prompt", "notes.md"], context=ctx).argv, "--append-system-prompt") == \
        ["From notes.\n\n" + CLI]
    ctx = AgentContext(pi_append_file="From APPEND_SYSTEM.md.")
    assert after(bound("pi", [], context=ctx).argv, "--append-system-prompt") == ["From APPEND_SYSTEM.md.\n\n" + CLI]


def test_pi_wrapper_runs_any_amux_command(tmp_path: Path) -> None:
    spec = plan("pi", [], binding="global", hub=HUB, amux_command=["/usr/bin/python3", "-m", "amux_memory.tools.cli"],
                run_dir=str(tmp_path), environ={"PATH": "/bin"})
    [wrapper] = spec.files
    assert wrapper.path == str(tmp_path / MEMORY_DIR / "amux") and wrapper.mode == 0o700
    assert "exec /usr/bin/python3 -m amux_memory.tools.cli \"$@\"" in wrapper.content
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
    run_as = RunAs(uid=4242, gid=4343, groups=(), name="alice", home="/home/alice", shell="/bin/zsh")
    copy = f"{RUN}/{MEMORY_DIR}/amux-entry"
    environ = {"PATH": "/root/.venv/bin:/usr/bin:/bin:/usr/bin", "CODEX_HOME": "/root/.codex",
               "PI_CODING_AGENT_DIR": "/root/.pi/agent", "CLAUDE_CONFIG_DIR": "/root/.claude",
               "AMUX_TOKEN": "amux_root_token", "HOME": "/root", "SECRET_OF_ROOT": "x", "LC_ALL": "C.UTF-8",
               "ANTHROPIC_API_KEY": "k", "TERM": "xterm", "HTTPS_PROXY": "http://proxy:3128", "VIRTUAL_ENV": "/v"}
    spec = plan("claude", ["-p", "hi"], binding="principal:alice", hub=HUB, amux_command=[copy], run_as=run_as,
                run_dir=RUN, environ=environ, executable="/usr/bin/claude")
    wrapper = f"{RUN}/{MEMORY_DIR}/amux"
    [file] = spec.files  # the copy is already in the memory directory: nothing more to copy
    assert (file.path, file.mode, file.owner, file.group) == (wrapper, 0o700, 4242, 4343)
    assert "AMUX_MEMORY_BINDING=principal:alice; export AMUX_MEMORY_BINDING" in file.content
    assert file.content.rstrip().endswith(f'exec {copy} "$@"')
    server = json.loads(option(spec.argv, "--mcp-config")[0])
    assert server["mcpServers"]["amux"]["command"] == wrapper
    env = spec.environment(environ)
    # An allow-list, not the launcher's whole environment; PATH a system one after the memory directory.
    assert env["PATH"] == f"{RUN}/{MEMORY_DIR}:{SYSTEM_PATH}"
    assert (env["HOME"], env["USER"], env["LOGNAME"], env["SHELL"]) == ("/home/alice", "alice", "alice", "/bin/zsh")
    assert env["CODEX_HOME"] == "/home/alice/.codex" and env["PI_CODING_AGENT_DIR"] == "/home/alice/.pi/agent"
    assert (env["LC_ALL"], env["ANTHROPIC_API_KEY"], env["TERM"], env["HTTPS_PROXY"]) == \
        ("C.UTF-8", "k", "xterm", "http://proxy:3128")
    for dropped in ("CLAUDE_CONFIG_DIR", "AMUX_TOKEN", "SECRET_OF_ROOT", "VIRTUAL_ENV"):
        assert dropped not in env
    assert spec.cleanup == [f"{RUN}/{MEMORY_DIR}"] and spec.run_as == run_as
    assert not set(spec.env_set) & set(spec.env_unset)
    # --pass-env adds names or patterns; the launcher's own credentials stay out even if named.
    passed = plan("claude", [], binding=None, hub=HUB, run_as=run_as, run_dir=RUN,
                  pass_env=["SECRET_*", "AMUX_TOKEN"]).environment(environ)
    assert passed["SECRET_OF_ROOT"] == "x" and "AMUX_TOKEN" not in passed and passed["PATH"] == SYSTEM_PATH


def test_isolated_spec_copies_the_cli_and_makes_the_users_codex_home() -> None:
    run_as = RunAs(uid=4242, gid=4343, name="alice", home="/home/alice")
    spec = plan("codex", ["exec", "x"], binding="global", hub=HUB, amux_command=[AMUX], run_as=run_as, run_dir=RUN)
    copy = f"{RUN}/{MEMORY_DIR}/{ENTRY_NAME}"
    assert spec.files[0] == FileSpec(copy, "", 0o700, 4242, 4343, source=AMUX)
    assert f'exec {copy} "$@"' in spec.files[1].content
    # Codex refuses to start without its CODEX_HOME: the user's own ~/.codex, created only when missing.
    assert spec.dirs == [DirSpec("/home/alice/.codex", 0o700, 4242, 4343)]
    nameless = RunAs(uid=4242, gid=4242, home=f"{RUN}/home")
    assert plan("pi", [], binding=None, hub=HUB, run_as=nameless, run_dir=RUN).dirs == \
        [DirSpec(f"{RUN}/home", 0o700, 4242, 4242)]


def test_spec_is_plain_json_and_deterministic() -> None:
    a = bound("codex", ["exec", "x"])
    b = bound("codex", ["exec", "x"])
    assert a == b
    data = json.loads(a.to_json())
    assert data == a.as_dict()
    assert set(data) >= {"agent", "argv", "env_set", "env_unset", "env_inherit", "dirs", "files", "cleanup",
                         "mcp_servers", "system_prompt_append", "binding", "memory", "notices"}
    assert len(a.notices) == 1 and a.notices[0].startswith("amux: session s1: memory global")
    assert "features.memories" in a.notices[0]
    iso = plan("codex", ["exec"], binding="global", hub=HUB, amux_command=[AMUX], run_dir="/r",
               run_as=RunAs(uid=7, gid=7, groups=(5,), name=None, home="/h"))
    assert json.loads(iso.to_json())["run_as"] == {"uid": 7, "gid": 7, "groups": [5], "name": None, "home": "/h",
                                                   "shell": None}
    for spec in (a, iso):
        assert LaunchSpec.from_dict(json.loads(spec.to_json())) == spec


def test_resume_warnings_make_a_second_notice_line() -> None:
    spec = bound("pi", [], warnings=["no Hub answers at /x now; memory calls fail until it is back"])
    assert len(spec.notices) == 2 and spec.notices[1].startswith("amux: warning: no Hub answers")
    assert spec.memory  # a stored binding keeps memory installed


# -- helpers ---------------------------------------------------------------------------------------------------


def test_take_value_option_and_merge() -> None:
    assert take_value_option(["a", "--x", "1", "--x=2", "--x"], ["--x"]) == (["a", "--x"], ["1", "2"])
    assert take_value_option(["--x=2", "--", "--x", "3"], ["--x"], equals=False, end_of_options=False) == \
        (["--x=2", "--"], ["3"])
    assert variadic_values(["--m", "a", "b", "-p", "--m=c", "--", "--m", "d"], ["--m"]) == ["a", "b", "c"]
    assert merge_instructions([None, "", "  "], "P\n") == "P\n"
    assert merge_instructions(["A\n", "B"], "P\n") == "A\n\nB\n\nP\n"


@pytest.mark.parametrize(("agent", "args", "found"), [
    ("claude", ["--continue", "-p", "hi"], "--continue"),
    ("claude", ["-c"], "-c"),
    ("claude", ["-p", "hi", "--resume", "0f3c"], "--resume"),
    ("claude", ["-pr"], "-r"),
    ("claude", ["--resume=0f3c"], "--resume"),
    ("claude", ["--from-pr", "12"], "--from-pr"),
    ("claude", ["-p", "continue the work -c"], None),
    ("claude", ["-n", "xc", "-p", "hi"], None),
    ("claude", ["-p", "--", "--resume"], None),
    ("codex", ["exec", "resume", "--last"], "exec resume"),
    ("codex", ["e", "--skip-git-repo-check", "-c", "x=1", "resume", "id"], "e resume"),
    ("codex", ["resume", "--last"], "resume"),
    ("codex", ["-p", "work", "fork", "id"], "fork"),
    ("codex", ["exec", "-m", "resume", "go"], None),  # `resume` is -m's value; the prompt is `go`
    ("codex", ["exec", "please resume the work"], None),
    ("codex", ["-c", "x=resume", "exec", "hi"], None),
    ("pi", ["--continue", "hi"], "--continue"),
    ("pi", ["-r"], "-r"),
    ("pi", ["--session", "a1b2", "-p", "hi"], "--session"),
    ("pi", ["--fork", "a1b2"], "--fork"),
    ("pi", ["--model", "-c", "-p", "hi"], None),  # a value, however odd
    ("pi", ["-p", "hi", "--no-session"], None),
])
def test_native_resume_is_spotted_as_each_agent_parses_it(agent: str, args: list[str], found: str | None) -> None:
    assert native_resume(agent, args) == found


class _NoServer:
    def request(self, method: str, params: Any) -> dict[str, Any]:
        raise AssertionError(f"nothing may be sent ({method})")


@pytest.mark.parametrize("key", THREAD_PARAMS_REFUSED)
def test_start_memory_thread_refuses_thread_params_that_could_undo_the_check(key: str) -> None:
    with pytest.raises(LaunchError) as err:
        start_memory_thread(_NoServer(), developer_instructions=MCP, cwd="/",  # type: ignore[arg-type]
                            thread_params={"approvalPolicy": "never", key: {"features.memories": True}})
    assert err.value.step == "thread/start" and key in err.value.message


def test_toml_values_survive_any_text() -> None:
    text = 'quote " backslash \\ newline \n tab \t emoji \U0001f600 control \x01'
    assert tomllib.loads(f"v = {toml_value(text)}")["v"] == text
    assert tomllib.loads(f"v = {toml_value(['a', 'b'])}")["v"] == ["a", "b"]


def test_read_context_reads_but_never_writes(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text('developer_instructions = "From config."\n')
    (codex_home / "work.config.toml").write_text('developer_instructions = "From the work profile."\n')
    agent_dir = tmp_path / "pi-agent"
    agent_dir.mkdir()
    (agent_dir / "APPEND_SYSTEM.md").write_text("Global append.")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    env = {"CODEX_HOME": str(codex_home), "PI_CODING_AGENT_DIR": str(agent_dir)}
    assert read_context("codex", [], env, cwd=str(tmp_path)).codex_config["developer_instructions"] == "From config."
    ctx = read_context("codex", ["exec", "-p", "work"], env, cwd=str(tmp_path))
    assert ctx.codex_profiles == {"work": {"developer_instructions": "From the work profile."}}
    assert read_context("codex", ["--profile", "none"], env, cwd=str(tmp_path)).codex_profiles == {"none": {}}
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
