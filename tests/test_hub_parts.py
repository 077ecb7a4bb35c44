"""The Hub's parts in process: the version ``hello`` reports, the dispatch table, canonical paths, start failure."""

from __future__ import annotations

import socket
import unicodedata
from importlib.metadata import version
from pathlib import Path

import pytest
import trio

from hub.config import HubConfig
from hub.home import HomeLock
from hub.run import run
from hub.server import Hub
from hub.service import HANDLERS
from protocol.config_file import LOCK_NAME
from protocol.errors import ExitStatus
from protocol.framing import FrameDecoder
from protocol.limits import LIMITS
from protocol.messages import DATA_METHODS, PROTOCOL_VERSION, decode_response, encode_request
from protocol.paths import is_canonical_path
from protocol.version import package_version


def _config(tmp_path: Path) -> HubConfig:
    return HubConfig(home=tmp_path, memory_enabled=True, isolation="off", socket_path=tmp_path / "hub.sock",
                     socket_mode=0o600, socket_group="")


async def test_hello_reports_the_installed_package_version(tmp_path: Path) -> None:
    hub = Hub(_config(tmp_path), LIMITS)
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
        assert hello["methods"] == sorted(DATA_METHODS)
        await client.aclose()


def test_dispatch_table_names_exactly_the_data_methods() -> None:
    assert set(HANDLERS) == set(DATA_METHODS)


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
        assert run(_config(tmp_path), LIMITS) == ExitStatus.HUB_START_FAILED
    finally:
        holder.release()
    assert "already serving" in capsys.readouterr().err
    assert not (tmp_path / "hub.sock").exists()
