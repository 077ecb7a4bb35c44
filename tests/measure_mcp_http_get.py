"""Measure ``memory_get`` of a 2 KiB note over the Hub's MCP HTTP listener on loopback (for the bench).

Run: ``python -m tests.measure_mcp_http_get [--calls N]``.  Starts a real Hub (``amux hub serve``) in a
temporary home with ``hub.mcp_listen`` on a free loopback port, writes one 2 KiB note with the CLI, opens
one MCP session with a bearer token and sends ``N`` ``tools/call memory_get`` requests, one at a time on one
keep-alive ``http.client`` connection (what an agent's HTTP client does), after 20 warm-up calls, paced
at :data:`PACE_SECONDS` from start to start so the token stays under the listener's 20 requests a second
(``MCP_HTTP_RATE_PER_SECOND``; faster, it answers 429).  For
comparison it times the same ``tools/call`` through the stdio relay (one ``amux mcp`` process, newline JSON
on its stdin/stdout) and the same read as a Hub ``get`` on the Unix socket (:class:`HubClient`, one
connection), paced alike.
Prints one JSON object: milliseconds per call, ``p50``/``p90``/``p99``/``mean`` for each path.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from amux_memory.tools.client.blocking import HubClient
from tests.conftest import amux_argv, make_hub

WARMUP = 20
PACE_SECONDS = 0.055
NOTE = ("# Note\n\n" + "".join(f"- fact {i:03d}: the build of this project uses a pinned toolchain\n"
                               for i in range(40)))[:2048]


def percentiles(samples: list[float]) -> dict[str, float]:
    """``p50``, ``p90``, ``p99`` and ``mean`` of ``samples`` (seconds), in milliseconds, 3 decimals."""
    s = sorted(samples)

    def at(q: float) -> float:
        return round(s[min(len(s) - 1, int(q * len(s)))] * 1000, 3)

    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "mean": round(statistics.fmean(s) * 1000, 3),
            "calls": len(s)}


def main() -> None:
    """Start the Hub, measure both paths, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        h = make_hub(Path(tmp), settings={"hub.mcp_listen": "127.0.0.1:0"})
        try:
            assert h.log is not None
            url = re.findall(r"serving MCP on (http://\S+)", h.log.read_text())[-1]
            h.cli("hub", "principal", "add", "bench")
            token = h.cli("hub", "token", "issue", "bench").json["token"]
            assert len(NOTE.encode()) == 2048
            r = h.cli("memory", "upsert", "notes/bench.md", "--expected-revision", "absent", input=NOTE.encode())
            assert r.returncode == 0, r.stderr
            u = urlsplit(url)
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
            headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                       "Authorization": f"Bearer {token}"}

            def post(body: dict[str, Any]) -> tuple[http.client.HTTPResponse, bytes]:
                conn.request("POST", u.path, body=json.dumps(body).encode(), headers=headers)
                resp = conn.getresponse()
                return resp, resp.read()

            resp, _ = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
            headers["Mcp-Session-Id"] = resp.getheader("mcp-session-id") or ""
            headers["MCP-Protocol-Version"] = "2025-06-18"
            post({"jsonrpc": "2.0", "method": "notifications/initialized"})
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "memory_get", "arguments": {"path": "notes/bench.md"}}}
            samples = []
            for i in range(WARMUP + args.calls):
                t0 = time.perf_counter()
                resp, body = post(call)
                dt = time.perf_counter() - t0
                assert resp.status == 200 and b"2048 bytes" in body, body[:300]
                if i >= WARMUP:
                    samples.append(dt)
                time.sleep(max(0.0, PACE_SECONDS - dt))
            conn.close()
            socket_samples = []
            with HubClient(h.socket, timeout=30) as client:
                for i in range(WARMUP + args.calls):
                    t0 = time.perf_counter()
                    got = client.call("get", {"path": "notes/bench.md"})
                    dt = time.perf_counter() - t0
                    assert got["content"] == NOTE
                    if i >= WARMUP:
                        socket_samples.append(dt)
                    time.sleep(max(0.0, PACE_SECONDS - dt))
            relay = subprocess.Popen([*amux_argv(), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env={**h.env, "AMUX_HOME": str(h.home)})
            assert relay.stdin is not None and relay.stdout is not None

            def line(message: dict[str, Any]) -> bytes:
                assert relay.stdin is not None and relay.stdout is not None
                relay.stdin.write(json.dumps(message).encode() + b"\n")
                relay.stdin.flush()
                return b"" if "id" not in message else relay.stdout.readline()

            line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
            line({"jsonrpc": "2.0", "method": "notifications/initialized"})
            relay_samples = []
            for i in range(WARMUP + args.calls):
                t0 = time.perf_counter()
                answer = line(call)
                dt = time.perf_counter() - t0
                assert b"2048 bytes" in answer, answer[:300]
                if i >= WARMUP:
                    relay_samples.append(dt)
                time.sleep(max(0.0, PACE_SECONDS - dt))
            relay.stdin.close()
            relay.wait(15)
            print(json.dumps({"http_memory_get_ms": percentiles(samples), "relay_memory_get_ms":
                              percentiles(relay_samples), "socket_get_ms": percentiles(socket_samples),
                              "note_bytes": 2048}))
        finally:
            h.stop()


if __name__ == "__main__":
    main()
