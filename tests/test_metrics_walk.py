"""The walk behind the metrics' gauges (``hub/serve/metrics.py``, DESIGN.md §19.6): decided proposals are not
read again while unchanged, and a scrape does not wait for a walk once there are figures."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
import trio
import trio.testing

from amux_memory.hub.serve import metrics
from amux_memory.hub.serve.metrics import STATS_TTL_SECONDS, HubMetrics, Stats, walk_stats


def _proposal(folder: Path, pid: str, status: str, time_ns: int) -> Path:
    path = folder / f"{pid}.json"
    path.write_text(json.dumps({"id": pid, "status": status, "time_ns": time_ns, "content": "# x\n"}))
    return path


def test_a_decided_proposal_is_not_read_again_while_its_file_is_unchanged(tmp_path: Path) -> None:
    review = tmp_path / "review" / "teams" / "web"
    review.mkdir(parents=True)
    approved = _proposal(review, "p000000000001", "approved", 10)
    _proposal(review, "p000000000002", "pending", 20)
    first = walk_stats(tmp_path)
    assert (first.review_pending, first.review_oldest_ns) == (1, 20) and len(first.decided) == 1

    # The decided file's bytes changed without a new inode, size or mtime: the next walk does not read it.
    st = approved.stat()
    text = approved.read_text()
    approved.write_text(text.replace('"approved"', '"pending" '))
    os.utime(approved, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert approved.stat().st_size == st.st_size
    again = walk_stats(tmp_path, decided=first.decided)
    assert (again.review_pending, again.decided) == (1, first.decided)

    # A proposal is changed by replacing its file (a new inode): that one is read.
    replaced = review / "tmp.json"
    replaced.write_text(text.replace('"approved"', '"pending"').replace('"time_ns": 10', '"time_ns": 5'))
    os.replace(replaced, approved)
    third = walk_stats(tmp_path, decided=again.decided)
    assert (third.review_pending, third.review_oldest_ns, third.decided) == (2, 5, frozenset())


async def test_a_scrape_renders_the_last_figures_while_a_new_walk_runs(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    m = HubMetrics(tmp_path, "0", ())
    release, started = threading.Event(), threading.Event()
    walks: list[int] = []

    def slow_walk(home: Path, *args: object) -> Stats:
        walks.append(1)
        if len(walks) > 1:
            started.set()
            release.wait(30)
        return Stats(documents=len(walks))

    monkeypatch.setattr(metrics, "walk_stats", slow_walk)
    async with trio.open_nursery() as nursery:
        await m.refresh(0, nursery)  # the first scrape waits for the first walk
        assert m.stats.documents == 1
        m.stats_at -= STATS_TTL_SECONDS  # the figures are now stale
        with trio.fail_after(5):
            await m.refresh(0, nursery)  # returns at once: the walk runs in the nursery
            await trio.to_thread.run_sync(started.wait)  # the walk is in its worker thread
            await m.refresh(0, nursery)  # and a second scrape meanwhile starts no other walk
            await trio.testing.wait_all_tasks_blocked()
        assert m.stats.documents == 1 and len(walks) == 2
        release.set()
    assert m.stats.documents == 2
