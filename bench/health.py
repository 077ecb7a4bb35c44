"""(k) Memory health (DESIGN.md §23): the Hub's ``health`` over a full scope, 1,024 documents and up to 8 MiB
(the corpus's, else synthetic), round trip on a persistent connection; goal at most 1 s."""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.context import Ctx
from bench.data import SCAN_BYTES, Synth, corpus_docs, corpus_scope, write_scope
from bench.util import CORPUS, HubProc

HEALTH_GOAL_SECONDS = 1.0
"""A full scope's health report answers within this many seconds (s)."""


def run(ctx: Ctx) -> dict[str, Any]:
    """Section k: ``health`` on a full scope, warm (the first call reads the files cold into the page cache and
    the Hub's content cache); also the median of three calls each after one document was edited by hand."""
    if ctx.use_corpus and CORPUS.is_dir():
        docs, source = corpus_scope(corpus_docs()), "corpus"
    else:
        docs, source = Synth().scope(1024, SCAN_BYTES // 1024 - 64), "synthetic"
    hub = HubProc.create(ctx.tmp / "k-health")
    write_scope(hub.scope_dir, docs)
    reps = 3 if ctx.quick else 15
    times: list[float] = []
    with hub, hub.client() as client:
        first = client.call("health", {})
        for _ in range(reps):
            t0 = time.perf_counter()
            result = client.call("health", {})
            times.append((time.perf_counter() - t0) * 1000)
        changed: list[float] = []
        for name in sorted(docs)[:: max(1, len(docs) // 3)][:3]:  # a hand edit of one document, then health
            with open(hub.scope_dir / name, "ab") as f:
                f.write(b"\nA line added by hand, so this document's paragraphs are split and scored again.\n")
            t0 = time.perf_counter()
            client.call("health", {})
            changed.append((time.perf_counter() - t0) * 1000)
    p50 = statistics.median(times)
    out = {"source": source, "files": len(docs), "bytes": sum(map(len, docs.values())), "reps": reps,
           "p50_ms": round(p50, 1), "max_ms": round(max(times), 1), "hub_elapsed_ms": result["elapsed_ms"],
           "first_ms": first["elapsed_ms"],
           "one_changed_ms": round(statistics.median(changed), 1), "counts": result["counts"],
           "documents": result["documents"]}
    ctx.log(f"k. health on {out['files']} {source} documents ({out['bytes'] / 2**20:.1f} MiB): p50 {p50:.0f} ms, "
            f"first {out['first_ms']:.0f} ms, after one edit {out['one_changed_ms']:.0f} ms")
    ctx.target("k. health on a full scope (1,024 documents, 8 MiB)", p50 <= HEALTH_GOAL_SECONDS * 1000,
               f"p50 {p50:.0f} ms, max {max(times):.0f} ms of {reps} on {out['files']} {source} documents "
               f"({out['bytes'] / 2**20:.1f} MiB; first call {out['first_ms']:.0f} ms, after one edit "
               f"{out['one_changed_ms']:.0f} ms); findings {result['counts']}",
               f"≤ {HEALTH_GOAL_SECONDS * 1000:.0f} ms")
    return out
