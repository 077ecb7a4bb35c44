"""Crash consistency of memory history: kill -9 the Hub during concurrent upserts and forgets.

After each kill, with the Hub still down, the history segment is read
offline: every acknowledged revision is in its document's history, in the
order it was acknowledged; every recorded version names bytes some client
sent (never a torn or invented version); and the newest recorded version
equals the file, or the file is a write whose answer was lost (in flight at
the kill).  After the restart, ``history`` fills that gap as ``external``
and then ends at the file.  Quick in the normal suite; ``AMUX_STRESS=full``
runs 200 kills (DESIGN.md §15).
"""

from __future__ import annotations

import random
import signal
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest

from amux_memory.hub.storage.history import Retention, ScopeHistory
from amux_memory.tools.client.blocking import HubClient
from tests.conftest import HubProcess
from tests.helpers import wait_until
from tests.stress.crash_model import Doc, check_recorded, revision_of, run_writer
from tests.stress.scale import FULL, pick, report

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600 if FULL else 300)]

WORKERS = 4
DOCS_PER_WORKER = 2
WRITES_START_SECONDS = 20.0  # a round fails when its first acknowledged write takes longer


@dataclass
class Tally:
    acked: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _content(worker: int, path: str, seq: int, rng: random.Random) -> bytes:
    return f"# {path}\n".encode() + f"worker {worker} write {seq}\n".encode() * rng.randrange(1, 200)


def _writer(hub: HubProcess, worker: int, docs: dict[str, Doc], stop: threading.Event, seed: int,
            tally: Tally) -> None:
    def connect() -> HubClient:
        client = HubClient(hub.socket, timeout=5)
        client.connect()
        return client

    def acked() -> None:
        with tally.lock:
            tally.acked += 1

    run_writer(connect, docs, stop, random.Random(seed), tally.errors, partial(_content, worker), acked=acked)


def _check_offline(hub: HubProcess, docs: dict[str, Doc], tail: int | None = None) -> int:
    """Read the segment as it is after the kill; returns how many gaps (unrecorded in-flight writes) it found.

    ``tail`` checks only the last ``tail`` acknowledged revisions of each document (retention pruned the rest;
    pruned versions keep their headers, so their revisions are still listed).
    """
    hist = ScopeHistory(str(hub.home / "history" / "global"), Retention(10**9, 10**5, 1 << 40))
    gaps = 0
    try:
        hist.load()
        for path, doc in docs.items():
            recorded = [v.revision for v in hist.by_path.get(path, [])]
            leftovers = [p.name for p in (hub.home / "history").rglob("*.amux-tmp")]
            assert len(leftovers) <= 1, leftovers  # at most the compaction the kill interrupted
            gaps += check_recorded(path, doc, recorded, revision_of(hub.scope_dir / path), tail)
    finally:
        hist.close()
    return gaps


def _resolve(hub: HubProcess, docs: dict[str, Doc]) -> None:
    """After the restart: history ends at the file (a gap recorded as external); adopt in-flight outcomes."""
    with hub.client() as c:
        for path, doc in docs.items():
            page: dict[str, Any] = c.call("history", {"path": path, "limit": 5})
            on_disk = revision_of(hub.scope_dir / path)
            if page["versions"]:
                assert page["versions"][0]["revision"] == on_disk, path
            if on_disk != doc.revision:
                # A write whose answer was lost landed: recorded by its own action, or now as external.
                assert on_disk == doc.in_flight, path
                doc.acked.append(on_disk)
            doc.revision, doc.in_flight = on_disk, None


def _run(hub: HubProcess, rounds: int, seed: int, tail: int | None) -> tuple[int, int, float]:
    rng = random.Random(seed)
    docs = [{f"w{w}/{d}.md": Doc() for d in range(DOCS_PER_WORKER)} for w in range(WORKERS)]
    tally = Tally()
    gaps = 0
    started = time.monotonic()
    for _round in range(rounds):
        stop = threading.Event()
        threads = [threading.Thread(target=_writer, args=(hub, w, docs[w], stop, rng.randrange(1 << 30), tally))
                   for w in range(WORKERS)]
        acked_before = tally.acked
        for t in threads:
            t.start()
        # The kill lands among writes: after the first acknowledged write of this round (on a loaded machine,
        # connecting can take longer than the random pause), then a random pause.
        wait_until(lambda before=acked_before: tally.acked > before or tally.errors, WRITES_START_SECONDS,
                   "the round's first acknowledged write", interval=0.002)
        time.sleep(rng.uniform(0.02, 0.2))
        assert hub.stop(signal.SIGKILL) == -signal.SIGKILL
        stop.set()
        for t in threads:
            t.join(30)
            assert not t.is_alive()
        assert tally.errors == [], tally.errors
        for w in range(WORKERS):
            gaps += _check_offline(hub, docs[w], tail)
        hub.start()
        for w in range(WORKERS):
            _resolve(hub, docs[w])
    assert tally.acked > rounds
    return tally.acked, gaps, time.monotonic() - started


def test_kill_9_keeps_every_acknowledged_version(hub_factory: Any) -> None:
    hub: HubProcess = hub_factory(settings={"memory.history_max_versions": "1000000",
                                            "memory.history_max_bytes": str(1 << 40)})
    rounds = pick(6, 200)
    acked, gaps, seconds = _run(hub, rounds, 2027, None)
    report(f"history crash: {rounds} kill -9 rounds, {WORKERS} writers x {DOCS_PER_WORKER} docs, {acked} "
           f"acknowledged writes, {seconds:.1f} s: every acknowledged revision in history in "
           f"order, nothing recorded that was never sent, {gaps} gaps (document durable, answer lost) filled as "
           "external")


def test_kill_9_while_retention_compacts(hub_factory: Any) -> None:
    # 5 versions a document and 32 KiB a scope: nearly every write prunes, and the segment is rewritten often.
    hub: HubProcess = hub_factory(settings={"memory.history_max_versions": "5",
                                            "memory.history_max_bytes": str(32 << 10)})
    rounds = pick(4, 100)
    acked, gaps, seconds = _run(hub, rounds, 2028, 5)
    report(f"history crash while compacting: {rounds} kill -9 rounds, {acked} acknowledged writes, {seconds:.1f} s: "
           f"the last 5 acknowledged revisions of every document recorded in order, {gaps} gaps filled as external")
