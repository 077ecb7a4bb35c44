"""``memory_get`` of a 2 KiB note over each way an agent reaches the Hub: MCP over HTTP, the stdio relay, the socket.

Run: ``python -m bench.memory_get_transports [--calls N]`` (from the repository root, like ``python -m bench``;
not part of the full run).  Starts a real Hub (``amux hub serve``) in a temporary home with ``hub.mcp_listen``
on a free loopback port, writes one 2 KiB note and measures, one path after the other, ``N`` calls (default
500) after 20 unmeasured ones, one at a time, paced at 55 ms from start to start so a token stays under the
listener's 20 requests a second (``MCP_HTTP_RATE_PER_SECOND``; faster, it answers 429):

* ``http_memory_get_ms``: ``tools/call memory_get`` on one MCP session with a bearer token from the real CLI,
  over one keep-alive ``http.client`` connection (what an agent's HTTP client does);
* ``relay_memory_get_ms``: the same ``tools/call`` through the stdio relay (one ``amux mcp`` process, newline
  JSON on its stdin/stdout);
* ``socket_get_ms``: the same read as a Hub ``get`` on the Unix socket (one ``HubClient`` connection).

Prints one JSON object: for each path the milliseconds per call, ``p50``/``p90``/``p99`` (nearest rank) and
``mean``, and ``calls``.  Section m of ``python -m bench`` measures the HTTP and socket paths side by side
against their targets; this adds the relay.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from amux_memory.hub.access.config import set_value
from amux_memory.protocol.limits import MCP_HTTP_RATE_PER_SECOND
from bench.capacity import PROTOCOL
from bench.mcp_http import Session, issue_token
from bench.util import HubProc, amux_argv

NOTE_PATH = "notes/bench.md"
NOTE = ("# Note\n\n" + "".join(f"- fact {i:03d}: the build of this project uses a pinned toolchain\n"
                               for i in range(40)))[:2048]
"""The note read: 2,048 bytes of ASCII."""
CALL: dict[str, Any] = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "memory_get", "arguments": {"path": NOTE_PATH}}}
"""The JSON-RPC request both MCP paths send."""
ANSWERED = b"2048 bytes"
"""What a ``memory_get`` answer of the note says (its text names the size)."""


def percentiles(samples: list[float]) -> dict[str, float]:
    """``p50``, ``p90``, ``p99`` and ``mean`` of ``samples`` (seconds), in milliseconds, 3 decimals; ``calls``."""
    s = sorted(samples)

    def at(q: float) -> float:
        return round(s[min(len(s) - 1, int(q * len(s)))] * 1000, 3)

    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "mean": round(statistics.fmean(s) * 1000, 3),
            "calls": len(s)}


def paced(call: Callable[[], None], calls: int, warmup: int = 20) -> list[float]:
    """Seconds each of ``calls`` calls of ``call`` took, after ``warmup`` unmeasured ones, each started 55 ms
    after the one before: 18 a second, under the listener's per-token rate (the pause is the pace an agent
    keeps, not a wait for anything)."""
    pace = 1.1 / MCP_HTTP_RATE_PER_SECOND
    samples = []
    for i in range(warmup + calls):
        t0 = time.perf_counter()
        call()
        dt = time.perf_counter() - t0
        if i >= warmup:
            samples.append(dt)
        time.sleep(max(0.0, pace - dt))
    return samples


def over_http(url: str, token: str, calls: int) -> list[float]:
    """``memory_get`` on one MCP session over one keep-alive HTTP connection."""
    session = Session(url, token)
    try:
        session.open()

        def call() -> None:
            status, _, body = session.post(CALL)
            if status != 200 or ANSWERED not in body:
                raise RuntimeError(f"memory_get over HTTP answered {status}: {body[:300]!r}")

        return paced(call, calls)
    finally:
        session.close()


def over_socket(hub: HubProc, calls: int) -> list[float]:
    """A Hub ``get`` of the note on one Unix-socket connection."""
    with hub.client(timeout=30) as client:

        def call() -> None:
            got = client.call("get", {"path": NOTE_PATH})
            if got["content"] != NOTE:
                raise RuntimeError(f"get answered {str(got)[:300]}")

        return paced(call, calls)


def through_relay(env: dict[str, str], calls: int) -> list[float]:
    """``memory_get`` through one ``amux mcp`` process (newline JSON on its stdin and stdout)."""
    relay = subprocess.Popen([*amux_argv(), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    stdin, stdout = relay.stdin, relay.stdout
    assert stdin is not None and stdout is not None

    def line(message: dict[str, Any]) -> bytes:
        stdin.write(json.dumps(message).encode() + b"\n")
        stdin.flush()
        return b"" if "id" not in message else stdout.readline()

    try:
        line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        line({"jsonrpc": "2.0", "method": "notifications/initialized"})

        def call() -> None:
            answer = line(CALL)
            if ANSWERED not in answer:
                raise RuntimeError(f"memory_get through the relay answered {answer[:300]!r}")

        return paced(call, calls)
    finally:
        stdin.close()
        try:
            relay.wait(15)
        except subprocess.TimeoutExpired:
            relay.kill()
            relay.wait()


def measure(base: Path, calls: int) -> dict[str, Any]:
    """Start a Hub under ``base``, write the note, measure the three paths; the figures."""
    hub = HubProc.create(base)
    set_value(hub.home, "hub.mcp_listen", "127.0.0.1:0")
    with hub:
        with hub.client() as c:
            c.call("upsert", {"path": NOTE_PATH, "content": NOTE.encode(), "expected_revision": "absent"})
            url = c.hello.get("mcp_url")
        if not isinstance(url, str):
            raise RuntimeError(f"the Hub's hello names no MCP URL: {url!r}")
        http = over_http(url, issue_token(hub, "bench"), calls)
        sock = over_socket(hub, calls)
        relay = through_relay(hub.env, calls)
    return {"http_memory_get_ms": percentiles(http), "relay_memory_get_ms": percentiles(relay),
            "socket_get_ms": percentiles(sock), "note_bytes": len(NOTE.encode())}


def main(argv: list[str] | None = None) -> int:
    """Parse ``--calls``, measure in a temporary folder, print the JSON object."""
    parser = argparse.ArgumentParser(prog="python -m bench.memory_get_transports", description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=500, help="measured calls on each path (default 500)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(measure(Path(tmp), args.calls)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
