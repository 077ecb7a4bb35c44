"""Load: many concurrent connections doing mixed search/get/upsert against one Hub.

Proof: no errors other than expected conflicts, and every connection makes
progress; p50/p99 per operation are reported.  Quick in the normal suite;
``AMUX_STRESS=full`` runs 500 connections for 60 s.
"""

from __future__ import annotations

import random
import socket
import statistics
from typing import Any

import pytest
import trio

from amux_memory.protocol.errors import ErrorCode
from amux_memory.protocol.framing import FrameDecoder
from amux_memory.protocol.messages import decode_response, encode_request
from tests.conftest import HubProcess
from tests.stress.scale import FULL, pick, report

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600 if FULL else 300)]  # the full runs take many minutes


class Conn:
    """One async connection speaking raw frames."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()
        self.next_id = 0

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        await self.stream.send_all(encode_request(self.next_id, method, params))
        while (body := self.decoder.next_frame()) is None:
            data = await self.stream.receive_some(65536)
            assert data, "the Hub closed a connection under load"
            self.decoder.feed(data)
        response = decode_response(body)
        assert response.id == self.next_id
        return response


async def _connect(path: str) -> Conn:
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.connect(path)
    conn = Conn(trio.SocketStream(sock))
    assert (await conn.call("hello", {"protocol": 1})).error is None
    return conn


async def test_mixed_load_has_no_unexpected_errors(hub: HubProcess) -> None:
    connections, seconds = pick(40, 500), pick(3, 60)
    with hub.client() as c:
        for i in range(64):
            c.call("upsert", {"path": f"load/doc{i}.md", "content": f"# doc {i}\n\nshared words load test\n",
                              "expected_revision": "absent"})
    latencies: dict[str, list[float]] = {"search": [], "get": [], "upsert": []}
    unexpected: list[str] = []
    counts = {"conflict": 0, "ops": 0}
    per_conn_ops = [0] * connections

    async def client(k: int) -> None:
        rng = random.Random(k)
        conn = await _connect(str(hub.socket))
        revisions: dict[str, str] = {}
        end = trio.current_time() + seconds
        while trio.current_time() < end:
            path = f"load/doc{rng.randrange(64)}.md"
            roll = rng.random()
            if roll < 0.3:
                method, params = "search", {"query": rng.choice(["shared", "load words", "doc", "absent-word"])}
            elif roll < 0.8 or path not in revisions:
                method, params = "get", {"path": path}
            else:
                method, params = "upsert", {"path": path, "content": f"# doc\n\nshared words by {k}\n",
                                            "expected_revision": revisions[path]}
            t0 = trio.current_time()
            r = await conn.call(method, params)
            latencies[method].append(trio.current_time() - t0)
            counts["ops"] += 1
            per_conn_ops[k] += 1
            if r.error is not None:
                if r.error.code is ErrorCode.CONFLICT:
                    counts["conflict"] += 1
                    revisions[path] = r.error.data["observed_revision"]
                else:
                    unexpected.append(f"{method}: {r.error!r}")
            elif method in ("get", "upsert"):
                revisions[path] = r.result["revision"]
        await conn.stream.aclose()

    async with trio.open_nursery() as nursery:
        for k in range(connections):
            nursery.start_soon(client, k)
    assert unexpected == [], unexpected[:5]
    assert min(per_conn_ops) > 0  # every connection was served
    figures = []
    for method, values in latencies.items():
        if values:
            values.sort()
            p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
            figures.append(f"{method} n={len(values)} p50={statistics.median(values) * 1000:.1f} ms "
                           f"p99={p99 * 1000:.1f} ms")
    report(f"load: {connections} connections x {seconds} s, {counts['ops']} ops "
           f"({counts['ops'] / seconds:.0f}/s), {counts['conflict']} expected conflicts, 0 other errors; "
           + "; ".join(figures))
