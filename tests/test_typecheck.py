"""Static checks: ``mypy --strict`` over the packages ``[tool.mypy] files`` lists, and ruff (pyproject.toml)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_mypy_strict_passes() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="ruff is not installed")
def test_ruff_is_clean() -> None:
    """``ruff check`` with the rule set in pyproject.toml, over the product packages and the tests."""
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "hub", "protocol", "tools", "launch", "bench",
                           "tests"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
