"""``amux launch`` through the real CLI and a real Hub, with a stand-in agent (DESIGN.md §10).

The stand-in is a small Python script installed as the agent program (via
``AMUX_LAUNCH_<AGENT>``): it records its argv, environment and uid to a JSON
file and can run one command with the environment it got (``STANDIN_RUN``;
``"@mcp"`` stands for the MCP server command the launch configured), so the
binding/resume/failure matrix is checked end to end without a model.  The
real Claude Code / Codex / Pi runs are ``test_launch_agents.py``; the real
``codex app-server`` (and a fake one that refuses) are driven here.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from amux_memory.launch import plan, read_context
from amux_memory.launch.agents import MEMORY_DIR
from amux_memory.launch.codex_app_server import CodexAppServer, start_memory_thread
from amux_memory.launch.errors import LaunchError
from amux_memory.protocol.agent_protocol import render
from amux_memory.protocol.errors import EXIT_CODES, ErrorCode
from tests.conftest import CliResult, HubProcess, amux_argv, make_hub
from tests.helpers import wait_until
from tests.other_users import free_uid, readable_amux, readable_python

MCP = render("mcp")
CLI = render("cli")

STANDIN = r'''#!{python}
import json, os, shutil, subprocess, sys
record = {"argv": sys.argv, "env": dict(os.environ), "uid": os.getuid(), "gid": os.getgid(),
          "which": {name: shutil.which(name) for name in ("amux", "python3", "pip")}}
first = os.environ.get("PATH", "").split(os.pathsep)[0]
record["path0"] = sorted(os.listdir(first)) if os.path.isdir(first) else None
if os.path.isdir(os.environ.get("CODEX_HOME", "/nonexistent")):
    st = os.stat(os.environ["CODEX_HOME"])
    record["codex_home"] = {"uid": st.st_uid, "mode": st.st_mode & 0o777}
run = os.environ.get("STANDIN_RUN")
if run:
    cmd = json.loads(run)
    if cmd[0] == "@mcp":
        config = [a for a in sys.argv if a.startswith("--mcp-config=")]
        if config:
            cmd[0] = json.loads(config[0].split("=", 1)[1])["mcpServers"]["amux"]["command"]
        else:  # Codex: -c mcp_servers.amux.command="..."
            import tomllib
            item = next(a for a in sys.argv if a.startswith("mcp_servers.amux.command="))
            cmd[0] = tomllib.loads("v = " + item.split("=", 1)[1])["v"]
    found = shutil.which(cmd[0])
    if found:
        st = os.stat(found)
        record["amux"] = {"path": found, "uid": st.st_uid, "gid": st.st_gid, "mode": st.st_mode & 0o777,
                          "dir_uid": os.stat(os.path.dirname(found)).st_uid,
                          "dir_mode": os.stat(os.path.dirname(found)).st_mode & 0o777}
    proc = subprocess.run(cmd, capture_output=True)
    record["run"] = {"code": proc.returncode, "stdout": proc.stdout.decode(), "stderr": proc.stderr.decode()}
with open(os.environ["STANDIN_OUT"], "w") as fh:
    json.dump(record, fh)
if os.environ.get("STANDIN_SLEEP"):
    import time
    time.sleep(float(os.environ["STANDIN_SLEEP"]))  # an agent still at work, for the launcher to signal
sys.exit(int(os.environ.get("STANDIN_EXIT", "0")))
'''


def install_standin(directory: Path, name: str, python: str = sys.executable) -> Path:
    path = directory / name
    path.write_text(STANDIN.replace("{python}", python))
    path.chmod(0o755)
    return path


class Launcher:
    """Runs ``amux launch`` against one Hub with stand-in agents; ``record`` is what the last agent saw."""

    def __init__(self, hub: HubProcess, work: Path, argv: list[str] | None = None) -> None:
        self.hub = hub
        self.work = work
        self.argv = argv or amux_argv()
        self.out = work / "standin.json"
        self.env = {**hub.env}
        for agent in ("claude", "codex", "pi"):
            self.env[f"AMUX_LAUNCH_{agent.upper()}"] = str(install_standin(work, agent))
        self.env["STANDIN_OUT"] = str(self.out)

    def __call__(self, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> CliResult:
        self.out.unlink(missing_ok=True)
        # In the work folder, outside any git repository: the protocol gets no project line (DESIGN.md §24).
        proc = subprocess.run([*self.argv, "launch", *args], capture_output=True, stdin=subprocess.DEVNULL,
                              env={**self.env, **(env or {})}, timeout=timeout, cwd=self.work)
        return CliResult(proc.returncode, proc.stdout, proc.stderr.decode(errors="replace"))

    @property
    def ran(self) -> bool:
        return self.out.exists()

    @property
    def record(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.out.read_text())
        return data

    def session(self, session_id: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.hub.home / "sessions" / f"{session_id}.json").read_text())
        return data


def amux_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("amux:")]


def memory_flags(argv: list[str]) -> list[str]:
    return [a for a in argv if a.startswith(("--mcp-config", "--append-system-prompt")) or "mcp_servers" in a
            or "memories" in a or "developer_instructions" in a]


@pytest.fixture
def launcher(hub: HubProcess, tmp_path: Path) -> Launcher:
    work = tmp_path / "work"
    work.mkdir()
    return Launcher(hub, work)


# -- binding, resume, failures ------------------------------------------------------------------------------


def test_fresh_launch_stores_the_binding_and_exits_with_the_agents_status(launcher: Launcher) -> None:
    r = launcher("--session-id", "s-fresh", "claude", "-p", "hi", "--append-system-prompt", "Mine.",
                 env={"STANDIN_EXIT": "7", "STANDIN_RUN": json.dumps(["@mcp", "memory", "search", "anything"])})
    assert r.returncode == 7, r.stderr
    state = launcher.session("s-fresh")
    assert state["binding"] == "global" and state["agent"] == "claude" and state["reason"] is None
    assert state["hub"] == str(launcher.hub.socket) and state["created"].endswith("Z")
    mode = (launcher.hub.home / "sessions" / "s-fresh.json").stat().st_mode
    assert stat.S_IMODE(mode) == 0o600
    rec = launcher.record
    argv, env = rec["argv"], rec["env"]
    appends = [argv[i + 1] for i, a in enumerate(argv) if a == "--append-system-prompt"]
    assert appends == ["Mine.\n\n" + MCP]
    assert argv[-2:] == ["-p", "hi"]
    assert env["CLAUDE_CODE_DISABLE_AUTO_MEMORY"] == "1"
    assert env["AMUX_MEMORY_BINDING"] == "global" and env["AMUX_HUB"] == str(launcher.hub.socket)
    assert rec["run"]["code"] == 0, rec["run"]  # the configured MCP command is a working amux
    lines = amux_lines(r.stderr)
    assert len(lines) == 1 and "s-fresh" in lines[0] and "memory global" in lines[0]
    assert "CLAUDE_CODE_DISABLE_AUTO_MEMORY=1" in lines[0]
    assert r.stdout == b""  # the agent's stdout is the agent's: the launcher adds nothing


@pytest.mark.slow
def test_resume_keeps_the_binding_and_a_policy_change_is_binding_mismatch(launcher: Launcher) -> None:
    assert launcher("--session-id", "s-res", "claude", "-p", "one").returncode == 0
    hub = launcher.hub
    hub.configure("memory.isolation", "user")
    hub.restart()
    r = launcher("--resume", "s-res", "claude", "-p", "two",
                 env={"STANDIN_RUN": json.dumps(["@mcp", "memory", "search", "x"])})
    assert r.returncode == 0, r.stderr
    rec = launcher.record
    assert rec["env"]["AMUX_MEMORY_BINDING"] == "global"  # the stored binding, not the Hub's new answer
    assert any(a.startswith("--mcp-config=") for a in rec["argv"])
    assert rec["run"]["code"] == EXIT_CODES[ErrorCode.BINDING_MISMATCH], rec["run"]
    error = json.loads(rec["run"]["stdout"])["error"]
    assert error["code"] == "binding_mismatch" and "new conversation" in error["message"]
    lines = amux_lines(r.stderr)
    assert len(lines) == 2 and "binding_mismatch" in lines[1] and "new conversation" in lines[1]
    assert launcher.session("s-res")["binding"] == "global"  # resuming never rewrites the stored binding


@pytest.mark.slow
def test_disabled_hub_launches_without_memory_and_a_stored_null_stays_null(hub_factory: Any, tmp_path: Path) -> None:
    hub = hub_factory(enabled=False)
    launch = Launcher(hub, tmp_path)
    r = launch("--session-id", "s-off", "claude", "-p", "hi", "--append-system-prompt", "Mine.")
    assert r.returncode == 0, r.stderr
    assert launch.record["argv"][1:] == ["-p", "hi", "--append-system-prompt", "Mine."]  # untouched
    assert "CLAUDE_CODE_DISABLE_AUTO_MEMORY" not in launch.record["env"]
    assert "AMUX_MEMORY_BINDING" not in launch.record["env"]
    [line] = amux_lines(r.stderr)
    assert "warning" in line and "disabled" in line and "s-off" in line
    state = launch.session("s-off")
    assert state["binding"] is None and "disabled" in state["reason"]
    assert f"memory.enabled true --home {hub.home}" in state["reason"], state  # the fix names this home
    hub.configure("memory.enabled", "true")
    hub.restart()
    r = launch("--resume", "s-off", "claude", "-p", "again")
    assert r.returncode == 0, r.stderr
    assert memory_flags(launch.record["argv"]) == [] and "AMUX_MEMORY_BINDING" not in launch.record["env"]
    assert "stays without memory" in r.stderr
    assert launch.session("s-off")["binding"] is None
    # A new session on the now-enabled Hub does get memory.
    assert launch("codex", "exec", "x").returncode == 0
    assert memory_flags(launch.record["argv"])


def test_hub_down_launch_warns_starts_without_memory_and_creates_no_store(tmp_path: Path) -> None:
    hub = make_hub(tmp_path, start=False)
    (tmp_path / "work").mkdir()
    launch = Launcher(hub, tmp_path / "work")
    for agent in ("claude", "codex", "pi"):
        r = launch(agent, "-p", "hi", env={"STANDIN_EXIT": "3"})
        assert r.returncode == 3, r.stderr
        assert launch.record["argv"][1:] == ["-p", "hi"]
        [line] = amux_lines(r.stderr)
        assert "warning" in line and "unreachable" in line
    assert not (hub.home / "memory").exists()  # never a local store
    sessions = [json.loads(p.read_text()) for p in (hub.home / "sessions").iterdir()]
    assert len(sessions) == 3 and all(s["binding"] is None and "unreachable" in s["reason"] for s in sessions)


def test_resume_with_a_stored_binding_keeps_memory_while_the_hub_is_down(launcher: Launcher) -> None:
    assert launcher("--session-id", "s-keep", "pi", "-p", "one").returncode == 0
    launcher.hub.stop()
    r = launcher("--resume", "s-keep", "pi", "-p", "two")
    assert r.returncode == 0, r.stderr
    argv = launcher.record["argv"]
    assert argv[1:3] == ["--append-system-prompt", CLI]
    assert launcher.record["env"]["AMUX_MEMORY_BINDING"] == "global"
    lines = amux_lines(r.stderr)
    assert len(lines) == 2 and "no Hub answers" in lines[1]


@pytest.mark.slow
def test_resume_while_disabled_keeps_memory_and_warns(launcher: Launcher) -> None:
    assert launcher("--session-id", "s-dis", "codex", "exec", "one").returncode == 0
    launcher.hub.configure("memory.enabled", "false")
    launcher.hub.restart()
    r = launcher("--resume", "s-dis", "codex", "exec", "two")
    assert r.returncode == 0, r.stderr
    assert "features.memories=false" in launcher.record["argv"]
    assert "disabled" in amux_lines(r.stderr)[1]


@pytest.mark.slow
def test_unknown_session_unknown_agent_and_missing_executable(launcher: Launcher) -> None:
    r = launcher("--resume", "no-such-session", "claude")
    assert r.returncode == EXIT_CODES[ErrorCode.NOT_FOUND]
    assert json.loads(r.stdout)["error"]["data"]["step"] == "session" and "no-such-session" in r.stderr
    r = launcher("aider", "--model", "x")
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST]
    error = json.loads(r.stdout)["error"]
    assert "MCP tool configuration" in error["message"] and "system-prompt slot" in error["message"]
    r = launcher("claude", env={"AMUX_LAUNCH_CLAUDE": str(launcher.work / "nowhere")})
    assert r.returncode == EXIT_CODES[ErrorCode.NOT_FOUND] and "AMUX_LAUNCH_CLAUDE" in r.stderr
    r = launcher("pi", env={"AMUX_LAUNCH_PI": "", "PATH": "/nonexistent"})
    assert r.returncode == EXIT_CODES[ErrorCode.NOT_FOUND] and "'pi' on PATH" in r.stderr
    r = launcher("--session-id", "../evil", "claude")
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST]
    assert not launcher.ran
    assert not (launcher.hub.home / "sessions").exists() or not any((launcher.hub.home / "sessions").iterdir())
    r = launcher("--session-id", "dup", "claude")
    assert r.returncode == 0
    r = launcher("--session-id", "dup", "claude")
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and "already exists" in r.stderr
    r = launcher("--resume", "dup", "codex")
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and "launched with claude" in r.stderr


@pytest.mark.slow
def test_agent_arguments_pass_through_unchanged(launcher: Launcher) -> None:
    odd = ["--help", "-h", "--session-id", "agents-own", "--", "--print-spec", "-c", "x=y"]
    assert launcher("--session-id", "s-args", "--", "claude", *odd).returncode == 0
    assert launcher.record["argv"][-len(odd):] == odd
    assert launcher("pi", "--version").returncode == 0
    assert launcher.record["argv"][-1] == "--version"
    r = launcher("--help")
    assert r.returncode == 0 and b"amux launch" in r.stdout and not launcher.ran
    r = launcher("--bogus", "claude")
    assert r.returncode == 2 and "Unknown option: --bogus" in r.stderr and not launcher.ran


@pytest.mark.slow
@pytest.mark.parametrize(("args", "option", "fixed"), [
    (["claude", "--print-spec", "-p", "hi"], "--print-spec", "amux launch --print-spec claude -p hi"),
    (["codex", "exec", "--session-id", "s1", "hi"], "--session-id", "amux launch --session-id s1 codex exec hi"),
    (["codex", "--resume=s1", "exec", "hi"], "--resume", "amux launch --resume=s1 codex exec hi"),
    (["pi", "-p", "hi", "--session-id", "s1"], "--session-id", "amux launch --session-id s1 pi -p hi"),
    (["claude", "--new-session", "-p", "hi"], "--new-session", "amux launch --new-session claude -p hi"),
    (["claude", "-p", "hi", "--as-user", "bob"], "--as-user", "amux launch --as-user bob claude -p hi"),
    (["pi", "--run-dir", "/tmp/r", "-p", "hi"], "--run-dir", "amux launch --run-dir /tmp/r pi -p hi"),
    (["claude", "--pass-env", "A,B", "-p", "hi"], "--pass-env", "amux launch --pass-env A,B claude -p hi"),
    (["--session-id", "s2", "pi", "--print-spec"], "--print-spec", "amux launch --session-id s2 --print-spec pi"),
    (["--print-spec", "claude", "--print-spec", "-p", "hi"], "--print-spec", "amux launch --print-spec claude -p hi"),
])
def test_amux_options_after_the_agent_are_refused_with_the_fixed_command(
        launcher: Launcher, args: list[str], option: str, fixed: str) -> None:
    r = launcher(*args)
    assert r.returncode == 2, r.stderr
    assert f"amux launch: {option} is an amux option; put it before the agent: {fixed}" in r.stderr
    assert not launcher.ran  # no agent started
    assert not (launcher.hub.home / "sessions").exists()  # no session stored
    assert r.stdout == b""


def test_several_misplaced_options_are_named_together(launcher: Launcher, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    r = launcher("pi", "--print-spec", "-p", "hi", "--run-dir", str(run_dir))
    assert r.returncode == 2
    assert (f"--print-spec, --run-dir are amux options; put them before the agent: amux launch --print-spec "
            f"--run-dir {run_dir} pi -p hi") in r.stderr
    assert not launcher.ran and not run_dir.exists() and not (launcher.hub.home / "sessions").exists()


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_agents_own_options_of_the_same_name_and_anything_after_a_double_dash_pass_through(
        launcher: Launcher) -> None:
    # Claude Code has its own --session-id (and --resume, which is its native resume: refused below).
    r = launcher("--session-id", "s-own", "claude", "--session-id", "0f3c0d5e-1111-4222-8333-444455556666",
                 "-p", "hi")
    assert r.returncode == 0, r.stderr
    assert launcher.record["argv"][-3:] == ["0f3c0d5e-1111-4222-8333-444455556666", "-p", "hi"]
    r = launcher("claude", "--resume", "0f3c0d5e-1111-4222-8333-444455556666")
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and "--resume SESSION" in r.stderr
    r = launcher("pi", "--resume")
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and "--resume SESSION" in r.stderr
    assert not launcher.ran
    # After a bare '--' the agent gets everything verbatim, amux option names included.
    r = launcher("--session-id", "s-dash", "codex", "exec", "--", "--print-spec", "--as-user", "x")
    assert r.returncode == 0, r.stderr
    assert launcher.record["argv"][-4:] == ["--", "--print-spec", "--as-user", "x"]


def test_sigterm_to_the_launcher_reaches_the_agent(launcher: Launcher) -> None:
    proc = subprocess.Popen([*launcher.argv, "launch", "pi", "-p", "hi"],
                            env={**launcher.env, "STANDIN_SLEEP": "60"}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(lambda: launcher.ran, 30, "the stand-in agent to run")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM  # the agent got SIGTERM; the launcher reports it like a shell


def test_print_spec_runs_nothing_and_stores_no_session(launcher: Launcher) -> None:
    r = launcher("--print-spec", "--session-id", "s-spec", "codex", "exec", "hi")
    assert r.returncode == 0, r.stderr
    spec = json.loads(r.stdout)
    assert spec["agent"] == "codex" and spec["binding"] == "global" and spec["memory"] is True
    assert spec["argv"][0] == launcher.env["AMUX_LAUNCH_CODEX"] and spec["argv"][-2:] == ["exec", "hi"]
    assert spec["developer_instructions"] == MCP
    assert not launcher.ran
    with pytest.raises(FileNotFoundError):  # a look at the plan starts no conversation to resume
        launcher.session("s-spec")


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_pi_has_only_an_amux_wrapper_on_path_and_the_cli_protocol(launcher: Launcher) -> None:
    word = "zanzibarquux"
    assert launcher.hub.cli("memory", "upsert", "notes/pi.md", "--expected-revision", "absent",
                            input=f"# Pi\n{word} lives here\n".encode()).returncode == 0
    venv_bin = os.path.dirname(amux_argv()[0])
    r = launcher("pi", "-p", "hi", env={"STANDIN_RUN": json.dumps(["amux", "memory", "search", word]),
                                        "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    rec = launcher.record
    assert rec["argv"][1:3] == ["--append-system-prompt", CLI] and rec["argv"][-2:] == ["-p", "hi"]
    assert rec["run"]["code"] == 0, rec["run"]
    assert json.loads(rec["run"]["stdout"])["matches"][0]["path"] == "notes/pi.md"
    # `amux` is a wrapper alone in a launch-local directory: amux's virtualenv (its python3, pip) stays off PATH.
    path = rec["env"]["PATH"].split(os.pathsep)
    assert path[0] == os.path.dirname(rec["amux"]["path"]) and path[1:] == ["/usr/bin", "/bin"]
    assert rec["path0"] == ["amux"]
    assert venv_bin not in path and rec["which"]["python3"] != os.path.join(venv_bin, "python3")
    assert not os.path.exists(path[0]), "the wrapper's run directory is removed after the run"
    assert "Pi has no built-in long-term memory" in r.stderr
    spec = json.loads(launcher("--print-spec", "pi", "-p", "hi", env={"PATH": "/usr/bin:/bin"}).stdout)
    assert venv_bin not in spec["env_set"]["PATH"].split(os.pathsep)
    [wrapper] = spec["files"]
    assert wrapper["path"].endswith("/agent-config/memory/amux") and wrapper["path"] in spec["cleanup"][0] + "/amux"
    assert not os.path.exists(os.path.dirname(wrapper["path"]))  # --print-spec leaves nothing behind


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_pi_run_dir_keeps_nothing_of_the_launch(launcher: Launcher, tmp_path: Path) -> None:
    existing = tmp_path / "rd"
    existing.mkdir()
    (existing / "mine.txt").write_text("the user's")
    assert launcher("--run-dir", str(existing), "pi", "-p", "hi").returncode == 0
    assert sorted(os.listdir(existing)) == ["mine.txt"]  # no empty agent-config/ left behind
    missing = tmp_path / "rd-new"
    assert launcher("--run-dir", str(missing), "pi", "-p", "hi").returncode == 0
    assert not missing.exists(), "a run directory made for this launch is removed with it"
    # A printed spec, run later by a Runtime, cleans up after itself too.
    from amux_memory.launch.runner import run
    from amux_memory.launch.spec import LaunchSpec

    spec = LaunchSpec.from_dict(json.loads(launcher("--print-spec", "pi", "-p", "hi").stdout))
    run_dir = Path(spec.files[0].path).parent.parent.parent
    env = {**os.environ, **launcher.env}
    env["PATH"] = os.environ.get("PATH", "")
    spec = LaunchSpec.from_dict({**spec.as_dict(), "argv": [launcher.env["AMUX_LAUNCH_PI"], "-p", "hi"]})
    assert run(spec, base_env=env) == 0
    assert not run_dir.exists()


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_refused_arguments_store_no_session_and_ask_no_hub(launcher: Launcher) -> None:
    sessions = launcher.hub.home / "sessions"
    before = sorted(os.listdir(sessions)) if sessions.exists() else []
    for args in (["codex", "-c", "features.memories=true", "exec", "hi"],
                 ["claude", "--mcp-config", '{"mcpServers":{"amux":{"command":"/bin/true"}}}', "-p", "hi"],
                 ["--print-spec", "claude", "--settings", "/nonexistent/settings.json", "-p", "hi"]):
        r = launcher(*args)
        assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST], (args, r.stderr)
        assert not launcher.ran
    after = sorted(os.listdir(sessions)) if sessions.exists() else []
    assert after == before


@pytest.mark.slow
def test_empty_session_values_are_usage_errors(launcher: Launcher) -> None:
    for args in (["--resume", ""], ["--resume="], ["--session-id", ""], ["--as-user", ""], ["--run-dir="]):
        r = launcher(*args, "claude", "-p", "hi")
        assert r.returncode == 2 and "non-empty value" in r.stderr, (args, r.stderr)
    assert not launcher.ran
    assert not (launcher.hub.home / "sessions").exists()  # never quietly a new session
    r = launcher("--resume", "x", "--new-session", "claude")
    assert r.returncode == 2 and "give one" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("agent", "args"), [
    ("claude", ["--continue", "-p", "hi"]),
    ("claude", ["-p", "hi", "--resume", "0f3c0d5e-1111-4222-8333-444455556666"]),
    ("codex", ["exec", "--skip-git-repo-check", "resume", "--last", "hi"]),
    ("codex", ["resume", "--last"]),
    ("pi", ["--session", "0f3c", "-p", "hi"]),
])
def test_agents_own_resume_needs_the_amux_session(launcher: Launcher, agent: str, args: list[str]) -> None:
    r = launcher(agent, *args)
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST], r.stderr
    error = json.loads(r.stdout)["error"]
    assert error["data"]["step"] == "session" and "--resume SESSION" in error["message"]
    assert "--new-session" in error["message"]
    assert not launcher.ran and not (launcher.hub.home / "sessions").exists()
    # Named explicitly: the agent runs, and the notices say the binding is the one resolved now.
    r = launcher("--new-session", "--session-id", "s-new", agent, *args)
    assert r.returncode == 0, r.stderr
    lines = amux_lines(r.stderr)
    assert len(lines) == 2 and "resolved now" in lines[1] and "may differ" in lines[1]
    assert launcher.session("s-new")["binding"] == "global"
    # The way the design wants it: the stored session's binding, no warning.
    r = launcher("--resume", "s-new", agent, *args)
    assert r.returncode == 0 and len(amux_lines(r.stderr)) == 1, r.stderr


@pytest.mark.slow
@pytest.mark.alone  # measures elapsed time
def test_a_trickling_hub_cannot_hold_the_launch(tmp_path: Path) -> None:
    # One byte every 0.3 s: each read succeeds, so only an overall deadline ends the hello.
    with _stub_hub(tmp_path / "trickle.sock", trickle=0.3) as sock:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
        env.update(AMUX_HUB=str(sock), AMUX_HOME=str(tmp_path / "home"))
        started = time.monotonic()
        proc = subprocess.run([*amux_argv(), "launch", "--print-spec", "claude", "-p", "hi"], env=env,
                              capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    spec = json.loads(proc.stdout)
    assert spec["memory"] is False and "within 2.5 s" in spec["notices"][0]
    assert elapsed < 8, elapsed


@pytest.mark.slow
def test_hub_client_connect_deadline(tmp_path: Path) -> None:
    from amux_memory.protocol.errors import HubError
    from amux_memory.tools.client.blocking import HubClient

    with _stub_hub(tmp_path / "t.sock", trickle=0.2) as sock:
        started = time.monotonic()
        with pytest.raises(HubError) as err:
            HubClient(sock, timeout=30, connect_deadline=1.0).connect()
        assert time.monotonic() - started < 3 and "within 1 s" in err.value.message
        os.environ["AMUX_CONNECT_DEADLINE"] = "0.5"
        try:
            client = HubClient(sock, timeout=30)
        finally:
            del os.environ["AMUX_CONNECT_DEADLINE"]
        assert client.connect_deadline == 0.5
        assert HubClient(sock).connect_deadline is None  # unset: as before, per-operation timeouts only


@contextmanager
def _stub_hub(path: Path, *, trickle: float | None = None) -> Iterator[Path]:
    """A Unix socket that accepts and never answers a frame: silent, or one byte every ``trickle`` seconds."""
    import socket
    import threading

    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    path.chmod(0o666)
    server.listen(8)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        # A frame header announcing 64 KiB, then its body one byte at a time: never a whole reply.
        pending = [b"\x00\x01\x00\x00"] + [b"x"] * 65536
        with conn:
            while not stop.wait(trickle or 0.2):
                if trickle:
                    try:
                        conn.sendall(pending.pop(0))
                    except OSError:
                        return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield path
    finally:
        stop.set()
        server.close()


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_users_config_files_are_byte_identical(launcher: Launcher, tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    config = codex_home / "config.toml"
    config.write_bytes(b'# mine\ndeveloper_instructions = "Always answer in French."\n[features]\nmemories = true\n')
    claude_dir = tmp_path / "claude-config"
    claude_dir.mkdir()
    settings = claude_dir / "settings.json"
    settings.write_bytes(b'{"autoMemoryEnabled": true, "model": "x"}\n')
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude.json").write_bytes(b"{}\n")
    files = [config, settings, home / ".claude.json"]
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files}
    env = {"CODEX_HOME": str(codex_home), "CLAUDE_CONFIG_DIR": str(claude_dir), "HOME": str(home)}
    assert launcher("codex", "exec", "hi", env=env).returncode == 0
    argv = launcher.record["argv"]
    [dev] = [a.split("=", 1)[1] for a in argv if a.startswith("developer_instructions=")]
    merged = tomllib.loads(f"v = {dev}")["v"]
    assert merged == "Always answer in French.\n\n" + MCP
    assert "features.memories=false" in argv  # the launch overrides the user's true, for this process only
    assert launcher("claude", "-p", "hi", env=env).returncode == 0
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files} == before
    assert sorted(p.name for p in claude_dir.iterdir()) == ["settings.json"]


# -- isolated launches (--as-user) ---------------------------------------------------------------------------


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="--as-user needs root")


def _isolated_launcher(hub_factory: Any, shared_dir: Path, **hub_kw: Any) -> Launcher:
    """A Launcher whose amux, stand-ins, output file and Hub socket another uid can use."""
    python = readable_python()
    if python is None:
        pytest.skip("no Python readable by other users (the interpreter must be world-executable)")
    hub = hub_factory(settings={"hub.socket_path": str(shared_dir / "hub.sock"), "hub.socket_mode": "0666"},
                      **hub_kw)
    out_dir = shared_dir / "out"
    out_dir.mkdir(mode=0o777)
    out_dir.chmod(0o777)
    launch = Launcher(hub, shared_dir, argv=[str(readable_amux(shared_dir, python))])
    for agent in ("claude", "codex", "pi"):
        launch.env[f"AMUX_LAUNCH_{agent.upper()}"] = str(install_standin(shared_dir, agent, python))
    launch.out = out_dir / "standin.json"
    launch.env.update(STANDIN_OUT=str(launch.out), AMUX_TOKEN="amux_not_for_the_agent",
                      CLAUDE_CONFIG_DIR="/root/.claude", CODEX_HOME="/root/.codex", ROOT_ONLY_SECRET="s3cret")
    return launch


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("isolation", ["off", "user"])
def test_as_user_runs_the_agent_with_a_private_copy(hub_factory: Any, shared_dir: Path, isolation: str) -> None:
    launch = _isolated_launcher(hub_factory, shared_dir, isolation=isolation)
    uid = free_uid(43001)
    run_dir = shared_dir / "run"
    r = launch("--session-id", f"iso-{isolation}", "--as-user", str(uid), "--run-dir", str(run_dir),
               "--pass-env", "STANDIN_*", "claude", "-p", "hi",
               env={"STANDIN_RUN": json.dumps(["@mcp", "memory", "search", "x"])})
    assert r.returncode == 0, r.stderr + r.stdout.decode()
    rec = launch.record
    want = "global" if isolation == "off" else f"principal:uid:{uid}"
    assert launch.session(f"iso-{isolation}")["binding"] == want
    assert launch.session(f"iso-{isolation}")["as_user"] == str(uid)
    assert (rec["uid"], rec["gid"]) == (uid, uid)
    env = rec["env"]
    memory_dir = str(run_dir / MEMORY_DIR)
    assert env["AMUX_MEMORY_BINDING"] == want
    assert env["PATH"] == memory_dir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert env["HOME"] == str(run_dir / "home") and env["CODEX_HOME"] == str(run_dir / "home" / ".codex")
    assert env["PI_CODING_AGENT_DIR"] == str(run_dir / "home" / ".pi" / "agent")
    # An allow-list of the launcher's environment (plus --pass-env), not all of it.
    assert "CLAUDE_CONFIG_DIR" not in env and "AMUX_TOKEN" not in env and "ROOT_ONLY_SECRET" not in env
    assert env["STANDIN_OUT"] == str(launch.out)
    # The MCP command is the user's own wrapper in <run>/agent-config/memory/, 0700, owned by the user and group ...
    assert rec["amux"]["path"] == memory_dir + "/amux"
    assert (rec["amux"]["uid"], rec["amux"]["gid"], rec["amux"]["mode"], rec["amux"]["dir_uid"],
            rec["amux"]["dir_mode"]) == (uid, uid, 0o700, uid, 0o700)
    # ... and it reaches the Hub as that user, in the scope the session is bound to.
    assert rec["run"]["code"] == 0, rec["run"]
    assert not (run_dir / MEMORY_DIR).exists()  # removed at cleanup


@pytest.mark.slow
@needs_root
def test_as_user_codex_gets_its_own_codex_home(hub_factory: Any, shared_dir: Path) -> None:
    launch = _isolated_launcher(hub_factory, shared_dir)
    uid = free_uid(43201)
    run_dir = shared_dir / "run"
    r = launch("--as-user", str(uid), "--run-dir", str(run_dir), "--pass-env", "STANDIN_*", "codex", "exec", "hi",
               env={"STANDIN_RUN": json.dumps(["@mcp", "memory", "search", "x"])})
    assert r.returncode == 0, r.stderr + r.stdout.decode()
    rec = launch.record
    # Codex refuses a CODEX_HOME that does not exist: the user's own, created empty and theirs.
    assert rec["env"]["CODEX_HOME"] == str(run_dir / "home" / ".codex")
    assert rec["codex_home"] == {"uid": uid, "mode": 0o700}
    assert rec["run"]["code"] == 0, rec["run"]


@pytest.mark.slow
@needs_root
def test_as_user_print_spec_is_a_complete_spec_that_runs(hub_factory: Any, shared_dir: Path) -> None:
    from amux_memory.launch.runner import run
    from amux_memory.launch.spec import LaunchSpec

    launch = _isolated_launcher(hub_factory, shared_dir)
    uid = free_uid(43301)
    run_dir = shared_dir / "run"
    r = launch("--print-spec", "--as-user", str(uid), "--run-dir", str(run_dir), "--pass-env", "STANDIN_*",
               "claude", "-p", "hi")
    assert r.returncode == 0, r.stderr
    assert not launch.ran and not (run_dir / MEMORY_DIR).exists()  # nothing runs, nothing is left
    spec = LaunchSpec.from_dict(json.loads(r.stdout))
    copy, wrapper = spec.files
    assert copy.source is not None and copy.path == str(run_dir / MEMORY_DIR / "amux-entry")
    assert (copy.owner, copy.group, copy.mode) == (uid, uid, 0o700)
    # Whoever runs it later gets everything it names: the copy, the wrapper, the user's directories.
    status = run(spec, base_env={**launch.env, "STANDIN_RUN": json.dumps(["@mcp", "memory", "search", "x"])})
    assert status == 0
    rec = launch.record
    assert rec["uid"] == uid and rec["run"]["code"] == 0, rec.get("run")
    assert not (run_dir / MEMORY_DIR).exists()


@pytest.mark.slow
@needs_root
def test_as_user_probe_is_bounded_and_a_sigterm_leaves_nothing(hub_factory: Any, shared_dir: Path) -> None:
    launch = _isolated_launcher(hub_factory, shared_dir)
    uid = free_uid(43401)
    run_dir = shared_dir / "run"
    entry = str(run_dir / MEMORY_DIR / "amux-entry")
    with _stub_hub(shared_dir / "silent.sock") as silent:
        # A Hub that never answers costs the hello deadline plus the probe's start-up, not 12.5 s.
        started = time.monotonic()
        r = launch("--print-spec", "--as-user", str(uid), "--run-dir", str(run_dir), "claude",
                   env={"AMUX_HUB": str(silent)})
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["memory"] is False and time.monotonic() - started < 7
        # SIGTERM while the probe runs: the launcher stops, the probe goes with it, the copy is removed.
        proc = subprocess.Popen([*launch.argv, "launch", "--as-user", str(uid), "--run-dir", str(run_dir), "claude"],
                                env={**launch.env, "AMUX_HUB": str(silent)}, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_until(lambda: _processes_running(entry), 20, "the probe to start", interval=0.02)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert _processes_running(entry) == [], "no orphaned probe"
    assert not (run_dir / MEMORY_DIR).exists() and not (run_dir / "agent-config").exists()
    assert not launch.ran


def _processes_running(needle: str) -> list[int]:
    """Pids whose command line mentions ``needle`` (from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
@needs_root
def test_as_user_run_dir_the_user_cannot_enter_is_named_and_nothing_is_left(hub_factory: Any,
                                                                            shared_dir: Path) -> None:
    launch = _isolated_launcher(hub_factory, shared_dir)
    uid = free_uid(43501)
    private = shared_dir / "private"
    private.mkdir(mode=0o700)
    r = launch("--as-user", str(uid), "--run-dir", str(private / "run"), "claude")
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST], r.stderr
    error = json.loads(r.stdout)["error"]
    assert error["data"]["step"] == "isolation" and f"cannot enter {private}" in error["message"]
    assert "Python installation" not in error["message"]
    assert list(private.iterdir()) == []  # the run directory it had to create is gone again
    # A run directory that does not exist yet is made for the user, and removed after the run.
    fresh = shared_dir / "fresh" / "run"
    r = launch("--as-user", str(uid), "--run-dir", str(fresh), "--pass-env", "STANDIN_*", "pi", "-p", "hi")
    assert r.returncode == 0, r.stderr
    assert launch.record["uid"] == uid and not (shared_dir / "fresh").exists()


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
@needs_root
def test_as_user_with_an_unreadable_installation_is_an_explicit_error(hub_factory: Any, shared_dir: Path) -> None:
    if not str(Path(sys.executable).resolve()).startswith("/root/"):
        pytest.skip("this interpreter is readable by other users; nothing to refuse")
    hub = hub_factory(settings={"hub.socket_path": str(shared_dir / "hub.sock"), "hub.socket_mode": "0666"})
    launch = Launcher(hub, shared_dir)
    r = launch("--as-user", str(free_uid(43101)), "claude", "-p", "hi")
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST], r.stderr
    error = json.loads(r.stdout)["error"]
    assert error["data"]["step"] == "isolation" and "must be readable" in error["message"]
    assert not launch.ran
    assert not list(Path(tempfile.gettempdir()).glob("amux-run-*/agent-config"))  # the temporary run dir is gone


# -- codex app-server ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def codex_bin(bin_dir: Path) -> Path:
    """The pinned Codex from tests/clients/install.sh (``bin_dir`` installs it, or skips; required with CI=true)."""
    return bin_dir / "codex"


def _codex_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "codex-user"
    (home / ".codex").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMUX_", "CODEX_", "OPENAI_"))}
    env.update(HOME=str(home), CODEX_HOME=str(home / ".codex"))
    return env


@pytest.mark.slow
def test_real_codex_app_server_confirms_memory_off_and_disables_thread_memory(codex_bin: Path, hub: HubProcess,
                                                                              tmp_path: Path) -> None:
    env = _codex_env(tmp_path)
    config = Path(env["CODEX_HOME"]) / "config.toml"
    config.write_text('developer_instructions = "Mine."\n[features]\nmemories = true\n')  # the launch must win
    before = config.read_bytes()
    spec = plan("codex", ["app-server"], binding="global", hub=str(hub.socket), amux_command=amux_argv()[:1],
                executable=str(codex_bin), environ=env,
                context=read_context("codex", [], env))
    with CodexAppServer(spec.argv, env=spec.environment(env), cwd=str(tmp_path)) as server:
        assert spec.developer_instructions is not None
        thread = start_memory_thread(server, developer_instructions=spec.developer_instructions, cwd=str(tmp_path),
                                     thread_params={"approvalPolicy": "never", "sandbox": "read-only"})
        assert thread.memory_settings == {"features.memories": False, "memories.use_memories": False,
                                          "memories.generate_memories": False}
        assert thread.thread_id
        status = server.request("mcpServerStatus/list", {})
        [amux] = [s for s in status["data"] if s["name"] == "amux"]
        assert "memory_search" in amux["tools"]
    assert config.read_bytes() == before


def test_real_codex_app_server_without_the_overrides_is_refused(codex_bin: Path, tmp_path: Path) -> None:
    env = _codex_env(tmp_path)
    (Path(env["CODEX_HOME"]) / "config.toml").write_text("[features]\nmemories = true\n")
    with CodexAppServer([str(codex_bin), "app-server"], env=env, cwd=str(tmp_path)) as server, \
            pytest.raises(LaunchError) as err:
        start_memory_thread(server, developer_instructions=MCP, cwd=str(tmp_path))
    assert err.value.step == "config/read" and "features.memories = true" in err.value.message


FAKE_APP_SERVER = r'''
import json, sys
mode = sys.argv[1]
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method, rid = msg["method"], msg["id"]
    if mode == "exit" and method == "config/read":
        sys.stderr.write("fake: crashing on purpose\n")
        sys.exit(3)
    if mode == "backtrace" and method == "initialize":
        # What Codex prints when it refuses to start: its error, then a long Rust backtrace.
        sys.stderr.write("WARNING: noise\nError: --profile only applies to runtime commands\n\nStack backtrace:\n"
                         + "".join(f"   {n}: <unknown>\n" for n in range(12)))
        sys.exit(1)
    if method == "initialize":
        reply = {"id": rid, "result": {"userAgent": "fake"}}
        print(json.dumps({"method": "configWarning", "params": {"summary": "noise"}}), flush=True)
    elif method == "config/read":
        mem = mode != "memories-true"
        reply = {"id": rid, "result": {"config": {"features": {"memories": False},
                 "memories": {"use_memories": not mem, "generate_memories": False}}}}
    elif method == "thread/start":
        reply = {"id": rid, "result": {"thread": {"id": "thread-1"}}}
    elif method == "thread/memoryMode/set" and mode == "unsupported":
        reply = {"id": rid, "error": {"code": -32600,
                                      "message": "Invalid request: unknown variant `thread/memoryMode/set`"}}
    elif method == "thread/memoryMode/set" and mode == "silent":
        continue
    else:
        reply = {"id": rid, "result": {}}
    print(json.dumps(reply), flush=True)
'''


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "step", "words"), [
    ("unsupported", "thread/memoryMode/set", "unsupported"),
    ("memories-true", "config/read", "memories.use_memories = true"),
    ("exit", "config/read", "crashing on purpose"),
    ("silent", "thread/memoryMode/set", "no reply"),
    ("backtrace", "initialize", "Error: --profile only applies to runtime commands"),
])
def test_fake_app_server_failures_name_the_step(tmp_path: Path, mode: str, step: str, words: str) -> None:
    script = tmp_path / "fake_app_server.py"
    script.write_text(FAKE_APP_SERVER)
    with CodexAppServer([sys.executable, str(script), mode], timeout=3) as server, pytest.raises(LaunchError) as err:
        start_memory_thread(server, developer_instructions=MCP, cwd=str(tmp_path))
    assert err.value.step == step and words in err.value.message, err.value.message


def test_fake_app_server_happy_path(tmp_path: Path) -> None:
    script = tmp_path / "fake_app_server.py"
    script.write_text(FAKE_APP_SERVER)
    with CodexAppServer([sys.executable, str(script), "ok"], timeout=5) as server:
        thread = start_memory_thread(server, developer_instructions=MCP, cwd=str(tmp_path))
    assert thread.thread_id == "thread-1"
