"""The first search after a reboot: page cache dropped, Hub restarted, beside ``rg -l`` (DESIGN.md §5.4.1).

Run: ``python -m bench.disk_cold [--runs 5] [--files 1000]`` as root, from the repository root (not part of
the full run; section a's disk-cold row keeps the Hub running).  A scope of ``--files`` real notes from
``../shared/corpus`` (within the 8 MiB budget), written once; then, per run and per query (four rare
keywords, then four common ones): ``sync``, drop the page cache, restart the Hub, one ``search`` on a fresh
connection (the Hub's ``elapsed_ms``, and whether it came back ``incomplete``); drop the page cache again and
time ``rg -F -i -l`` over the same files.  Prints one JSON object and a PASS/FAIL line per run.

Target (:data:`GOAL`): whenever ``rg -l`` needs at most :data:`RG_CEILING_MS`, the Hub's search is complete
and takes at most ``GOAL`` × rg's time.  Measured on the 2-core VM (1,000 notes, 7.5 MiB), 5 runs × 2
queries, twice: at load average 10-13 (other helpers' tests and benches) rg took 196-591 ms, the Hub
225-313 ms, incomplete (``time``) in 9 of 10, and the one run with rg under the ceiling (196 ms) FAILED
(Hub 279 ms, incomplete); at load 2-3 rg took 204-306 ms, the Hub 169-289 ms, incomplete in 8 of 10
(ratio median 1.2): PASS only because rg stayed just over the ceiling; on a quiet machine (load 0.3,
2 runs) rg took 143-231 ms, the Hub 186-272 ms, 2 of 4 incomplete, and at rg 143 ms the Hub was complete
but 1.37× rg: FAIL.  The Hub is short of CPU, not
disk: re-reading and folding the same 1,000 files from a warm page cache takes it 410 ms in process at
the higher load (``unicodedata.is_normalized``, ``decode`` and path validation lead the profile), and the
read pool adds about 100 ms of hand-offs to that.  Its answer also comes 15-63 ms past the 250 ms (reads
in flight are waited for, then matching).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import data
from bench.latency import drop_page_cache, time_rg
from bench.util import HubProc, ripgrep

GOAL = 1.0
"""Target: the Hub's disk-cold search time over ``rg -l``'s, when rg needs at most :data:`RG_CEILING_MS`."""
RG_CEILING_MS = 200.0
"""Above this, the disk itself is too slow for the 250 ms budget and ``incomplete`` is the honest answer."""


def _queries(docs: dict[str, bytes]) -> list[data.Query]:
    qs = data.derive_queries(docs, sizes=(4,))
    return [q for q in qs if q.name in ("en-rare-4", "en-common-4")] or qs[:2]


def run(files: int, runs: int, tmp: Path) -> dict[str, Any]:
    """``runs`` rounds of every query, each a dropped cache and a restarted Hub; the figures and verdicts."""
    rg = ripgrep()
    if rg is None:
        raise SystemExit("ripgrep (rg) is not installed")
    docs = data.corpus_scope(data.corpus_docs(), files=files)
    hub = HubProc.create(tmp / "disk-cold")
    data.write_scope(hub.scope_dir, docs)
    queries = _queries(docs)
    rounds: list[dict[str, Any]] = []
    for r in range(runs):
        for q in queries:
            if not drop_page_cache():
                raise SystemExit("cannot drop the page cache: run as root")
            hub.start()
            try:
                with hub.client() as c:
                    res = c.call("search", {"query": " ".join(q.words), "limit": 20})
            finally:
                hub.stop()
            drop_page_cache()
            rg_ms = time_rg(rg, q.words, hub.scope_dir)[0]
            hub_ms = float(res["elapsed_ms"])
            row = {"run": r + 1, "query": q.name, "hub_ms": round(hub_ms, 1), "rg_ms": round(rg_ms, 1),
                   "ratio": round(hub_ms / rg_ms, 2), "incomplete": bool(res.get("incomplete")),
                   "reasons": res.get("incomplete_reasons", [])}
            row["pass"] = rg_ms > RG_CEILING_MS or (not row["incomplete"] and hub_ms <= GOAL * rg_ms)
            rounds.append(row)
            print(json.dumps(row), file=sys.stderr)
    return {"files": len(docs), "mib": round(sum(map(len, docs.values())) / data.MIB, 2), "rounds": rounds,
            "incomplete": sum(r["incomplete"] for r in rounds),
            "median_ratio": statistics.median(r["ratio"] for r in rounds),
            "pass": all(r["pass"] for r in rounds)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.disk_cold", description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    ap.add_argument("--files", type=int, default=1000, help="notes in the scope (default 1000)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="amux-disk-cold-") as tmp:
        out = run(args.files, args.runs, Path(tmp))
    print(json.dumps(out, indent=1))
    verdict = "PASS" if out["pass"] else "FAIL"
    print(f"{verdict}  disk-cold first search after a restart ≤ {GOAL} × rg -l (rg ≤ {RG_CEILING_MS:g} ms), "
          f"never incomplete: {out['incomplete']} incomplete, median ratio {out['median_ratio']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
