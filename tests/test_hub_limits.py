"""Connection limits of the Hub, in process with Trio's virtual clock (no real waiting)."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
from pathlib import Path

import pytest
import trio
import trio.testing

import amux_memory.hub.serve.connection as connection
import amux_memory.hub.serve.listeners as listeners
from amux_memory.hub.access.identity import GLOBAL
from amux_memory.hub.serve.hub import Hub
from amux_memory.hub.serve.run import serve
from amux_memory.protocol.errors import ErrorCode
from amux_memory.protocol.framing import FrameDecoder
from amux_memory.protocol.limits import LIMITS
from amux_memory.protocol.messages import Response, decode_response, encode_request
from tests.helpers import hub_config


async def _closed(stream: trio.SocketStream) -> bool:
    """Read until EOF; True if the Hub closed the connection."""
    while True:
        data = await stream.receive_some(65536)
        if not data:
            return True


async def test_silent_connection_is_closed_after_the_hello_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    hub = Hub(hub_config(tmp_path), LIMITS)
    a, b = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client = trio.SocketStream(b)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, trio.SocketStream(a))
        start = trio.current_time()
        assert await _closed(client)
        waited = trio.current_time() - start
        assert connection.HELLO_TIMEOUT_SECONDS <= waited < connection.HELLO_TIMEOUT_SECONDS + 1


@pytest.mark.parametrize("method", ["search", "hello"])
async def test_chatty_connection_without_hello_is_closed_after_the_hello_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, method: str
) -> None:
    """A peer that keeps sending requests before hello (refused) or hellos that fail, one every 8 s, is still
    closed once HELLO_TIMEOUT_SECONDS have passed since the connection was accepted: one deadline, not reset."""
    hub = Hub(hub_config(tmp_path), LIMITS)
    a, b = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client = trio.SocketStream(b)
    params = {"query": "x"} if method == "search" else {"protocol": 999}
    answers: list[ErrorCode | None] = []

    async def chatter() -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            for rid in range(1, 100):
                await client.send_all(encode_request(rid, method, params))
                await trio.sleep(8)

    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        nursery.start_soon(hub.handle, trio.SocketStream(a))
        nursery.start_soon(chatter)
        decoder = FrameDecoder()
        with trio.fail_after(10 * connection.HELLO_TIMEOUT_SECONDS):
            while data := await client.receive_some(65536):
                decoder.feed(data)
                while (body := decoder.next_frame()) is not None:
                    error = decode_response(body).error
                    answers.append(error.code if error is not None else None)
        waited = trio.current_time() - start
        nursery.cancel_scope.cancel()
    assert connection.HELLO_TIMEOUT_SECONDS <= waited < connection.HELLO_TIMEOUT_SECONDS + 1
    assert len(answers) == 2 and all(code is not None for code in answers), answers  # at 0 s and 8 s, refused


async def test_idle_connection_is_closed_after_the_idle_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    hub = Hub(hub_config(tmp_path), LIMITS)
    a, b = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client = trio.SocketStream(b)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, trio.SocketStream(a))
        await client.send_all(encode_request(1, "hello", {"protocol": 1}))
        decoder = FrameDecoder()
        while (body := decoder.next_frame()) is None:
            decoder.feed(await client.receive_some(65536))
        assert decode_response(body).error is None
        start = trio.current_time()
        assert await _closed(client)
        assert trio.current_time() - start >= connection.IDLE_TIMEOUT_SECONDS


async def test_connection_over_the_cap_is_told_busy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listeners, "MAX_CONNECTIONS", 2)
    config = hub_config(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(serve, config, LIMITS)
        held = []
        for _ in range(2):
            s = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            await s.connect(str(config.socket_path))
            held.append(trio.SocketStream(s))
        await trio.testing.wait_all_tasks_blocked()
        extra = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await extra.connect(str(config.socket_path))
        stream = trio.SocketStream(extra)
        decoder = FrameDecoder()
        with trio.fail_after(5):
            while (body := decoder.next_frame()) is None:
                decoder.feed(await stream.receive_some(65536))
            response = decode_response(body)
            assert response.error is not None and response.error.code is ErrorCode.BUSY
            assert await _closed(stream)
        for h in held:
            await h.aclose()
        nursery.cancel_scope.cancel()


async def test_request_start_deadline_and_the_hello_reply_come_from_limits(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The Hub's time bounds live in ``Limits`` (DESIGN.md §6): a Hub made with another
    ``request_start_seconds`` answers ``busy`` after that long and reports it in ``hello``."""
    limits = dataclasses.replace(LIMITS, request_start_seconds=3.0)
    hub = Hub(hub_config(tmp_path), limits)
    (tmp_path / "memory" / "global").mkdir(parents=True)
    a, b = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client = trio.SocketStream(b)
    decoder = FrameDecoder()

    async def call(rid: int, method: str, params: dict[str, object]) -> Response:
        await client.send_all(encode_request(rid, method, params))
        while (body := decoder.next_frame()) is None:
            decoder.feed(await client.receive_some(65536))
        return decode_response(body)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, trio.SocketStream(a))
        hello = await call(1, "hello", {"protocol": 1})
        assert hello.result is not None and hello.result["limits"]["request_start_seconds"] == 3.0
        assert hello.result["limits"]["search_threads"] == LIMITS.search_threads
        async with hub.memory._lock(GLOBAL):  # the scope is held, as by a stuck writer
            start = trio.current_time()
            resp = await call(2, "upsert", {"path": "a.md", "content": "x\n", "expected_revision": "absent"})
            assert 3.0 <= trio.current_time() - start < 4.0
        assert resp.error is not None and resp.error.code is ErrorCode.BUSY
        assert resp.error.data == {"deadline_seconds": 3.0}
        nursery.cancel_scope.cancel()
