"""``amux doctor`` and ``amux system config list`` through the real CLI, on a healthy and a broken set-up
(a temporary HOME holding the agents' user configuration files), and the ``--home`` spelled out in the
commands messages suggest (DESIGN.md §13.2, §19)."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, ExitStatus
from tests.conftest import CliResult, HubProcess, amux_argv

BIN = str(Path(sys.executable).parent)


def _user(tmp_path: Path, hub: HubProcess, *, healthy: bool) -> dict[str, str]:
    """An environment whose HOME holds Claude Code and Codex user configs registering amux (or broken ones)."""
    user = tmp_path / "user"
    (user / ".claude").mkdir(parents=True)
    (user / ".codex").mkdir()
    amux = amux_argv()[0] if healthy else str(tmp_path / "gone" / "amux")
    (user / ".claude.json").write_text(json.dumps(
        {"mcpServers": {"amux": {"type": "stdio", "command": amux, "args": ["mcp"], "env": {}}}}))
    (user / ".claude" / "settings.json").write_text(json.dumps({"autoMemoryEnabled": False} if healthy else {}))
    codex = f'[mcp_servers.amux]\ncommand = "{amux_argv()[0]}"\nargs = ["mcp"]\n'
    codex += "[features]\nmemories = false\n" if healthy else "[features]\nmemories = true\n"
    (user / ".codex" / "config.toml").write_text(codex)
    env = {k: v for k, v in hub.env.items() if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME",
                                                          "CLAUDE_CODE_DISABLE_AUTO_MEMORY")}
    env.update(HOME=str(user), PATH=f"{BIN}:/usr/bin:/bin")
    return env


def _in_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run the CLI with stdout on a pseudo-terminal; its exit status and what it printed there."""
    main, sub = pty.openpty()
    proc = subprocess.Popen([*amux_argv(), *args], stdout=sub, stderr=subprocess.DEVNULL, env=env,
                            stdin=subprocess.DEVNULL)
    os.close(sub)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the other end closed
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    return proc.wait(60), out.decode(errors="replace")


def _doctor(hub: HubProcess, env: dict[str, str], *args: str) -> tuple[CliResult, dict[str, Any]]:
    r = hub.cli("doctor", *args, env=env)
    doc = r.json
    return r, {c["name"]: c for c in doc["checks"]}


def test_doctor_on_a_healthy_setup(hub: HubProcess, tmp_path: Path) -> None:
    env = _user(tmp_path, hub, healthy=True)
    r, checks = _doctor(hub, env)
    assert r.returncode == 0 and r.json["ok"] is True, r.stdout
    assert list(checks) == ["cli", "home", "hub", "memory", "identity", "health", "scopes", "claude_mcp",
                            "claude_memory", "codex_mcp", "codex_memory"]
    assert all(c["status"] == "ok" for c in checks.values()), checks
    assert str(hub.socket) in checks["home"]["summary"] and "global" in checks["identity"]["summary"]
    assert amux_argv()[0] in checks["claude_mcp"]["summary"]
    # In a terminal: one line per check, no JSON.
    status, text = _in_terminal(["doctor"], {**hub.env, **env})
    assert status == 0
    assert "{" not in text and text.rstrip().endswith("all good"), text
    assert all(line.startswith("ok ") for line in text.splitlines()[:-1]), text
    # A paragraph in two documents: the health check warns with the count per code (DESIGN.md §23).
    para = b"The release runs from main only; ask before a Friday deploy, and note it in the log.\n"
    for path in ("a.md", "b.md"):
        assert hub.cli("memory", "upsert", path, "--expected-revision", "absent", input=para, env=env).returncode == 0
    r, checks = _doctor(hub, env)
    assert r.returncode == 0 and checks["health"]["status"] == "warn", checks["health"]
    assert "duplicate 1" in checks["health"]["summary"] and checks["health"]["fix"] == "amux memory health"


def test_doctor_on_a_broken_setup(hub_factory: Any, tmp_path: Path) -> None:
    hub: HubProcess = hub_factory(enabled=False)
    env = _user(tmp_path, hub, healthy=False)
    r, checks = _doctor(hub, env)
    assert r.returncode == ExitStatus.PROBLEMS_FOUND and r.json["ok"] is False, r.stdout
    assert checks["hub"]["status"] == "ok"
    assert checks["memory"]["status"] == "fail"
    assert checks["memory"]["fix"].startswith(f"amux system config set memory.enabled true --home {hub.home}")
    assert checks["claude_mcp"]["status"] == "fail" and "does not exist" in checks["claude_mcp"]["summary"]
    assert checks["claude_memory"]["status"] == "warn" and "autoMemoryEnabled" in checks["claude_memory"]["fix"]
    assert checks["codex_mcp"]["status"] == "ok" and checks["codex_memory"]["status"] == "warn"
    # Memory on, auto memory off through the environment, and the Hub stopped: the Hub is what fails now.
    hub.configure("memory.enabled", "true")
    hub.stop()
    r, checks = _doctor(hub, {**env, "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"})
    assert r.returncode == ExitStatus.PROBLEMS_FOUND
    assert checks["hub"]["status"] == "fail" and checks["hub"]["fix"].startswith(f"amux hub start --home {hub.home}")
    assert checks["memory"]["status"] == "ok" and checks["identity"]["status"] == "skip"
    assert checks["claude_memory"]["status"] == "ok"
    # Nothing of the agents installed: skipped, not failed; the CLI not on PATH: a warning.
    bare = {**env, "HOME": str(tmp_path / "nobody"), "PATH": "/usr/bin:/bin"}
    r, checks = _doctor(hub, bare)
    assert checks["claude_mcp"]["status"] == "skip" and checks["codex_mcp"]["status"] == "skip"
    assert checks["cli"]["status"] == "warn"
    assert not (tmp_path / "nobody").exists()  # doctor only reads


def test_config_list_and_home(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_")}
    env["HOME"] = str(tmp_path / "user")
    other = tmp_path / "other"

    def amux(*args: str, **extra: str) -> CliResult:
        proc = subprocess.run([*amux_argv(), *args], capture_output=True, env={**env, **extra}, timeout=60)
        return CliResult(proc.returncode, proc.stdout, proc.stderr.decode())

    assert amux("system", "config", "set", "memory.isolation", "user", "--home", str(other)).returncode == 0
    listed = amux("system", "config", "list", "--home", str(other))
    assert listed.returncode == 0, listed.stderr
    rows = {row["key"]: row for row in listed.json["settings"]}
    assert listed.json["file"] == str(other / "config.toml")
    assert rows["memory.isolation"] == {"key": "memory.isolation", "value": "user", "default": "off",
                                        "source": "config.toml", "description": rows["memory.isolation"]["description"]}
    assert rows["memory.enabled"]["source"] == "default" and rows["memory.enabled"]["value"] is False
    assert {"memory.history", "hub.socket_path", "hub.listen"} <= set(rows)
    # AMUX_HOME is honoured the same way, and ~/.amux is untouched.
    via_env = amux("system", "config", "list", AMUX_HOME=str(other)).json
    assert via_env == listed.json and not (tmp_path / "user" / ".amux").exists()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.toml").write_text('[memory]\nenabled = "maybe"\n')
    broken = amux("system", "config", "list", "--home", str(bad))
    assert broken.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and "memory.enabled" in broken.stderr


def test_disabled_names_the_home_it_applies_to(hub_factory: Any) -> None:
    hub: HubProcess = hub_factory(enabled=False)
    r = hub.cli("memory", "search", "x")
    assert r.returncode == EXIT_CODES[ErrorCode.DISABLED]
    message = r.json["error"]["message"]
    assert f"'amux system config set memory.enabled true --home {hub.home}'" in message, message
    assert f"amux hub restart --home {hub.home}" in message
    assert hub.log is not None and f"memory.enabled true --home {hub.home}'" in hub.log.read_text()


@pytest.mark.slow
def test_doctor_reads_what_the_real_agents_write(hub: HubProcess, bin_dir: Path, tmp_path: Path) -> None:
    """Registrations made by the real ``claude mcp add`` and ``codex mcp add`` are found, and Codex's own
    ``features list`` decides whether its memories are on."""
    user = tmp_path / "real-user"
    (user / ".codex").mkdir(parents=True)
    env = {k: v for k, v in hub.env.items() if not k.startswith(("ANTHROPIC_", "CLAUDE", "CODEX_", "OPENAI_"))}
    env.update(HOME=str(user), PATH=f"{BIN}:{bin_dir}:/usr/bin:/bin")
    amux = amux_argv()[0]
    for argv in ([str(bin_dir / "claude"), "mcp", "add", "-s", "user", "amux", "--", amux, "mcp"],
                 [str(bin_dir / "codex"), "mcp", "add", "amux", "--", amux, "mcp"]):
        added = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
        assert added.returncode == 0, added.stdout + added.stderr
    r, checks = _doctor(hub, env)
    assert r.returncode == 0, r.stdout
    assert checks["claude_mcp"]["status"] == "ok" and amux in checks["claude_mcp"]["summary"]
    assert checks["codex_mcp"]["status"] == "ok" and amux in checks["codex_mcp"]["summary"]
    assert checks["claude_memory"]["status"] == "warn"  # Claude Code's auto memory is on by default
    assert checks["codex_memory"]["status"] == "ok" and "codex features list" in checks["codex_memory"]["summary"]
    with open(user / ".codex" / "config.toml", "a") as fh:
        fh.write("\n[features]\nmemories = true\n")
    (user / ".claude" / "settings.json").write_text(json.dumps({"autoMemoryEnabled": False}))
    r, checks = _doctor(hub, env)
    assert checks["codex_memory"]["status"] == "warn" and checks["claude_memory"]["status"] == "ok", checks


def test_doctor_escapes_terminal_controls_from_agent_files(hub: HubProcess, tmp_path: Path) -> None:
    env = _user(tmp_path, hub, healthy=True)
    hostile = "/tmp/\x1b]0;owned\x07\x1b[2J/amux"
    (Path(env["HOME"]) / ".claude.json").write_text(json.dumps(
        {"mcpServers": {"amux": {"type": "stdio", "command": hostile, "args": ["mcp"]}}}))
    status, text = _in_terminal(["doctor"], {**hub.env, **env})
    assert status == ExitStatus.PROBLEMS_FOUND
    assert "\x1b" not in text and "\x07" not in text, repr(text)
    assert "\\x1b]0;owned\\x07" in text, text


def _register(user: Path, claude_env: dict[str, str], codex_env: dict[str, str]) -> None:
    """Point the amux registrations in ``user``'s Claude Code and Codex configs at the Hub ``*_env`` names."""
    state = json.loads((user / ".claude.json").read_text())
    state["mcpServers"]["amux"]["env"] = claude_env
    (user / ".claude.json").write_text(json.dumps(state))
    codex = re.sub(r"\[mcp_servers\.amux\.env\]\n(?:\w+ = .*\n)*", "", (user / ".codex" / "config.toml").read_text())
    if codex_env:
        table = "".join(f'{k} = "{v}"\n' for k, v in codex_env.items())
        codex = codex.replace('args = ["mcp"]\n', f'args = ["mcp"]\n[mcp_servers.amux.env]\n{table}')
    (user / ".codex" / "config.toml").write_text(codex)


def test_doctor_checks_the_hub_each_registration_points_at(hub: HubProcess, tmp_path: Path) -> None:
    env = _user(tmp_path, hub, healthy=True)
    user = Path(env["HOME"])
    nowhere = tmp_path / "nothere"
    _register(user, {"AMUX_HOME": str(nowhere), "OTHER": "kept"}, {"AMUX_HUB": str(tmp_path / "nothere.sock")})
    r, checks = _doctor(hub, env)
    assert r.returncode == ExitStatus.PROBLEMS_FOUND and r.json["ok"] is False, r.stdout
    assert checks["hub"]["status"] == "ok"
    claude, codex = checks["claude_mcp"], checks["codex_mcp"]
    assert claude["status"] == "fail" and f"no Hub answers at {nowhere / 'hub.sock'}" in claude["summary"]
    assert f"-e AMUX_HOME={hub.home}" in claude["fix"] and "-e OTHER=kept" in claude["fix"], claude["fix"]
    assert claude["fix"].index("-e ") > claude["fix"].index(" amux "), "-e after the name, as the README says"
    assert codex["status"] == "fail" and "nothere.sock" in codex["summary"]
    assert f"--env AMUX_HOME={hub.home}" in codex["fix"], codex["fix"]

    # Registrations with no env use the caller's home; doctor --home D checks another one.
    _register(user, {}, {})
    other = tmp_path / "other-home"
    other.mkdir()
    r, checks = _doctor(hub, env, "--home", str(other))
    assert checks["claude_mcp"]["status"] == "warn", checks["claude_mcp"]
    assert str(hub.socket) in checks["claude_mcp"]["summary"] and str(other) in checks["claude_mcp"]["summary"]
    assert f"-e AMUX_HOME={other}" in checks["claude_mcp"]["fix"]
    assert checks["codex_mcp"]["status"] == "warn" and f"--env AMUX_HOME={other}" in checks["codex_mcp"]["fix"]
    r, checks = _doctor(hub, env)
    assert checks["claude_mcp"]["status"] == "ok" and checks["codex_mcp"]["status"] == "ok"


def test_doctor_warnings_are_not_all_good_and_project_settings_count(hub: HubProcess, tmp_path: Path) -> None:
    env = {**hub.env, **_user(tmp_path, hub, healthy=True)}
    user = Path(env["HOME"])
    (user / ".codex" / "config.toml").write_text((user / ".codex" / "config.toml").read_text()
                                                 .replace("memories = false", "memories = true"))
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.local.json").write_text(json.dumps({"autoMemoryEnabled": True}))
    proc = subprocess.run([*amux_argv(), "doctor"], cwd=project, env=env, capture_output=True, timeout=60)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert proc.returncode == 0
    memory = checks["claude_memory"]
    assert memory["status"] == "warn" and "settings.local.json" in memory["summary"], memory
    assert str(project / ".claude" / "settings.local.json") in memory["fix"]
    fix = checks["codex_memory"]["fix"]
    assert all(word in fix for word in ("memories = false", "use_memories = false", "generate_memories = false"))
    # Without the project file Claude is fine (user settings say off); Codex still warns, in a terminal too.
    status, text = _in_terminal(["doctor"], env)
    assert status == 0
    last = text.rstrip().splitlines()[-1]
    assert "all good" not in text and last.startswith("no failures, 1 warning"), text


def test_amux_output_json_is_honoured_by_the_operating_commands(hub: HubProcess, tmp_path: Path) -> None:
    env = {**hub.env, **_user(tmp_path, hub, healthy=True), "AMUX_OUTPUT": "json"}
    for args in (["hub", "status"], ["doctor"], ["system", "config", "list"]):
        status, text = _in_terminal(args, env)
        assert status == 0, text
        doc = json.loads(text)  # JSON in a terminal, as --json gives
        assert isinstance(doc, dict) and doc, args
    status, text = _in_terminal(["hub", "status"], {k: v for k, v in env.items() if k != "AMUX_OUTPUT"})
    assert status == 0 and not text.lstrip().startswith("{"), "text for a person without it"


def test_config_list_in_a_terminal_is_a_table_like_the_others(hub: HubProcess) -> None:
    status, text = _in_terminal(["system", "config", "list"], {**hub.env, "COLUMNS": "120", "NO_COLOR": "1"})
    assert status == 0, text
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in text.replace("\r\n", "\n").splitlines()]
    header = next(line for line in lines if line.startswith("key"))
    assert header.split() == ["key", "value", "from", "default"], header
    assert lines[lines.index(header) + 1].startswith("─"), "the rule under the header, as list and log have"
    assert any(line.split()[:3] == ["memory.enabled", "true", "config.toml"] for line in lines), lines
