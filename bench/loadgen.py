"""Closed-loop load over N concurrent Hub connections (run as its own process by the bench).

``python -m bench.loadgen SOCKET --clients N --seconds S --method get|search|upsert --params JSON
[--tokens FILE]`` prints one JSON object: completed requests, errors, throughput and latency
percentiles.  Each connection says hello, then sends one request at a time
for ``S`` seconds (after a short warm-up); the requests that complete inside
the window count, with their whole latency.  asyncio keeps the generator's own
cost per request small so the Hub, not the client, is what is measured.
With ``--tokens FILE`` (a JSON list of tokens) connection ``i`` says hello
with token ``i mod len``: with isolation ``user`` each writes in its own
principal's scope.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from amux_memory.protocol.framing import FrameDecoder
from amux_memory.protocol.messages import PROTOCOL_VERSION, decode_response, encode_request


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = FrameDecoder()
        self.rid = 0

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.rid += 1
        self.writer.write(encode_request(self.rid, method, params))
        while True:
            body = self.decoder.next_frame()
            if body is not None:
                return decode_response(body).unwrap()
            data = await self.reader.read(65536)
            if not data:
                raise ConnectionError("the Hub closed the connection")
            self.decoder.feed(data)


async def _open(socket_path: str, token: str | None = None) -> Conn:
    reader, writer = await asyncio.open_unix_connection(socket_path)
    conn = Conn(reader, writer)
    hello: dict[str, Any] = {"protocol": PROTOCOL_VERSION, "client": "bench-loadgen"}
    if token is not None:
        hello["token"] = token
    await conn.call("hello", hello)
    return conn


async def run(socket_path: str, clients: int, seconds: float, warmup: float, method: str,
              params: dict[str, Any], tokens: list[str] | None = None) -> dict[str, Any]:
    conns: list[Conn] = []
    while len(conns) < clients:
        # In batches: the Hub's listen backlog is 128, a burst of 256 connects at once would overflow it.
        batch = min(32, clients - len(conns))
        first = len(conns)
        conns += await asyncio.gather(*(_open(socket_path, tokens[(first + k) % len(tokens)] if tokens else None)
                                        for k in range(batch)))
    latencies: list[float] = []
    errors: dict[str, int] = {}
    start = time.perf_counter()
    measure_from = start + warmup
    stop_at = measure_from + seconds

    async def worker(index: int, conn: Conn) -> None:
        # "upsert": each connection rewrites its own document, chaining revisions (compare-and-swap).
        path = f"loadgen/{os.getpid()}-c{index:03d}.md"
        revision = "absent"
        count = 0
        while True:
            t0 = time.perf_counter()
            if t0 >= stop_at:
                return
            try:
                if method == "upsert":
                    count += 1
                    content = params["content"].encode() + f"<!-- {count} -->\n".encode()
                    res = await conn.call("upsert", {"path": path, "content": content, "expected_revision": revision})
                    revision = res["revision"]
                else:
                    await conn.call(method, params)
                ok = True
            except Exception as exc:  # noqa: BLE001 - count, keep going
                key = getattr(getattr(exc, "code", None), "value", type(exc).__name__)
                errors[key] = errors.get(key, 0) + 1
                ok = False
            t1 = time.perf_counter()
            if ok and measure_from <= t1 <= stop_at:  # completions inside the window
                latencies.append(t1 - t0)

    await asyncio.gather(*(worker(i, c) for i, c in enumerate(conns)))
    for c in conns:
        c.writer.close()
    latencies.sort()

    def pct(q: float) -> float:
        if not latencies:
            return float("nan")
        return latencies[min(len(latencies) - 1, int(round((len(latencies) - 1) * q / 100)))] * 1000

    return {
        "clients": clients, "method": method, "seconds": seconds, "completed": len(latencies),
        "throughput_per_s": round(len(latencies) / seconds, 1), "errors": errors,
        "p50_ms": round(pct(50), 3), "p99_ms": round(pct(99), 3), "max_ms": round(pct(100), 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.loadgen")
    ap.add_argument("socket")
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--warmup", type=float, default=0.3)
    ap.add_argument("--method", default="get")
    ap.add_argument("--params", default='{"path": "MEMORY.md"}', help="JSON params of every request")
    ap.add_argument("--tokens", help="JSON file: a list of tokens, connection i says hello with token i mod len")
    a = ap.parse_args(argv)
    tokens = json.loads(Path(a.tokens).read_text(encoding="utf-8")) if a.tokens else None
    out = asyncio.run(run(a.socket, a.clients, a.seconds, a.warmup, a.method, json.loads(a.params), tokens))
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
