"""A seeded generator of hostile HTTP requests to the Hub's ``/mcp``, sent over raw sockets (Trio).

Every request carries a valid bearer token (so it passes the front door's token check and reaches what lies
behind it) unless its kind is about the headers themselves.  The kinds (:data:`KINDS`), each drawn at random:
bodies that are not JSON, not UTF-8, deeply nested, huge JSON-RPC batches, random JSON-RPC shapes (on a real
session too), wrong HTTP methods, content types, ``Accept``, ``MCP-Protocol-Version`` and ``Mcp-Session-Id``
values, oversized and too many headers, a ``Content-Length`` that lies, bodies sent half and abandoned,
garbage request lines and chunked bodies that are not.

:func:`fuzz` sends ``count`` of them with ``concurrency`` connections at once (one connection a request, as a
hostile client would; the answer's status line is read and the connection closed) and counts the answers by
status (``closed`` when the Hub closed without a status line, ``abandoned`` for a request the generator gave up
on by design, ``timeout`` when nothing came within :data:`ANSWER_SECONDS`).
"""

from __future__ import annotations

import contextlib
import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

ANSWER_SECONDS = 20.0
"""Seconds one request waits for its status line (the Hub's own body timeout is 30 s; a fuzzed request that is
complete must be answered well within it)."""


@dataclass
class Target:
    """Where and as whom: ``host``/``port`` of the MCP listener, a valid ``token``, a session ``sid`` it opened."""

    host: str
    port: int
    token: str
    sid: str
    statuses: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    five_xx: list[str] = field(default_factory=list)
    """The kind and the first bytes of each request answered 5xx (the test prints them)."""
    deletes: Counter[str] = field(default_factory=Counter)
    """The answers to the DELETEs that ended the sessions fuzzed requests opened."""
    timeouts: list[str] = field(default_factory=list)
    """The kind and the first bytes of each request left unanswered for :data:`ANSWER_SECONDS`."""


def _junk(rng: random.Random, n: int) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(n))


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("abcxyz{}[]\":,0123456789 \\\u00e9\u2603\U0001f600") for _ in range(n))


def _value(rng: random.Random, depth: int = 0) -> object:
    """A random JSON value (bounded size)."""
    pick = rng.randrange(8 if depth < 3 else 5)
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([True, False])
    if pick == 2:
        return rng.choice([0, -1, 2**63, -(2**64), 1e308, 3.5, 2**31])
    if pick == 3:
        return _text(rng, rng.randrange(0, 40))
    if pick == 4:
        return rng.choice(["memory_get", "memory_search", "tools/call", "initialize", "../../etc/passwd", ""])
    if pick == 5:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {_text(rng, rng.randrange(1, 8)): _value(rng, depth + 1) for _ in range(rng.randrange(4))}


METHODS = ("initialize", "tools/list", "tools/call", "ping", "notifications/initialized", "resources/list",
           "prompts/get", "logging/setLevel", "completion/complete", "server/discover", "x" * 300, "", "\u0000")


def _rpc(rng: random.Random) -> dict[str, object]:
    """A JSON-RPC-looking message with random parts wrong."""
    msg: dict[str, object] = {"jsonrpc": rng.choice(["2.0", "2.0", "1.0", 2, None]),
                              "method": rng.choice(METHODS)}
    if rng.random() < 0.8:
        msg["id"] = rng.choice([1, "a", None, 2**70, [], {}, -5, 1.5])
    if rng.random() < 0.8:
        if msg["method"] == "tools/call" and rng.random() < 0.7:
            msg["params"] = {"name": rng.choice(["memory_get", "memory_search", "memory_upsert", "memory_forget",
                                                 "result_continue", "nope"]),
                             "arguments": rng.choice([{"path": _text(rng, 20)}, {"query": _text(rng, 30)},
                                                      {"path": "a.md", "content": 5}, _value(rng), None, [],
                                                      {"token": _text(rng, 10)}])}
        else:
            msg["params"] = _value(rng)
    return msg


@dataclass
class Request:
    """Bytes to send, and how: ``abandon`` after sending (a half-sent body), ``shut`` the write side after."""

    data: bytes
    abandon: bool = False


def build(target: Target, rng: random.Random, kind: str) -> Request:
    """One hostile request of ``kind`` (:data:`KINDS`)."""
    host = f"{target.host}:{target.port}"
    headers = {"Host": host, "Authorization": f"Bearer {target.token}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream", "Connection": "close"}
    method = "POST"
    path = "/mcp"
    body = b""
    raw_tail = b""
    abandon = False
    session = rng.random() < 0.5
    if session:
        headers["Mcp-Session-Id"] = target.sid
        headers["MCP-Protocol-Version"] = "2025-06-18"
    if kind == "not_json":
        body = _text(rng, rng.randrange(1, 2000)).encode()
    elif kind == "not_utf8":
        body = b'{"jsonrpc":"2.0","id":1,"method":"' + _junk(rng, rng.randrange(1, 200)) + b'"}'
    elif kind == "nested":
        depth = rng.choice([100, 1000, 10_000, 100_000, 400_000])
        opener, closer = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
        inner = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + opener * depth + b"1" + closer * depth + b"}"
        body = inner if rng.random() < 0.5 else opener * depth + closer * depth
    elif kind == "batch":
        n = rng.choice([2, 100, 1000, 5000])
        body = json.dumps([_rpc(rng) for _ in range(n)]).encode()[: 1 << 20]
    elif kind == "rpc":
        body = json.dumps(_rpc(rng)).encode()
    elif kind == "http_method":
        method = rng.choice(["PUT", "PATCH", "OPTIONS", "TRACE", "CONNECT", "PROPFIND", "GET", "DELETE", "HEAD",
                             "X" * 100, "get"])
        body = json.dumps(_rpc(rng)).encode() if rng.random() < 0.5 else b""
        if method == "GET" and session:
            headers["Mcp-Session-Id"] = _text(rng, 30)  # never open the real session's event stream
        if method == "DELETE" and session:
            headers["Mcp-Session-Id"] = "f" * 32  # never end the fuzzer's own session
    elif kind == "content_type":
        headers["Content-Type"] = rng.choice(["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                                              "application/json; charset=latin-1", "", "a" * 5000, "*/*",
                                              "application/json\u00e9"])
        body = json.dumps(_rpc(rng)).encode()
        if rng.random() < 0.3:
            headers["Accept"] = rng.choice(["text/html", "", "application/xml", "*/*;q=0", "x" * 3000])
    elif kind == "protocol_version":
        headers["MCP-Protocol-Version"] = rng.choice(["1999-01-01", "", "2025-06-18\u0000", _text(rng, 50),
                                                      "9" * 4000, "2026-07-28", "latest"])
        if rng.random() < 0.5:
            headers["Mcp-Session-Id"] = target.sid
        body = json.dumps(_rpc(rng)).encode()
    elif kind == "session_id":
        headers["Mcp-Session-Id"] = rng.choice([_text(rng, rng.randrange(0, 100)), "0" * 32, "", "a" * 8000,
                                                target.sid + "x", target.sid.upper(), "../" * 30])
        headers["MCP-Protocol-Version"] = "2025-06-18"
        body = json.dumps(_rpc(rng)).encode()
    elif kind == "big_headers":
        if rng.random() < 0.5:
            headers["X-Fill"] = "a" * rng.choice([8_000, 20_000, 70_000, 300_000])
        else:
            for i in range(rng.choice([100, 500, 2000])):
                headers[f"X-{i}"] = "b" * 40
        body = json.dumps(_rpc(rng)).encode()
    elif kind == "bad_length":
        body = json.dumps(_rpc(rng)).encode()
        lie = rng.choice([-1, 0, 2**64, len(body) - 1 if body else 0, len(body) + 10, "abc", "1, 2"])
        head = _head(method, path, {**headers, "Content-Length": str(lie)})
        # a length promising more than is sent is a half-sent body: the Hub rightly waits for the rest
        return Request(head + body, abandon=rng.random() < 0.5 or lie in (2**64, len(body) + 10))
    elif kind == "half_body":
        body = json.dumps(_rpc(rng)).encode()
        head = _head(method, path, {**headers, "Content-Length": str(len(body) + rng.randrange(1, 100_000))})
        return Request(head + body[: rng.randrange(0, len(body) + 1)], abandon=True)
    elif kind == "chunked":
        headers["Transfer-Encoding"] = rng.choice(["chunked", "gzip, chunked", "chunked, chunked", "identity"])
        raw_tail = rng.choice([b"zz\r\nabc\r\n0\r\n\r\n", b"5\r\n{\"a\":\r\n0\r\n\r\n",
                               b"ffffffffffffffff\r\nabc", b"3\r\nabc\r\n"])
        head = _head(method, path, headers)
        return Request(head + raw_tail, abandon=raw_tail.endswith((b"abc", b"abc\r\n")))
    elif kind == "garbage":
        return Request(rng.choice([
            _junk(rng, rng.randrange(1, 3000)) + b"\r\n\r\n",
            b"GET /mcp\r\n\r\n",
            b"POST /mcp HTTP/9.9\r\nHost: " + host.encode() + b"\r\n\r\n",
            b"POST /mcp?token=" + target.token.encode() + b" HTTP/1.1\r\nHost: " + host.encode() + b"\r\n\r\n",
            b"POST " + b"/" * 20_000 + b" HTTP/1.1\r\nHost: " + host.encode() + b"\r\n\r\n",
            b"POST /mcp HTTP/1.1\r\nHost: " + host.encode() + b"\r\nAuthorization: Bearer \xff\xfe\r\n\r\n",
            b"POST /mcp HTTP/1.1\nHost: " + host.encode() + b"\n\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        ]))
    elif kind == "wrong_host":
        headers["Host"] = rng.choice(["evil.example", "", "127.0.0.1", "localhost:1", "a" * 300])
        if rng.random() < 0.5:
            headers["Origin"] = rng.choice(["http://evil.example", "null", f"http://{host}"])
        body = json.dumps(_rpc(rng)).encode()
    elif kind == "bad_token":
        headers["Authorization"] = rng.choice(["Bearer", "Bearer " + "x" * 5000, "Basic YTpi", "bearer  ",
                                               f"Bearer {target.token}x", f"Bearer {target.token} extra", ""])
        headers["Amux-Binding"] = rng.choice(["", "principal:", "team:x", "\u00e9" * 10])
        body = json.dumps(_rpc(rng)).encode()
    elif kind == "amux_headers":
        headers["Amux-Session"] = rng.choice(["", "a" * 500, "../x", "\u0000", "ok-session"])
        headers["Amux-Instructions"] = rng.choice(["on", "off", "maybe", ""])
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": rng.choice(["2025-06-18", "2025-11-25", "1.0", ""]), "capabilities": _value(rng),
            "clientInfo": rng.choice([{"name": "f", "version": "1"}, None, "x"])}}).encode()
    elif kind == "too_big":
        body = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"a" * ((1 << 20) + 10) + b'"}}'
    headers["Content-Length"] = str(len(body))
    return Request(_head(method, path, headers) + body + raw_tail, abandon=abandon)


def _head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1".encode()]
    lines += [f"{k}: {v}".encode("utf-8", "surrogateescape") for k, v in headers.items()]
    return b"\r\n".join(lines) + b"\r\n\r\n"


KINDS: dict[str, float] = {
    "not_json": 10, "not_utf8": 8, "nested": 4, "batch": 3, "rpc": 20, "http_method": 8, "content_type": 8,
    "protocol_version": 8, "session_id": 8, "big_headers": 3, "bad_length": 4, "half_body": 3, "chunked": 4,
    "garbage": 5, "wrong_host": 3, "bad_token": 4, "amux_headers": 4, "too_big": 0.2,
}
"""Each kind's weight in the draw."""


async def _status(stream: trio.abc.Stream) -> tuple[str, bytes]:
    """Read an answer's head: ``(status, head bytes)``; ``closed`` when the Hub closed without a status line,
    ``http2``/``other`` when it answered in another protocol (``PRI *`` switches Hypercorn to HTTP/2)."""
    buf = b""
    while b"\r\n\r\n" not in buf and len(buf) < 65536:
        try:
            chunk = await stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            chunk = b""
        if not chunk:
            break
        buf += chunk
        if not b"HTTP/".startswith(buf[:5]):
            return ("http2" if buf[3:4] == b"\x04" else "other"), buf  # an HTTP/2 SETTINGS frame: h2c spoken
    if not buf.startswith(b"HTTP/"):
        return "closed", buf
    parts = buf.split(b"\r\n", 1)[0].split(b" ")
    return (parts[1].decode("ascii", "replace") if len(parts) > 1 else "closed"), buf.split(b"\r\n\r\n", 1)[0]


async def send_one(target: Target, request: Request, kind: str) -> str:
    """Send one request on a new connection, reading the answer while it is sent (the Hub may answer 413 or
    431 before reading everything); the answer's status code, or ``closed``/``abandoned``/``timeout``.
    A session the request opened (an ``initialize`` answered 200 with ``Mcp-Session-Id``) is ended with a
    DELETE, so the per-principal cap on open sessions does not turn every later request into a 429."""
    try:
        stream = await trio.open_tcp_stream(target.host, target.port)
    except OSError:
        return "connect_failed"
    status, head = "timeout", b""
    try:
        with trio.move_on_after(ANSWER_SECONDS):
            async with trio.open_nursery() as nursery:
                sent = trio.Event()

                async def send() -> None:
                    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        await stream.send_all(request.data)
                    sent.set()

                nursery.start_soon(send)
                if request.abandon:
                    await sent.wait()
                    return "abandoned"
                status, head = await _status(stream)
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()
    if status == "timeout":
        target.timeouts.append(f"{kind}: {request.data[:300]!r}")
        return status
    if status.startswith("5"):
        te = [h for h in request.data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
              if h.lower().startswith(b"transfer-encoding:")]
        if status == "501" and te and te != [b"Transfer-Encoding: chunked"]:
            return "501_transfer_coding"  # RFC 9112 §6.1: the answer to a coding the server lacks
        target.five_xx.append(f"{kind}: {status} for {request.data[:300]!r}... {te}")
    opened = [line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")
              if line.lower().startswith(b"mcp-session-id:")]
    if status == "200" and opened and opened[0].decode("latin-1") != target.sid:
        await _delete(target, opened[0].decode("latin-1"))
    return status


async def _delete(target: Target, sid: str) -> None:
    """End session ``sid`` (``DELETE /mcp``), counting the answer in ``target.deletes``."""
    data = (f"DELETE /mcp HTTP/1.1\r\nHost: {target.host}:{target.port}\r\nAuthorization: Bearer {target.token}"
            f"\r\nMcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-06-18\r\nConnection: close\r\n"
            "Content-Length: 0\r\n\r\n").encode("latin-1")
    try:
        stream = await trio.open_tcp_stream(target.host, target.port)
    except OSError:
        target.deletes["connect_failed"] += 1
        return
    try:
        with trio.move_on_after(ANSWER_SECONDS) as waited:
            await stream.send_all(data)
            target.deletes[(await _status(stream))[0]] += 1
        if waited.cancelled_caught:
            target.deletes["timeout"] += 1
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        target.deletes["closed"] += 1
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def fuzz(target: Target, count: int, seed: int, concurrency: int = 8,
               progress: Callable[[int], None] | None = None, start: int = 0) -> None:
    """Send ``count`` hostile requests (numbered from ``start``), ``concurrency`` at a time; request ``i`` is drawn from
    ``random.Random(f"{seed}:{i}")``, so a run is reproducible whatever the interleaving.  Tallies go into
    ``target.statuses`` and ``target.kinds``; ``progress(sent)`` is called every 1,000 requests."""
    names, weights = list(KINDS), list(KINDS.values())
    numbers = iter(range(start, start + count))
    sent = 0

    async def worker() -> None:
        nonlocal sent
        for i in numbers:
            rng = random.Random(f"{seed}:{i}")
            kind = rng.choices(names, weights)[0]
            target.statuses[await send_one(target, build(target, rng, kind), kind)] += 1
            target.kinds[kind] += 1
            sent += 1
            if progress is not None and sent % 1000 == 0:
                progress(sent)

    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
