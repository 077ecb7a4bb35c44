"""Soak: the Hub's memory levels off under sustained mixed team traffic (DESIGN.md §6).

A real Hub under the load of ``python -m bench.soak`` (:func:`bench.soak.run`: 40 principals, 6 teams, socket
and MCP HTTP clients writing, proposing, approving, forgetting, searching and reading, a backup every 20 s).
The Hub hands freed memory back every :data:`hub.serve.heap.TRIM_SECONDS`, so its RSS is a saw: this test
compares the lowest RSS of the second half of the run with that of the first half, per 1,000 requests made in
between.  Quick in the normal suite (25 s of traffic, ~29 s in all); ``AMUX_STRESS=full`` runs the 30 minutes of
the documented soak (``bench/README.md``: 78.8 → 221.4 MiB, 2.0 MiB a minute over the last 10; before the trim
and the bounded indexes 78.7 → 721.8 MiB in 10 minutes, 59 MiB a minute).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from amux_memory.hub.serve.heap import TRIM_SECONDS
from bench.soak import run
from tests.stress.scale import FULL, pick, report

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400 if FULL else 120)]

GROWTH_MIB_PER_1000 = 2.5
"""The lowest RSS of the second half may exceed the first half's by at most this many MiB per 1,000 requests
made between them.  Measured over the quick run's 25 s (2026-12-05, 2-core VM, ~410 requests/s): 1.05-1.11
MiB in three runs (start-up still fills caches and the indexes); the code before the trim: 5.75 and 6.84."""


def _trough(samples: list[dict[str, float]], start: float, stop: float) -> tuple[float, float]:
    """The lowest RSS (MiB) of the samples in ``[start, stop)`` minutes, and the requests made when it was seen."""
    window = [s for s in samples if start <= s["minute"] < stop]
    low = min(window, key=lambda s: s["rss_mib"])
    return low["rss_mib"], low["requests"]


def test_rss_levels_off_under_mixed_team_traffic(tmp_path: Path) -> None:
    seconds = float(pick(25, 1800))
    result = run(seconds / 60, 500.0, tmp_path, sample_seconds=pick(1, 20) / 2)
    samples = result["samples"]
    span = samples[-1]["minute"]
    warm = pick(3, 60) / 60  # start-up: caches, the MCP server's import, the first threads
    half = (span + warm) / 2
    assert half - warm >= TRIM_SECONDS / 60, "each half must hold a trim"
    first, first_at = _trough(samples, warm, half)
    second, second_at = _trough(samples, half, span + 1)
    per_1000 = (second - first) / max(1.0, (second_at - first_at) / 1000)
    report(f"soak: {seconds:.0f} s, {result['requests_per_s']} requests/s, RSS {samples[0]['rss_mib']} MiB at start, "
           f"lowest {first} then {second} MiB ({per_1000:+.2f} MiB per 1,000 requests), {result['rss_mib_end']} at "
           f"the end, peak {result['hwm_mib_end']}; threads {result['threads_end']}, files {result['fds_end']}")
    assert result["unexpected"] == [], result["unexpected"]
    assert result["requests_per_s"] >= 50, result["requests"]  # traffic went on
    assert per_1000 <= GROWTH_MIB_PER_1000, [(s["minute"], s["rss_mib"]) for s in samples]
    # the bounded parts, from the Hub's /metrics under the load: the writes' versions indexed, searches cached
    assert samples[-1]["index_versions"] > 0 and samples[-1]["cache_mib"] > 0, samples[-1]
    assert result["rss_mib_max"] < result["bound_mib"], result["rss_mib_max"]
