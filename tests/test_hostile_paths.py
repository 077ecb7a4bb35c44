"""Hostile paths through the real CLI and raw frames: all rejected, nothing outside the scope touched.

The table is ``tests/hostile.py`` (100 lexical cases) plus paths through
symlinks planted inside the scope that point outside it.  Before and after,
the whole Hub home and an "outside" directory are snapshotted (names, modes,
bytes, link targets) and must be identical, except for the files the test
itself deliberately wrote.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

from amux_memory.protocol.errors import EXIT_CODES, ErrorCode
from amux_memory.protocol.framing import FrameDecoder
from amux_memory.protocol.messages import decode_response, encode_request
from tests.cli_batch import run_many
from tests.conftest import HubProcess
from tests.hostile import HOSTILE, SYMLINKED

REV = "0" * 64


def snapshot(*roots: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                st = p.lstat()
                if p.is_symlink():
                    out[str(p)] = ("link", os.readlink(p))
                elif p.is_file():
                    out[str(p)] = ("file", st.st_mode, p.read_bytes())
                elif p.is_dir():
                    out[str(p)] = ("dir", st.st_mode)
    return out


def plant(hub: HubProcess, tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("outside-secret-word\n")
    scope = hub.scope_dir
    scope.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, scope / "linkdir")
    os.symlink(outside / "secret.md", scope / "linkfile.md")
    (scope / "nested").mkdir()
    os.symlink(outside, scope / "nested" / "linkdir")
    return outside


def _requests(path: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("get", {"path": path}),
        ("get", {"path": path, "start_line": 1, "end_line": 3}),
        ("upsert", {"path": path, "content": b"hostile\n", "expected_revision": "absent"}),
        ("upsert", {"path": path, "content": b"hostile\n", "expected_revision": REV}),
        ("forget", {"path": path, "expected_revision": REV}),
        ("export", {"path": path}),
    ]


def test_hostile_paths_over_raw_frames(hub: HubProcess, tmp_path: Path) -> None:
    outside = plant(hub, tmp_path)
    before = snapshot(hub.home, outside)
    paths = HOSTILE + SYMLINKED
    assert len(paths) >= 100
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(hub.socket))
        requests = [("hello", {"protocol": 1})]
        for p in paths:
            requests += _requests(p)
            requests.append(("search", {"query": "outside-secret-word", "path_prefix": p}))
        decoder = FrameDecoder()
        answers: dict[int, Any] = {}
        for start in range(0, len(requests), 30):  # stay under the in-flight limit
            window = list(enumerate(requests))[start : start + 30]
            s.sendall(b"".join(encode_request(i, m, prm) for i, (m, prm) in window))
            while len(answers) < start + len(window):
                decoder.feed(s.recv(1 << 16))
                while (body := decoder.next_frame()) is not None:
                    r = decode_response(body)
                    answers[r.id] = r  # type: ignore[index]
    for i, (method, params) in enumerate(requests[1:], start=1):
        r = answers[i]
        if method == "search":
            # A prefix through a symlink is lexically fine but finds nothing behind the link.
            if r.error is None:
                assert r.result["matches"] == [], params
            else:
                assert r.error.code is ErrorCode.INVALID_PATH
            continue
        assert r.error is not None and r.error.code is ErrorCode.INVALID_PATH, (method, params["path"], r)
    assert snapshot(hub.home, outside) == before


@pytest.mark.slow
def test_hostile_paths_through_the_cli(hub: HubProcess, tmp_path: Path) -> None:
    """Each path through ``amux memory upsert`` and ``show``: the CLI's entry point, run for every path in one
    process (:func:`tests.cli_batch.run_many`), each call a real request to the Hub."""
    outside = plant(hub, tmp_path)
    before = snapshot(hub.home, outside)
    paths = [p for p in HOSTILE + SYMLINKED if "\x00" not in p]  # argv cannot carry NUL; covered over raw frames
    calls: list[tuple[list[str], bytes]] = []
    for p in paths:
        calls += [(["memory", "upsert", "--expected-revision", "absent", "--", p], b"hostile\n"),
                  (["memory", "show", "--", p], b"")]
    results = run_many(calls, hub.env)
    for p, up, shown in zip(paths, results[0::2], results[1::2], strict=True):
        assert up.returncode == EXIT_CODES[ErrorCode.INVALID_PATH], (p, up.stderr)
        assert up.json["error"]["code"] == "invalid_path"
        assert shown.returncode == EXIT_CODES[ErrorCode.INVALID_PATH], (p, shown.stderr)
        assert shown.json["error"]["code"] == "invalid_path"
    found = hub.cli("memory", "search", "outside-secret-word")
    assert found.json["matches"] == []
    assert snapshot(hub.home, outside) == before


def test_nfd_twin_reaches_the_nfc_file_only(hub: HubProcess) -> None:
    nfc, nfd = "r\u00e9sum\u00e9.md", "re\u0301sume\u0301.md"
    assert hub.cli("memory", "upsert", nfc, "--expected-revision", "absent", input=b"one\n").returncode == 0
    again = hub.cli("memory", "upsert", nfd, "--expected-revision", "absent", input=b"two\n")
    assert again.returncode == EXIT_CODES[ErrorCode.CONFLICT]  # same document, already exists
    assert sorted(p.name for p in hub.scope_dir.iterdir()) == [nfc]


@pytest.mark.slow
async def test_hostile_paths_through_mcp(hub: HubProcess, tmp_path: Path) -> None:
    import trio

    from tests.mcp_session import call, err, mcp_session

    outside = plant(hub, tmp_path)
    before = snapshot(hub.home, outside)
    with trio.fail_after(120):
        async with mcp_session(hub.home, tmp_path / "mcp.log") as s:
            for p in HOSTILE + SYMLINKED:
                for tool, args in (
                    ("memory_get", {"path": p}),
                    ("memory_upsert", {"path": p, "content": "hostile\n", "expected_revision": "absent"}),
                    ("memory_forget", {"path": p, "expected_revision": REV}),
                ):
                    error = err(await call(s, tool, **args), ErrorCode.INVALID_PATH)
                    assert error["code"] == "invalid_path", (tool, p)
    assert snapshot(hub.home, outside) == before
