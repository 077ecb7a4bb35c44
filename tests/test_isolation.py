"""Isolation between OS users: the CLI run as other uids against one Hub.

The tests run as root.  Each "other user" is a forked child that drops to an
unnamed uid (so its principal id is ``uid:<n>``) and then runs the real CLI
entry point in-process; the Hub names it from ``SO_PEERCRED`` alone.  (Exec'ing
the venv's Python as another uid is not possible when the interpreter lives
under root's 0700 home, hence fork-then-setuid.)
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Imported before fork: the child (another uid) cannot read root's site-packages.  The commands the
# children run are registered lazily, so their modules are imported here too.
import tools.cli.app  # noqa: F401
import tools.cli.hub  # noqa: F401
import tools.cli.memory  # noqa: F401
import tools.client  # noqa: F401
from protocol.errors import EXIT_CODES, ErrorCode
from tests.conftest import HubProcess

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the CLI as other uids")


def _free_uid(start: int) -> int:
    uid = start
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
        uid += 1


ALICE = _free_uid(42001)
BOB = _free_uid(ALICE + 1)


def run_as(uid: int, socket: Path, *args: str, env: dict[str, str] | None = None,
           stdin_file: Path | None = None) -> tuple[int, Any, str]:
    """Run ``amux ARGS`` as ``uid`` in a forked child: ``(exit status, parsed stdout, stderr)``."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 70
        try:
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            if stdin_file is not None:
                fd = os.open(stdin_file, os.O_RDONLY)
                os.dup2(fd, 0)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            for key in [k for k in os.environ if k.startswith("AMUX_")]:
                del os.environ[key]
            os.environ["AMUX_HUB"] = str(socket)
            os.environ["HOME"] = "/nonexistent"
            os.environ.update(env or {})
            # pytest replaced sys.std*; the CLI must write to the real fds.
            sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - lives until os._exit
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 - lives until os._exit
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 - lives until os._exit
            from tools.cli.app import main

            code = main(list(args))
        except BaseException as exc:  # noqa: BLE001 - report anything to the parent
            os.write(2, f"child failed: {exc!r}\n".encode())
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(out_w)
    os.close(err_w)
    with os.fdopen(out_r, "rb") as fo, os.fdopen(err_r, "rb") as fe:
        stdout = fo.read()
        stderr = fe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    try:
        parsed = json.loads(stdout) if stdout.strip() else None
    except ValueError:
        parsed = stdout
    return code, parsed, stderr


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A world-traversable directory for the socket and input files (pytest's tmp is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="amux-iso-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    for p in sorted(d.rglob("*"), reverse=True):
        p.unlink() if not p.is_dir() else p.rmdir()
    d.rmdir()


def _hub(hub_factory: Any, shared_dir: Path, isolation: str) -> HubProcess:
    h: HubProcess = hub_factory(
        isolation=isolation,
        settings={"hub.socket_path": str(shared_dir / "hub.sock"), "hub.socket_mode": "0666"},
    )
    return h


def _input(shared_dir: Path, name: str, text: str) -> Path:
    p = shared_dir / name
    p.write_text(text)
    p.chmod(0o644)
    return p


def test_isolation_user_keeps_principals_apart(hub_factory: Any, shared_dir: Path) -> None:
    h = _hub(hub_factory, shared_dir, "user")
    a_in = _input(shared_dir, "a.md", "# Alice\n\nalpha-secret preference\n")
    b_in = _input(shared_dir, "b.md", "# Bob\n\nbeta preference\n")
    code, out, err = run_as(ALICE, h.socket, "memory", "upsert", "MEMORY.md", "--expected-revision", "absent",
                            "--file", str(a_in))
    assert code == 0, err
    code, out, err = run_as(BOB, h.socket, "memory", "upsert", "MEMORY.md", "--expected-revision", "absent",
                            "--file", str(b_in))
    assert code == 0, err  # a separate scope: "absent" holds for Bob too

    code, found, _ = run_as(BOB, h.socket, "memory", "search", "alpha-secret")
    assert code == 0 and found["matches"] == [] and found["scanned_files"] == 1
    code, shown, _ = run_as(BOB, h.socket, "memory", "show", "MEMORY.md")
    assert "beta" in shown["content"] and "alpha" not in shown["content"]
    code, shown, _ = run_as(ALICE, h.socket, "memory", "show", "MEMORY.md")
    assert "alpha-secret" in shown["content"]
    code, exported, _ = run_as(ALICE, h.socket, "memory", "export", "MEMORY.md")
    assert code == 0
    # Bob cannot delete Alice's entry even knowing its revision: his own scope has another file.
    alice_rev = hashlib.sha256(a_in.read_bytes()).hexdigest()
    code, out, _ = run_as(BOB, h.socket, "memory", "forget", "MEMORY.md", "--expected-revision", alice_rev)
    assert code == EXIT_CODES[ErrorCode.CONFLICT]
    # Root (this process) is a third principal and sees neither.
    r = h.cli("memory", "search", "preference", env={"AMUX_HUB": str(h.socket)})
    assert r.json["matches"] == []

    code, status, _ = run_as(ALICE, h.socket, "hub", "status")
    assert status["principal"] == f"uid:{ALICE}" and status["binding"] == f"principal:uid:{ALICE}"
    root = h.home / "memory"
    alice_dir = root / "users" / hashlib.sha256(f"uid:{ALICE}".encode()).hexdigest()
    assert (alice_dir / "MEMORY.md").read_bytes() == a_in.read_bytes()
    assert (alice_dir.stat().st_mode & 0o777) == 0o700
    assert ((alice_dir / "MEMORY.md").stat().st_mode & 0o777) == 0o600
    assert not (root / "global" / "MEMORY.md").exists()  # nothing fell back to global


def test_binding_mismatch_after_policy_change(hub_factory: Any, shared_dir: Path) -> None:
    h = _hub(hub_factory, shared_dir, "user")
    code, out, _ = run_as(ALICE, h.socket, "memory", "search", "x", env={"AMUX_MEMORY_BINDING": "global"})
    assert code == EXIT_CODES[ErrorCode.BINDING_MISMATCH]
    assert out["error"]["data"]["current"] == f"principal:uid:{ALICE}"
    code, out, _ = run_as(ALICE, h.socket, "memory", "search", "x",
                          env={"AMUX_MEMORY_BINDING": f"principal:uid:{ALICE}"})
    assert code == 0


def test_isolation_off_everyone_shares_global(hub_factory: Any, shared_dir: Path) -> None:
    h = _hub(hub_factory, shared_dir, "off")
    a_in = _input(shared_dir, "a.md", "shared-fact from alice\n")
    code, out, err = run_as(ALICE, h.socket, "memory", "upsert", "team.md", "--expected-revision", "absent",
                            "--file", str(a_in))
    assert code == 0, err
    code, found, _ = run_as(BOB, h.socket, "memory", "search", "shared-fact")
    assert [m["path"] for m in found["matches"]] == ["team.md"]
    code, status, _ = run_as(BOB, h.socket, "hub", "status")
    assert status["principal"] == f"uid:{BOB}" and status["binding"] == "global"
    assert (h.home / "memory" / "global" / "team.md").exists()
