"""Capacity: the agent calls a second one Hub sustains at p99 ≤ 50 ms, over MCP HTTP and over the socket.

Open-loop load (run as its own process by section m: ``python -m bench.capacity --http URL | --socket PATH
--tokens FILE --rate R --seconds S``): ``len(tokens)`` sessions (one per token, the tokens spread over
several principals by the caller), each on its own keep-alive connection, together start ``R`` calls a
second on a fixed schedule, session ``i`` taking every ``len``-th slot.  A call's latency runs from its
*scheduled* start, so a Hub falling behind shows in p99 rather than slowing the load (no coordinated
omission).  Over HTTP each call is ``tools/call memory_get`` of one 2 KiB note on an MCP session opened with
``initialize``; over the socket it is a ``get`` of the same note after ``hello`` with the same token.  Prints
one JSON object: ``rate``, ``completed``, ``errors``, ``p50_ms``, ``p99_ms``, ``late`` (calls that could not
start on time because their session was still waiting for an answer).

:func:`sustained` steps the rate up (:data:`RATES`) until p99 passes :data:`P99_GOAL_MS` or calls fail, and
returns the last rate that held.  The generator is asyncio with pre-built requests, so its cost per call is
small, but on the 2-core bench VM it shares the cores with the Hub: the figures are a floor.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from amux_memory.protocol.framing import FrameDecoder
from amux_memory.protocol.messages import PROTOCOL_VERSION, decode_response, encode_request

P99_GOAL_MS = 50.0
"""A rate is sustained while the p99 latency of its calls stays at or under this, with no errors."""
RATES = (25, 50, 100, 150, 200, 300, 400, 600)
"""Total calls a second tried, in order, until one is not sustained."""
MIN_SAMPLES = 300
"""Measured calls a step at least (a slow rate runs longer): the p99 of fewer is little more than the maximum."""
PROTOCOL = "2025-06-18"
"""The MCP protocol version the bench's HTTP sessions negotiate (``initialize``)."""


class _Http:
    """One MCP session over one keep-alive HTTP/1.1 connection (answers are JSON with a Content-Length)."""

    def __init__(self, url: str, token: str, note: str) -> None:
        u = urlsplit(url)
        self.host, self.port, self.path, self.token, self.note = u.hostname or "127.0.0.1", u.port, u.path, token, note
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream"}
        self.call_bytes = b""

    def _request(self, body: dict[str, Any]) -> bytes:
        data = json.dumps(body).encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in self.headers.items())
        return (f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{head}"
                f"Content-Length: {len(data)}\r\n\r\n").encode() + data

    async def _exchange(self, raw: bytes) -> tuple[int, dict[str, str], bytes]:
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
        if headers.get("transfer-encoding", "").lower() != "chunked":
            return status, headers, await self.reader.readexactly(int(headers.get("content-length", "0")))
        body = b""  # an event stream (a Hub before JSON answers): its chunks until the last
        while size := int((await self.reader.readuntil(b"\r\n")).strip(), 16):
            body += (await self.reader.readexactly(size + 2))[:-2]
        await self.reader.readuntil(b"\r\n")
        return status, headers, body

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        hello = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        status, headers, body = await self._exchange(self._request({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                                                    "params": hello}))
        if status != 200 or "mcp-session-id" not in headers:
            raise RuntimeError(f"initialize answered HTTP {status}: {body[:200]!r}")
        self.headers |= {"Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": PROTOCOL}
        status, _, body = await self._exchange(self._request({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        if status != 202:
            raise RuntimeError(f"notifications/initialized answered HTTP {status}: {body[:200]!r}")
        self.call_bytes = self._request({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                         "params": {"name": "memory_get", "arguments": {"path": self.note}}})

    async def call(self) -> None:
        status, _, body = await self._exchange(self.call_bytes)
        if status != 200 or b'"isError":true' in body:
            raise RuntimeError(f"HTTP {status}")

    async def close(self) -> None:
        """End the session (DELETE: a principal may hold only 16) and the connection."""
        head = "".join(f"{k}: {v}\r\n" for k, v in self.headers.items())
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, ValueError):
            await self._exchange(f"DELETE {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{head}"
                                 "Content-Length: 0\r\n\r\n".encode())
        self.writer.close()


class _Socket:
    """One Hub connection on the Unix socket, said hello with a token."""

    def __init__(self, path: str, token: str, note: str) -> None:
        self.sock_path, self.token, self.note, self.rid = path, token, note, 0
        self.decoder = FrameDecoder()

    async def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.rid += 1
        self.writer.write(encode_request(self.rid, method, params))
        while (body := self.decoder.next_frame()) is None:
            data = await self.reader.read(65536)
            if not data:
                raise ConnectionError("the Hub closed the connection")
            self.decoder.feed(data)
        result: dict[str, Any] = decode_response(body).unwrap()
        return result

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_unix_connection(self.sock_path)
        await self._call("hello", {"protocol": PROTOCOL_VERSION, "client": "bench-capacity", "token": self.token})

    async def call(self) -> None:
        await self._call("get", {"path": self.note})

    async def close(self) -> None:
        self.writer.close()


async def run(target: str, http: bool, tokens: list[str], note: str, rate: float, seconds: float,
              warmup: float = 0.5) -> dict[str, Any]:
    """One open-loop step at ``rate`` calls a second for ``warmup + seconds``; the figures of the last ``seconds``."""
    conns: list[_Http | _Socket] = [(_Http if http else _Socket)(target, t, note) for t in tokens]
    for i in range(0, len(conns), 16):
        await asyncio.gather(*(c.open() for c in conns[i:i + 16]))
    n = len(conns)
    start = time.perf_counter() + 0.05
    total = int((warmup + seconds) * rate)
    latencies: list[float] = []
    errors: dict[str, int] = {}
    late = 0

    async def session(i: int) -> None:
        nonlocal late
        for k in range(i, total, n):
            due = start + k / rate
            now = time.perf_counter()
            if due > now:
                await asyncio.sleep(due - now)
            else:
                late += 1
            try:
                await conns[i].call()
            except Exception as exc:  # noqa: BLE001 - count, keep going
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                continue
            if due >= start + warmup:
                latencies.append(time.perf_counter() - due)

    await asyncio.gather(*(session(i) for i in range(n)))
    await asyncio.gather(*(c.close() for c in conns))
    latencies.sort()

    def pct(q: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000, 2) if latencies else -1.0

    return {"rate": rate, "sessions": n, "completed": len(latencies), "errors": errors, "late": late,
            "p50_ms": pct(0.5), "p99_ms": pct(0.99)}


def step(target: str, http: bool, tokens_file: Path, note: str, rate: float, seconds: float) -> dict[str, Any]:
    """One step in its own process (``python -m bench.capacity``), so the generator never shares the bench's GIL."""
    argv = [sys.executable, "-m", "bench.capacity", "--http" if http else "--socket", target,
            "--tokens", str(tokens_file), "--note", note, "--rate", str(rate), "--seconds", str(seconds)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"bench.capacity failed: {proc.stderr[-1500:]}")
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def sustained(target: str, http: bool, tokens_file: Path, note: str, seconds: float,
              rates: tuple[int, ...] = RATES, min_samples: int = MIN_SAMPLES) -> dict[str, Any]:
    """Step the rate up until p99 > :data:`P99_GOAL_MS` or a call fails: ``{"sustained": rate, "steps": [...]}``.
    Each step runs ``seconds``, or longer for ``min_samples`` calls (the quick run's smoke asks for fewer)."""
    steps: list[dict[str, Any]] = []
    best = 0
    for rate in rates:
        # At least min_samples calls a step, so the p99 is not just the slowest call of a short step.
        s = step(target, http, tokens_file, note, rate, max(seconds, min_samples / rate))
        steps.append(s)
        if s["errors"] or s["p99_ms"] < 0 or s["p99_ms"] > P99_GOAL_MS:
            break
        best = rate
    return {"sustained": best, "steps": steps}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.capacity", description=__doc__.split("\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--http", metavar="URL", help="the Hub's MCP URL")
    where.add_argument("--socket", metavar="PATH", help="the Hub's Unix socket")
    ap.add_argument("--tokens", type=Path, required=True, help="JSON file: a list of tokens, one session each")
    ap.add_argument("--note", required=True, help="the note every call reads")
    ap.add_argument("--rate", type=float, required=True, help="calls a second, all sessions together")
    ap.add_argument("--seconds", type=float, default=3.0, help="measured seconds (after 0.5 s of warm-up)")
    a = ap.parse_args(argv)
    tokens = json.loads(a.tokens.read_text(encoding="utf-8"))
    out = asyncio.run(run(a.http or a.socket, a.http is not None, tokens, a.note, a.rate, a.seconds))
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
