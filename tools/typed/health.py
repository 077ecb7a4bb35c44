"""The whole health report: the Hub's ``health`` findings with the typed-memory lint folded in (DESIGN.md §23).

The Hub knows nothing of typed memories (DESIGN.md §11), so its ``health``
answer (:mod:`hub.methods.health`) lacks what ``amux memory lint`` finds;
:func:`full_report` asks the Hub, runs :func:`tools.typed.lint.lint_library` on
the caller's library through the same connection, and adds each lint problem
as a finding of code ``lint_<lint code>`` (``lint_expired``,
``lint_missing_section``, ...), in the Hub's answer shape::

    {"findings": [{"code", "paths", "lines", "message", "next"}], "counts": {code: n}, "documents": n,
     "elapsed_ms": float}

Two lint codes are left out because the Hub reports the same thing:
``credential`` (``secret``) and ``broken_link`` (``dangling_link``).  Every
frontend (``amux memory health``, ``amux doctor``, the web page, ``amux
memory tidy``) uses this one function, so they cannot disagree.
"""

from __future__ import annotations

import datetime as _dt
import time
from typing import TYPE_CHECKING, Any

from amux_memory.protocol.requests import health_params

if TYPE_CHECKING:
    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.typed.model import Problem

Result = dict[str, Any]

COVERED_BY_HUB = frozenset({"credential", "broken_link"})
"""Lint codes the Hub's own findings already report (``secret``, ``dangling_link``)."""

LINT_PREFIX = "lint_"
"""What a folded lint finding's code starts with."""

FIX_MARK = "; fix: "
"""Where a lint message's fix begins (:mod:`tools.typed.lint`)."""


def lint_finding(problem: Problem) -> Result:
    """One lint problem as a health finding: ``lint_<code>``, its path and line, message and fix split apart."""
    message, _, fix = problem.message.partition(FIX_MARK)
    lines = [[problem.line, problem.line]] if problem.line else []
    return {"code": LINT_PREFIX + problem.code, "paths": [problem.path], "lines": lines,
            "message": f"{problem.severity}: {message}", "next": fix or "amux memory lint"}


def full_report(client: HubClient, path_prefix: str = "", today: _dt.date | None = None) -> Result:
    """The Hub's ``health`` for ``path_prefix`` plus the lint findings of documents under it.

    ``client`` is connected; ``today`` is the date lint judges expiry by (default: today).  Raises the
    :class:`~protocol.errors.HubError` of the Hub's call (``disabled``, ``invalid_path``, ``not_found`` for a
    mount the caller has not, ...) or of lint's reads.
    """
    from amux_memory.tools.typed.library import HubLibrary
    from amux_memory.tools.typed.lint import lint_library

    started = time.perf_counter()
    result: Result = client.call("health", health_params(path_prefix=path_prefix))
    problems = lint_library(HubLibrary(client), today or _dt.date.today())
    folded = [lint_finding(p) for p in problems
              if p.code not in COVERED_BY_HUB and p.path.startswith(path_prefix)]
    counts: dict[str, int] = dict(result.get("counts") or {})
    for f in folded:
        counts[f["code"]] = counts.get(f["code"], 0) + 1
    return {"findings": list(result.get("findings") or []) + folded, "counts": counts,
            "documents": result.get("documents", 0),
            "elapsed_ms": round((time.perf_counter() - started) * 1000, 3)}
