"""A person's first half hour with the README, through the real CLI (a pseudo-terminal where a person types):
``upsert`` says what it waits for on a terminal and explains text given as an argument, a new path without
``--expected-revision`` is told to pass ``absent``, ``edit`` names the editor it opens, ``principal add`` does
not speak of isolated memory while isolation is off, ``hub restart`` of a foreground ``hub serve`` says what it
did, ``health`` checks plain path pointers, and ``launch --print-spec`` stores no session (DESIGN.md §17-§19,
§23)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

import pytest

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode
from tests.conftest import HubProcess, amux_argv, make_hub
from tests.terminal import run_in_terminal


@pytest.fixture
def hub(tmp_path: Path) -> HubProcess:
    return make_hub(tmp_path)


def read_until(fd: int, wanted: bytes, timeout: float = 30) -> bytes:
    """What ``fd`` gives until ``wanted`` appears (or ``timeout`` seconds pass)."""
    seen = b""
    deadline = time.monotonic() + timeout
    while wanted not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


def test_upsert_on_a_terminal_says_what_it_waits_for(hub: HubProcess) -> None:
    """stdin and stdout on one terminal, as a person who typed the command without a pipe: it says it reads the
    text typed there up to Ctrl-D, then stores what was typed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*amux_argv(), "memory", "upsert", "typed.md", "--expected-revision", "absent"],
                            stdin=slave, stdout=slave, stderr=subprocess.PIPE, env={**hub.env, "TERM": "dumb"})
    os.close(slave)
    assert proc.stderr is not None
    said = read_until(proc.stderr.fileno(), b"Ctrl-D")
    assert b"reading the new content of typed.md from this terminal" in said and b"Ctrl-D" in said, said
    os.write(master, b"# Typed by hand\n")
    os.write(master, b"\x04")  # end of input at the start of a line
    assert proc.wait(30) == 0
    os.close(master)
    shown = hub.cli("memory", "export", "typed.md")
    assert shown.returncode == 0 and shown.stdout == b"# Typed by hand\n"
    # Piped, nothing is said: a script's stderr stays clean.
    piped = hub.cli("memory", "upsert", "piped.md", "--expected-revision", "absent", input=b"# Piped\n")
    assert piped.returncode == 0 and "terminal" not in piped.stderr


def test_text_given_as_an_argument_is_explained(hub: HubProcess) -> None:
    r = hub.cli("memory", "upsert", "notes.md", "remember this", "--expected-revision", "absent")
    assert r.returncode == 2
    said = " ".join(re.sub(r"[│╭╮╰╯─]|Error", " ", r.stderr).split())  # the panel's words, unwrapped
    assert "the content is not an argument (got 'remember this' after it)" in said, r.stderr
    assert "echo 'TEXT' | amux memory upsert PATH" in said and "Unused Tokens" not in said
    assert hub.cli("memory", "export", "notes.md").returncode == EXIT_CODES[ErrorCode.NOT_FOUND]


def test_a_missing_revision_says_absent_for_a_new_path_and_the_revision_for_an_existing_one(hub: HubProcess) -> None:
    new = hub.cli("memory", "upsert", "fresh.md", input=b"# Fresh\n")
    assert new.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST]
    error = new.json["error"]
    assert "fresh.md does not exist yet, so pass '--expected-revision absent'" in error["message"], error
    assert error["data"] == {"field": "expected_revision", "current_revision": "absent"}
    shown = run_in_terminal([*amux_argv(), "memory", "upsert", "fresh.md"], env={**hub.env, "TERM": "dumb"})
    assert "next: Run it again with --expected-revision absent: amux memory upsert fresh.md --expected-revision " \
           "absent" in shown.stderr, shown.stderr
    assert hub.cli("memory", "upsert", "fresh.md", "--expected-revision", "absent", input=b"# Fresh\n").returncode == 0
    revision = hub.cli("memory", "show", "fresh.md").json["revision"]
    old = hub.cli("memory", "upsert", "fresh.md", input=b"# Other\n")
    assert f"fresh.md is now at {revision[:12]}" in old.json["error"]["message"], old.json
    assert old.json["error"]["data"]["current_revision"] == revision
    assert hub.cli("memory", "export", "fresh.md").stdout == b"# Fresh\n"


def test_edit_without_an_editor_set_says_which_it_opens_and_how_to_choose(hub: HubProcess, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    vi = bin_dir / "vi"
    vi.write_text("#!/bin/sh\nprintf '# Edited in vi\\n' > \"$1\"\n")
    vi.chmod(0o755)
    env = {k: v for k, v in hub.env.items() if k not in ("VISUAL", "EDITOR")}
    env.update(PATH=f"{bin_dir}:{env.get('PATH', '')}", TERM="dumb")
    r = run_in_terminal([*amux_argv(), "memory", "edit", "notes.md"], env=env)
    assert r.returncode == 0, r.stderr
    assert "opening vi, as neither $VISUAL nor $EDITOR is set" in r.stderr and "export EDITOR=nano" in r.stderr
    assert hub.cli("memory", "export", "notes.md").stdout == b"# Edited in vi\n"
    # With EDITOR set, nothing is said about it.
    r = run_in_terminal([*amux_argv(), "memory", "edit", "notes.md"], env={**env, "EDITOR": str(vi)})
    assert r.returncode == 0 and "opening" not in r.stderr, r.stderr


def test_principal_add_speaks_of_isolated_memory_only_while_isolation_is_on(tmp_path: Path) -> None:
    h = make_hub(tmp_path, start=False)
    off = run_in_terminal([*amux_argv(), "hub", "principal", "add", "ana"], env={**h.env, "TERM": "dumb"})
    assert off.returncode == 0, off.stderr
    assert "isolated memory" not in off.plain and "memory.isolation is off" in off.plain, off.plain
    assert "'amux system config set memory.isolation user'" in off.plain
    assert h.cli("hub", "principal", "add", "ben").json["isolation"] == "off"
    h.configure("memory.isolation", "user")
    on = run_in_terminal([*amux_argv(), "hub", "principal", "add", "cy"], env={**h.env, "TERM": "dumb"})
    assert "its isolated memory is principal:cy" in on.plain, on.plain


def test_restart_of_a_foreground_hub_serve_says_it_now_runs_in_the_background(tmp_path: Path) -> None:
    """The Quick start's 'amux hub serve' in one terminal, 'amux hub restart' in another."""
    h = make_hub(tmp_path, start=False)
    master, slave = pty.openpty()
    serve = subprocess.Popen([*amux_argv(), "hub", "serve"], stdin=slave, stdout=slave, stderr=slave, env=h.env,
                             start_new_session=True)
    os.close(slave)
    try:
        assert b"Hub listening" in read_until(master, b"Hub listening")
        r = run_in_terminal([*amux_argv(), "hub", "restart"], env={**h.env, "TERM": "dumb"})
        assert r.returncode == 0, r.stderr
        assert "it ran in the foreground of /dev/" in r.plain, r.plain
        assert "it now runs in the background instead" in r.plain and "Hub started" in r.plain
        assert serve.wait(30) == 0  # the foreground one stopped cleanly
        piped = h.cli("hub", "restart", "--json")
        assert piped.returncode == 0 and piped.json["replaced_foreground"] is None, piped.stdout
    finally:
        if serve.poll() is None:
            serve.kill()
        os.close(master)
        h.cli("hub", "stop")


def test_health_checks_plain_path_pointers(hub: HubProcess) -> None:
    text = b"# Memory\n\n- testing: see notes/testing.md\n- deploy: see notes/deploy.md\n- web: https://x.org/a/b.md\n"
    assert hub.cli("memory", "upsert", "MEMORY.md", "--expected-revision", "absent", input=text).returncode == 0
    assert hub.cli("memory", "upsert", "notes/deploy.md", "--expected-revision", "absent",
                   input=b"# Deploy\n").returncode == 0
    dirty = hub.cli("memory", "health", "--json")
    assert dirty.returncode == 20, dirty.stderr
    dangling = [f for f in dirty.json["findings"] if f["code"] == "dangling_link"]
    assert [f["message"] for f in dangling] == ["line 3 links to notes/testing.md, which does not exist"], dangling
    assert hub.cli("memory", "upsert", "notes/testing.md", "--expected-revision", "absent",
                   input=b"# Testing\n").returncode == 0
    clean = hub.cli("memory", "health", "--json")
    assert clean.returncode == 0 and clean.json["findings"] == [], clean.json


def test_print_spec_stores_no_session(tmp_path: Path) -> None:
    h = make_hub(tmp_path)
    r = h.cli("launch", "--print-spec", "claude")
    assert r.returncode == 0, r.stderr
    assert r.json["agent"] == "claude"
    sessions = h.home / "sessions"
    assert not sessions.exists() or list(sessions.iterdir()) == []


def test_tidy_without_the_agent_installed_says_to_run_the_tidy_again(hub: HubProcess) -> None:
    text = b"# Memory\n\n- testing: see notes/missing.md\n"  # a finding, so the tidy would start the agent
    assert hub.cli("memory", "upsert", "MEMORY.md", "--expected-revision", "absent", input=text).returncode == 0
    env = {k: v for k, v in hub.env.items() if not k.startswith("AMUX_LAUNCH_")}
    env.update(PATH="/usr/bin:/bin", TERM="dumb")
    r = run_in_terminal([*amux_argv(), "memory", "tidy", "claude"], env=env)
    assert r.returncode == EXIT_CODES[ErrorCode.NOT_FOUND], r.stderr
    assert "then run 'amux memory tidy claude' again" in r.stderr and "amux launch claude" not in r.stderr, r.stderr
