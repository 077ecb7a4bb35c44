"""(d) Growth: search time against scope size, in process (``hub.methods.search.search_scope`` with the
Hub's content cache), 64 … 1,024 files and 0.5 … 16 MiB; limits raised past 8 MiB so the whole
scope is scanned.  ripgrep runs on the same folders in the same loop.  Fitted slope and exponent."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from amux_memory.hub.methods.search import search_scope
from amux_memory.hub.storage.cache import ScopeCache
from amux_memory.protocol.limits import LIMITS
from bench.context import Ctx
from bench.data import MIB, Query, Synth, check_result, derive_queries, literal_rank, write_scope
from bench.latency import time_rg
from bench.util import linear_fit, ms, summary

RAISED = dataclasses.replace(LIMITS, scan_max_bytes=64 * MIB, scan_max_files=4096, scan_budget_seconds=60.0)
EXPONENT_GOAL = 1.15


def _series(ctx: Ctx, name: str, points: list[tuple[float, dict[str, bytes]]], query: Query,
            reps: int) -> dict[str, Any]:
    """Every point measured in every round (round-robin), so load that comes and goes hits all sizes alike."""
    setup = []
    for x, docs in points:
        root = ctx.tmp / "d-growth" / f"{name}-{x:g}"
        write_scope(root, docs)
        setup.append((x, docs, root, literal_rank(docs, query.words), ScopeCache()))
    samples: dict[float, dict[str, list[float]]] = {x: {"warm": [], "cold": [], "rg": []} for x, *_ in setup}
    cold_reps = max(3, reps // 2)
    for i in range(reps):
        for x, _docs, root, expected, cache in setup:
            t = samples[x]
            if i < cold_reps:
                fresh = ScopeCache()  # cold: nothing cached (OS page cache warm)
                t0 = time.perf_counter()
                res = search_scope(str(root), query.words, "", 20, RAISED, cache=fresh)
                t["cold"].append(ms(time.perf_counter() - t0))
                _check(ctx, name, x, res, expected)
            if i == 0:
                search_scope(str(root), query.words, "", 20, RAISED, cache=cache)  # fill the kept cache
            t0 = time.perf_counter()
            res = search_scope(str(root), query.words, "", 20, RAISED, cache=cache)
            t["warm"].append(ms(time.perf_counter() - t0))
            _check(ctx, name, x, res, expected)
            if ctx.rg:
                t["rg"].append(time_rg(ctx.rg, query.words, root)[0])
    rows = []
    for x, docs, _root, expected, _cache in setup:
        t = samples[x]
        row: dict[str, Any] = {"x": x, "files": len(docs), "bytes": sum(map(len, docs.values())),
                               "candidates": len(expected), "warm": summary(t["warm"]), "cold": summary(t["cold"]),
                               "rg": summary(t["rg"]) if t["rg"] else None}
        rows.append(row)
        ctx.log(f"d. {name} {x:g}: {row['files']} files {row['bytes'] / MIB:.2f} MiB warm {row['warm']['p50']} ms "
                f"cold {row['cold']['p50']} ms rg {row['rg']['p50'] if row['rg'] else '-'} ms")
    xs = [r["x"] for r in rows]
    fits = {k: linear_fit(xs, [r[k]["p50"] for r in rows]) for k in ("warm", "cold", "rg") if rows[0][k]}
    return {"axis": name, "query": list(query.words), "points": rows, "fits": fits}


def _check(ctx: Ctx, name: str, x: float, res: dict[str, Any], expected: list[tuple[str, int]]) -> None:
    ctx.checked += 1
    problems = check_result(res, expected, 20)
    if problems:
        ctx.problem(f"d. {name} {x:g}: " + "; ".join(problems))


def run(ctx: Ctx, corpus_scope: dict[str, bytes] | None) -> dict[str, Any]:
    synth = Synth(seed=23)
    reps = 4 if ctx.quick else 15
    # Files axis: real documents when the corpus is there (first N of the 1,024-file scope), else 8 KiB synthetic ones.
    counts = (16, 32, 64, 128) if ctx.quick else (64, 128, 256, 512, 1024)
    if corpus_scope is not None and not ctx.quick:
        items = list(corpus_scope.items())
        source = "corpus"
    else:
        items = list(synth.scope(max(counts), 8192).items())
        source = "synthetic 8 KiB documents"
    by_files = [(float(n), dict(items[:n])) for n in counts]
    q_files = _four_common(by_files[-1][1])
    # Bytes axis: 1,024 synthetic documents (256 in quick mode) whose size grows, up to the 16 MiB scope quota.
    n_docs = 256 if ctx.quick else 1024
    sizes = (0.125, 0.25, 0.5, 1.0) if ctx.quick else (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
    by_bytes = [(mib, Synth(seed=29).scope(n_docs, int(mib * MIB) // n_docs)) for mib in sizes]
    q_bytes = _four_common(by_bytes[-1][1])
    out: dict[str, Any] = {"files_axis": _series(ctx, "files", by_files, q_files, reps),
           "bytes_axis": _series(ctx, "MiB", by_bytes, q_bytes, reps),
           "files_axis_source": source, "bytes_axis_docs": n_docs,
           "limits": {"scan_max_bytes": RAISED.scan_max_bytes, "scan_max_files": RAISED.scan_max_files}}
    exps = {f"{axis} {k}": f["exponent"] for axis in ("files_axis", "bytes_axis") for k, f in out[axis]["fits"].items()
            if k != "rg"}
    worst = max(exps.values())
    ctx.target("d. growth is linear, not worse", worst <= EXPONENT_GOAL,
               "log-log exponents " + ", ".join(f"{k} {v:.2f}" for k, v in exps.items())
               + f"; warm slope {out['bytes_axis']['fits']['warm']['slope']:.2f} ms/MiB, "
               f"{out['files_axis']['fits']['warm']['slope'] * 100:.2f} ms/100 files",
               f"exponent ≤ {EXPONENT_GOAL}")
    return out


def _four_common(docs: dict[str, bytes]) -> Query:
    qs = [q for q in derive_queries(docs, sizes=(4,)) if q.name.startswith("en-common")]
    return qs[0] if qs else Query("en-common-4", "en", "common", ("the", "and", "memory", "decision"))
