"""The search cache's hit rate in ``/metrics`` (``amux_search_cache_hits_total``, ``amux_search_cache_misses_total``;
DESIGN.md §5.5, §19.6), through a real Hub, and ``hub.cache_max_bytes`` reported in ``hello``."""

from __future__ import annotations

import os
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from amux_memory.protocol.requests import upsert_params
from amux_memory.protocol.settings import default_value
from tests.conftest import make_hub
from tests.helpers import free_port, wait_until


def scraped(base: str) -> dict[str, float]:
    """``/metrics`` parsed: sample name -> value (the series here carry no labels)."""
    with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples}


def test_the_cache_hit_rate_is_scraped_and_the_bound_is_the_setting(tmp_path: Path) -> None:
    port = free_port()
    h = make_hub(tmp_path, start=False, settings={"hub.metrics_listen": f"127.0.0.1:{port}",
                                                  "hub.cache_max_bytes": str(3 << 20)})
    scope = h.home / "memory" / "global"
    scope.mkdir(parents=True, exist_ok=True)
    stamp = time.time() - 3600
    for i in range(3):  # placed by hand and backdated: the cache trusts them (not just edited)
        (scope / f"n{i}.md").write_bytes(f"# Note {i}\n\nabout caching\n".encode())
        os.utime(scope / f"n{i}.md", (stamp, stamp))
    h.start()
    assert h.log is not None
    wait_until(lambda: "/metrics" in h.log.read_text(), 10, "the Hub to log its metrics URL")
    base = f"http://127.0.0.1:{port}"
    scrape = scraped(base)
    assert scrape["amux_search_cache_hits_total"] == scrape["amux_search_cache_misses_total"] == 0
    assert scrape["amux_search_cache_bytes"] == scrape["amux_history_index_versions"] == 0
    with h.client() as c:
        assert c.hello["limits"]["cache_max_bytes"] == 3 << 20 != default_value("hub.cache_max_bytes")
        assert c.call("search", {"query": "caching"})["candidates"] == 3  # read: three misses
        assert c.call("search", {"query": "caching"})["candidates"] == 3  # from the cache: three hits
    scrape = scraped(base)
    assert (scrape["amux_search_cache_misses_total"], scrape["amux_search_cache_hits_total"]) == (3, 3)
    assert scrape["amux_search_watched_folders"] == 1  # the scope's one folder (hub.watch_files, DESIGN.md §5.5)
    held = sum(len(p.read_bytes()) for p in scope.glob("*.md"))  # all ASCII: the folded text is as long
    assert scrape["amux_search_cache_bytes"] == 2 * held
    note = scope / "n0.md"
    st = note.stat()
    with open(note, "r+b") as fh:  # an editor writing in place: same size, and the mtime put back
        fh.write(b"# Note 0\n\nabout hashing\n")
    os.utime(note, ns=(st.st_atime_ns, st.st_mtime_ns))
    with h.client() as c:
        assert [m["path"] for m in c.call("search", {"query": "hashing"})["matches"]] == ["n0.md"]
    scrape = scraped(base)
    assert (scrape["amux_search_cache_misses_total"], scrape["amux_search_cache_hits_total"]) == (4, 5)
    with h.client() as c:  # two writes: the scope's history index holds their versions (DESIGN.md §6)
        made = c.call("upsert", upsert_params("new.md", "# New\n", "absent"))
        c.call("upsert", upsert_params("new.md", "# Newer\n", made["revision"]))
    assert scraped(base)["amux_history_index_versions"] >= 2
    h.stop()


def test_a_hub_with_watch_files_off_watches_nothing_and_still_sees_an_edit(tmp_path: Path) -> None:
    port = free_port()
    h = make_hub(tmp_path, start=False, settings={"hub.metrics_listen": f"127.0.0.1:{port}",
                                                  "hub.watch_files": "false"})
    note = h.home / "memory" / "global" / "n.md"
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_bytes(b"about caching\n")
    os.utime(note, (time.time() - 3600,) * 2)
    h.start()
    assert h.log is not None
    wait_until(lambda: "/metrics" in h.log.read_text(), 10, "the Hub to log its metrics URL")
    with h.client() as c:
        assert c.call("search", {"query": "caching"})["candidates"] == 1
        st = note.stat()
        with open(note, "r+b") as fh:  # an editor writing in place
            fh.write(b"about hashing\n")
        os.utime(note, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime: the ctime tells
        assert c.call("search", {"query": "hashing"})["candidates"] == 1
    assert scraped(f"http://127.0.0.1:{port}")["amux_search_watched_folders"] == 0
    h.stop()
