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
    # Every target has its one verdict line in the table, and each measured target carries a figure.
    assert results["targets"]
    for target in results["targets"]:
        verdict = {True: "PASS", False: "FAIL", None: "SKIP"}[target["pass"]]
        assert f"{verdict}  {target['target']}: {target['figure']}" in table, target
        assert target["figure"] and target["goal"], target
    names = [t["target"] for t in results["targets"]]
    assert any(n.startswith("f. start-up") for n in names), names
    assert (out / "machine.json").exists()
    for key in ("a", "b", "c", "d", "e", "f"):
        assert results[key], key
    # The start-up row measured both processes, and the data command imported none of the heavy packages.
    assert set(results["f"]["stats"]) == {"python -c pass", "amux memory search"}
    assert results["f"]["heavy_imports"] == []
