"""Crash consistency: kill -9 the Hub at random moments during concurrent upserts and forgets.

After every restart each document is exactly one of the versions a client
sent (never torn), it is the last acknowledged version unless a later write to
it was in flight at the kill, no temporary file is left or visible, and every
acknowledged write is present.  Quick in the normal suite; ``AMUX_STRESS=full``
runs 200 kills.
"""

from __future__ import annotations

import hashlib
import random
import signal
import threading
import time
from dataclasses import dataclass, field

import pytest

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.client.blocking import HubClient
from amux_memory.tools.client.paging import export_document
from tests.conftest import HubProcess
from tests.helpers import wait_until
from tests.stress.scale import FULL, pick, report

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600 if FULL else 300)]  # the full runs take many minutes

WORKERS = 4
DOCS_PER_WORKER = 3
WRITES_START_SECONDS = 20.0  # a round fails when its first acknowledged write takes longer


@dataclass
class DocState:
    """What a client knows of one document it alone writes."""

    acked: bytes | None = None  # last acknowledged content (None = absent)
    revision: str = "absent"
    in_flight: list[bytes | None] = field(default_factory=list)  # sent, outcome unknown


def _content(worker: int, doc: int, seq: int, rng: random.Random) -> bytes:
    body = f"worker {worker} doc {doc} write {seq}\n".encode() * rng.randrange(1, 400)
    return body + hashlib.sha256(body).hexdigest().encode() + b"\n"


@dataclass
class Tally:
    """Acknowledged writes, and anything unexpected a writer thread saw."""

    acked: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _writer(hub: HubProcess, worker: int, docs: dict[str, DocState], stop: threading.Event, seed: int,
            tally: Tally) -> None:
    try:
        _write_until_killed(hub, worker, docs, stop, seed, tally)
    except BaseException as exc:  # a thread's failure must fail the test
        tally.errors.append(repr(exc))


def _write_until_killed(hub: HubProcess, worker: int, docs: dict[str, DocState], stop: threading.Event, seed: int,
                        tally: Tally) -> None:
    rng = random.Random(seed)
    seq = 0
    while not stop.is_set():
        try:
            client = HubClient(hub.socket, timeout=5)
            client.connect()
        except HubError:
            return  # the Hub is down: this round is over for us
        try:
            while not stop.is_set():
                path = rng.choice(list(docs))
                state = docs[path]
                seq += 1
                if state.acked is not None and rng.random() < 0.25:
                    state.in_flight = [None]
                    client.call("forget", {"path": path, "expected_revision": state.revision})
                    state.acked, state.revision = None, "absent"
                else:
                    new = _content(worker, int(path.split("/")[1].split(".")[0]), seq, rng)
                    state.in_flight = [new]
                    # Random sizes: a deliberate cut now and then, not what the rewrite guard is for.
                    r = client.call("upsert", {"path": path, "content": new, "expected_revision": state.revision,
                                               "allow_shrink": True})
                    state.acked, state.revision = new, r["revision"]
                state.in_flight = []
                with tally.lock:
                    tally.acked += 1
        except HubError as exc:
            if exc.code is not ErrorCode.UNAVAILABLE:  # only the kill may interrupt us
                tally.errors.append(repr(exc))
            return
        finally:
            client.close()


def _check(hub: HubProcess, docs: dict[str, DocState]) -> None:
    """Verify every document after a restart; resolve in-flight writes."""
    leftovers = [p for p in hub.scope_dir.rglob("*") if p.name.endswith(".amux-tmp")]
    assert leftovers == [], leftovers
    with hub.client() as c:
        for path, state in docs.items():
            got = c.call("get", {"path": path})
            on_disk = export_document(c, path)[0] if got["exists"] else None
            allowed = [state.acked, *state.in_flight]
            assert on_disk in allowed, (path, on_disk[:80] if on_disk else None)
            if on_disk != state.acked:
                state.acked = on_disk  # the in-flight write landed before the kill
            state.revision = "absent" if on_disk is None else hashlib.sha256(on_disk).hexdigest()
            state.in_flight = []
        # Search sees exactly the documents that exist now (each holds "worker"), at their current revision.
        prefix = next(iter(docs)).split("/")[0] + "/"
        found = c.call("search", {"query": "worker", "path_prefix": prefix, "limit": 20})
        assert found["incomplete"] is False, found
        assert sorted(m["path"] for m in found["matches"]) == sorted(p for p, s in docs.items() if s.acked), found
        assert all(m["revision"] == docs[m["path"]].revision for m in found["matches"]), found


def test_kill_9_during_writes_loses_nothing_acknowledged(hub: HubProcess) -> None:
    rounds = pick(12, 200)
    rng = random.Random(2026)
    docs: list[dict[str, DocState]] = [
        {f"w{w}/{d}.md": DocState() for d in range(DOCS_PER_WORKER)} for w in range(WORKERS)
    ]
    started = time.monotonic()
    tally = Tally()
    for _round in range(rounds):
        stop = threading.Event()
        threads = [
            threading.Thread(target=_writer, args=(hub, w, docs[w], stop, rng.randrange(1 << 30), tally))
            for w in range(WORKERS)
        ]
        acked_before = tally.acked
        for t in threads:
            t.start()
        # The kill lands among writes: after the first acknowledged write of this round (on a loaded machine,
        # connecting can take longer than the random pause), then a random pause.
        wait_until(lambda before=acked_before: tally.acked > before or tally.errors, WRITES_START_SECONDS,
                   "the round's first acknowledged write", interval=0.002)
        time.sleep(rng.uniform(0.005, 0.15))
        assert hub.stop(signal.SIGKILL) == -signal.SIGKILL
        stop.set()
        for t in threads:
            t.join(30)
            assert not t.is_alive()
        hub.start()
        assert tally.errors == [], tally.errors
        for w in range(WORKERS):
            _check(hub, docs[w])
    assert tally.acked > rounds  # the kills really landed among writes
    report(f"crash: {rounds} kill -9 rounds, {WORKERS} writers x {DOCS_PER_WORKER} docs, {tally.acked} acknowledged "
           f"writes, {time.monotonic() - started:.1f} s: every document old-or-new, no acknowledged write lost")


