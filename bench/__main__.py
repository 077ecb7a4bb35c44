"""``python -m bench [--quick] [--out DIR]``: the whole bench suite, a Markdown table, JSON and a plot.

Exit status: 0 when the suite ran and every search result equalled the
literal scan; 1 when a section broke or a result differed (a bug, not a
missed performance target); with ``--strict`` also 1 when a target FAILs.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import (
    budget,
    citations,
    data,
    footprint,
    growth,
    health,
    history,
    latency,
    mcp_http,
    ops,
    reach,
    report,
    review,
    secrets,
    startup,
    teams,
)
from bench.context import Ctx, verdict
from bench.util import CORPUS, REPO, machine, ripgrep

CLI_GOAL_MS = 150.0
RG_RATIO_GOAL = 0.8
COMMON16_GOAL = 0.7
DISK_COLD_GOAL = 1.0


def _code_state() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "hub", "protocol", "tools"], cwd=REPO,
                               capture_output=True, text=True, timeout=10).stdout.split("\n")
        changed = [ln[3:] for ln in dirty if ln.strip()]
        return f"git {head}" + (f" + uncommitted changes in {', '.join(changed)}" if changed else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"


def _a_targets(ctx: Ctx, scopes: list[dict[str, Any]]) -> None:
    fours = [(sc["scope"], q) for sc in scopes for q in sc["queries"] if q["keywords"] == 4]
    if ctx.rg is None:
        ctx.target("a. Hub-side search p50 ≤ 0.8 × rg (4 keywords, full scope)", None, "ripgrep is not installed",
                   "≤ 0.80")
    elif fours:
        worst_scope, worst = max(fours, key=lambda sq: sq[1]["ratio_hub_warm_to_rg"] or 0)
        ctx.target(
            "a. Hub-side search p50 ≤ 0.8 × rg (4 keywords, full scope)",
            all((q["ratio_hub_warm_to_rg"] or 99) <= RG_RATIO_GOAL for _, q in fours),
            "ratios " + ", ".join(f"{s}/{q['query']} {q['ratio_hub_warm_to_rg']:.2f}" for s, q in fours)
            + f"; worst {worst_scope}/{worst['query']}: Hub {worst['stats']['hub_warm']['p50']:.1f} ms vs rg "
            f"{worst['stats']['rg']['p50']:.1f} ms (round trip {worst['stats']['rtt_warm']['p50']:.1f} ms, "
            f"{worst['ratio_rtt_warm_to_rg']:.2f})",
            f"≤ {RG_RATIO_GOAL}",
        )
    _common16_target(ctx, scopes)
    _disk_cold_target(ctx, scopes)
    clis = [(sc["scope"], q) for sc in scopes for q in sc["queries"] if q["stats"].get("cli")]
    if clis:
        worst_scope, worst = max(clis, key=lambda sq: sq[1]["stats"]["cli"]["p50"])
        all_p50 = sorted(q["stats"]["cli"]["p50"] for _, q in clis)
        ctx.target("a. CLI end-to-end `amux memory search` p50 ≤ 150 ms",
                   worst["stats"]["cli"]["p50"] <= CLI_GOAL_MS,
                   f"per-query p50 {all_p50[0]:.0f}–{all_p50[-1]:.0f} ms (worst {worst_scope}/{worst['query']}, "
                   f"p95 {worst['stats']['cli']['p95']:.0f} ms)", f"≤ {CLI_GOAL_MS:.0f} ms")
    colds = [q["stats"]["hub_cold"]["max"] for sc in scopes for q in sc["queries"] if q["stats"].get("hub_cold")]
    firsts = [sc["first_after_start"]["elapsed_ms"] for sc in scopes]
    inc = [f"{sc['scope']}/{q['query']}: {i}" for sc in scopes for q in sc["queries"] for i in q["incomplete"]
           if not i.startswith("Hub disk-cold")] + [
        f"{sc['scope']} first search" for sc in scopes if sc["first_after_start"]["incomplete"]]
    worst = max(colds + firsts)
    ctx.target("a. full scope complete within the 250 ms budget (warm, cold cache, first after start)",
               not inc and worst < 250,
               f"slowest cold {max(colds) if colds else 0:.0f} ms, first after start {max(firsts):.0f} ms; "
               f"{len(inc)} incomplete", "< 250 ms, never incomplete")


SECTIONS = frozenset("abcdefhsrmtkv")
"""The bench's sections, by letter (``--only``)."""


def _sections(text: str) -> frozenset[str]:
    """``--only``'s value: comma-separated section letters; an unknown one is an argparse error."""
    chosen = frozenset(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(chosen - SECTIONS)
    if not chosen or unknown:
        raise argparse.ArgumentTypeError(f"unknown section(s) {', '.join(unknown) or '(none)'}; "
                                         f"choose from {', '.join(sorted(SECTIONS))}")
    return chosen


def _common16_target(ctx: Ctx, scopes: list[dict[str, Any]]) -> None:
    """Target: 16 common keywords, Hub p50 / rg p50 ≤ :data:`COMMON16_GOAL` on every scope (worst named)."""
    name = f"a. 16 common keywords ≤ {COMMON16_GOAL} × rg (both scopes)"
    rows = [(sc["scope"], q) for sc in scopes for q in sc["queries"]
            if q["query"] in ("en-common-16", "zh-common-16") and q["ratio_hub_warm_to_rg"] is not None]
    if ctx.rg is None or not rows:
        ctx.target(name, None, "ripgrep is not installed" if ctx.rg is None else "no 16-keyword common query ran",
                   f"≤ {COMMON16_GOAL}")
        return
    worst_scope, worst = max(rows, key=lambda sq: sq[1]["ratio_hub_warm_to_rg"])
    ctx.target(name, all(q["ratio_hub_warm_to_rg"] <= COMMON16_GOAL for _, q in rows),
               "ratios " + ", ".join(f"{s}/{q['query']} {q['ratio_hub_warm_to_rg']:.2f}" for s, q in rows)
               + f"; worst {worst_scope}/{worst['query']}: Hub {worst['stats']['hub_warm']['p50']:.1f} ms vs rg "
               f"{worst['stats']['rg']['p50']:.1f} ms", f"≤ {COMMON16_GOAL}")


def _disk_cold_target(ctx: Ctx, scopes: list[dict[str, Any]]) -> None:
    """Target: on a dropped page cache, per scope, the median of the queries' Hub p50 over the median of
    their rg p50 ≤ :data:`DISK_COLD_GOAL` (the disk-cold table; SKIP when it was not measured)."""
    name = f"a. disk-cold Hub ≤ {DISK_COLD_GOAL} × rg"
    figures, ratios = [], []
    for sc in scopes:
        rows = [q for q in sc["queries"] if q["stats"].get("hub_disk_cold") and q["stats"].get("rg_disk_cold")]
        if not rows:
            continue
        hub = statistics.median(q["stats"]["hub_disk_cold"]["p50"] for q in rows)
        rg = statistics.median(q["stats"]["rg_disk_cold"]["p50"] for q in rows)
        incomplete = sum(1 for q in rows for i in q["incomplete"] if i.startswith("Hub disk-cold"))
        ratios.append(hub / rg)
        figures.append(f"{sc['scope']}: Hub {hub:.0f} ms vs rg {rg:.0f} ms = {hub / rg:.2f} (median p50 of "
                       f"{len(rows)} queries; {incomplete} incomplete)")
    if not ratios:
        ctx.target(name, None, "not measured (needs root and ripgrep to drop the page cache)", f"≤ {DISK_COLD_GOAL}")
        return
    ctx.target(name, all(r <= DISK_COLD_GOAL for r in ratios), "; ".join(figures), f"≤ {DISK_COLD_GOAL}")


def main(argv: list[str] | None = None) -> int:
    # The CLI and the Hubs run as a user's would, with bytecode caches: with PYTHONDONTWRITEBYTECODE set (a CI
    # machine's setting) a fresh clone's every `amux` process compiled this repository's modules anew, and the
    # CLI rows of section a measured that (290-360 ms a search instead of 160).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run of a few seconds on small synthetic scopes")
    ap.add_argument("--out", type=Path, help="results folder (default bench/results, or bench/results/tmp/quick "
                                              "with --quick)")
    ap.add_argument("--tmp", type=Path, help="where scopes and Hub homes are made (default: the system temp dir)")
    ap.add_argument("--synthetic", action="store_true",
                    help="use synthetic scopes even when ../shared/corpus exists")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a performance target FAILs")
    ap.add_argument("--keep", action="store_true", help="keep the temporary scopes and Hub homes")
    ap.add_argument("--only", metavar="SECTIONS", type=_sections,
                    help="run only these sections, comma-separated letters (e.g. a,b); the others are left out")
    ap.add_argument("--render", type=Path, metavar="JSON",
                    help="only rewrite the .md and .png of an earlier run's JSON")
    args = ap.parse_args(argv)
    if args.render:
        return _render(args.render)
    quick = args.quick
    out = args.out or (REPO / "bench" / "results" / ("tmp/quick" if quick else ""))
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="amux-bench-", dir=args.tmp))
    use_corpus = data.corpus_available() and not quick and not args.synthetic
    ctx = Ctx(quick=quick, tmp=tmp, out=out, rg=ripgrep(), use_corpus=use_corpus)
    if ctx.rg is None:
        ctx.notes.append("ripgrep (rg) is not installed: reference columns for rg are empty and the rg targets SKIP "
                         "(.ci/run and the README install it)")
    if not data.corpus_available():
        ctx.notes.append(f"../shared/corpus is absent ({CORPUS}): synthetic scopes only")
    results: dict[str, Any] = {"quick": quick, "command": "python -m bench" + (" --quick" if quick else ""),
                               "machine": machine(tmp, ctx.rg), "code": _code_state()}
    broken: list[str] = []

    def section(name: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception:  # noqa: BLE001 - one broken section must not hide the others' figures
            broken.append(f"{name}: {traceback.format_exc()}")
            ctx.log(f"section {name} BROKE:\n{traceback.format_exc()}")
            return None

    def wanted(name: str) -> bool:
        return args.only is None or name in args.only

    t0 = time.monotonic()
    try:
        # Scopes.
        synth = data.Synth(seed=5)
        if use_corpus:
            scope = data.corpus_scope(data.corpus_docs())
            source = f"../shared/corpus ({len(scope)}-file scope, {sum(map(len, scope.values())) / data.MIB:.2f} MiB)"
            scopes = [("corpus 1,024 files", scope), ("synthetic 1,024 × 8 KiB", synth.scope(1024, 8192))]
        else:
            scope = synth.scope(128 if quick else 1024, 8192)
            source = "synthetic (quick)" if quick else "synthetic (corpus absent)"
            scopes = [(f"synthetic {len(scope)} × 8 KiB", scope)]
        results["data_source"] = source
        # a
        a_rows = []
        for i, (label, docs) in enumerate(scopes if wanted("a") else []):
            queries = data.derive_queries(docs)
            if quick:
                keep = ("en-common-4", "zh-rare-1", "en-rare-16", "zh-common-4", "en-common-16")
                queries = [q for q in queries if q.name in keep] or queries[:3]
                reps, cold, cli, disk = 2, 1, 1, 0
            elif i == 0:
                reps, cold, cli, disk = 25, 10, 25, 3
            else:
                reps, cold, cli, disk = 12, 5, 12, 0
            run_label = label.split(" ")[0] + "-" + str(len(docs))
            row = section(f"a/{label}",
                          functools.partial(latency.run, ctx, run_label, docs, queries, reps, cold, cli, disk))
            if row is not None:
                row["scope"] = label
                a_rows.append(row)
        results["a"] = a_rows
        if wanted("a"):
            results["cli_breakdown"] = section("cli", lambda: latency.cli_breakdown(ctx, 3 if quick else 15))
        if a_rows:
            _a_targets(ctx, a_rows)
        later: list[tuple[str, Callable[[], Any]]] = [
            ("b", lambda: budget.run(ctx)),
            ("c", lambda: ops.run(ctx, scope if len(scope) >= 1024 else None)),
            ("d", lambda: growth.run(ctx, scope if use_corpus else None)),
            ("e", lambda: footprint.run(ctx)),
            ("f", lambda: startup.run(ctx, 5 if quick else 40)),
            ("h", lambda: history.run(ctx)),
            ("s", lambda: secrets.run(ctx)),
            ("r", lambda: review.run(ctx)),
            ("m", lambda: mcp_http.run(ctx)),
            ("t", lambda: {**teams.run(ctx), "reach": reach.run(ctx)}),
            ("k", lambda: health.run(ctx)),
            ("v", lambda: citations.run(ctx)),
        ]
        for name, fn in later:
            results[name] = section(name, fn) if wanted(name) else None
        if args.only is not None:
            ctx.notes.append(f"only sections {', '.join(sorted(args.only))} were run (--only)")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    results["wall_seconds"] = round(time.monotonic() - t0, 1)
    results["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results["targets"] = ctx.targets
    results["problems"] = ctx.problems
    results["checked_results"] = ctx.checked
    results["notes"] = ctx.notes + [f"section broke: {b.splitlines()[0]}" for b in broken]
    results["broken"] = broken
    stem = "bench-quick" if quick else "bench"
    if all(results.get(k) for k in ("a", "d")):
        note = report.plot(results, out / f"{stem}.png")
    else:
        note = "no plot: a section broke"
    if note:
        results["notes"].append(note)
    else:
        results["plot"] = f"{stem}.png"
    report.write_json(results, out / f"{stem}.json")
    (out / "machine.json").write_text(json.dumps(results["machine"], indent=1) + "\n")
    md = report.markdown(results) if not broken else _broken_markdown(results)
    (out / f"{stem}.md").write_text(md, encoding="utf-8")
    print(md)
    print(f"\nresults: {out / (stem + '.md')}, {out / (stem + '.json')}"
          + (f", {out / results['plot']}" if results.get("plot") else ""), file=sys.stderr)
    failed = [t for t in ctx.targets if t["pass"] is False]
    if broken or ctx.problems:
        return 1
    return 1 if (args.strict and failed) else 0


def _render(path: Path) -> int:
    results = json.loads(path.read_text(encoding="utf-8"))
    stem = path.stem
    if results.get("plot"):
        report.plot(results, path.parent / results["plot"])
    md = report.markdown(results) if not results.get("broken") else _broken_markdown(results)
    path.with_suffix(".md").write_text(md, encoding="utf-8")
    print(md)
    plot = f" and {path.parent / results['plot']}" if results.get("plot") else ""
    print(f"\nrewrote {path.with_suffix('.md')}{plot} from {stem}.json", file=sys.stderr)
    return 0


def _broken_markdown(results: dict[str, Any]) -> str:
    lines = ["# amux-memory bench: a section BROKE\n"]
    for t in results["targets"]:
        lines.append(f"{verdict(t['pass'])}  {t['target']}: {t['figure']}")
    lines += ["", *[f"```\n{b}\n```" for b in results["broken"]]]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
