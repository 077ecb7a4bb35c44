"""The HTTP side of ``tests/stress/test_mcp_http_load.py``: many MCP sessions over streamable HTTP, in its own process.

Run as ``python -m tests.stress.mcp_http_load`` with one JSON object on
stdin's first line: ``{"url", "tokens": [str], "sessions": int, "stages":
[int], "seconds": float, "interval": float, "call": {"name"?, "arguments"?}}``.
Sessions are spread over the tokens round robin (session ``i`` uses
``tokens[i % len(tokens)]``), each on its own HTTP/1.1 connection (raw
``httpx2`` on Trio: what an agent's HTTP stack sends, without the SDK client's
own tasks eating the CPU the Hub needs).

The protocol on stdout, one line each, so the test can read the Hub's memory
at each step:

1. sessions are opened (``initialize``, ``notifications/initialized``,
   ``tools/list``) up to each count of ``stages`` in turn; after each it
   prints ``OPEN n`` and waits for a line on stdin;
2. then every session calls the tool every ``interval`` seconds (a random
   phase first) for ``seconds``; without ``call.name``: ``memory_get`` (with
   ``call.arguments``, its answer holding ``call.expect``) when the server
   lists it, else ``whoami`` (no arguments);
3. it prints ``RESULT {json}``: ``calls``, ``answered`` (200 with a result
   that is not an error), ``statuses`` (HTTP status counts, or the exception
   type), ``failures`` (the first 20, as text), ``latency_ms`` (``n``,
   ``p50``, ``p99``, ``max``), ``tool`` and ``per_session_min`` (fewest calls
   answered in one session) and ``slow`` (the first 40 calls over ``SLOW_MS``:
   seconds into the call phase, ms); then DELETEs every session and exits 0.

Everything is loopback and bounded: each request times out after 30 s and
the run after ``seconds`` + 120 s.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx2
import trio

from bench.mcp_http import rpc_message

PROTOCOL = "2025-06-18"
REQUEST_TIMEOUT_SECONDS = 30.0
"""One HTTP request's bound (connect, write, read)."""
SLOW_MS = 100.0
"""A call slower than this is listed in the result's ``slow`` (a stall shows as a cluster of them)."""
SLACK_SECONDS = 120.0
"""The whole run's bound beyond its call phase (opening and closing the sessions)."""


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, linear between closest ranks; NaN when empty."""
    if not values:
        return math.nan
    s = sorted(values)
    k = (len(s) - 1) * q / 100
    lo = math.floor(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


@dataclass
class Tally:
    """What the call phase saw, across sessions."""

    latencies: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    calls: int = 0
    slow: list[tuple[float, int]] = field(default_factory=list)
    """Calls slower than :data:`SLOW_MS`: (seconds into the call phase, ms)."""
    began: float = field(default_factory=time.perf_counter)
    answered: int = 0

    def fail(self, what: str) -> None:
        """Record one failed call, described by ``what``."""
        if len(self.failures) < 20:
            self.failures.append(what[:300])


class Session:
    """One MCP session on its own HTTP connection."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}",
                                                "Accept": "application/json, text/event-stream",
                                                "Content-Type": "application/json"},
                                       timeout=REQUEST_TIMEOUT_SECONDS,
                                       limits=httpx2.Limits(max_connections=1, max_keepalive_connections=1))
        self.sid = ""
        self.next_id = 0
        self.answered = 0

    async def post(self, body: dict[str, Any]) -> httpx2.Response:
        """POST one JSON-RPC message (with the session's headers once it has an id)."""
        headers = {"Mcp-Session-Id": self.sid, "MCP-Protocol-Version": PROTOCOL} if self.sid else {}
        return await self.http.post(self.url, content=json.dumps(body).encode(), headers=headers)

    async def request(self, method: str, params: dict[str, Any]) -> tuple[int, Any]:
        """One JSON-RPC request: ``(HTTP status, the answer or the body's text)``."""
        self.next_id += 1
        resp = await self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        if resp.status_code != 200:
            return resp.status_code, resp.text
        return 200, rpc_message(resp.content)

    async def open(self) -> list[str]:
        """``initialize``, ``notifications/initialized`` and ``tools/list``; the tool names.  Raises
        ``RuntimeError`` on any answer but success."""
        resp = await self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "loadtest", "version": "1"}}})
        if resp.status_code != 200 or "mcp-session-id" not in resp.headers:
            raise RuntimeError(f"initialize answered {resp.status_code}: {resp.text[:300]}")
        self.sid = resp.headers["mcp-session-id"]
        resp = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if resp.status_code != 202:
            raise RuntimeError(f"notifications/initialized answered {resp.status_code}: {resp.text[:300]}")
        status, answer = await self.request("tools/list", {})
        if status != 200 or "result" not in answer:
            raise RuntimeError(f"tools/list answered {status}: {str(answer)[:300]}")
        return [t["name"] for t in answer["result"]["tools"]]

    async def call(self, name: str, arguments: dict[str, Any], expect: str, tally: Tally) -> None:
        """One ``tools/call``, timed and counted in ``tally``; answered when its result is no error and its JSON
        holds ``expect``."""
        tally.calls += 1
        t0 = time.perf_counter()
        try:
            status, answer = await self.request("tools/call", {"name": name, "arguments": arguments})
        except httpx2.HTTPError as exc:
            tally.statuses[type(exc).__name__] += 1
            tally.fail(f"{type(exc).__name__}: {exc}")
            return
        tally.latencies.append((time.perf_counter() - t0) * 1000.0)
        if tally.latencies[-1] > SLOW_MS:
            tally.slow.append((round(t0 - tally.began, 2), round(tally.latencies[-1])))
        tally.statuses[str(status)] += 1
        if status != 200:
            tally.fail(f"HTTP {status}: {answer}")
        elif "result" not in answer or answer["result"].get("isError") or expect not in json.dumps(answer["result"]):
            tally.fail(f"not a result: {json.dumps(answer)[:300]}")
        else:
            tally.answered += 1
            self.answered += 1

    async def close(self) -> None:
        """DELETE the session (errors ignored: the Hub expires it anyway) and close the connection."""
        try:
            if self.sid:
                await self.http.delete(self.url, headers={"Mcp-Session-Id": self.sid, "MCP-Protocol-Version": PROTOCOL})
        except httpx2.HTTPError:
            pass
        await self.http.aclose()


async def _run(spec: dict[str, Any]) -> dict[str, Any]:
    tokens: list[str] = spec["tokens"]
    sessions = [Session(spec["url"], tokens[i % len(tokens)]) for i in range(spec["sessions"])]
    stdin = trio.wrap_file(sys.stdin)
    tools: list[str] = []
    opened = 0
    try:
        for stage in spec["stages"]:
            async with trio.open_nursery() as nursery:
                for s in sessions[opened:stage]:
                    async def open_one(s: Session = s) -> None:
                        tools[:] = await s.open()
                    nursery.start_soon(open_one)
            opened = stage
            print(f"OPEN {opened}", flush=True)
            await stdin.readline()
        call = spec.get("call") or {}
        name = call.get("name") or ("memory_get" if "memory_get" in tools else "whoami")
        arguments = call.get("arguments", {}) if name != "whoami" else {}
        expect = call.get("expect", "") if name != "whoami" else ""
        tally = Tally()
        interval = float(spec["interval"])
        start = trio.current_time()
        deadline = start + float(spec["seconds"])

        async def loop(s: Session) -> None:
            # Each session's calls are due at start + offset + k * interval, offset in [0, interval): the count of
            # calls is fixed by the schedule, not by how late a busy machine wakes the task.
            next_at = start + interval * random.random()
            await trio.sleep_until(next_at)
            while next_at < deadline:
                await s.call(name, arguments, expect, tally)
                next_at += interval
                await trio.sleep_until(next_at)

        async with trio.open_nursery() as nursery:
            for s in sessions[:opened]:
                nursery.start_soon(loop, s)
        lat = tally.latencies
        return {"tool": name, "tools": tools, "sessions": opened, "calls": tally.calls, "answered": tally.answered,
                "statuses": dict(tally.statuses), "failures": tally.failures,
                "latency_ms": {"n": len(lat), "p50": round(percentile(lat, 50), 2),
                               "p99": round(percentile(lat, 99), 2), "max": round(max(lat, default=math.nan), 2)},
                "slow": tally.slow[:40], "per_session_min": min((s.answered for s in sessions[:opened]), default=0)}
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(30):
            async with trio.open_nursery() as nursery:
                for s in sessions:
                    nursery.start_soon(s.close)


def main() -> int:
    """Read the spec from stdin, run, print ``RESULT {json}``; 0, or 3 with the error on stderr."""
    spec = json.loads(sys.stdin.readline())
    try:
        result = trio.run(_with_bound, spec)
    except Exception as exc:  # noqa: BLE001 - the test prints what broke
        print(f"ERROR {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 3
    print("RESULT " + json.dumps(result), flush=True)
    return 0


async def _with_bound(spec: dict[str, Any]) -> dict[str, Any]:
    with trio.fail_after(float(spec["seconds"]) + SLACK_SECONDS):
        return await _run(spec)


if __name__ == "__main__":
    sys.exit(main())
