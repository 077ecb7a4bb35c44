"""What every bench section shares: mode, folders, reference tools, and where problems are reported."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Ctx:
    quick: bool
    tmp: Path
    out: Path
    rg: str | None
    use_corpus: bool
    problems: list[str] = field(default_factory=list)
    """Correctness failures (a result differing from the literal scan, a budget not reported): the run fails."""
    notes: list[str] = field(default_factory=list)
    targets: list[dict[str, Any]] = field(default_factory=list)
    checked: int = 0
    """Search results compared with the literal scan."""
    started: float = field(default_factory=time.monotonic)

    def log(self, message: str) -> None:
        print(f"[bench {time.monotonic() - self.started:6.1f}s] {message}", file=sys.stderr, flush=True)

    def problem(self, message: str) -> None:
        self.log("PROBLEM: " + message)
        self.problems.append(message)

    def target(self, name: str, passed: bool | None, figure: str, goal: str) -> None:
        """Record a performance target; ``passed=None`` means it could not be measured (SKIP)."""
        self.targets.append({"target": name, "pass": passed, "figure": figure, "goal": goal})
        self.log(f"{verdict(passed)} {name}: {figure} (goal: {goal})")


def verdict(passed: bool | None) -> str:
    return "SKIP" if passed is None else "PASS" if passed else "FAIL"
