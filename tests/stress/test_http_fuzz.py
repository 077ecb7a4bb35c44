"""Fuzz the Hub's MCP HTTP endpoint at scale: hostile requests with valid tokens, while a legitimate session works.

A real Hub (``hub.mcp_listen`` on loopback, ``hub.mcp_rate``/``hub.mcp_burst`` raised so the fuzzer's answers
come from what lies behind the rate limit, not the limit itself) gets the requests of
:mod:`tests.stress.http_fuzz` (bodies that are not JSON, not UTF-8, deeply nested, huge batches, random JSON-RPC
on a real session, wrong methods, content types, protocol versions, session ids, oversized headers, lying
lengths, half-sent bodies, garbage), 8 connections at a time.  Meanwhile a second principal's session calls
``memory_get`` every :data:`LEGIT_PAUSE` seconds.

Proof: no answer is 5xx, no request waits unanswered (``timeout``) and none finds the listener gone; the Hub
still serves (its process, a Unix-socket ``get``, a new MCP session); its ``VmRSS`` after the fuzzing is within
:data:`FLAT_GROWTH_MIB` of what it was after the warm-up (the first tenth); every call of the legitimate
session answered 200 with its note.  The suite sends 300 requests (about 10 s in all); ``AMUX_STRESS=full``
100,000 (README of tests/stress).  DESIGN.md §6 (bounds), §7 (tokens).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import trio

from tests.helpers import mcp_http_hub
from tests.mcp_http_raw import issue, open_session, tool
from tests.stress.http_fuzz import Target, fuzz
from tests.stress.scale import pick, report, rss

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

REQUESTS = int(os.environ.get("AMUX_HTTP_FUZZ_REQUESTS") or pick(300, 100_000))
"""300 in the suite, 100,000 with ``AMUX_STRESS=full``; ``AMUX_HTTP_FUZZ_REQUESTS=N`` sends N."""
WARMUP = REQUESTS // 10
"""Requests sent before the Hub's memory is first measured (its caches, the SDK's first sessions)."""
SEED = 32
CONCURRENCY = 8
LEGIT_PAUSE = 0.2
"""Seconds between two calls of the legitimate session."""
FLAT_GROWTH_MIB = 32
"""How much the Hub's VmRSS may grow from the warm-up to the end: a leak of 300 bytes a request would pass
this bound at 100,000 requests."""
NOTE = "notes/legit.md"


def test_hostile_http_requests_do_not_break_the_hub(tmp_path: Path) -> None:
    t0 = time.monotonic()
    h, url = mcp_http_hub(tmp_path, **{"hub.mcp_rate": "1000000", "hub.mcp_burst": "1000000"})
    assert h.proc is not None
    pid = h.proc.pid
    with h.client() as c:
        c.call("upsert", {"path": NOTE, "content": b"# legit\nthe legitimate note\n", "expected_revision": "absent"})
    fuzz_token, _ = issue(h, "fuzzer")
    legit_token, _ = issue(h, "legit")
    u = urlsplit(url)
    assert u.hostname is not None and u.port is not None
    target = Target(u.hostname, u.port, fuzz_token, open_session(url, fuzz_token))
    legit_sid = open_session(url, legit_token)
    legit: list[str] = []
    stop = threading.Event()

    def legitimate() -> None:
        while not stop.is_set():
            try:
                status, result = tool(url, legit_token, legit_sid, arguments={"path": NOTE})
                good = status == 200 and "the legitimate note" in result["structuredContent"]["content"]
                legit.append("ok" if good else f"{status}: {str(result)[:200]}")
            except Exception as exc:  # noqa: BLE001 - reported by the assertion
                legit.append(f"{type(exc).__name__}: {exc}")
            stop.wait(LEGIT_PAUSE)

    worker = threading.Thread(target=legitimate, daemon=True)
    worker.start()
    memory: dict[str, dict[str, int]] = {"start": rss(pid)}
    try:
        trio.run(fuzz, target, WARMUP, SEED, CONCURRENCY)
        memory["warm"] = rss(pid)
        fuzz_t0 = time.monotonic()

        def progress(sent: int) -> None:
            if sent % 10_000 == 0:
                report(f"HTTP fuzz: {WARMUP + sent} sent, VmRSS {rss(pid)['VmRSS'] / 1024:.1f} MiB")

        trio.run(fuzz, target, REQUESTS - WARMUP, SEED, CONCURRENCY, progress, WARMUP)
        fuzz_seconds = time.monotonic() - fuzz_t0
        memory["end"] = rss(pid)
    finally:
        stop.set()
        worker.join(30)
    assert h.proc.poll() is None, "the Hub died"
    with h.client() as c:
        assert c.call("get", {"path": NOTE})["exists"] is True
    status, result = tool(url, legit_token, open_session(url, legit_token), arguments={"path": NOTE})
    assert status == 200 and not result["isError"]
    h.stop()
    mib = {k: round(v["VmRSS"] / 1024, 1) for k, v in memory.items()}
    total = sum(target.statuses.values())
    report(f"HTTP fuzz: {total} requests ({dict(sorted(target.kinds.items()))}), answers "
           f"{dict(sorted(target.statuses.items()))}, sessions they opened ended by DELETE "
           f"{dict(target.deletes)}; Hub VmRSS MiB start {mib['start']}, after {WARMUP} "
           f"{mib['warm']}, end {mib['end']} (VmHWM {memory['end']['VmHWM'] / 1024:.1f}); "
           f"{REQUESTS - WARMUP} after the warm-up in {fuzz_seconds:.0f} s; legitimate calls {len(legit)}, "
           f"answered ok {legit.count('ok')}; whole test {time.monotonic() - t0:.0f} s")
    assert total == REQUESTS
    assert target.five_xx == [], target.five_xx[:10]
    assert target.timeouts == [], target.timeouts[:10]
    # 501 is HTTP's own answer to a transfer coding the server does not implement (RFC 9112 §6.1: gzip,
    # identity); Hypercorn's h11 gives it before the Hub sees the request, and it is counted on its own.
    assert not [s for s in target.statuses if s.startswith("5") and s != "501_transfer_coding"], target.statuses
    assert target.statuses["timeout"] == 0 and target.statuses["connect_failed"] == 0, target.statuses
    assert legit and all(r == "ok" for r in legit), [r for r in legit if r != "ok"][:5]
    assert set(target.deletes) <= {"200", "204"}, target.deletes
    assert mib["end"] - mib["warm"] <= FLAT_GROWTH_MIB, mib
