"""The Hub's syscalls for one upsert, recorded with strace: write → fsync(file) → rename → fsync(dir).

Needs ``strace`` (installed by .ci/run); skips outside CI when it is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import amux_argv, make_hub
from tools.client.blocking import HubClient

STRACE = shutil.which("strace")


def _need_strace() -> str:
    if STRACE is None:
        if os.environ.get("CI") == "true":
            pytest.fail("strace is required in CI (.ci/run installs it)")
        pytest.skip("strace is not installed")
    return STRACE


def test_upsert_syscall_order(tmp_path: Path) -> None:
    strace = _need_strace()
    hub = make_hub(tmp_path, start=False)
    trace = tmp_path / "trace.txt"
    proc = subprocess.Popen(
        [strace, "-f", "-qq", "-e", "trace=openat,write,fsync,fdatasync,rename,renameat,renameat2,mkdirat,mkdir",
         "-o", str(trace), *amux_argv(), "hub", "serve", "--home", str(hub.home)],
        env=hub.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with HubClient(hub.socket, timeout=5) as c:
                    c.call("upsert", {"path": "topics/durable.md", "content": b"# kept\n",
                                      "expected_revision": "absent"})
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
    lines = trace.read_text().splitlines()
    events: list[tuple[str, str]] = []
    tmp_fd = dir_fd = None
    for line in lines:
        body = line.split(None, 1)[1] if line[:1].isdigit() else line
        m = re.match(r'openat\(.*"(\.[0-9a-f]+\.amux-tmp)", O_WRONLY\|O_CREAT\|O_EXCL.*\) = (\d+)', body)
        if m:
            tmp_fd = m.group(2)
            events.append(("open-temp", tmp_fd))
            continue
        if tmp_fd is None:
            continue
        if re.match(rf"write\({tmp_fd}, ", body):
            events.append(("write", tmp_fd))
        elif re.match(rf"f(data)?sync\({tmp_fd}\)", body) and dir_fd is None:
            events.append(("fsync-file", tmp_fd))
        m = re.match(r'rename(at2?)?\((\d+), "\.[0-9a-f]+\.amux-tmp", \d+, "durable\.md"', body)
        if m:
            dir_fd = m.group(2)
            events.append(("rename", dir_fd))
            continue
        if dir_fd is not None and re.match(rf"fsync\({dir_fd}\)", body):
            events.append(("fsync-dir", dir_fd))
            break
    kinds = [e for e, _ in events]
    assert kinds[:1] == ["open-temp"], lines[-40:]
    order = [kinds.index(k) for k in ("write", "fsync-file", "rename", "fsync-dir")]
    assert order == sorted(order), kinds
    assert (hub.home / "memory" / "global" / "topics" / "durable.md").read_bytes() == b"# kept\n"
