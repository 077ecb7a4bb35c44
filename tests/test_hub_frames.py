"""The Hub's wire behaviour, byte by byte, against a real Hub subprocess.

Raw ``AF_UNIX`` sockets (:class:`tests.raw_hub.Raw`, not :class:`tools.client.blocking.HubClient`) so a
test can send exactly the bytes it wants: requests before ``hello``, garbage bodies, unknown
methods, oversized length prefixes, half frames, pipelined requests.  Every
socket has a timeout, so a Hub that stops answering fails the test instead of
hanging it.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from amux_memory.hub.methods.calls import Kind
from amux_memory.hub.methods.routes import ROUTES
from amux_memory.hub.serve.hub import Hub
from amux_memory.protocol.errors import ErrorCode
from amux_memory.protocol.framing import FrameDecoder, encode_frame
from amux_memory.protocol.limits import LIMITS
from amux_memory.protocol.messages import (
    PROTOCOL_VERSION,
    Response,
    decode_response,
    encode_request,
    pack,
)
from tests.conftest import HubProcess
from tests.helpers import StandInMemory, hub_config
from tests.raw_hub import RAW_TIMEOUT, Raw, error_of

TIMEOUT = RAW_TIMEOUT
MAX = LIMITS.max_frame_bytes
DOC = "# Preferences\n\nThe build uses ninja and clang.\nTabs, not spaces.\n"


def assert_works(conn: Raw, rid: int = 1000) -> None:
    """A search on an already-helloed connection succeeds."""
    result = conn.call(rid, "search", {"query": "ninja"}).unwrap()
    assert isinstance(result["matches"], list)


def assert_hub_serves(hub: HubProcess) -> None:
    """The Hub process is alive and a fresh connection can hello and search."""
    assert hub.proc is not None and hub.proc.poll() is None, "the Hub process died"
    with Raw(hub.socket) as fresh:
        fresh.hello()
        assert_works(fresh)


@pytest.fixture
def seeded(hub: HubProcess) -> HubProcess:
    """A Hub whose global scope holds MEMORY.md."""
    with hub.client() as c:
        c.call("upsert", {"path": "MEMORY.md", "content": DOC, "expected_revision": "absent"})
    return hub


# (a) -------------------------------------------------------------------------


def test_data_call_before_hello_is_bad_request_and_connection_survives(seeded: HubProcess) -> None:
    for method in ["search", "get", "upsert", "forget", "export"]:
        with Raw(seeded.socket) as conn:
            params = {"query": "ninja", "path": "MEMORY.md", "content": "", "expected_revision": "absent"}
            code, _ = error_of(conn.call(5, method, params))
            assert code is ErrorCode.BAD_REQUEST, method
            code, _ = error_of(conn.call(6, "search", {"query": "ninja"}))  # still not helloed
            assert code is ErrorCode.BAD_REQUEST
            hello = conn.hello(7)
            assert hello["protocol"] == PROTOCOL_VERSION and hello["memory_enabled"] is True
            found = conn.call(8, "search", {"query": "ninja"}).unwrap()
            assert [m["path"] for m in found["matches"]] == ["MEMORY.md"]
    # The rejected upsert/forget did nothing.
    with seeded.client() as c:
        assert c.call("get", {"path": "MEMORY.md"})["content"] == DOC


# (b) -------------------------------------------------------------------------


GARBAGE = [
    b"\xc1", b"this is not msgpack", b"\x81\xa2id", b"", b"\x93\x01\xa3get\x80", b"\xdd\xff\xff\xff\xff",
    b"\x91" * 100_000, b"\x81\xa1k" * 100_000, pack({"id": 1, "method": "get"}) + b"\x00", b"\xa1\xff",
    b"\x83\xa2id\x01\xa6method\xa3get\xa6params\x81\x01\x02",  # non-string key
]


def test_garbage_body_is_bad_request_with_null_id_and_connection_survives(seeded: HubProcess) -> None:
    with Raw(seeded.socket) as conn:
        conn.hello()
        for i, body in enumerate(GARBAGE):
            conn.send(encode_frame(body))
            resp = conn.response()
            assert resp.id is None, body[:20]
            code, _ = error_of(resp)
            assert code is ErrorCode.BAD_REQUEST
            # The same connection goes on working.
            assert conn.call(10 + i, "get", {"path": "MEMORY.md"}).unwrap()["content"] == DOC
        assert_works(conn)


def test_garbage_before_hello_then_hello_works(hub: HubProcess) -> None:
    with Raw(hub.socket) as conn:
        conn.send(encode_frame(b"\xc1\xc1\xc1"))
        resp = conn.response()
        assert resp.id is None and error_of(resp)[0] is ErrorCode.BAD_REQUEST
        conn.hello()
        assert_works(conn)


# (c) -------------------------------------------------------------------------


@pytest.mark.parametrize("helloed", [True, False], ids=["after-hello", "before-hello"])
def test_unknown_method_is_bad_request_with_the_request_id(hub: HubProcess, helloed: bool) -> None:
    with Raw(hub.socket) as conn:
        if helloed:
            conn.hello()
        resp = conn.call(424242, "delete", {"path": "MEMORY.md"})
        code, data = error_of(resp)
        assert code is ErrorCode.BAD_REQUEST
        assert "id" not in data  # the id is the response's, not part of the error data
        assert resp.error is not None and "unknown method" in resp.error.message
        # Other per-request defects are also addressed to the request.
        conn.send(encode_frame(pack({"id": 77, "method": "get", "params": [1]})))
        resp = conn.response()
        assert resp.id == 77 and error_of(resp)[0] is ErrorCode.BAD_REQUEST
        conn.send(encode_frame(pack({"id": 78, "method": "get", "params": {}, "jsonrpc": "2.0"})))
        resp = conn.response()
        assert resp.id == 78 and error_of(resp)[0] is ErrorCode.BAD_REQUEST
        if not helloed:
            conn.hello()
        assert_works(conn)


# (d) -------------------------------------------------------------------------


@pytest.mark.parametrize("trailing", [b"", b"x" * 1000], ids=["header-only", "with-body-bytes"])
def test_oversized_length_prefix_is_answered_then_closed(hub: HubProcess, trailing: bytes) -> None:
    with Raw(hub.socket) as other:
        other.hello()  # opened and helloed before the misbehaving connections
        for announced in [MAX + 1, 2 * 1024 * 1024, 0xFFFFFFFF]:
            with Raw(hub.socket) as conn:
                conn.hello()
                conn.send(struct.pack(">I", announced) + trailing)
                resp = conn.response()
                assert resp.id is None
                code, data = error_of(resp)
                assert code is ErrorCode.FRAME_TOO_LARGE
                assert data["current"] == announced and data["maximum"] == MAX
                started = time.monotonic()
                assert conn.wait_closed() == []  # EOF (not a timeout), and nothing more
                assert time.monotonic() - started < TIMEOUT
            assert_works(other, announced % 1000)
            assert hub.proc is not None and hub.proc.poll() is None
    assert_hub_serves(hub)


def test_oversized_prefix_as_the_very_first_bytes(hub: HubProcess) -> None:
    with Raw(hub.socket) as conn:
        conn.send(b"\xff\xff\xff\xff")
        code, _ = error_of(conn.response())
        assert code is ErrorCode.FRAME_TOO_LARGE
        assert conn.wait_closed() == []
    assert_hub_serves(hub)


def test_requests_before_an_oversized_prefix_are_still_answered(seeded: HubProcess) -> None:
    # One packet: hello, a get, then a 4 GiB header.  The two complete requests
    # are answered; then frame_too_large; then the Hub closes.
    with Raw(seeded.socket) as conn:
        conn.send(
            encode_request(1, "hello", {"protocol": PROTOCOL_VERSION})
            + encode_request(2, "get", {"path": "MEMORY.md"})
            + b"\xff\xff\xff\xff"
        )
        seen = conn.wait_closed()
        by_id = {r.id: r for r in seen}
        assert sorted(by_id, key=str) == [1, 2, None], seen
        assert by_id[1].unwrap()["binding"] == "global"
        assert by_id[2].unwrap()["content"] == DOC
        assert error_of(by_id[None])[0] is ErrorCode.FRAME_TOO_LARGE
    assert_hub_serves(seeded)


def test_exactly_max_size_frame_is_read_not_rejected(hub: HubProcess) -> None:
    # A 1 MiB body is within the limit: the Hub reads it and answers (quota,
    # since the content exceeds the document limit), and the connection lives on.
    with Raw(hub.socket) as conn:
        conn.hello()
        skeleton = pack({"id": 3, "method": "upsert",
                         "params": {"path": "big.md", "expected_revision": "absent", "content": ""}})
        pad = MAX - len(skeleton) - 4  # content grows from a fixstr to a str32 header (+4)
        body = pack({"id": 3, "method": "upsert",
                     "params": {"path": "big.md", "expected_revision": "absent", "content": "y" * pad}})
        assert len(body) == MAX
        conn.send(encode_frame(body))
        resp = conn.response()
        assert resp.id == 3
        assert error_of(resp)[0] is ErrorCode.QUOTA_EXCEEDED
        assert_works(conn)


# (e) -------------------------------------------------------------------------


HALVES = [
    b"\x00\x00",  # half a header
    struct.pack(">I", 100) + b"\x81\xa2id",  # a header and part of the body
    encode_request(1, "hello", {"protocol": PROTOCOL_VERSION})[:-3],  # all but the last bytes
    encode_request(1, "hello", {"protocol": PROTOCOL_VERSION}) + encode_request(2, "get", {"path": "MEMORY.md"})[:9],
]


def test_half_frame_then_disconnect_does_not_affect_others(seeded: HubProcess) -> None:
    with Raw(seeded.socket) as other:
        other.hello()
        for i, half in enumerate(HALVES):
            stalled = Raw(seeded.socket)
            stalled.send(half)
            # While the half frame sits in the Hub, others are served normally.
            assert_works(other, 10 * i + 1)
            with Raw(seeded.socket) as third:
                third.hello()
                assert_works(third, 2)
            stalled.close()
            assert_works(other, 10 * i + 3)
            assert other.call(10 * i + 4, "get", {"path": "MEMORY.md"}).unwrap()["content"] == DOC
    assert_hub_serves(seeded)


def test_many_stalled_connections_do_not_block_the_hub(hub: HubProcess) -> None:
    stalled = [Raw(hub.socket) for _ in range(20)]
    try:
        for i, s in enumerate(stalled):
            s.send(struct.pack(">I", 1000)[: i % 4] if i % 2 else struct.pack(">I", 1000) + b"a" * i)
        assert_hub_serves(hub)
    finally:
        for s in stalled:
            s.close()
    assert_hub_serves(hub)


# (f) -------------------------------------------------------------------------


def test_pipelined_requests_all_answered_with_matching_ids(seeded: HubProcess) -> None:
    with Raw(seeded.socket) as conn:
        expected: dict[int, str] = {1: "hello"}
        packet = encode_request(1, "hello", {"protocol": PROTOCOL_VERSION})
        for k in range(10):
            packet += encode_request(100 + k, "get", {"path": "MEMORY.md", "start_line": 1 + k % 4,
                                                      "end_line": 1 + k % 4})
            expected[100 + k] = "get"
            packet += encode_request(200 + k, "search", {"query": "ninja tabs"})
            expected[200 + k] = "search"
        packet += encode_request(300, "get", {"path": "missing.md"})
        expected[300] = "get-missing"
        packet += encode_request(301, "search", {"query": ""})
        expected[301] = "bad"
        conn.send(packet)  # everything at once, without waiting for any answer
        answers: dict[int, Response] = {}
        for _ in expected:
            resp = conn.response()
            assert isinstance(resp.id, int) and resp.id not in answers, resp
            answers[resp.id] = resp
        assert set(answers) == set(expected)
        lines = DOC.splitlines(keepends=True)
        for rid, kind in expected.items():
            resp = answers[rid]
            if kind == "get":
                line = 1 + (rid - 100) % 4
                assert resp.unwrap()["content"] == lines[line - 1], rid
            elif kind == "search":
                assert [m["path"] for m in resp.unwrap()["matches"]] == ["MEMORY.md"]
            elif kind == "get-missing":
                assert resp.unwrap()["exists"] is False
            elif kind == "bad":
                assert error_of(resp)[0] is ErrorCode.BAD_REQUEST
        assert_works(conn)


def test_pipelined_frames_split_byte_by_byte(seeded: HubProcess) -> None:
    with Raw(seeded.socket) as conn:
        packet = encode_request(1, "hello", {"protocol": PROTOCOL_VERSION}) + encode_request(
            2, "get", {"path": "MEMORY.md"})
        for i in range(len(packet)):
            conn.send(packet[i : i + 1])
        first, second = conn.response(), conn.response()
        assert (first.id, second.id) == (1, 2)
        assert second.unwrap()["content"] == DOC


def test_requests_sent_before_a_half_close_are_all_answered(seeded: HubProcess) -> None:
    # The client sends its requests and shuts down its writing side: the Hub
    # sees EOF but still answers what it already received, then closes.
    with Raw(seeded.socket) as conn:
        conn.send(encode_request(1, "hello", {"protocol": PROTOCOL_VERSION})
                  + encode_request(2, "get", {"path": "MEMORY.md"})
                  + encode_request(3, "search", {"query": "clang"}))
        conn.sock.shutdown(socket.SHUT_WR)
        seen = {r.id: r for r in conn.wait_closed()}
        assert sorted(seen) == [1, 2, 3]  # type: ignore[type-var]
        assert seen[2].unwrap()["content"] == DOC
        assert [m["path"] for m in seen[3].unwrap()["matches"]] == ["MEMORY.md"]


# (g) -------------------------------------------------------------------------


def test_hello_with_unsupported_protocol_version(hub: HubProcess) -> None:
    for version in [99, 0, 2, 2**31]:
        with Raw(hub.socket) as conn:
            resp = conn.call(1, "hello", {"protocol": version, "client": "future"})
            code, data = error_of(resp)
            assert code is ErrorCode.BAD_REQUEST, version
            assert data["supported"] == [PROTOCOL_VERSION]
            # A failed hello does not open the session ...
            assert error_of(conn.call(2, "search", {"query": "x"}))[0] is ErrorCode.BAD_REQUEST
            # ... and a good one on the same connection does.
            conn.hello(3)
            assert_works(conn)


def test_hello_with_malformed_params(hub: HubProcess) -> None:
    cases: list[dict[str, Any]] = [
        {"protocol": "1"}, {"protocol": True}, {"protocol": -1}, {"protocol": 2**40}, {"client": 5},
        {"client": "c" * 201}, {"binding": ""}, {"binding": 7}, {"binding": "b" * 1201}, {"nonsense": 1},
    ]
    with Raw(hub.socket) as conn:
        for i, params in enumerate(cases):
            assert error_of(conn.call(10 + i, "hello", params))[0] is ErrorCode.BAD_REQUEST, params
            assert error_of(conn.call(50 + i, "get", {"path": "MEMORY.md"}))[0] is ErrorCode.BAD_REQUEST
        conn.hello(3)
        assert_works(conn)


def test_hello_with_wrong_binding_is_binding_mismatch(hub: HubProcess) -> None:
    for binding in ["principal:someone", "principal:" + "x" * 100, "Global", "global ", "users/x"]:
        with Raw(hub.socket) as conn:
            code, data = error_of(conn.call(1, "hello", {"protocol": PROTOCOL_VERSION, "binding": binding}))
            assert code is ErrorCode.BINDING_MISMATCH, binding
            assert data == {"binding": binding, "current": "global"}
            assert error_of(conn.call(2, "search", {"query": "x"}))[0] is ErrorCode.BAD_REQUEST
            hello = conn.hello(3, binding="global")
            assert hello["binding"] == "global" and hello["scope"] == "global"
            assert_works(conn)


def test_hello_with_global_binding_and_isolation_off(hub: HubProcess) -> None:
    with Raw(hub.socket) as conn:
        hello = conn.hello(1, binding="global")
        assert hello["binding"] == "global"
        assert hello["isolation"] == "off"
        assert hello["limits"]["max_frame_bytes"] == MAX
        # Derived from the route table, so a new method cannot make this stale: the Hub lists every method
        # it answers except the handshake ("hello"), the switch into an MCP session ("mcp_open", §9.2) and the
        # operator's methods (§7.8), a tidy run's (§21) and those of a caller with no identity yet (§7.4).
        unlisted = (Kind.HANDSHAKE, Kind.SESSION, Kind.OPERATOR, Kind.RUN, Kind.ENROL)
        others = {name for name, r in ROUTES.items() if r.kind in unlisted}
        assert others == {"hello", "mcp_open", "scope_copy", "backup_stage", "review_run", "tls_ca", "redeem",
                          "logout"}
        assert set(hello["methods"]) == set(ROUTES) - others
        assert_works(conn)


# (h) -------------------------------------------------------------------------


def _garbage_bodies(rng: random.Random, n: int) -> list[bytes]:
    """Random bytes, and valid requests with random bytes overwritten, inserted or cut."""
    valid = [
        pack({"id": 1, "method": "get", "params": {"path": "MEMORY.md"}}),
        pack({"id": 2, "method": "search", "params": {"query": "ninja", "limit": 3}}),
        pack({"id": 3, "method": "upsert", "params": {"path": "n.md", "content": "x", "expected_revision": "absent"}}),
        pack({"id": 4, "method": "export", "params": {"path": "MEMORY.md", "offset": 0}}),
        pack({"id": 5, "method": "forget", "params": {"path": "n.md", "expected_revision": "a" * 64}}),
        pack({"id": 6, "method": "hello", "params": {"protocol": 1, "binding": "global"}}),
    ]
    bodies = []
    for _ in range(n):
        if rng.randrange(4) == 0:
            bodies.append(rng.randbytes(rng.randrange(0, 300)))
            continue
        body = bytearray(rng.choice(valid))
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(len(body) + 1)
            op = rng.randrange(3)
            if op == 0:
                body[pos : pos + 1] = bytes([rng.randrange(256)])  # overwrite (or append at the end)
            elif op == 1:
                body[pos:pos] = rng.randbytes(rng.randint(1, 8))  # insert
            else:
                del body[max(pos, 1):]  # truncate
        bodies.append(bytes(body))
    return bodies


@pytest.mark.parametrize("seed", [1, 2])
def test_random_garbage_frames(seeded: HubProcess, seed: int) -> None:
    rng = random.Random(seed)
    bodies = _garbage_bodies(rng, 200)
    with Raw(seeded.socket) as bystander, Raw(seeded.socket) as conn:
        bystander.hello()
        if seed % 2:
            conn.hello()  # one run reaches the data-method paths, one mostly stays before hello
        for body in bodies:
            conn.send(encode_frame(body))
            # A whole frame always gets exactly one answer, never an internal error.
            resp = conn.response()
            if resp.error is not None:
                assert resp.error.code is not ErrorCode.INTERNAL, (body, resp.error)
                assert resp.error.code in set(ErrorCode)
            else:
                assert isinstance(resp.result, dict)
        conn.hello(999)
        assert_works(conn)
        # Then unframed random bytes whose first four announce more than the
        # maximum: the Hub answers frame_too_large and closes (no hang, no crash).
        junk = rng.randbytes(4096)
        assert struct.unpack(">I", junk[:4])[0] > MAX  # holds for these seeds
        conn.send(junk)
        seen = conn.wait_closed()
        assert seen and error_of(seen[-1])[0] is ErrorCode.FRAME_TOO_LARGE
        assert_works(bystander)
    assert_hub_serves(seeded)


# Back-pressure ---------------------------------------------------------------


def test_pipelining_past_the_in_flight_limit(seeded: HubProcess) -> None:
    # 640 requests in one packet: every one is answered exactly once, either
    # with its result or with busy (never silently dropped), and other
    # connections are served meanwhile.
    with seeded.client() as c:
        c.call("upsert", {"path": "big.md", "content": ("word " * 15 + "\n") * 700, "expected_revision": "absent"})
    n = 640
    with Raw(seeded.socket) as bystander, Raw(seeded.socket) as flood:
        bystander.hello()
        flood.hello()
        flood.send(b"".join(encode_request(100 + k, "get", {"path": "big.md"}) for k in range(n)))
        assert_works(bystander)  # the flooded connection does not stall the Hub
        answered: dict[int, Response] = {}
        for _ in range(n):
            resp = flood.response()
            assert isinstance(resp.id, int) and resp.id not in answered
            answered[resp.id] = resp
        assert set(answered) == set(range(100, 100 + n))
        results = [r for r in answered.values() if r.error is None]
        busy = [r.error for r in answered.values() if r.error is not None]
        assert results and busy
        assert all(e.code is ErrorCode.BUSY and e.data["maximum"] == 32 for e in busy)
        assert all(len(r.unwrap()["content"]) > 4000 for r in results)
        assert_works(flood)
    assert_hub_serves(seeded)


class _InstantService(StandInMemory):
    """A stand-in for MemoryMethods: answers every data call at once with ~7 KB."""

    def __init__(self) -> None:
        self.calls = 0

    async def run(self, route: Any, scope: Any, params: dict[str, Any], identity: Any = None,
                  **where: Any) -> dict[str, Any]:
        self.calls += 1
        await trio.sleep(0)  # a checkpoint, as the real service's awaits are
        return {"blob": "x" * 7000}


async def test_unread_answers_do_not_pile_up_in_the_hub(tmp_path: Path) -> None:
    # In-process (no subprocess) so that "the Hub has done all it can" is
    # observable exactly: trio.testing.wait_all_tasks_blocked().  A peer sends
    # 20 batches of 32 requests and reads nothing.  A request must count as in
    # flight until its answer is *sent*; otherwise each batch finds the counter
    # back at zero and the Hub computes and holds every answer (unbounded memory).
    service = _InstantService()
    config = hub_config(tmp_path, socket_path=tmp_path / "s")
    hub = Hub(config, LIMITS, service)  # type: ignore[arg-type]
    a, b = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client = trio.SocketStream(b)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, trio.SocketStream(a))
        await client.send_all(encode_request(1, "hello", {"protocol": PROTOCOL_VERSION}))
        batches = 20
        for i in range(batches):
            await client.send_all(b"".join(
                encode_request(100 + 32 * i + k, "get", {"path": "a.md"}) for k in range(32)))
            await trio.testing.wait_all_tasks_blocked()
        # 32 in flight plus the answers the socket buffer took: far from 640.
        assert service.calls <= 32 + 64, service.calls
        # Now read: every request is answered exactly once, result or busy.
        decoder = FrameDecoder()
        answers: dict[int | None, Response] = {}
        while len(answers) < 1 + 32 * batches:
            with trio.fail_after(TIMEOUT):
                data = await client.receive_some(65536)
            assert data, "the Hub closed the connection"
            decoder.feed(data)
            while (body := decoder.next_frame()) is not None:
                resp = decode_response(body)
                assert resp.id not in answers
                answers[resp.id] = resp
        ok = [r for r in answers.values() if r.error is None]
        assert len(ok) == 1 + service.calls  # hello + every computed answer was delivered
        assert all(r.error.code is ErrorCode.BUSY for r in answers.values() if r.error is not None)
        await client.aclose()
