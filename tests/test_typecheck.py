"""Static checks: ``mypy --strict`` over the installed tree and the bench (:mod:`tests.typecheck`), and ruff
(pyproject.toml)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest

from tests import typecheck
from tests.conftest import REPO


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_mypy_strict_passes() -> None:
    proc = typecheck.run([])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checked = re.search(r"in (\d+) source files", proc.stdout)
    assert checked, proc.stdout
    folders = ("hub", "protocol", "tools", "launch", "bench")
    expected = sum(1 for folder in folders for _ in (REPO / folder).rglob("*.py"))
    assert int(checked.group(1)) == expected, f"mypy checked {checked.group(1)} files, the folders hold {expected}"


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="ruff is not installed")
def test_ruff_is_clean() -> None:
    """``ruff check`` with the rule set in pyproject.toml, over the product packages and the tests."""
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "hub", "protocol", "tools", "launch", "bench",
                           "tests"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
