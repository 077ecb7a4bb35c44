"""``amux launch`` with the real Claude Code, Codex and Pi binaries, offline (DESIGN.md §10, §7).

Each test starts a real Hub, seeds it through the CLI with a word found
nowhere else, points the agent at :class:`tests.fakemodel.FakeModel` on
127.0.0.1 and runs ``amux launch AGENT ...`` as a user would.  What the agent
sent to the model is the evidence: the instruction block (exactly one copy of
the protocol), the offered tools, and, after the fake model asked for a memory
search, the tool result carrying the Hub's real match.

The agents come from ``tests/clients/install.sh`` (pinned npm packages).
Without Node/npm these tests skip with a message, except with ``CI=true``,
where they fail (the ``bin_dir`` fixture of ``tests/conftest.py``).

Measured facts these tests rely on (Claude Code 2.1.197, Codex 0.171.0, Pi 0.73.1):

* Claude Code uses only the last of several ``--append-system-prompt`` flags,
  so a launch must merge the user's text with the protocol into one; in
  ``-p`` mode it denies an MCP tool unless ``--allowedTools`` names it (the
  launch does; these tests never do), and it does not wait for MCP servers
  unless a server has ``alwaysLoad`` (or ``MCP_CONNECTION_NONBLOCKING=0``).
  A settings file's ``env`` outranks the process environment, a ``--settings``
  flag outranks the settings files.
* Codex does not wait for an MCP server either unless it is ``required``.
  It keeps a profile in ``$CODEX_HOME/<name>.config.toml``; ``-c`` overrides
  outrank it.  It replays the first run's developer message on ``exec
  resume`` and ignores the ``developer_instructions`` given to the resumed
  run, so the protocol stays exactly once however the resume is launched.
* Codex offers MCP tools in a ``namespace`` entry ``mcp__amux``; Pi has no MCP
  and reaches the Hub through its ``bash`` tool and the ``amux`` CLI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amux_memory.hub.mcp.tools import TOOL_NAMES
from amux_memory.protocol.agent_protocol import render
from tests.agent_clients import client_env, unavailable
from tests.conftest import REPO, HubProcess, amux_argv
from tests.fakemodel import (
    FakeModel,
    Text,
    ToolCall,
    anthropic_system,
    anthropic_tool_names,
    anthropic_tool_results,
    codex_provider,
    responses_texts,
    responses_tool_names,
    responses_tool_outputs,
    strings,
)
from tests.helpers import seeded
from tests.other_users import readable_amux, readable_python

pytestmark = pytest.mark.slow  # the real npm-installed agent clients

WORD = "quillfeather"
ENTRY = f"# Preferences\n- Indent with {WORD} tabs.\n"
SNIPPET = f"- Indent with {WORD} tabs."
MCP_PROTOCOL = render("mcp").strip()
CLI_PROTOCOL = render("cli").strip()
FULL_NAMES = sorted(f"mcp__amux__{name}" for name in TOOL_NAMES)
NATIVE_MEMORY = re.compile(r"(?m)^# Memory\s*$")  # Claude Code's own file-based memory section
CLAUDE_TURNS = "/v1/messages"
CODEX_TURNS = "/v1/responses"


@pytest.fixture(scope="session")
def agents(bin_dir: Path) -> Path:
    """``node_modules/.bin`` with claude, codex and pi (pi is checked here; the rest by ``bin_dir``)."""
    if not os.access(bin_dir / "pi", os.X_OK):
        unavailable(f"pi is not installed in {bin_dir}; run 'bash tests/clients/install.sh' first")
    return bin_dir


# -- running a launch -------------------------------------------------------------------------------


def _path_without_amux() -> str:
    # The launch itself must put `amux` where the agent finds it; the test's PATH must not do it by accident.
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(d for d in dirs if d and not os.access(os.path.join(d, "amux"), os.X_OK))


def launch_env(agents: Path, hub: HubProcess, home: Path, **extra: str) -> dict[str, str]:
    """The environment of ``amux launch``: the Hub, the agent executables, an isolated HOME for every agent."""
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    (home / ".pi" / "agent").mkdir(parents=True, exist_ok=True)
    return client_env(
        PATH=_path_without_amux(), AMUX_HOME=str(hub.home), HOME=str(home),
        AMUX_LAUNCH_CLAUDE=str(agents / "claude"), AMUX_LAUNCH_CODEX=str(agents / "codex"),
        AMUX_LAUNCH_PI=str(agents / "pi"),
        CLAUDE_CONFIG_DIR=str(home / ".claude"), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1", CODEX_HOME=str(home / ".codex"),
        PI_CODING_AGENT_DIR=str(home / ".pi" / "agent"), PI_OFFLINE="1", **extra,
    )


def claude_env(agents: Path, hub: HubProcess, home: Path, model: FakeModel) -> dict[str, str]:
    """:func:`launch_env` with Claude Code's model requests sent to the fake model."""
    return launch_env(agents, hub, home, ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="dummy-fake-key")


def launch(env: dict[str, str], cwd: Path, *args: str, timeout: float = 120,
           amux: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``amux launch ARGS`` to completion (stdin closed) and return the finished process.

    ``amux``: the command to run instead of the installed one (it is also what the launch gives the agent).
    """
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([*(amux or amux_argv()), "launch", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)


def slow_amux(directory: Path, delay: float = 2.0) -> Path:
    """An ``amux`` whose MCP server starts ``delay`` seconds late (a loaded machine, a cold cache).

    Launched through it, the launch configures it as the agent's MCP server:
    an agent that does not wait for its servers starts its first turn without
    the memory tools (measured: Claude Code and Codex both do, at 2 s).
    """
    script = directory / "amux"
    directory.mkdir(parents=True, exist_ok=True)
    script.write_text(f"#!{sys.executable}\nimport sys, time\nif sys.argv[1:2] == ['mcp']:\n    time.sleep({delay})\n"
                      f"sys.path.insert(0, {str(REPO)!r})\n"
                      "from amux_memory.tools.cli.app import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return script


def notices(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The launch's own ``amux:`` lines on stderr; the contract allows one or two."""
    lines = [line for line in proc.stderr.splitlines() if line.startswith("amux:")]
    assert 1 <= len(lines) <= 2, proc.stderr[-3000:]
    return lines


def explain(proc: subprocess.CompletedProcess[str], model: FakeModel) -> str:
    return (f"exit {proc.returncode}\nstdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-3000:]}\n"
            f"model requests: {[(r.method, r.path) for r in model.requests]}")


def session_state(hub: HubProcess, session_id: str) -> dict[str, Any]:
    state: dict[str, Any] = json.loads((hub.home / "sessions" / f"{session_id}.json").read_text())
    return state


def claude_args(prompt: str, *extra: str) -> list[str]:
    return ["claude", "-p", prompt, "--output-format", "stream-json", "--verbose", *extra]


def claude_result(proc: subprocess.CompletedProcess[str]) -> Any:
    """The ``result`` text of Claude Code's final stream-json message."""
    messages = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return messages[-1].get("result") if messages else None


# -- Claude Code ----------------------------------------------------------------------------------------


def test_claude_gets_one_protocol_block_the_amux_tools_and_a_real_hub_match(
        agents: Path, hub: HubProcess, tmp_path: Path, fake_model: FakeModel) -> None:
    seeded(hub, ENTRY)
    home = tmp_path / "home"
    env = claude_env(agents, hub, home, fake_model)
    settings = home / ".claude" / "settings.json"
    # The user's settings switch auto memory on through their `env`, which outranks the process environment.
    settings.write_bytes(b'{\n  "autoMemoryEnabled": true,\n  "env": {"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "0"}\n}\n')
    before = settings.read_bytes()
    work = tmp_path / "work"
    session = str(uuid.uuid4())
    fake_model.script(ToolCall("mcp__amux__memory_search", {"query": WORD}), Text("finished"))

    # No --allowedTools: the launch itself must make the amux tools usable in -p mode. The user's own --settings
    # (a header in its env) still applies, merged with the launch's.
    proc = launch(env, work, "--session-id", session,
                  *claude_args("What do I prefer for indentation?", "--append-system-prompt", "USER-APPEND-RULE",
                               "--settings", '{"env": {"ANTHROPIC_CUSTOM_HEADERS": "x-user-setting: kept"}}',
                               "--no-session-persistence"))
    assert proc.returncode == 0, explain(proc, fake_model)
    assert any("global" in line for line in notices(proc)), proc.stderr[-2000:]
    assert session_state(hub, session)["binding"] == "global"

    turns = fake_model.turns(CLAUDE_TURNS)
    assert len(turns) == 2, explain(proc, fake_model)
    system = anthropic_system(turns[0])
    assert system.count(MCP_PROTOCOL) == 1, system[-3000:]
    # One block in the whole request: the MCP server's own instructions are off for a launch.
    assert sum(s.count(MCP_PROTOCOL) for s in strings(turns[0])) == 1
    assert system.count("USER-APPEND-RULE") == 1, "the user's own append text is merged, not dropped"
    assert not NATIVE_MEMORY.search(system), "Claude Code's native auto memory is off, whatever settings.json says"
    assert sorted(n for n in anthropic_tool_names(turns[0]) if n.startswith("mcp__amux__")) == FULL_NAMES
    results = json.dumps(anthropic_tool_results(turns[1]))
    assert SNIPPET in results and "MEMORY.md" in results, results[:2000]
    headers = [r.headers for r in fake_model.requests if r.path.startswith(CLAUDE_TURNS)]
    assert headers and all(h.get("x-user-setting") == "kept" for h in headers), "the user's --settings still apply"
    assert claude_result(proc) == "finished"
    assert settings.read_bytes() == before, "the user's settings.json is untouched"
    assert sorted(p.name for p in work.iterdir()) == [], "no project settings or MCP file written"


def test_claude_with_the_hub_down_starts_without_memory(
        agents: Path, hub: HubProcess, tmp_path: Path, fake_model: FakeModel) -> None:
    hub.stop()
    env = claude_env(agents, hub, tmp_path / "home", fake_model)
    session = str(uuid.uuid4())
    proc = launch(env, tmp_path / "work", "--session-id", session,
                  *claude_args("hello", "--no-session-persistence"), timeout=60)
    assert proc.returncode == 0, explain(proc, fake_model)
    notices(proc)
    turns = fake_model.turns(CLAUDE_TURNS)
    assert turns, explain(proc, fake_model)
    assert not [n for n in anthropic_tool_names(turns[0]) if n.startswith("mcp__amux__")]
    system = anthropic_system(turns[0])
    assert MCP_PROTOCOL not in system and CLI_PROTOCOL not in system
    assert claude_result(proc) == "done"
    state = session_state(hub, session)  # stored, and stored without memory: never a fallback to global
    assert state["binding"] is None and "unreachable" in state["reason"]


def test_claude_with_memory_disabled_keeps_its_native_memory(
        agents: Path, hub_factory: Any, tmp_path: Path, fake_model: FakeModel) -> None:
    hub = hub_factory(enabled=False)
    env = claude_env(agents, hub, tmp_path / "home", fake_model)
    proc = launch(env, tmp_path / "work", *claude_args("hello", "--no-session-persistence"), timeout=60)
    assert proc.returncode == 0, explain(proc, fake_model)
    notices(proc)
    turns = fake_model.turns(CLAUDE_TURNS)
    assert turns, explain(proc, fake_model)
    assert not [n for n in anthropic_tool_names(turns[0]) if n.startswith("mcp__amux__")]
    system = anthropic_system(turns[0])
    assert MCP_PROTOCOL not in system and CLI_PROTOCOL not in system
    # The control for the first test: without amux memory, Claude Code's own memory section is there.
    assert NATIVE_MEMORY.search(system), "new launches while disabled keep the agent's own memory policy"


def test_claude_resume_keeps_the_stored_binding_and_a_changed_policy_is_binding_mismatch(
        agents: Path, hub: HubProcess, tmp_path: Path, fake_model: FakeModel) -> None:
    seeded(hub, ENTRY)
    env = claude_env(agents, hub, tmp_path / "home", fake_model)
    work = tmp_path / "work"
    session = str(uuid.uuid4())
    conversation = str(uuid.uuid4())  # Claude Code's own session id, so its own --resume can name it
    first = launch(env, work, "--session-id", session, *claude_args("FIRST-PROMPT hello", "--session-id", conversation))
    assert first.returncode == 0, explain(first, fake_model)
    assert session_state(hub, session)["binding"] == "global"

    # Claude's own resume without the amux session is refused: the conversation's binding would be unknown.
    refused = launch(env, work, *claude_args("again", "--resume", conversation))
    assert refused.returncode == 2 and "--resume SESSION" in refused.stderr, refused.stderr[-2000:]

    # The policy changes under the stored conversation: the resume keeps its binding, and the Hub refuses it.
    hub.configure("memory.isolation", "user")
    hub.restart()
    fake_model.script(ToolCall("mcp__amux__memory_search", {"query": WORD}), Text("finished"))
    resumed = launch(env, work, "--resume", session,
                     *claude_args("SECOND-PROMPT What do I prefer?", "--resume", conversation))
    assert resumed.returncode == 0, explain(resumed, fake_model)
    assert any("global" in line for line in notices(resumed)), resumed.stderr[-2000:]
    assert session_state(hub, session)["binding"] == "global"
    turns = fake_model.turns(CLAUDE_TURNS)
    assert len(turns) == 3, explain(resumed, fake_model)
    assert "FIRST-PROMPT" in json.dumps(turns[1]["messages"]), "Claude Code really resumed its own conversation"
    assert anthropic_system(turns[1]).count(MCP_PROTOCOL) == 1
    results = json.dumps(anthropic_tool_results(turns[2]))
    assert "binding_mismatch" in results and SNIPPET not in results, results[:2000]


def test_claude_waits_for_a_slow_amux_server(
        agents: Path, hub: HubProcess, tmp_path: Path, fake_model: FakeModel) -> None:
    env = claude_env(agents, hub, tmp_path / "home", fake_model)
    proc = launch(env, tmp_path / "work", *claude_args("hello", "--no-session-persistence"),
                  amux=[str(slow_amux(tmp_path / "slow"))])
    assert proc.returncode == 0, explain(proc, fake_model)
    turns = fake_model.turns(CLAUDE_TURNS)
    assert turns, explain(proc, fake_model)
    assert sorted(n for n in anthropic_tool_names(turns[0]) if n.startswith("mcp__amux__")) == FULL_NAMES


# -- Codex ------------------------------------------------------------------------------------------------


def test_codex_merges_developer_instructions_reaches_the_hub_and_resume_keeps_one_copy(
        agents: Path, hub: HubProcess, tmp_path: Path, fake_model: FakeModel) -> None:
    seeded(hub, ENTRY)
    home = tmp_path / "home"
    env = launch_env(agents, hub, home)
    config = home / ".codex" / "config.toml"
    config.write_bytes(b'# my own Codex settings\ndeveloper_instructions = "USER-DEV-RULE: answer briefly."\n')
    before = config.read_bytes()
    work = tmp_path / "work"
    session = str(uuid.uuid4())
    fake_model.script(ToolCall("mcp__amux__memory_search", {"query": WORD}), Text("finished"))

    first = launch(env, work, "--session-id", session, "codex", "exec", "--skip-git-repo-check",
                   *codex_provider(fake_model), "FIRST-PROMPT what do I prefer?")
    assert first.returncode == 0, explain(first, fake_model)
    assert any("global" in line for line in notices(first)), first.stderr[-2000:]
    assert session_state(hub, session)["binding"] == "global"
    turns = fake_model.turns(CODEX_TURNS)
    assert len(turns) == 2, explain(first, fake_model)
    developer = "\n".join(responses_texts(turns[0], "developer"))
    assert developer.count(MCP_PROTOCOL) == 1, developer[:3000]
    assert sum(s.count(MCP_PROTOCOL) for s in strings(turns[0])) == 1, "one block in the whole request"
    assert developer.count("USER-DEV-RULE") == 1, "the user's developer_instructions are merged, once"
    assert set(FULL_NAMES) <= set(responses_tool_names(turns[0]))
    outputs = json.dumps(responses_tool_outputs(turns[1]))
    assert SNIPPET in outputs and "MEMORY.md" in outputs, outputs[:2000]
    assert first.stdout.strip().endswith("finished")
    assert config.read_bytes() == before, "the user's config.toml is untouched"

    # Resume the same Codex thread through a resumed launch: the instructions stay one copy.
    fake_model.script(Text("again"))
    resumed = launch(env, work, "--resume", session, "codex", "exec", "--skip-git-repo-check",
                     *codex_provider(fake_model), "resume", "--last", "SECOND-PROMPT")
    assert resumed.returncode == 0, explain(resumed, fake_model)
    assert any("global" in line for line in notices(resumed)), resumed.stderr[-2000:]
    turn = fake_model.turns(CODEX_TURNS)[-1]
    users = "\n".join(responses_texts(turn, "user"))
    assert "FIRST-PROMPT" in users and "SECOND-PROMPT" in users, "a real resume of the first thread"
    developer = "\n".join(responses_texts(turn, "developer"))
    assert developer.count(MCP_PROTOCOL) == 1 and developer.count("USER-DEV-RULE") == 1, developer[:3000]
    assert set(FULL_NAMES) <= set(responses_tool_names(turn))
    assert config.read_bytes() == before


def test_codex_waits_for_a_slow_amux_server_and_a_profile_keeps_its_instructions_but_not_its_memory(
        agents: Path, hub: HubProcess, tmp_path: Path, fake_model: FakeModel) -> None:
    home = tmp_path / "home"
    env = launch_env(agents, hub, home)
    codex_home = home / ".codex"
    (codex_home / "config.toml").write_text('developer_instructions = "TOP-LEVEL-RULE"\n')
    # Codex 0.171's profile layout; this profile also switches Codex's own memories on.
    (codex_home / "work.config.toml").write_text('developer_instructions = "PROFILE-RULE"\n'
                                                 '[features]\nmemories = true\n[memories]\nuse_memories = true\n')
    (codex_home / "memories").mkdir()
    (codex_home / "memories" / "memory_summary.md").write_text("## User preferences\n- NATIVEMEMWORD tabs\n")
    work = tmp_path / "work"
    work.mkdir()
    # The control: Codex itself, with that profile, injects its native memory.
    direct = subprocess.run([str(agents / "codex"), "-p", "work", "exec", "--skip-git-repo-check",
                             *codex_provider(fake_model), "hello"], capture_output=True, text=True, env=env, cwd=work,
                            timeout=120, stdin=subprocess.DEVNULL)
    assert direct.returncode == 0, direct.stderr[-2000:]
    assert "NATIVEMEMWORD" in json.dumps(fake_model.turns(CODEX_TURNS))
    seen = len(fake_model.turns(CODEX_TURNS))

    proc = launch(env, work, "codex", "-p", "work", "exec", "--skip-git-repo-check", *codex_provider(fake_model),
                  "hello", amux=[str(slow_amux(tmp_path / "slow"))])
    assert proc.returncode == 0, explain(proc, fake_model)
    turns = fake_model.turns(CODEX_TURNS)[seen:]
    assert turns, explain(proc, fake_model)
    developer = "\n".join(responses_texts(turns[0], "developer"))
    assert developer.count("PROFILE-RULE") == 1 and "TOP-LEVEL-RULE" not in developer, developer[:3000]
    assert developer.count(MCP_PROTOCOL) == 1
    assert set(FULL_NAMES) <= set(responses_tool_names(turns[0])), "a required server is waited for"
    assert "NATIVEMEMWORD" not in json.dumps(turns), "the launch's -c overrides outrank the profile"


# -- Pi ---------------------------------------------------------------------------------------------------


def test_pi_gets_the_cli_protocol_once_and_its_shell_reaches_the_hub(
        agents: Path, hub: HubProcess, tmp_path: Path, fake_model: FakeModel) -> None:
    seeded(hub, ENTRY)
    home = tmp_path / "home"
    env = launch_env(agents, hub, home)
    provider = {"providers": {"fake": {"baseUrl": fake_model.url, "api": "anthropic-messages", "apiKey": "x",
                                       "models": [{"id": "fake-model"}]}}}
    (home / ".pi" / "agent" / "models.json").write_text(json.dumps(provider))
    fake_model.script(ToolCall("bash", {"command": f"amux memory search {WORD}"}), Text("finished"))

    proc = launch(env, tmp_path / "work", "pi", "-p", "--no-session", "--provider", "fake", "--model", "fake-model",
                  "--append-system-prompt", "PI-USER-RULE", "What do I prefer for indentation?")
    assert proc.returncode == 0, explain(proc, fake_model)
    assert any("global" in line for line in notices(proc)), proc.stderr[-2000:]
    turns = fake_model.turns(CLAUDE_TURNS)
    assert len(turns) == 2, explain(proc, fake_model)
    system = anthropic_system(turns[0])
    assert system.count(CLI_PROTOCOL) == 1, system[-3000:]
    assert MCP_PROTOCOL not in system
    assert system.count("PI-USER-RULE") == 1
    results = json.dumps(anthropic_tool_results(turns[1]))
    assert SNIPPET in results and "MEMORY.md" in results, results[:2000]
    assert proc.stdout.strip() == "finished"


# -- an isolated launch (--as-user), for real ---------------------------------------------------------------------


@pytest.fixture
def throwaway_user() -> Iterator[tuple[str, int, Path]]:
    """A real account made with useradd (name, uid, home), deleted with its home afterwards; root only."""
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("--as-user with a real account needs root and useradd")
    name = f"amuxt{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", name], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"useradd failed: {made.stderr.strip()}")
    try:
        import pwd

        entry = pwd.getpwnam(name)
        yield name, entry.pw_uid, Path(entry.pw_dir)
    finally:
        subprocess.run(["userdel", "--remove", name], capture_output=True)


def test_codex_as_another_user_gets_its_own_codex_home_and_reaches_the_hub(
        agents: Path, hub_factory: Any, throwaway_user: tuple[str, int, Path], fake_model: FakeModel) -> None:
    python = readable_python()
    if python is None:
        pytest.skip("no Python readable by other users (the interpreter must be world-executable)")
    name, uid, user_home = throwaway_user
    assert not (user_home / ".codex").exists()
    shared = Path(tempfile.mkdtemp(prefix="amux-agent-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        hub = seeded(hub_factory(isolation="user", settings={"hub.socket_path": str(shared / "hub.sock"),
                                                             "hub.socket_mode": "0666"}), ENTRY)
        # The user's own memory: the launch binds that user's scope, not root's.
        r = subprocess.run([str(readable_amux(shared, python)), "memory", "upsert", "MEMORY.md",
                            "--expected-revision", "absent"], input=ENTRY.encode(), capture_output=True,
                           env={"PATH": "/usr/bin:/bin", "HOME": str(user_home), "AMUX_HUB": str(hub.socket)},
                           user=uid, group=uid, cwd="/")
        assert r.returncode == 0, r.stderr
        work = shared / "work"
        work.mkdir(mode=0o777)
        work.chmod(0o777)
        env = launch_env(agents, hub, shared / "root-home")
        fake_model.script(ToolCall("mcp__amux__memory_search", {"query": WORD}), Text("finished"))
        proc = launch(env, work, "--as-user", name, "codex", "exec", "--skip-git-repo-check",
                      *codex_provider(fake_model), "What do I prefer?", amux=[str(shared / "bin" / "amux")])
        assert proc.returncode == 0, explain(proc, fake_model)
        assert any(f"memory principal:{name} " in line for line in notices(proc)), proc.stderr[-2000:]
        turns = fake_model.turns(CODEX_TURNS)
        assert len(turns) == 2, explain(proc, fake_model)
        outputs = json.dumps(responses_tool_outputs(turns[1]))
        assert SNIPPET in outputs, outputs[:2000]
        # Codex needs its CODEX_HOME: the user's own ~/.codex, made for them (0700), kept after the run.
        st = (user_home / ".codex").stat()
        assert (st.st_uid, st.st_mode & 0o777) == (uid, 0o700)
        assert any((user_home / ".codex").iterdir()), "Codex really ran there"
    finally:
        shutil.rmtree(shared, ignore_errors=True)


# -- amux options after AGENT --------------------------------------------------------------------------


@pytest.mark.parametrize("agent", ["claude", "codex", "pi"])
def test_the_agents_own_options_named_like_amux_options_are_the_ones_that_pass_through(
        agents: Path, hub: HubProcess, tmp_path: Path, agent: str) -> None:
    from amux_memory.launch.misplaced import AGENT_OWN_OPTIONS
    from amux_memory.tools.cli.launch import option_arities

    env = launch_env(agents, hub, tmp_path / "home")
    helps = [subprocess.run([str(agents / agent), *sub, "--help"], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=60, stdin=subprocess.DEVNULL)
             for sub in ([], ["exec"], ["resume"]) if agent == "codex" or not sub]
    texts = [proc.stdout + proc.stderr for proc in helps]  # Pi prints its help on stderr
    assert all("--help" in text or "-h" in text for text in texts)
    mentioned = {name for name in option_arities() if any(re.search(rf"(?<![\w-]){name}(?![\w-])", t) for t in texts)}
    assert mentioned == AGENT_OWN_OPTIONS[agent]
    # The real agent never sees a misplaced amux option: refused, nothing stored.
    proc = launch(env, tmp_path / "work", agent, "--print-spec", "-p", "hi")
    assert proc.returncode == 2, proc.stderr
    assert f"put it before the agent: amux launch --print-spec {agent} -p hi" in proc.stderr
    assert not (hub.home / "sessions").exists()
