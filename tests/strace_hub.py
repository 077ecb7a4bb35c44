"""Run a real Hub under strace and record its system calls (DESIGN.md §4.5, §15): shared by the
durability-order and history-order tests."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

from amux_memory.protocol.errors import HubError
from amux_memory.tools.client.blocking import HubClient
from tests.conftest import amux_argv, make_hub
from tests.helpers import skip_or_fail, wait_until

STRACE = shutil.which("strace")

_UNFINISHED = re.compile(r"^(?P<call>.*?) <unfinished \.\.\.>$")
_RESUMED = re.compile(r"^<\.\.\. (?P<name>\w+) resumed>(?P<rest>.*)$")
_PADDED_RESULT = re.compile(r"^(?P<args>.*?\))\s+(?P<result>= .*)$")


def parse_trace(text: str) -> list[str]:
    """The calls of a ``strace -f -o FILE`` trace, one whole call per line, pids stripped.

    With several threads strace splits a call another thread interrupts into ``PID fsync(13 <unfinished ...>``
    and, later, ``PID <... fsync resumed>) = 0``; the two halves are joined into ``fsync(13) = 0`` (the
    column padding of the short resumed line collapsed to one space) and put where the call *returned* (the
    resumed line), so "A happened before B" means A had completed.  Lines strace adds on its own
    (``+++ exited``, ``--- SIGTERM``) are kept as they are.  A call still unfinished at the end (the process
    was killed inside it) is kept, marked ``<unfinished ...>``, at its start.
    """
    out: list[str | None] = []
    pending: dict[str, tuple[int, str]] = {}  # pid -> (slot in out, the call's first half)
    for raw in text.splitlines():
        pid, body = ("", raw)
        if raw[:1].isdigit():
            pid, _, body = raw.partition(" ")
            body = body.lstrip()
        if (m := _UNFINISHED.match(body)) is not None:
            pending[pid] = (len(out), m.group("call"))
            out.append(body)
            continue
        if (m := _RESUMED.match(body)) is not None and pid in pending:
            slot, first = pending.pop(pid)
            out[slot] = None
            rest = m.group("rest")
            if (p := _PADDED_RESULT.match(rest)) is not None:  # strace pads a short resumed line to column 40
                rest = f"{p.group('args')} {p.group('result')}"
            out.append(first + rest)
            continue
        out.append(body)
    return [line for line in out if line is not None]


def need_strace() -> str:
    """The strace binary; fails the test in CI when it is missing (.ci/run installs it), else skips."""
    if STRACE is None:
        skip_or_fail("strace is not installed", "strace is required in CI (.ci/run installs it)")
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

    def connected() -> HubClient | None:
        """A connection to the traced Hub once it answers ``hello``; ``None`` before."""
        assert proc.poll() is None, f"strace or the Hub under it exited ({proc.returncode})"
        try:
            client = HubClient(hub.socket, timeout=5)
            client.connect()
        except (HubError, OSError):
            return None
        return client

    try:
        c = wait_until(connected, 30, "the Hub under strace to answer")
        try:
            for params in calls:
                answers.append(c.call("upsert", params))
        finally:
            c.close()
    finally:
        # Signal the Hub itself (its pid is in the home's lock file), not strace.
        try:
            os.kill(int((hub.home / "hub.lock").read_text().split()[0]), signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            proc.kill()
        proc.wait(30)
    lines = parse_trace(trace.read_text())
    return hub.home, lines, answers
