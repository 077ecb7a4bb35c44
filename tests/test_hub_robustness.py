"""Hub behaviour found by breaking it: load, odd files on disk, socket settings, long names."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode, ExitStatus
from amux_memory.protocol.framing import FrameDecoder
from amux_memory.protocol.messages import decode_response, encode_request
from tests.conftest import HubProcess, amux_argv


def _fill_scope(scope: Path, files: int = 1024, size: int = 7000) -> None:
    scope.mkdir(parents=True, exist_ok=True)
    line = b"lorem ipsum dolor sit amet consectetur adipiscing elit\n"
    body = line * (size // len(line))
    for i in range(files):
        (scope / f"n{i:04d}.md").write_bytes(body + f"marker{i % 7}\n".encode())


def _pipelined(sock_path: Path, requests: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(sock_path))
        s.sendall(encode_request(0, "hello", {"protocol": 1}))
        s.sendall(b"".join(encode_request(i + 1, m, p) for i, (m, p) in enumerate(requests)))
        decoder = FrameDecoder()
        answers: dict[int, Any] = {}
        while len(answers) < len(requests) + 1:
            chunk = s.recv(1 << 16)
            assert chunk, "Hub closed the connection"
            decoder.feed(chunk)
            while (body := decoder.next_frame()) is not None:
                r = decode_response(body)
                answers[r.id] = r  # type: ignore[index]
        return [answers[i + 1] for i in range(len(requests))]


MARKERS = 7
"""``_fill_scope`` puts ``marker{i % 7}`` in file ``n{i:04d}.md``."""
MIN_ANSWERED = 0.5
"""Share of the burst's searches that must get a real answer (the rest may be ``busy``, never anything else)."""


def _check_search_answer(result: dict[str, Any], marker: int) -> None:
    """A ``search`` for ``marker{marker} lorem`` over ``_fill_scope``'s 1,024 files, checked for content."""
    assert result["scanned_files"] <= 1024 and result["candidates"] > 0, result
    matches = result["matches"]
    assert matches, result
    if not result["incomplete"]:  # the whole scope was read: every file has "lorem", 146-147 have the marker
        assert result["scanned_files"] == 1024 and result["candidates"] == 1024, result
        assert len(matches) == 5 and result["truncated"] is True, result
    keyword = f"marker{marker}"
    for m in matches:
        index = int(m["path"].removeprefix("n").removesuffix(".md"))
        assert m["path"] == f"n{index:04d}.md", m
        assert m["matched"] in ([keyword, "lorem"], ["lorem"]) and "lorem ipsum" in m["snippet"], m
        if keyword in m["matched"]:
            assert index % MARKERS == marker, (marker, m)
        # Ranked: documents with both keywords come first, and a full scan finds 146 of them.
        assert keyword in m["matched"] or result["incomplete"], (marker, m)


@pytest.mark.slow
def test_concurrent_pipelined_searches_are_answered_and_never_fail_internally(hub: HubProcess) -> None:
    """Six connections pipeline 32 searches each (192 at once over a full 7 MiB scope).

    An answer is either a real result or ``busy`` (the Hub at a limit, DESIGN.md §6); at least
    ``MIN_ANSWERED`` of them are real results with the expected matches, and every search after the
    burst is answered in full.
    """
    _fill_scope(hub.scope_dir)
    results: list[list[Any]] = []

    def worker() -> None:
        reqs = [("search", {"query": f"marker{i % MARKERS} lorem"}) for i in range(32)]
        results.append(_pipelined(hub.socket, reqs))

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == 6
    answered = 0
    for answers in results:
        assert len(answers) == 32
        for i, r in enumerate(answers):
            if r.error is not None:
                assert r.error.code is ErrorCode.BUSY, r.error
                continue
            _check_search_answer(r.result, i % MARKERS)
            answered += 1
    assert answered >= MIN_ANSWERED * 6 * 32, f"only {answered} of {6 * 32} searches got an answer"
    after = _pipelined(hub.socket, [("search", {"query": f"marker{k} lorem"}) for k in range(MARKERS)])
    for k, r in enumerate(after):
        assert r.error is None, r.error
        assert r.result["incomplete"] is False, r.result
        _check_search_answer(r.result, k)


def test_responses_stay_within_8_kib_with_a_64_bit_id(hub: HubProcess) -> None:
    body = ("x" * 99 + "\n").encode() * 650
    with hub.client() as c:
        c.call("upsert", {"path": "big.md", "content": body, "expected_revision": "absent"})
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(hub.socket))
        big_id = 2**63 - 1
        s.sendall(encode_request(1, "hello", {"protocol": 1}))
        s.sendall(encode_request(big_id, "get", {"path": "big.md"}))
        s.sendall(encode_request(big_id - 1, "export", {"path": "big.md"}))
        decoder = FrameDecoder()
        sizes: dict[int, int] = {}
        while len(sizes) < 3:
            decoder.feed(s.recv(1 << 16))
            while (frame := decoder.next_frame()) is not None:
                sizes[decode_response(frame).id] = len(frame)  # type: ignore[index]
    assert sizes[big_id] <= 8192 and sizes[big_id - 1] <= 8192, sizes


@pytest.mark.slow
def test_hand_placed_non_utf8_file_exports_byte_identical(hub: HubProcess) -> None:
    hub.scope_dir.mkdir(parents=True, exist_ok=True)
    raw = b"\x80" * 20_000 + b"\xff\xfe latin-1 caf\xe9\n"
    (hub.scope_dir / "odd.md").write_bytes(raw)
    r = hub.cli("memory", "export", "odd.md", timeout=30)
    assert r.returncode == 0 and r.stdout == raw
    pages, offset = 0, 0
    while True:  # show's paging always progresses and stays bounded
        page = hub.cli("memory", "show", "odd.md", "--offset", str(offset)).json
        assert len(page["content"].encode()) <= 8192
        pages += 1
        if not page["truncated"]:
            break
        assert page["next_offset"] > offset
        offset = page["next_offset"]
    assert pages >= 2


@pytest.mark.slow  # over 2 s in the fast loop; this file keeps faster tests of the same paths
def test_overlong_segment_is_invalid_path_and_creates_nothing(hub: HubProcess) -> None:
    before = sorted(p.name for p in hub.home.rglob("*"))
    long_name = "leftover1/leftover2/" + "d" * 300 + "/x.md"
    r = hub.cli("memory", "upsert", long_name, "--expected-revision", "absent", input=b"hi\n")
    assert r.returncode == EXIT_CODES[ErrorCode.INVALID_PATH], r.stderr
    r = hub.cli("memory", "upsert", "x" * 255 + ".md", "--expected-revision", "absent", input=b"hi\n")
    assert r.returncode == EXIT_CODES[ErrorCode.INVALID_PATH]
    ok = hub.cli("memory", "upsert", "y" * 252 + ".md", "--expected-revision", "absent", input=b"hi\n")
    assert ok.returncode == 0, ok.stderr  # the longest legal name still fits beside its temp file
    # The history store (DESIGN.md §15) records the acknowledged create; nothing else is new.
    after = sorted(p.name for p in hub.home.rglob("*") if p.relative_to(hub.home).parts[0] != "history")
    assert [n for n in after if n not in before] == ["y" * 252 + ".md"]
    assert any((hub.home / "history").rglob("versions.log"))


def _serve(home: Path, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*amux_argv(), "hub", "serve", "--home", str(home)], capture_output=True, env=env,
                          timeout=30)


def test_socket_path_that_is_not_a_socket_is_left_alone(hub_factory: Any, tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    h: HubProcess = hub_factory(settings={"hub.socket_path": str(precious)}, start=False)
    r = _serve(h.home, h.env)
    assert r.returncode == ExitStatus.HUB_START_FAILED and b"not a socket" in r.stderr
    assert precious.read_text() == "keep me"


def test_second_home_on_the_same_socket_is_refused(hub_factory: Any, tmp_path: Path) -> None:
    sock = tmp_path / "shared.sock"
    first: HubProcess = hub_factory(settings={"hub.socket_path": str(sock)})
    second: HubProcess = hub_factory(settings={"hub.socket_path": str(sock)}, start=False)
    r = _serve(second.home, second.env)
    assert r.returncode == ExitStatus.HUB_START_FAILED and b"already listening" in r.stderr
    assert first.cli("hub", "status").returncode == 0  # the first Hub still owns its socket


def test_symlinked_scope_directory_is_refused(hub_factory: Any, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.md").write_text("secretword\n")
    h: HubProcess = hub_factory(start=False)
    (h.home / "memory").mkdir(mode=0o700)
    os.symlink(outside, h.home / "memory" / "global")
    r = _serve(h.home, h.env)
    assert r.returncode == ExitStatus.HUB_START_FAILED and b"symlink" in r.stderr


def test_socket_dir_for_other_users_is_traversable(hub_factory: Any, tmp_path: Path) -> None:
    sock = tmp_path / "newdir" / "hub.sock"
    h: HubProcess = hub_factory(settings={"hub.socket_path": str(sock), "hub.socket_mode": "0666"})
    assert (sock.parent.stat().st_mode & 0o777) == 0o755
    assert (sock.stat().st_mode & 0o777) == 0o666
    assert (h.home / "memory").stat().st_mode & 0o777 == 0o700
    assert (h.home / "memory" / "users").stat().st_mode & 0o777 == 0o700


def test_unknown_socket_group_is_rejected_by_config(hub_factory: Any) -> None:
    h: HubProcess = hub_factory(start=False)
    r = h.cli("system", "config", "set", "hub.socket_group", "no-such-group-amux")
    assert r.returncode == EXIT_CODES[ErrorCode.BAD_REQUEST] and "no group" in r.stderr
