"""Contention: many clients read-modify-write one document, each appending its own lines.

Each client reads the document, appends one line, and upserts with the
revision it read, retrying on ``conflict``.  Proof: exactly one winner per
base revision (the acknowledged writes form one chain) and the final document
holds every acknowledged line — zero lost updates.  Quick in the normal suite;
``AMUX_STRESS=full`` runs 32 clients x 500 rounds.  Lines are 3 characters so
16,000 of them fit the 64 KiB document limit.
"""

from __future__ import annotations

import threading
import time

import pytest

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.client.paging import export_document
from tests.conftest import HubProcess
from tests.stress.scale import FULL, pick, report

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600 if FULL else 300)]  # the full runs take many minutes

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _token(n: int) -> str:
    return "".join(ALPHABET[(n >> shift) & 63] for shift in (12, 6, 0))


def test_read_modify_write_loses_no_update(hub: HubProcess) -> None:
    clients, rounds = pick(8, 32), pick(40, 500)
    with hub.client() as c:
        base = c.call("upsert", {"path": "shared.md", "content": b"", "expected_revision": "absent",
                                 "allow_empty": True})["revision"]
    chain: list[tuple[str, str, str]] = []  # (expected revision, new revision, line)
    errors: list[str] = []
    conflicts = [0]
    lock = threading.Lock()

    def worker(k: int) -> None:
        try:
            with hub.client(timeout=120) as client:
                for r in range(rounds):
                    line = _token(k * rounds + r)
                    while True:
                        got = client.call("get", {"path": "shared.md", "end_line": 0})
                        content = got["content"]
                        while got["truncated"]:
                            got = client.call("get", {"path": "shared.md", "offset": got["next_offset"]})
                            content += got["content"]
                        try:
                            res = client.call("upsert", {"path": "shared.md", "content": content + line + "\n",
                                                         "expected_revision": got["revision"]})
                        except HubError as exc:
                            if exc.code is ErrorCode.CONFLICT:
                                with lock:
                                    conflicts[0] += 1
                                continue
                            raise
                        with lock:
                            chain.append((got["revision"], res["revision"], line))
                        break
        except BaseException as exc:  # surface thread failures in the test
            errors.append(repr(exc))

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    assert errors == []
    assert len(chain) == clients * rounds
    expected = [e for e, _, _ in chain]
    assert len(set(expected)) == len(expected), "two writes succeeded from the same revision"
    by_base = {e: n for e, n, _ in chain}
    rev, steps = base, 0
    while rev in by_base:  # one unbroken chain from the first revision to the last
        rev, steps = by_base[rev], steps + 1
    assert steps == len(chain)
    with hub.client() as c:
        final, _ = export_document(c, "shared.md")
    lines = final.decode().splitlines()
    assert sorted(lines) == sorted(line for _, _, line in chain)
    report(f"contention: {clients} clients x {rounds} rounds = {len(chain)} acknowledged appends, "
           f"{conflicts[0]} conflicts retried, {elapsed:.1f} s, 0 lost updates")
