"""Run a real Hub under strace and record its system calls (DESIGN.md §4.5, §15): shared by the
durability-order and history-order tests."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import amux_argv, make_hub
from tools.client.blocking import HubClient

STRACE = shutil.which("strace")


def need_strace() -> str:
    """The strace binary; fails the test in CI when it is missing (.ci/run installs it), else skips."""
    if STRACE is None:
        if os.environ.get("CI") == "true":
            pytest.fail("strace is required in CI (.ci/run installs it)")
        pytest.skip("strace is not installed")
    return STRACE


def traced_hub(tmp_path: Path, calls: list[dict[str, object]], *, isolation: str = "off",
                syscalls: str = "openat,write,fsync,fdatasync,rename,renameat,renameat2,mkdirat,mkdir",
                decode_fds: bool = False) -> tuple[Path, list[str], list[dict[str, object]]]:
    """Run ``amux hub serve`` under strace, make the upserts in ``calls`` and stop it.

    Returns the home, the trace's lines (pids stripped) and the answers.  ``decode_fds`` adds
    ``strace -y`` so each descriptor is printed with its path (``fsync(5</home/memory/users>)``).
    """
    strace = need_strace()
    hub = make_hub(tmp_path, isolation=isolation, start=False)
    trace = tmp_path / "trace.txt"
    proc = subprocess.Popen(
        [strace, "-f", "-qq", *(["-y"] if decode_fds else []), "-e", f"trace={syscalls}",
         "-o", str(trace), *amux_argv(), "hub", "serve", "--home", str(hub.home)],
        env=hub.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    answers: list[dict[str, object]] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with HubClient(hub.socket, timeout=5) as c:
                    for params in calls:
                        answers.append(c.call("upsert", params))
                break
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
    finally:
        # Signal the Hub itself (its pid is in the home's lock file), not strace.
        try:
            os.kill(int((hub.home / "hub.lock").read_text().split()[0]), signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            proc.kill()
        proc.wait(30)
    lines = [line.split(None, 1)[1] if line[:1].isdigit() else line for line in trace.read_text().splitlines()]
    return hub.home, lines, answers
