"""(c) Operations over the Unix socket: get/upsert/forget latency, upsert throughput beside a raw
durable-write loop on the same disk, and throughput/p99 with 1, 8, 64 and 256 concurrent clients."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from amux_memory.hub.access.config import set_value
from amux_memory.hub.access.registry import Registry, modify
from bench.context import Ctx
from bench.data import write_scope
from bench.util import REPO, HubProc, ms, summary

RAW_GOAL = 0.5
"""Upsert throughput with history on, as a fraction of the raw durable-write loop (the least such a write needs
is that loop plus one synced history append)."""
SCOPES_GOAL = 1.5
"""Writers in separate scopes (isolation ``user``): 8 clients' throughput as a multiple of one client's."""
SCOPED_WRITERS = 8

DOC = b"# Preferences\n\n" + b"- prefer small, reviewed changes; run the tests before committing\n" * 30  # ~2 KiB


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def raw_loop(directory: Path, content: bytes, n: int) -> list[float]:
    """The floor for a durable replace: write a temp file, fsync it, rename it over the target, fsync the directory."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    times = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            fd = os.open(".raw.tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=dfd)
            try:
                view = memoryview(content)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(".raw.tmp", "raw.md", src_dir_fd=dfd, dst_dir_fd=dfd)
            os.fsync(dfd)
            times.append(ms(time.perf_counter() - t0))
    finally:
        os.close(dfd)
    return times


def _variant(i: int) -> bytes:
    return DOC + f"<!-- edit {i} -->\n".encode()


def run(ctx: Ctx, full_scope: dict[str, bytes] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"latency": {}, "throughput": [], "concurrency": []}
    n_get = 300 if ctx.quick else 3000
    n_write = 40 if ctx.quick else 400
    for label, docs in (("small scope (1 doc)", {}), ("full scope (1,024 docs)", full_scope)):
        if docs is None:
            continue
        hub = HubProc.create(ctx.tmp / f"c-{len(docs)}")
        # Beside the small scope, a Hub with history off, its upserts in the same alternating blocks.
        off = None if docs else HubProc.create(ctx.tmp / "c-off")
        if off is not None:
            set_value(off.home, "memory.history", "false")
        # The document under test is MEMORY.md, plus one created and forgotten in turn: a full scope
        # holds 1,022 others (the quota is 1,024 documents).
        others = dict(list(docs.items())[:1022])
        write_scope(hub.scope_dir, others)
        rawdir = hub.home / "memory" / "raw-loop"  # same file system, next to the scope
        rawdir.mkdir(mode=0o700)
        with hub, hub.client() as c, contextlib.ExitStack() as stack:
            rev = c.call("upsert", {"path": "MEMORY.md", "content": DOC, "expected_revision": "absent"})["revision"]
            c_off = None
            if off is not None:
                stack.enter_context(off)
                c_off = stack.enter_context(off.client())
                rev_off = c_off.call("upsert", {"path": "MEMORY.md", "content": DOC,
                                                "expected_revision": "absent"})["revision"]
            offs: list[float] = []
            off_time = 0.0
            # get
            gets = []
            for _ in range(n_get):
                t0 = time.perf_counter()
                r = c.call("get", {"path": "MEMORY.md"})
                gets.append(ms(time.perf_counter() - t0))
            if r["revision"] != rev:
                ctx.problem("c. get returned a different revision")
            # upsert, alternating blocks with the raw loop so both see the same disk state
            ups: list[float] = []
            raws: list[float] = []
            block = 10 if ctx.quick else 25
            up_time = raw_time = 0.0
            i = 0
            while len(ups) < n_write:
                t_block = time.perf_counter()
                for _ in range(block):
                    i += 1
                    content = _variant(i)
                    t0 = time.perf_counter()
                    r = c.call("upsert", {"path": "MEMORY.md", "content": content, "expected_revision": rev})
                    ups.append(ms(time.perf_counter() - t0))
                    rev = r["revision"]
                    if rev != _sha(content):
                        ctx.problem("c. upsert returned a wrong revision")
                up_time += time.perf_counter() - t_block
                if c_off is not None:
                    t_block = time.perf_counter()
                    for k in range(block):
                        t0 = time.perf_counter()
                        rev_off = c_off.call("upsert", {"path": "MEMORY.md", "content": _variant(i - k),
                                                        "expected_revision": rev_off})["revision"]
                        offs.append(ms(time.perf_counter() - t0))
                    off_time += time.perf_counter() - t_block
                t_block = time.perf_counter()
                raws += raw_loop(rawdir, _variant(i), block)
                raw_time += time.perf_counter() - t_block
            # forget: create a document, then time its CAS delete
            forgets = []
            for j in range(n_write // 2):
                content = _variant(-j)
                r = c.call("upsert", {"path": f"tmp/f{j}.md", "content": content, "expected_revision": "absent"})
                t0 = time.perf_counter()
                f = c.call("forget", {"path": f"tmp/f{j}.md", "expected_revision": r["revision"]})
                forgets.append(ms(time.perf_counter() - t0))
                if not f["deleted"]:
                    ctx.problem("c. forget did not delete")
            up_tp = len(ups) / up_time
            raw_tp = len(raws) / raw_time
            out["latency"][label] = {"get": summary(gets), "upsert": summary(ups), "forget": summary(forgets),
                                     "raw_write_fsync_rename_fsync": summary(raws)}
            row: dict[str, Any] = {"scope": label, "upsert_per_s": round(up_tp, 1),
                                   "raw_loop_per_s": round(raw_tp, 1), "ratio": round(up_tp / raw_tp, 3),
                                   "doc_bytes": len(DOC)}
            if offs:
                off_tp = len(offs) / off_time
                row.update({"history_off_per_s": round(off_tp, 1), "history_off_ratio": round(off_tp / raw_tp, 3)})
                out["latency"][label]["upsert_history_off"] = summary(offs)
            out["throughput"].append(row)
            ctx.log(f"c. {label}: get p50 {summary(gets)['p50']} ms p99 {summary(gets)['p99']} ms; upsert p50 "
                    f"{summary(ups)['p50']} ms ({up_tp:.0f}/s vs raw {raw_tp:.0f}/s = {up_tp / raw_tp:.2f}); "
                    f"forget p50 {summary(forgets)['p50']} ms")
            if not docs:  # concurrent writers on the small scope (each writes its own document)
                out["concurrency"] += _concurrency(ctx, hub, [("upsert", {"content": DOC.decode()})])
            if docs is full_scope or full_scope is None:
                reads: list[tuple[str, dict[str, Any]]] = [("get", {"path": "MEMORY.md"})]
                if not ctx.quick:
                    reads.append(("search", {"query": "decision context", "limit": 5}))
                out["concurrency"] = _concurrency(ctx, hub, reads) + out["concurrency"]
    ctx.target("c. get p50 ≤ 1 ms", all(v["get"]["p50"] <= 1.0 for v in out["latency"].values()),
               ", ".join(f"{k}: {v['get']['p50']:.3f} ms" for k, v in out["latency"].items()), "≤ 1 ms")
    worst = min(out["throughput"], key=lambda r: r["ratio"])

    def figure(r: dict[str, Any]) -> str:
        text = f"{r['scope']}: {r['upsert_per_s']:.0f}/s vs {r['raw_loop_per_s']:.0f}/s = {r['ratio']:.2f}"
        if "history_off_per_s" in r:
            text += f" (history off {r['history_off_per_s']:.0f}/s = {r['history_off_ratio']:.2f})"
        return text

    ctx.target(f"c. upsert with history on ≥ {RAW_GOAL} × raw fsync loop", worst["ratio"] >= RAW_GOAL,
               "; ".join(figure(r) for r in out["throughput"]), f"≥ {RAW_GOAL}")
    out["scoped_writers"] = scoped = _scoped_writers(ctx)
    ctx.target(f"c. {SCOPED_WRITERS} writers in {SCOPED_WRITERS} principals' scopes (isolation user) "
               f"≥ {SCOPES_GOAL} × one writer", scoped["ratio"] >= SCOPES_GOAL,
               f"{scoped['many_per_s']:.0f}/s vs {scoped['one_per_s']:.0f}/s = {scoped['ratio']:.2f} (p50 "
               f"{scoped['many_p50_ms']:.2f} vs {scoped['one_p50_ms']:.2f} ms)", f"≥ {SCOPES_GOAL}")
    return out


def _scoped_writers(ctx: Ctx) -> dict[str, Any]:
    """Upserts by 8 principals, each in its own scope (isolation ``user``, a token each), beside one of them alone.

    The two loads take turns twice (1, 8, 1, 8 clients; separate load-generator processes) so a burst of
    load from elsewhere hits both alike; throughputs are the sums over the turns.  Returns ``{one_per_s,
    many_per_s, ratio, one_p50_ms, many_p50_ms, runs}``.
    """
    hub = HubProc.create(ctx.tmp / "c-scopes", isolation="user")
    tokens: list[str] = []
    for k in range(SCOPED_WRITERS):
        def add(r: Registry, now: float, k: int = k) -> tuple[Registry, bool]:
            return r.add_principal(f"writer{k}", "user", now)

        modify(hub.home, add)

        def issue(r: Registry, now: float, k: int = k) -> tuple[Registry, str]:
            updated, text, _ = r.issue_token(f"writer{k}", now, None, None)
            return updated, text

        tokens.append(modify(hub.home, issue))
    token_file = hub.home.parent / "tokens.json"
    token_file.write_text(json.dumps(tokens))
    seconds = 0.5 if ctx.quick else 3.0
    runs: list[dict[str, Any]] = []
    with hub:
        for n in (1, SCOPED_WRITERS, 1, SCOPED_WRITERS):
            row = _loadgen(hub, n, seconds, "upsert", {"content": DOC.decode()}, 0.3, token_file)
            if row["errors"]:
                ctx.problem(f"c. {n} writers in their own scopes: errors {row['errors']}")
            runs.append(row)
            ctx.log(f"c. {n} writers, own scopes: {row['throughput_per_s']:.0f}/s p50 {row['p50_ms']} ms")
    scopes = hub.home / "memory" / "users"
    if len([p for p in scopes.iterdir() if p.is_dir()]) != SCOPED_WRITERS:
        ctx.problem(f"c. writers in their own scopes: not {SCOPED_WRITERS} scope folders under {scopes}")
    one = [r for r in runs if r["clients"] == 1]
    many = [r for r in runs if r["clients"] == SCOPED_WRITERS]

    def rate(rows: list[dict[str, Any]]) -> float:
        return float(sum(r["completed"] for r in rows)) / float(sum(r["seconds"] for r in rows))

    return {"one_per_s": round(rate(one), 1), "many_per_s": round(rate(many), 1),
            "ratio": round(rate(many) / rate(one), 3), "one_p50_ms": one[-1]["p50_ms"],
            "many_p50_ms": many[-1]["p50_ms"], "runs": runs}


def _loadgen(hub: HubProc, n: int, seconds: float, method: str, params: dict[str, Any], warmup: float,
             tokens: Path | None = None) -> dict[str, Any]:
    """One run of ``bench.loadgen`` (its own process) against ``hub``: its JSON row."""
    argv = [sys.executable, "-m", "bench.loadgen", str(hub.socket), "--clients", str(n), "--seconds", str(seconds),
            "--method", method, "--params", json.dumps(params), "--warmup", str(warmup)]
    if tokens is not None:
        argv += ["--tokens", str(tokens)]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120 + seconds)
    if proc.returncode != 0:
        raise RuntimeError(f"loadgen failed: {proc.stderr[-2000:]}")
    row: dict[str, Any] = json.loads(proc.stdout)
    return row


def _concurrency(ctx: Ctx, hub: HubProc, ops: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    rows = []
    seconds = 0.5 if ctx.quick else 3.0
    levels = (1, 8) if ctx.quick else (1, 8, 64, 256)
    for method, params in ops:
        for n in levels:
            row = _loadgen(hub, n, seconds, method, params, 1.0 if method == "search" else 0.3)
            if row["errors"]:
                ctx.problem(f"c. {n} concurrent {method} clients: errors {row['errors']}")
            rows.append(row)
            ctx.log(f"c. {n:3d} clients {method}: {row['throughput_per_s']:.0f}/s p50 {row['p50_ms']} ms "
                    f"p99 {row['p99_ms']} ms errors {row['errors']}")
    return rows
