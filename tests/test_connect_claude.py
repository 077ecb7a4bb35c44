"""``amux hub connect claude`` with the real Claude Code (tests/clients/install.sh): run in one folder, it
registers amux for every project of the user, so ``claude mcp list`` in another project shows it connected;
no file of Claude Code's holds the token (a headersHelper reads amux's 0600 token file); a second connect
reuses that token, and one without it replaces the earlier token, which is revoked (DESIGN.md §22.5)."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from amux_memory.hub.access import registry as reg
from tests.agent_clients import client_env, install_clients
from tests.conftest import amux_argv, make_hub

pytestmark = pytest.mark.slow  # the real Claude Code: a few seconds a command


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connect_claude_gives_memory_in_every_project_and_no_token_in_claudes_files(tmp_path: Path) -> None:
    bins = install_clients()
    port = free_port()
    hub = make_hub(tmp_path, settings={"hub.mcp_listen": f"127.0.0.1:{port}"})
    reg.modify(hub.home, lambda r, now: r.add_principal("alice", "user", now))
    user = tmp_path / "user"
    one, other = user / "clone", user / "elsewhere" / "project"
    one.mkdir(parents=True)
    other.mkdir(parents=True)
    env = client_env(HOME=str(user), CLAUDE_CONFIG_DIR=str(user / ".claude"), AMUX_HOME=str(hub.home),
                     PATH=f"{bins}:/usr/bin:/bin")

    def connect() -> dict[str, object]:
        r = subprocess.run([*amux_argv(), "hub", "connect", "claude", "--principal", "alice", "--json"], cwd=one,
                           env=env, capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr
        doc: dict[str, object] = json.loads(r.stdout)
        return doc

    first = connect()
    assert first["registered"] is True and first["reused"] is False and first["token"] is None, first
    assert first["expires"] is not None
    token_file = hub.home / "claude-token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    token = token_file.read_text()
    listed = subprocess.run([str(bins / "claude"), "mcp", "list"], cwd=other, env=env, capture_output=True,
                            text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    amux_line = [line for line in listed.stdout.splitlines() if line.startswith("amux:")]
    assert amux_line and "Connected" in amux_line[0], listed.stdout
    for path in [*user.rglob("*")]:
        if path.is_file() and ".claude" in str(path.relative_to(user)):
            assert token not in path.read_text(errors="replace"), path  # only the helper's command is there
    # doctor, in the other project, describes that registration and its reach.
    claude_check = doctor_check(other, env)
    assert claude_check["status"] == "ok", claude_check
    assert "over HTTP" in claude_check["summary"] and "(user: every project)" in claude_check["summary"]
    assert "headersHelper" in claude_check["summary"] and f":{port}/mcp" in claude_check["summary"]
    # Again: the token in the file is still valid, so it is reused; nothing new issued.
    again = connect()
    assert again["reused"] is True and again["token_id"] == first["token_id"]
    # Without the file a new token replaces the earlier one, which stops working.
    token_file.unlink()
    third = connect()
    assert third["reused"] is False and third["token_id"] != first["token_id"]
    states = {t["id"]: t["state"] for t in hub.cli("hub", "token", "list", "--json").json["tokens"]}
    assert states == {first["token_id"]: "revoked", third["token_id"]: "active"}, states
    # Registered for one project only (Claude Code's default scope), doctor elsewhere suggests what connect does,
    # never the stdio relay; in that project it warns of the reach.
    claude = str(bins / "claude")
    assert subprocess.run([claude, "mcp", "remove", "-s", "user", "amux"], env=env, capture_output=True,
                          timeout=120).returncode == 0
    assert subprocess.run([claude, "mcp", "add", "--transport", "http", "amux", f"http://127.0.0.1:{port}/mcp"],
                          cwd=one, env=env, capture_output=True, timeout=120).returncode == 0
    elsewhere = doctor_check(other, env)
    assert elsewhere["status"] == "warn" and elsewhere["fix"].startswith("amux hub connect claude"), elsewhere
    assert " mcp" not in elsewhere["fix"].replace("mcp_", "")
    here = doctor_check(one, env)
    assert here["status"] == "warn" and "only" in here["summary"] and "other projects have no memory" in \
        here["summary"], here
    assert here["fix"].startswith("amux hub connect claude"), here


def doctor_check(cwd: Path, env: dict[str, str]) -> dict[str, str]:
    """``amux doctor --json`` run in ``cwd``: its ``claude_mcp`` check."""
    r = subprocess.run([*amux_argv(), "doctor", "--json"], cwd=cwd, env=env, capture_output=True, timeout=180)
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    found: dict[str, str] = checks["claude_mcp"]
    return found
