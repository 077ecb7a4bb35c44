"""The Hub's parts in process: the version ``hello`` reports, the dispatch table, canonical paths, start failure."""

from __future__ import annotations

import gc
import logging
import math
import socket
import threading
import unicodedata
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing

import amux_memory.hub.serve.hub as hub_server
import amux_memory.hub.serve.run as hub_run
from amux_memory.hub.methods.routes import ROUTES, data_methods
from amux_memory.hub.serve.home import HomeLock
from amux_memory.hub.serve.hub import Hub
from amux_memory.hub.serve.run import run
from amux_memory.protocol.config_file import LOCK_NAME
from amux_memory.protocol.errors import ExitStatus
from amux_memory.protocol.framing import FrameDecoder
from amux_memory.protocol.limits import LIMITS
from amux_memory.protocol.messages import PROTOCOL_VERSION, decode_response, encode_request
from amux_memory.protocol.paths import is_canonical_path
from amux_memory.protocol.version import package_version
from tests.helpers import StandInMemory, hub_config, wait_until


async def test_hello_reports_the_installed_package_version(tmp_path: Path) -> None:
    hub = Hub(hub_config(tmp_path), LIMITS)
    a, b = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client = trio.SocketStream(b)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, trio.SocketStream(a))
        await client.send_all(encode_request(1, "hello", {"protocol": PROTOCOL_VERSION}))
        decoder = FrameDecoder()
        with trio.fail_after(5):
            while (body := decoder.next_frame()) is None:
                decoder.feed(await client.receive_some(65536))
        hello = decode_response(body).unwrap()
        assert hello["hub_version"] == version("amux-memory") == package_version()
        assert hello["methods"] == data_methods(ROUTES)
        await client.aclose()


def test_every_data_route_has_a_parser_and_a_handler() -> None:
    data = data_methods(ROUTES)
    assert {"search", "get", "upsert", "forget"} <= set(data)
    assert all(ROUTES[name].parse is not None and ROUTES[name].handler is not None for name in data)


def test_canonical_path_is_a_valid_path_in_its_nfc_spelling() -> None:
    assert is_canonical_path("MEMORY.md") and is_canonical_path("projects/amux/notes.md")
    nfd = unicodedata.normalize("NFD", "café.md")
    assert nfd != "café.md" and not is_canonical_path(nfd)  # valid, but the API names it in NFC
    for bad in ("../x.md", "/abs.md", "a//b.md", "notes.txt", "a\x00.md", "x" * 300 + ".md", ""):
        assert not is_canonical_path(bad), bad


def test_run_exits_hub_start_failed_when_another_hub_holds_the_home(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    holder = HomeLock(tmp_path / LOCK_NAME)
    holder.acquire()
    try:
        assert run(hub_config(tmp_path), LIMITS) == ExitStatus.HUB_START_FAILED
    finally:
        holder.release()
    assert "already serving" in capsys.readouterr().err
    assert not (tmp_path / "hub.sock").exists()


THREAD_GRACE = 0.2
"""Real seconds of no progress before the mock clock jumps: a worker thread's job is not idleness."""


class _HeldService(StandInMemory):
    """A stand-in memory service whose every call waits for ``release`` (and counts the Hub's running calls)."""

    def __init__(self, hub_ref: list[Hub]) -> None:
        self.hub_ref = hub_ref
        self.release = trio.Event()
        self.started = trio.Event()
        self.running_seen: list[int] = []

    async def run(self, route: Any, scope: Any, params: dict[str, Any], identity: Any = None,
                  **where: Any) -> dict[str, Any]:
        self.running_seen.append(self.hub_ref[0].calls_running)
        self.started.set()
        await self.release.wait()
        return {"ok": True}


async def _exchange(client: trio.SocketStream, decoder: FrameDecoder, rid: int, method: str,
                    params: dict[str, object]) -> dict[str, object]:
    await client.send_all(encode_request(rid, method, params))
    while (body := decoder.next_frame()) is None:
        decoder.feed(await client.receive_some(65536))
    result: dict[str, object] = decode_response(body).unwrap()
    return result


async def test_the_mcp_warm_import_waits_for_an_idle_hub_and_goes_in_steps(
    tmp_path: Path, mock_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    mock_clock.autojump_threshold = THREAD_GRACE  # waiting on a worker thread is not idleness
    hub_ref: list[Hub] = []
    service = _HeldService(hub_ref)
    hub = Hub(hub_config(tmp_path), LIMITS, memory=service)  # type: ignore[arg-type]
    hub_ref.append(hub)
    imported: list[tuple[str, float]] = []
    frozen: list[float] = []
    freeze = trio.Event()

    def import_module(name: str) -> None:
        imported.append((name, trio.from_thread.run_sync(trio.current_time)))
        if name == "amux_no_such_step":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    monkeypatch.setattr(hub_server, "importlib", SimpleNamespace(import_module=import_module))
    monkeypatch.setattr(hub_run, "MCP_WARM_STEPS", ("amux_warm_first", "amux_no_such_step", "amux_warm_last"))
    def gc_freeze() -> None:
        frozen.append(trio.current_time())
        freeze.set()

    monkeypatch.setattr(gc, "freeze", gc_freeze)
    assert hub_run.idle_for(hub) == math.inf  # no call yet
    a, b = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client, decoder = trio.SocketStream(b), FrameDecoder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, trio.SocketStream(a))
        await _exchange(client, decoder, 1, "hello", {"protocol": PROTOCOL_VERSION})
        start = trio.current_time()
        nursery.start_soon(hub_run.warm_mcp, hub)
        # A data call that runs for 4 s: the import waits all that time, past its start-up delay.
        call = trio.Event()

        async def held_call() -> None:
            assert await _exchange(client, decoder, 2, "get", {"path": "MEMORY.md"}) == {"ok": True}
            call.set()

        nursery.start_soon(held_call)
        await trio.sleep(4)
        assert service.running_seen == [1] and hub.calls_running == 1 and hub_run.idle_for(hub) == 0.0
        assert imported == []
        service.release.set()
        await call.wait()
        ended = trio.current_time()
        assert hub.calls_running == 0 and hub.last_call_ended == ended
        with trio.fail_after(600):
            await freeze.wait()
        assert ended - start >= hub_run.MCP_WARM_DELAY_SECONDS
        # Every step waited for an idle Hub; the missing one was skipped; the collector was frozen once at the end.
        assert [name for name, _ in imported] == ["amux_warm_first", "amux_no_such_step", "amux_warm_last"]
        assert imported[0][1] >= ended + hub_run.MCP_WARM_IDLE_SECONDS
        assert frozen[0] >= imported[-1][1] and len(frozen) == 1
        await client.aclose()
        nursery.cancel_scope.cancel()


async def test_the_mcp_warm_import_reports_a_missing_mcp_server_and_stops(
    tmp_path: Path, mock_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture
) -> None:
    mock_clock.autojump_threshold = THREAD_GRACE
    hub = Hub(hub_config(tmp_path), LIMITS)
    imported: list[str] = []

    def import_module(name: str) -> None:
        imported.append(name)
        # A step the SDK lacks is skipped; a step whose own dependency is missing is a broken SDK.
        raise ModuleNotFoundError("No module named 'x'", name=name if name == "amux_no_such_step" else "pydantic_core")

    monkeypatch.setattr(hub_server, "importlib", SimpleNamespace(import_module=import_module))
    monkeypatch.setattr(hub_run, "MCP_WARM_STEPS", ("amux_no_such_step", "amux_broken_step", "amux_warm_last"))
    monkeypatch.setattr(gc, "freeze", lambda: None)
    with caplog.at_level(logging.ERROR, logger="amux.hub"), trio.fail_after(600):
        await hub_run.warm_mcp(hub)
    assert imported == ["amux_no_such_step", "amux_broken_step"]  # nothing after the broken step
    assert "the MCP server could not be imported" in caplog.text


async def test_a_busy_hub_whose_sdk_is_imported_already_still_freezes_the_collector(
    tmp_path: Path, mock_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the MCP HTTP listener on (or after an mcp_open) the SDK is imported already: the steps cost nothing,
    # and a Hub that is never idle (many MCP sessions calling tools) must still freeze what start-up made.
    mock_clock.autojump_threshold = THREAD_GRACE
    hub_ref: list[Hub] = []
    service = _HeldService(hub_ref)
    hub = Hub(hub_config(tmp_path), LIMITS, memory=service)  # type: ignore[arg-type]
    hub_ref.append(hub)
    imported: list[str] = []
    frozen: list[float] = []
    freeze = trio.Event()

    def gc_freeze() -> None:
        frozen.append(trio.current_time())
        freeze.set()

    monkeypatch.setattr(hub_server, "importlib", SimpleNamespace(import_module=imported.append))
    monkeypatch.setattr(hub_run, "MCP_WARM_STEPS", ("json", "trio"))  # both imported by this test already
    monkeypatch.setattr(gc, "freeze", gc_freeze)
    a, b = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client, decoder = trio.SocketStream(b), FrameDecoder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, trio.SocketStream(a))
        await _exchange(client, decoder, 1, "hello", {"protocol": PROTOCOL_VERSION})
        await client.send_all(encode_request(2, "get", {"path": "MEMORY.md"}))  # held: the Hub stays busy
        with trio.fail_after(60):
            await service.started.wait()
        start = trio.current_time()
        nursery.start_soon(hub_run.warm_mcp, hub)
        with trio.fail_after(60):
            await freeze.wait()
        assert hub.calls_running == 1 and imported == []
        assert frozen[0] - start <= hub_run.MCP_WARM_DELAY_SECONDS + 0.1
        service.release.set()
        await client.aclose()
        nursery.cancel_scope.cancel()


class _CountedLock:
    """A ``threading.Lock`` that counts the threads that came to take it (the one holding it and those waiting)."""

    def __init__(self) -> None:
        self.lock, self.counting, self.arrivals = threading.Lock(), threading.Lock(), 0

    def __enter__(self) -> None:
        with self.counting:
            self.arrivals += 1
        self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


async def test_an_mcp_open_during_a_warm_step_imports_the_sdk_after_it(
    tmp_path: Path, mock_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two threads importing the SDK from different modules at once can fail: measured, a warm "mcp" step with an
    # mcp_open importing hub.mcp.session 0.1 s into the warm-up raised _DeadlockError (mcp.shared.message).
    mock_clock.autojump_threshold = THREAD_GRACE
    hub = Hub(hub_config(tmp_path), LIMITS)
    hub.import_lock = lock = _CountedLock()
    events: list[str] = []
    in_step, release = threading.Event(), threading.Event()

    def warm_import(name: str) -> None:
        events.append("warm step begins")
        in_step.set()
        release.wait(10)
        events.append("warm step ends")

    def open_import(name: str) -> None:
        events.append("mcp_open imports")
        raise ImportError("the test stops mcp_open here")

    def import_module(name: str) -> None:  # both imports go through Hub.import_serially
        (warm_import if name == "amux_warm_step" else open_import)(name)

    monkeypatch.setattr(hub_server, "importlib", SimpleNamespace(import_module=import_module))
    monkeypatch.setattr(hub_run, "MCP_WARM_STEPS", ("amux_warm_step",))
    monkeypatch.setattr(gc, "freeze", lambda: None)
    a, b = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client, decoder = trio.SocketStream(b), FrameDecoder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.handle, trio.SocketStream(a))
        await _exchange(client, decoder, 1, "hello", {"protocol": PROTOCOL_VERSION})
        nursery.start_soon(hub_run.warm_mcp, hub)
        await trio.to_thread.run_sync(in_step.wait)
        await client.send_all(encode_request(2, "mcp_open", {}))
        await trio.to_thread.run_sync(wait_until, lambda: lock.arrivals == 2, 10, "mcp_open to reach the import lock")
        release.set()
        with trio.fail_after(60):
            while decoder.next_frame() is None and (data := await client.receive_some(65536)):
                decoder.feed(data)  # an error answer, or the connection closed
        assert events == ["warm step begins", "warm step ends", "mcp_open imports"]
        await client.aclose()
        nursery.cancel_scope.cancel()


async def test_with_mcp_preload_off_the_warm_up_imports_nothing_and_still_freezes(
    tmp_path: Path, mock_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # hub.mcp_preload = false: hub.serve.run.serve passes no steps; the collector is still frozen once after the delay.
    mock_clock.autojump_threshold = THREAD_GRACE
    hub = Hub(hub_config(tmp_path), LIMITS)
    imported: list[str] = []
    frozen: list[float] = []
    monkeypatch.setattr(hub_server, "importlib", SimpleNamespace(import_module=imported.append))
    monkeypatch.setattr(hub_run, "MCP_WARM_STEPS", ("amux_warm_first", "amux_warm_last"))
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(trio.current_time()))
    start = trio.current_time()
    with trio.fail_after(600):
        await hub_run.warm_mcp(hub, ())
    assert imported == [] and len(frozen) == 1 and frozen[0] - start >= hub_run.MCP_WARM_DELAY_SECONDS
    with trio.fail_after(600):
        await hub_run.warm_mcp(hub)  # the default: every step of MCP_WARM_STEPS
    assert imported == ["amux_warm_first", "amux_warm_last"]
