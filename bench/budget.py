"""(b) Scan budget: scopes past 1,024 files and past 8 MiB through a real Hub, and a deliberately
slowed read path in an in-process MemoryMethods: ``incomplete`` each time, and when the scan stopped."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import trio

from amux_memory.hub.access.config import HubConfig
from amux_memory.hub.access.identity import GLOBAL
from amux_memory.hub.methods.memory import MemoryMethods
from amux_memory.hub.methods.routes import call_in_process
from amux_memory.hub.methods.search import read_file_nofollow
from amux_memory.protocol.limits import LIMITS
from bench.context import Ctx
from bench.data import MIB, Synth, check_result, literal_rank, walk_order, write_scope
from bench.util import HubProc, ms, summary

STOP_GOAL_MS = LIMITS.scan_budget_seconds * 1000 + 10


def run(ctx: Ctx) -> dict[str, Any]:
    synth = Synth(seed=11)
    over_files = 1100 if not ctx.quick else 1030
    small = synth.scope(over_files, 1024, prefix="files/")
    big_n = 1024 if not ctx.quick else 600
    big = synth.scope(big_n, 16 * 1024, prefix="bytes/")  # 16 MiB: the whole scope quota
    out: dict[str, Any] = {"hub": [], "slow_reader": []}
    hub = HubProc.create(ctx.tmp / "b-budget")
    write_scope(hub.scope_dir, small | big)
    word = "zq"  # every synthetic English rare word starts with it: a common literal
    reps = 3 if ctx.quick else 7
    with hub, hub.client() as client:
        for label, prefix, docs, reason in (
            (f"{over_files} files (> 1,024)", "files/", small, "files"),
            (f"{big_n} files, {sum(map(len, big.values())) / MIB:.1f} MiB (> 8 MiB)", "bytes/", big, "bytes"),
        ):
            elapsed: list[float] = []
            seen: list[dict[str, Any]] = []
            for _ in range(reps):
                res = client.call("search", {"query": word, "path_prefix": prefix, "limit": 20})
                elapsed.append(res["elapsed_ms"])
                seen.append({k: res[k] for k in ("incomplete", "incomplete_reasons", "scanned_files", "scanned_bytes")})
                if not res["incomplete"] or reason not in res["incomplete_reasons"]:
                    ctx.problem(f"b. {label}: expected incomplete with reason {reason!r}, got "
                                f"{res['incomplete']} {res['incomplete_reasons']}")
                if res["scanned_files"] > LIMITS.scan_max_files or res["scanned_bytes"] > LIMITS.scan_max_bytes:
                    ctx.problem(f"b. {label}: scanned past the budget: {res['scanned_files']} files, "
                                f"{res['scanned_bytes']} bytes")
                if reason == "files":
                    problems = check_result(res, [], 20, docs, (word,))
                    if problems:
                        ctx.problem(f"b. {label}: " + "; ".join(problems))
                else:
                    # Files are all the same size: the scan takes them in walk order until 8 MiB.
                    kept = walk_order(docs)[: res["scanned_files"]]
                    expected = literal_rank({p: docs[p] for p in kept}, (word,))
                    if res["candidates"] != len(expected):
                        ctx.problem(f"b. {label}: candidates {res['candidates']} != {len(expected)} "
                                    "in the scanned files")
            last = seen[-1]
            row = {"case": label, "incomplete": all(s["incomplete"] for s in seen),
                   "reasons": last["incomplete_reasons"], "scanned_files": last["scanned_files"],
                   "scanned_bytes": last["scanned_bytes"], "elapsed_ms": summary(elapsed)}
            out["hub"].append(row)
            ctx.log(f"b. {label}: incomplete={row['incomplete']} {row['reasons']} scanned {row['scanned_files']} files "
                    f"{row['scanned_bytes']} B in {row['elapsed_ms']['p50']} ms")
        ctx.target("b. over 1,024 files / 8 MiB → incomplete",
                   all(r["incomplete"] for r in out["hub"]) and not any("b. " in p for p in ctx.problems),
                   "; ".join(f"{r['case']}: incomplete={r['incomplete']} {r['reasons']}" for r in out["hub"]),
                   "incomplete: true with reason files / bytes")
    # A slowed read path: an in-process MemoryMethods whose reader sleeps before each file.
    root_home = ctx.tmp / "b-slow"
    scope = root_home / "memory" / "global"
    files = 1024 if not ctx.quick else 256
    write_scope(scope, synth.scope(files, 2048))
    delays = (0.001, 0.005, 0.020, 0.050) if not ctx.quick else (0.005, 0.02)  # quick: 256 files the pool cannot finish
    worst = 0.0
    all_incomplete = True
    completed = 0
    for delay in delays:
        elapsed, walls, scanned = [], [], []
        for _ in range(3 if ctx.quick else 5):
            res, wall = trio.run(functools.partial(_slow_search, root_home, delay, "zq"))
            elapsed.append(res["elapsed_ms"])
            walls.append(wall)
            scanned.append(res["scanned_files"])
            if not res["incomplete"] and res["scanned_files"] == files:
                completed += 1  # the read pool overlapped enough slow reads to take every file in time
            elif not res["incomplete"] or "time" not in res["incomplete_reasons"]:
                all_incomplete = False
                ctx.problem(f"b. slow reader {delay * 1000:g} ms/file: not incomplete by time: "
                            f"{res['incomplete_reasons']}")
        row = {"delay_ms_per_file": delay * 1000, "elapsed_ms": summary(elapsed), "call_wall_ms": summary(walls),
               "scanned_files": summary([float(s) for s in scanned]), "files": files}
        worst = max(worst, max(elapsed))
        out["slow_reader"].append(row)
        ctx.log(f"b. slow reader {delay * 1000:g} ms/file: stopped at {row['elapsed_ms']['max']} ms (max), "
                f"{row['scanned_files']['p50']:.0f}/{files} files")
    out["stop_goal_ms"] = STOP_GOAL_MS
    ctx.target("b. slowed read path stops in time", all_incomplete and worst <= STOP_GOAL_MS,
               (f"every run incomplete (time) or complete ({completed} complete: overlapped reads took every "
                f"file); " if completed else "incomplete (time) every run; ")
               + f"latest stop {worst:.1f} ms (Hub-reported elapsed_ms, "
               f"readers {', '.join(f'{d * 1000:g}' for d in delays)} ms/file)", f"≤ {STOP_GOAL_MS:.0f} ms")
    return out


async def _slow_search(home: Path, delay: float, word: str) -> tuple[dict[str, Any], float]:
    def slow_reader(abspath: str) -> bytes:
        time.sleep(delay)
        return read_file_nofollow(abspath)

    config = HubConfig(home=home, memory_enabled=True, isolation="off", socket_path=home / "hub.sock",
                       socket_mode=0o600, socket_group="")
    service = MemoryMethods(config, LIMITS, slow_reader)  # fresh: nothing cached
    t0 = time.perf_counter()
    res = await call_in_process(service, GLOBAL, "search", {"query": word, "limit": 20})
    return res, ms(time.perf_counter() - t0)
