"""Sizes of the stress runs: quick in the normal suite, full with ``AMUX_STRESS=full``."""

from __future__ import annotations

import os
from pathlib import Path

FULL = os.environ.get("AMUX_STRESS") == "full"


def pick(quick: int, full: int) -> int:
    """``full`` when ``AMUX_STRESS=full``, else ``quick``."""
    return full if FULL else quick


def report(line: str) -> None:
    """Print a figure for the closing note (visible with ``pytest -s``)."""
    print(f"[stress] {line}", flush=True)


def rss(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of ``pid`` in KiB, from ``/proc``."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out
