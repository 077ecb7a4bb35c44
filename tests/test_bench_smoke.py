"""The bench suite's smoke run (``python -m bench --quick``) finishes and writes its results.

Performance targets may FAIL on a busy machine; only a broken suite or a search
result that differs from the literal scan makes the run exit non-zero.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_bench_quick_runs(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--synthetic", "--out", str(out), "--tmp", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    results = json.loads((out / "bench-quick.json").read_text())
    assert results["problems"] == [] and results["broken"] == []
    assert results["checked_results"] > 0
    table = (out / "bench-quick.md").read_text()
    assert "PASS" in table or "FAIL" in table
    assert (out / "machine.json").exists()
    for key in ("a", "b", "c", "d", "e"):
        assert results[key], key
