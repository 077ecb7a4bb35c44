"""The bench's shared pieces (``bench/util.py``) on their own, fast: statistics and the Hub subprocess.

``tests/test_bench_smoke.py`` runs the whole quick bench (slow); these keep the bench package in the
inner loop (``pytest -m "not slow"``). The Hub start is :func:`tools.lifecycle.spawn.wait_until_answering`
(DESIGN.md §19.2).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from amux_memory.hub.access.config import set_value
from bench.util import HubProc, linear_fit, percentile, summary


def test_percentile_and_summary() -> None:
    assert math.isnan(percentile([], 50))
    assert percentile([7.0], 99) == 7.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert summary([]) == {"n": 0}
    s = summary([1.0, 2.0, 3.0])
    assert (s["n"], s["p50"], s["min"], s["max"], s["mean"]) == (3, 2.0, 1.0, 3.0, 2.0)


def test_linear_fit_of_a_line() -> None:
    fit = linear_fit([1.0, 2.0, 4.0, 8.0], [2.0, 4.0, 8.0, 16.0])
    assert fit["slope"] == pytest.approx(2.0) and fit["intercept"] == pytest.approx(0.0, abs=1e-9)
    assert fit["r2"] == pytest.approx(1.0) and fit["exponent"] == pytest.approx(1.0)


@pytest.mark.slow  # over 1 s; the feature keeps a fast test in this file
def test_hub_proc_starts_answers_and_stops(tmp_path: Path) -> None:
    with HubProc.create(tmp_path) as h:
        c = h.client()  # connected
        try:
            assert c.call("upsert", {"path": "a.md", "content": b"# a\n", "expected_revision": "absent"})["revision"]
        finally:
            c.close()
        assert (h.scope_dir / "a.md").read_bytes() == b"# a\n"
        assert h.proc is not None and h.proc.poll() is None
    assert h.proc.poll() is not None


def test_hub_proc_start_failure_carries_the_log_tail(tmp_path: Path) -> None:
    h = HubProc.create(tmp_path)
    set_value(h.home, "hub.listen", "0.0.0.0:0")  # plaintext TCP off loopback: the Hub refuses to start
    with pytest.raises(RuntimeError, match=r"the Hub exited with \d+: (?s:.*)refusing plaintext TCP"):
        h.start()
