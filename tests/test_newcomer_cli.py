"""What a new user meets on a fresh clone, through the real CLI (in a terminal where a person would be): each
error's next step fits its cause, ``amux hub status`` reports a Hub that is not running as a state, every
command that prints data takes ``--json``, counts are singular for one, a signal is named (DESIGN.md §8, §17)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from pathlib import Path
from typing import Any

import msgpack
import pytest

from amux_memory.protocol.errors import ERRORS, EXIT_CODES, ErrorCode, ExitStatus, HubError
from tests.conftest import HubProcess, amux_argv
from tests.secret_samples import samples
from tests.terminal import TerminalResult, run_in_terminal


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The caller's environment without AMUX_* (and NO_COLOR), for ``home``; no agent program on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMUX_") and k != "NO_COLOR"}
    amux_dir = str(Path(amux_argv()[0]).parent)
    env.update(AMUX_HOME=str(home), TERM="dumb", PATH=f"{amux_dir}:/usr/bin:/bin", **extra)
    return env


def terminal(env: dict[str, str], *args: str) -> TerminalResult:
    return run_in_terminal([*amux_argv(), *args], env=env)


def next_line(stderr: str) -> str:
    """The ``  next: ...`` line of an error printed for a person."""
    found = [line for line in stderr.splitlines() if line.startswith("  next: ")]
    assert len(found) == 1, stderr
    return found[0].removeprefix("  next: ")


GENERIC_NOT_FOUND = "search for the right path"


@pytest.mark.parametrize(("agent", "package"), [("claude", "@anthropic-ai/claude-code"), ("codex", "@openai/codex"),
                                                ("pi", "@mariozechner/pi-coding-agent")])
def test_launch_without_the_agent_program_says_how_to_install_it(tmp_path: Path, agent: str, package: str) -> None:
    env = clean_env(tmp_path / "home")
    r = terminal(env, "launch", agent)
    assert r.returncode == EXIT_CODES[ErrorCode.NOT_FOUND] and r.screen == "", (r.screen, r.stderr)
    step = next_line(r.stderr)
    assert step == (f"Install it ('npm install -g {package}') or set AMUX_LAUNCH_{agent.upper()} to the path of "
                    f"its program, then run 'amux launch {agent}' again."), r.stderr
    assert GENERIC_NOT_FOUND not in r.stderr and "next_step:" not in r.stderr  # shown once, as the next step
    # Piped, a script finds the same next step in the JSON error's data.
    named = {**env, f"AMUX_LAUNCH_{agent.upper()}": str(tmp_path / "nothing-here")}
    piped = subprocess.run([*amux_argv(), "launch", agent], capture_output=True, env=named, timeout=60)
    error = json.loads(piped.stdout)["error"]
    assert error["code"] == "not_found" and error["data"]["step"] == "executable", error
    assert f"Point AMUX_LAUNCH_{agent.upper()} at the agent's executable" in error["next_step"], error
    assert "next_step" not in error["data"]


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_a_version_never_recorded_points_at_the_history(hub: HubProcess) -> None:
    r = hub.cli("memory", "upsert", "notes/deploy.md", "--expected-revision", "absent", input=b"# Deploy\n")
    assert r.returncode == 0, r.stderr
    piped = hub.cli("memory", "show", "notes/deploy.md", "--revision", "0123456789ab")
    assert piped.returncode == EXIT_CODES[ErrorCode.NOT_FOUND], piped.stderr
    wire = piped.json["error"]
    assert wire["data"] == {"path": "notes/deploy.md", "revision": "0123456789ab", "reason": "unknown"}, wire
    assert "'amux memory history notes/deploy.md'" in wire["next_step"], wire
    shown = run_in_terminal([*amux_argv(), "memory", "show", "notes/deploy.md", "--revision", "0123456789ab"],
                            env={**hub.env, "TERM": "dumb"})
    assert shown.returncode == 4 and shown.screen == ""
    assert next_line(shown.stderr) == ("List the versions stored for notes/deploy.md with 'amux memory history "
                                       "notes/deploy.md' and use one of their revisions."), shown.stderr
    # A missing document keeps the code's own next step.
    gone = run_in_terminal([*amux_argv(), "memory", "export", "notes/other.md"], env={**hub.env, "TERM": "dumb"})
    assert gone.returncode == 4 and "not_found" in gone.stderr


def test_an_unknown_token_id_points_at_the_token_list(tmp_path: Path) -> None:
    r = terminal(clean_env(tmp_path / "home"), "hub", "token", "revoke", "feedfeedfeed")
    assert r.returncode == EXIT_CODES[ErrorCode.NOT_FOUND], r.stderr
    assert next_line(r.stderr) == "'amux hub token list' shows the token ids; use one of them.", r.stderr


def test_a_refined_next_step_crosses_the_wire_and_the_generic_one_stays() -> None:
    refined = HubError(ErrorCode.NOT_FOUND, "version x of a.md was never recorded", {"path": "a.md"},
                       next_step="see 'amux memory history a.md'")
    wire = refined.to_wire()
    assert wire["data"] == {"path": "a.md"} and wire["next_step"] == "see 'amux memory history a.md'"
    back = HubError.from_wire(msgpack.unpackb(msgpack.packb(wire)))
    assert back.next_step == "see 'amux memory history a.md'" and back.refined == back.next_step
    generic = HubError(ErrorCode.NOT_FOUND, "a.md does not exist", {"path": "a.md"})
    assert set(generic.to_wire()) == {"code", "message", "data"}  # no member unless refined
    plain = HubError.from_wire(generic.to_wire())
    assert plain.refined is None and plain.next_step == ERRORS[ErrorCode.NOT_FOUND].next_step
    uncertain = HubError(ErrorCode.UNAVAILABLE, "lost", {"uncertain": True}, next_step="try again")
    assert "read the document" in uncertain.next_step  # an unknown outcome outranks any refinement


def test_hub_status_without_a_hub_is_one_line_and_exit_23(tmp_path: Path) -> None:
    home = tmp_path / "my home"
    env = clean_env(home)
    r = terminal(env, "hub", "status")
    assert (r.returncode, r.stderr) == (ExitStatus.HUB_NOT_RUNNING, ""), (r.screen, r.stderr)
    assert r.plain == f"no Hub is running for {home}; start one with 'amux hub start --home {shlex.quote(str(home))}'\n"
    as_json = terminal(env, "hub", "status", "--json")
    assert as_json.returncode == 23 and as_json.stderr == ""
    assert json.loads(as_json.plain) == {"running": False, "home": str(home), "socket": str(home / "hub.sock"),
                                         "start_command": f"amux hub start --home {shlex.quote(str(home))}"}
    assert ExitStatus.HUB_NOT_RUNNING == 23 and 23 not in EXIT_CODES.values()


def test_unavailable_names_the_hub_once(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    r = terminal(env, "memory", "search", "x")
    assert r.returncode == 11
    assert "running: False" not in r.stderr and "socket:" not in r.stderr
    assert r.stderr.count(str(tmp_path / "hub.sock")) == 2  # the message and the one hub: line
    assert "'amux hub serve'" not in next_line(r.stderr)  # the message and the next step agree: hub start


def admin(env: dict[str, str], *args: str) -> Any:
    """Run an admin command with --json in a terminal: its stdout is JSON all the same."""
    r = terminal(env, *args, "--json")
    assert r.returncode == 0 and "Unknown option" not in r.stderr, (args, r.plain, r.stderr)
    return json.loads(r.plain)


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_admin_commands_take_json_and_print_for_a_person(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "home")
    assert admin(env, "hub", "principal", "add", "alice")["added"] is True
    assert admin(env, "hub", "principal", "alias", "alice", "os:bob")["alias"] == "os:bob"
    listed = admin(env, "hub", "principal", "list")
    assert [p["name"] for p in listed["principals"]] == ["alice"]
    issued = admin(env, "hub", "token", "issue", "alice")
    assert issued["token"].startswith("amux_") and issued["principal"] == "alice"
    assert [t["id"] for t in admin(env, "hub", "token", "list")["tokens"]] == [issued["id"]]
    assert admin(env, "hub", "token", "revoke", issued["id"])["state"] == "revoked"
    assert admin(env, "hub", "principal", "unalias", "os:bob")["removed"] is True
    assert admin(env, "system", "config", "get", "memory.enabled") == {"key": "memory.enabled", "value": False}
    assert admin(env, "system", "config", "set", "memory.enabled", "true")["value"] is True
    by_env = terminal({**env, "AMUX_OUTPUT": "json"}, "hub", "principal", "list")
    assert json.loads(by_env.plain)["principals"][0]["aliases"] == []

    # For a person: an aligned table, and a token shown once with how to store it.
    table = terminal(env, "hub", "principal", "list")
    lines = table.plain.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "CREATED", "ALIASES", "TOKENS"] and lines[1].split()[:2] == ["alice",
                                                                                                           "user"]
    assert lines[0].index("KIND") == lines[1].index("user")  # aligned
    fresh = terminal(env, "hub", "token", "issue", "alice")
    assert fresh.returncode == 0 and not fresh.plain.lstrip().startswith("{"), fresh.plain
    token = [w for w in fresh.plain.split() if w.startswith("AMUX_TOKEN=")]
    assert len(token) == 1 and fresh.plain.count(token[0].removeprefix("AMUX_TOKEN=")) == 1, fresh.plain
    assert "it is not shown again" in fresh.plain and fresh.stderr == ""
    tokens = terminal(env, "hub", "token", "list").plain.splitlines()
    assert tokens[0].split() == ["ID", "PRINCIPAL", "LABEL", "CREATED", "EXPIRES", "BINDING", "STATE"]
    assert len(tokens) == 3
    got = terminal(env, "system", "config", "get", "memory.enabled")
    assert got.plain == "memory.enabled = true\n"


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_counts_are_singular_for_one(hub: HubProcess) -> None:
    sample = samples()[0]
    r = hub.cli("memory", "upsert", "notes/keys.md", "--expected-revision", "absent", "--allow-secret",
                input=f"# Keys\n{sample.line}\n".encode())
    assert r.returncode == 0, r.stderr
    env = {**hub.env, "TERM": "dumb"}
    scan = run_in_terminal([*amux_argv(), "memory", "scan"], env=env)
    assert "1 document holding credentials" in scan.plain and "1 documents" not in scan.plain, scan.plain
    listed = run_in_terminal([*amux_argv(), "memory", "list"], env=env)
    assert "1 document," in listed.plain and "1 documents" not in listed.plain, listed.plain


def test_an_editor_killed_by_a_signal_is_named(hub: HubProcess) -> None:
    r = hub.cli("memory", "edit", "a.md", env={"VISUAL": "", "EDITOR": "sh -c 'kill -TERM $$'"})
    assert r.returncode == ExitStatus.NOT_SAVED, r.stderr
    assert f"was killed by signal {int(signal.SIGTERM)} (SIGTERM)" in r.stderr and "status -" not in r.stderr


def test_launch_help_has_no_empty_commands_box(tmp_path: Path) -> None:
    r = terminal(clean_env(tmp_path), "launch", "--help")
    assert r.returncode == 0 and "--print-spec" in r.plain
    assert "Commands" not in r.plain and "--help" in r.plain, r.plain
