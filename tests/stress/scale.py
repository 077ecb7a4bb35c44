"""Sizes of the stress runs: quick in the normal suite, full with ``AMUX_STRESS=full``."""

from __future__ import annotations

import os

FULL = os.environ.get("AMUX_STRESS") == "full"


def pick(quick: int, full: int) -> int:
    """``full`` when ``AMUX_STRESS=full``, else ``quick``."""
    return full if FULL else quick


def report(line: str) -> None:
    """Print a figure for the closing note (visible with ``pytest -s``)."""
    print(f"[stress] {line}", flush=True)
