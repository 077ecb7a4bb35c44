"""Isolation between OS users: the CLI run as other uids against one Hub.

The tests run as root.  Each "other user" is a forked child that drops to an
unnamed uid (so its principal id is ``uid:<n>``) and then runs the real CLI
entry point in-process (:func:`tests.other_users.run_as`); the Hub names it from
``SO_PEERCRED`` alone.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode
from tests.conftest import HubProcess
from tests.other_users import ALICE, BOB, run_as, shared_input

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the CLI as other uids")


def _hub(hub_factory: Any, shared_dir: Path, isolation: str) -> HubProcess:
    h: HubProcess = hub_factory(
        isolation=isolation,
        settings={"hub.socket_path": str(shared_dir / "hub.sock"), "hub.socket_mode": "0666"},
    )
    return h


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_isolation_user_keeps_principals_apart(hub_factory: Any, shared_dir: Path) -> None:
    h = _hub(hub_factory, shared_dir, "user")
    a_in = shared_input(shared_dir, "a.md", "# Alice\n\nalpha-secret preference\n")
    b_in = shared_input(shared_dir, "b.md", "# Bob\n\nbeta preference\n")
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
    a_in = shared_input(shared_dir, "a.md", "shared-fact from alice\n")
    code, out, err = run_as(ALICE, h.socket, "memory", "upsert", "team.md", "--expected-revision", "absent",
                            "--file", str(a_in))
    assert code == 0, err
    code, found, _ = run_as(BOB, h.socket, "memory", "search", "shared-fact")
    assert [m["path"] for m in found["matches"]] == ["team.md"]
    code, status, _ = run_as(BOB, h.socket, "hub", "status")
    assert status["principal"] == f"uid:{BOB}" and status["binding"] == "global"
    assert (h.home / "memory" / "global" / "team.md").exists()
