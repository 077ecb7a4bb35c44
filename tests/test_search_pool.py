"""The scan's read pool on a slow (cold) disk: reads overlap, results and budgets do not depend on
which read finishes first, the time budget still stops the scan, and no thread outlives it
(DESIGN.md §5.4.1)."""

from __future__ import annotations

import dataclasses
import errno
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import amux_memory.hub.methods.search as hub_search
from amux_memory.hub.access.identity import GLOBAL
from amux_memory.hub.methods.memory import MemoryMethods
from amux_memory.hub.methods.routes import call_in_process
from amux_memory.hub.methods.search import read_file_nofollow, search_scope
from amux_memory.hub.storage.cache import ScopeCache
from amux_memory.protocol.limits import LIMITS
from tests.helpers import hub_config

ROOMY = dataclasses.replace(LIMITS, scan_budget_seconds=5.0)


def write_scope(root: Path, count: int, body: str = "needle {i}\n") -> None:
    """``count`` documents: a third at the top level, the rest in two folders."""
    for i in range(count):
        folder = ("", "alpha/", "beta/")[i % 3]
        p = root / f"{folder}f{i:03d}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(body.format(i=i) + ("extra words " * (i % 7)) + "\n")


class SlowReader:
    """A reader that sleeps ``seconds`` (or a seeded random 1–``seconds``) before each read and
    records which thread read which file and the most reads in flight at once (``peak``)."""

    def __init__(self, seconds: float, jitter: bool = False) -> None:
        self.seconds, self.rng = seconds, random.Random(7) if jitter else None
        self.calls: list[str] = []
        self.threads: set[int] = set()
        self.lock = threading.Lock()
        self.fail: dict[str, OSError] = {}
        self.active = self.peak = 0

    def __call__(self, abspath: str) -> bytes:
        with self.lock:
            self.calls.append(abspath)
            self.threads.add(threading.get_ident())
            pause = self.rng.uniform(0.001, self.seconds) if self.rng else self.seconds
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            time.sleep(pause)
        finally:
            with self.lock:
                self.active -= 1
        for suffix, exc in self.fail.items():
            if abspath.endswith(suffix):
                raise exc
        return read_file_nofollow(abspath)


def without_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub_search, "SLOW_READS_TO_POOL", 10**9)


def comparable(res: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in res.items() if k != "elapsed_ms"}


def test_slow_reads_overlap_and_give_the_same_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_scope(tmp_path, 40)
    reader = SlowReader(0.020)
    before = threading.active_count()
    t0 = time.perf_counter()
    pooled = search_scope(str(tmp_path), ("needle", "extra"), "", 20, ROOMY, reader=reader, cache=ScopeCache())
    elapsed = time.perf_counter() - t0
    assert threading.active_count() == before  # the pool ended with the scan
    assert pooled["incomplete"] is False and pooled["scanned_files"] == 40
    # Overlap, counted rather than timed (a wall-clock bound failed on a loaded CI machine: 0.40 s against 0.40):
    # several reads were in flight at once, in several threads.
    assert reader.peak > 1 and len(reader.threads) > 1, (reader.peak, elapsed)
    assert sorted(reader.calls) == sorted(set(reader.calls)) and len(reader.calls) == 40  # once per file
    without_pool(monkeypatch)
    plain = search_scope(str(tmp_path), ("needle", "extra"), "", 20, ROOMY, reader=read_file_nofollow,
                         cache=ScopeCache())
    assert comparable(pooled) == comparable(plain)


def test_results_and_byte_budget_do_not_depend_on_which_read_finishes_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_scope(tmp_path, 60)
    sizes = sorted(p.stat().st_size for p in tmp_path.rglob("*.md"))
    limits = dataclasses.replace(ROOMY, scan_max_bytes=sum(sizes[:45]), scan_max_files=50)
    pooled = search_scope(str(tmp_path), ("needle", "words"), "", 20, limits, reader=SlowReader(0.012, jitter=True),
                          cache=ScopeCache())
    assert pooled["incomplete"] is True and set(pooled["incomplete_reasons"]) == {"files", "bytes"}
    assert pooled["scanned_bytes"] <= limits.scan_max_bytes
    without_pool(monkeypatch)
    plain = search_scope(str(tmp_path), ("needle", "words"), "", 20, limits, cache=ScopeCache())
    assert comparable(pooled) == comparable(plain)


def test_read_errors_in_the_pool_are_reported_as_without_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_scope(tmp_path, 30)
    reader = SlowReader(0.005)
    reader.fail = {"alpha/f007.md": PermissionError(errno.EACCES, "denied"),
                   "beta/f011.md": OSError(errno.EIO, "I/O error"),
                   "f012.md": FileNotFoundError(errno.ENOENT, "gone")}
    pooled = search_scope(str(tmp_path), ("needle",), "", 20, ROOMY, reader=reader, cache=ScopeCache())
    assert len(reader.threads) > 1
    assert pooled["incomplete_reasons"] == ["unreadable"]
    assert sorted(pooled["unreadable"]) == ["alpha/f007.md", "beta/f011.md"]
    assert pooled["scanned_files"] == 27
    without_pool(monkeypatch)
    reader.seconds = 0.0
    assert comparable(search_scope(str(tmp_path), ("needle",), "", 20, ROOMY, reader=reader,
                                   cache=ScopeCache())) == comparable(pooled)


@pytest.mark.alone  # measures elapsed time against the search budget (a CI run under load: 0.55 s)
def test_a_slow_disk_still_stops_by_the_budget_and_leaves_no_thread(tmp_path: Path) -> None:
    write_scope(tmp_path, 300)
    reader = SlowReader(0.020)
    before = threading.active_count()
    t0 = time.perf_counter()
    res = search_scope(str(tmp_path), ("needle",), "", 20, LIMITS, reader=reader, cache=ScopeCache())
    elapsed = time.perf_counter() - t0
    calls = len(reader.calls)
    assert res["incomplete"] is True and res["incomplete_reasons"] == ["time"]
    assert elapsed <= LIMITS.scan_budget_seconds + 0.030, elapsed
    assert len(reader.threads) > 1 and res["scanned_files"] > LIMITS.scan_budget_seconds / 0.020  # overlapped
    assert res["scanned_files"] <= calls < 300
    assert threading.active_count() == before
    time.sleep(0.05)  # a window for a straggling read to show in: an absence cannot be polled for
    assert len(reader.calls) == calls  # nothing reads after the scan returned


@pytest.mark.alone  # measures elapsed time against the search budget (a CI run under load: 0.55 s)
async def test_slow_reader_through_the_service_stops_in_time(tmp_path: Path) -> None:
    root = tmp_path / "memory" / "global"
    write_scope(root, 300)
    config = hub_config(tmp_path)
    reader = SlowReader(0.020)
    service = MemoryMethods(config, LIMITS, reader)
    before = threading.active_count()
    res = await call_in_process(service, GLOBAL, "search", {"query": "needle", "limit": 20})
    calls = len(reader.calls)
    assert res["incomplete"] is True and "time" in res["incomplete_reasons"]
    # The budget (250 ms) plus at most one read in flight (20 ms here) and scheduling slack on a loaded
    # machine; without the stop, 300 reads of 20 ms would take well over a second.
    assert res["elapsed_ms"] <= 300, res["elapsed_ms"]
    assert len(reader.threads) > 1
    assert threading.active_count() <= before + 1  # trio's idle worker thread may stay; no pool thread does
    assert not [t for t in threading.enumerate() if t.name.startswith("amux-read")]
    time.sleep(0.05)  # a window for a straggling read to show in: an absence cannot be polled for
    assert len(reader.calls) == calls


class SlowLstat:
    """``os.stat`` as the scan calls it (relative to a folder's fd) sleeping ``seconds`` first: a disk whose
    inodes are not cached, where an ``lstat`` costs a seek like a read does."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.real, self.calls = seconds, os.stat, 0

    def __call__(self, path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if kwargs.get("dir_fd") is not None:
            self.calls += 1
            time.sleep(self.seconds)
        return self.real(path, *args, **kwargs)


@pytest.mark.alone  # measures elapsed time against the search budget (a CI run under load: 0.55 s)
@pytest.mark.parametrize("layout", ["top level", "one folder"])
def test_a_slow_lstat_still_stops_by_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    # The scan lstats a folder's files before reading them (for the read-ahead hint): on a disk where each
    # lstat is slow, that pass must neither overrun the 250 ms nor leave the budget spent before the first read.
    folder = tmp_path if layout == "top level" else tmp_path / "notes"
    folder.mkdir(exist_ok=True)
    for i in range(300):
        (folder / f"f{i:03d}.md").write_text(f"needle {i}\n")
    slow = SlowLstat(0.006)
    monkeypatch.setattr(os, "stat", slow)
    t0 = time.perf_counter()
    res = search_scope(str(tmp_path), ("needle",), "", 20, LIMITS, cache=ScopeCache())
    elapsed = time.perf_counter() - t0
    monkeypatch.undo()
    assert res["incomplete"] is True and res["incomplete_reasons"] == ["time"]
    assert elapsed <= LIMITS.scan_budget_seconds + 0.030, elapsed
    assert res["scanned_files"] > LIMITS.scan_budget_seconds / 0.006, res["scanned_files"]  # the pool overlaps lstats
    assert not [t for t in threading.enumerate() if t.name.startswith("amux-read")]
