"""(a) Search latency: Hub-side (warm and cold), persistent-socket round trip and whole CLI process,
each beside ``rg -F -i -l`` and a one-shot Python literal scan on the same files, alternating."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.context import Ctx
from bench.data import Query, backdate, check_result, literal_rank, python_scan, read_tree, write_scope
from bench.util import HubProc, amux_argv, ms, rss_kib, summary

LIMIT = 20


def rg_argv(rg: str, words: tuple[str, ...], root: Path) -> list[str]:
    argv = [rg, "-F", "-i", "-l"]
    for w in words:
        argv += ["-e", w]
    return argv + [str(root)]


def time_rg(rg: str, words: tuple[str, ...], root: Path) -> tuple[float, int]:
    """Whole-process wall time of ripgrep (ms) and how many files it listed."""
    t0 = time.perf_counter()
    proc = subprocess.run(rg_argv(rg, words, root), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    elapsed = ms(time.perf_counter() - t0)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"rg failed with {proc.returncode}")
    return elapsed, proc.stdout.count(b"\n")


def time_cli(hub: HubProc, words: tuple[str, ...]) -> tuple[float, dict[str, Any]]:
    """Whole-process wall time (ms) of ``amux memory search --limit 20 -- WORDS`` and its JSON."""
    t0 = time.perf_counter()
    proc = subprocess.run([*amux_argv(), "memory", "search", "--limit", str(LIMIT), "--", *words],
                          env=hub.env, capture_output=True, stdin=subprocess.DEVNULL)
    elapsed = ms(time.perf_counter() - t0)
    if proc.returncode != 0:
        raise RuntimeError(f"amux memory search failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}")
    return elapsed, json.loads(proc.stdout)


def drop_page_cache() -> bool:
    """Drop the OS page cache (root only); False when not allowed."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
        return True
    except OSError:
        return False


def run(ctx: Ctx, label: str, docs: dict[str, bytes], queries: list[Query], reps: int, cold_reps: int,
        cli_reps: int, disk_cold_reps: int = 0) -> dict[str, Any]:
    """Measure every query on one scope served by a fresh Hub; returns per-query figures."""
    base = ctx.tmp / f"a-{label}"
    hub = HubProc.create(base)
    root = hub.scope_dir
    write_scope(root, docs)
    assert read_tree(root).keys() == docs.keys()
    out: dict[str, Any] = {"scope": label, "files": len(docs), "bytes": sum(map(len, docs.values())),
                           "reps": reps, "cold_reps": cold_reps, "cli_reps": cli_reps, "queries": []}
    ctx.log(f"a. {label}: {len(docs)} files, {out['bytes'] / 2**20:.2f} MiB, {len(queries)} queries")
    with hub:
        with hub.client() as client:
            # The very first search after the Hub started: nothing cached, OS page cache warm.
            first = queries[0]
            t0 = time.perf_counter()
            res = client.call("search", {"query": " ".join(first.words), "limit": LIMIT})
            out["first_after_start"] = {"query": first.name, "elapsed_ms": res["elapsed_ms"],
                                        "round_trip_ms": round(ms(time.perf_counter() - t0), 3),
                                        "incomplete": res["incomplete"]}
            inc: list[str] = []
            _check(ctx, label, first, res, literal_rank(docs, first.words), "Hub first search", docs, inc)
            out["first_after_start"]["incomplete_detail"] = inc
            for q in queries:
                out["queries"].append(_one_query(ctx, label, hub, client, root, docs, q, reps, cold_reps,
                                                 cli_reps, disk_cold_reps if q.name.endswith("-4") else 0))
        out["hub_pid_rss_kib_after"] = rss_kib(hub.pid).get("VmRSS", 0)
    return out


def _check(ctx: Ctx, label: str, q: Query, got: dict[str, Any], expected: list[tuple[str, int]], who: str,
           docs: dict[str, bytes] | None = None, incomplete: list[str] | None = None) -> bool:
    """Record a difference from the literal scan as a problem; an ``incomplete`` result is checked
    against the files it scanned and noted in ``incomplete`` (it is the budget at work, not an error)."""
    if got["incomplete"] and incomplete is not None:
        incomplete.append(f"{who}: {got['incomplete_reasons']} after {got['scanned_files']} files, "
                          f"{got.get('elapsed_ms')} ms")
    ctx.checked += 1
    problems = check_result(got, expected, LIMIT, docs, q.words)
    if problems:
        ctx.problem(f"{label} {q.name} {who}: " + "; ".join(problems))
        return False
    return True


def _one_query(ctx: Ctx, label: str, hub: HubProc, client: Any, root: Path, docs: dict[str, bytes], q: Query,
               reps: int, cold_reps: int, cli_reps: int, disk_cold_reps: int) -> dict[str, Any]:
    params = {"query": " ".join(q.words), "limit": LIMIT}
    expected = python_scan(root, q.words)
    if expected != literal_rank(docs, q.words):
        ctx.problem(f"{label} {q.name}: the files on disk differ from the scope written")
    t: dict[str, list[float]] = {k: [] for k in ("hub_warm", "rtt_warm", "hub_cold", "rtt_cold", "cli", "rg", "python",
                                                 "hub_disk_cold", "rg_disk_cold")}
    checked = ok = 0
    incomplete: list[str] = []
    rg_files: set[int] = set()

    def hub_search(kind: str) -> None:
        """One search on the open connection: ``hub_<kind>`` gets its elapsed_ms, ``rtt_<kind>`` its round trip."""
        nonlocal checked, ok
        t0 = time.perf_counter()
        res = client.call("search", params)
        t[f"rtt_{kind}"].append(ms(time.perf_counter() - t0))
        t[f"hub_{kind}"].append(res["elapsed_ms"])
        checked += 1
        ok += _check(ctx, label, q, res, expected, f"Hub {kind}", docs, incomplete)

    client.call("search", params)  # warm this query's path once
    stamp = time.time() - 7200
    for i in range(reps):
        steps = ["rg", "hub", "python", "cli"]
        steps = steps[i % 4:] + steps[: i % 4]  # rotate so no tool always runs right after another
        for step in steps:
            if step == "rg" and ctx.rg:
                e, n = time_rg(ctx.rg, q.words, root)
                t["rg"].append(e)
                rg_files.add(n)
            elif step == "python" and (i % 2 == 0 or ctx.quick):
                t0 = time.perf_counter()
                ref = python_scan(root, q.words)
                t["python"].append(ms(time.perf_counter() - t0))
                if ref != expected:
                    ctx.problem(f"{label} {q.name}: the Python scan is not deterministic")
            elif step == "cli" and i < cli_reps:
                e, res = time_cli(hub, q.words)
                t["cli"].append(e)
                checked += 1
                ok += _check(ctx, label, q, res, expected, "CLI", docs, incomplete)
            elif step == "hub":
                hub_search("warm")
                if i < cold_reps:
                    # Cold: every file's mtime changes, so the Hub must re-read and re-fold all of them
                    # (its content cache is invalid; the OS page cache stays warm).
                    stamp -= 1
                    backdate(root, stamp, files_only=True)
                    hub_search("cold")
    for _ in range(disk_cold_reps):
        # Disk-cold: the page cache dropped too (first search after a reboot), for Hub and rg in turn.
        stamp -= 1
        backdate(root, stamp, files_only=True)
        if not drop_page_cache():
            ctx.notes.append("disk-cold rows skipped: cannot write /proc/sys/vm/drop_caches (needs root)")
            break
        res = client.call("search", params)
        t["hub_disk_cold"].append(res["elapsed_ms"])
        checked += 1
        ok += _check(ctx, label, q, res, expected, "Hub disk-cold", docs, incomplete)
        if ctx.rg and drop_page_cache():
            t["rg_disk_cold"].append(time_rg(ctx.rg, q.words, root)[0])
    stats = {k: summary(v) for k, v in t.items() if v}
    rg50 = stats.get("rg", {}).get("p50")

    def ratio(key: str) -> float | None:
        v = stats.get(key, {}).get("p50")
        return round(v / rg50, 3) if v is not None and rg50 else None

    row = {
        "query": q.name, "lang": q.lang, "freq": q.freq, "keywords": len(q.words), "words": list(q.words),
        "candidates": len(expected), "rg_files": sorted(rg_files), "stats": stats,
        "ratio_hub_warm_to_rg": ratio("hub_warm"), "ratio_rtt_warm_to_rg": ratio("rtt_warm"),
        "ratio_hub_cold_to_rg": ratio("hub_cold"), "ratio_cli_to_rg": ratio("cli"),
        "ratio_python_to_rg": ratio("python"), "checked": checked, "equal_to_literal_scan": ok,
        "incomplete": incomplete,
    }
    ctx.log(f"   {q.name:16s} cand={len(expected):4d} hub={stats['hub_warm']['p50']:.2f}ms "
            f"rtt={stats['rtt_warm']['p50']:.2f}ms cold={stats.get('hub_cold', {}).get('p50')}ms "
            f"cli={stats.get('cli', {}).get('p50')}ms rg={rg50}ms py={stats.get('python', {}).get('p50')}ms "
            f"ok {ok}/{checked}")
    return row


def cli_breakdown(ctx: Ctx, reps: int) -> dict[str, Any]:
    """Where the CLI's wall time goes: interpreter start, importing the CLI, the whole search command."""
    importing = "import amux_memory.tools.cli.app"
    out: dict[str, list[float]] = {"python -c pass": [], f"python -c '{importing}'": []}
    for _ in range(reps):
        for label, code in (("python -c pass", "pass"), (f"python -c '{importing}'", importing)):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            out[label].append(ms(time.perf_counter() - t0))
    return {k: summary(v) for k, v in out.items()}
