"""(h) Memory history (DESIGN.md §15): upsert throughput with history on beside off in the same run, ``history``
and ``log`` latency on a scope with 5,000 recorded changes, the store's size after 1,000 small edits of a 4 KiB
document, and the raw cost of the append options the design chose between."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

from amux_memory.hub.access.config import set_value
from bench.context import Ctx
from bench.util import HubProc, alternating_upserts, ms, summary

DOC = b"# Preferences\n\n" + b"- prefer small, reviewed changes; run the tests before committing\n" * 30  # ~2 KiB
THROUGHPUT_GOAL = 0.8
LATENCY_GOAL_MS = 5.0
SIZE_GOAL_BYTES = 1 << 20


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hub(ctx: Ctx, name: str, history: bool) -> HubProc:
    hub = HubProc.create(ctx.tmp / name)
    set_value(hub.home, "memory.history", "true" if history else "false")
    return hub


def _throughput(ctx: Ctx) -> dict[str, Any]:
    """Alternate blocks of upserts between a Hub with history and one without, on the same disk."""
    n = 40 if ctx.quick else 1000
    block = 10 if ctx.quick else 25
    on, off = _hub(ctx, "h-on", True), _hub(ctx, "h-off", False)
    with on, off, on.client() as c_on, off.client() as c_off:
        figures = alternating_upserts(c_on, c_off, "MEMORY.md", DOC, n, block)
        size = (on.home / "history" / "global" / "versions.log").stat().st_size
    return {"n": n, **figures, "segment_bytes": size}


def _latency(ctx: Ctx) -> dict[str, Any]:
    """``history`` (50 versions) and ``log`` (5,000 changes) p50 after a restart; the first call scans the segment."""
    docs = 2 if ctx.quick else 100
    per_doc = 50
    hub = _hub(ctx, "h-lat", True)
    with hub, hub.client() as c:
        for d in range(docs):
            rev = "absent"
            for v in range(per_doc):
                rev = c.call("upsert", {"path": f"notes/d{d}.md", "content": f"# d{d}\nversion {v}\n".encode(),
                                        "expected_revision": rev})["revision"]
    reps = 30 if ctx.quick else 300
    with hub, hub.client() as c:
        t0 = time.perf_counter()
        first = c.call("log", {"limit": 50})
        first_ms = ms(time.perf_counter() - t0)
        hist, log = [], []
        for r in range(reps):
            t0 = time.perf_counter()
            h = c.call("history", {"path": f"notes/d{r % docs}.md", "limit": 50})
            hist.append(ms(time.perf_counter() - t0))
            t0 = time.perf_counter()
            lg = c.call("log", {"limit": 50, "path_prefix": "notes/"})
            log.append(ms(time.perf_counter() - t0))
        if not h["versions"] or not lg["changes"] or not first["changes"]:
            ctx.problem("h. history or log returned nothing")
    return {"changes": docs * per_doc, "versions_per_doc": per_doc, "first_call_ms": round(first_ms, 3),
            "history": summary(hist), "log": summary(log), "history_entries_per_page": len(h["versions"]),
            "log_entries_per_page": len(lg["changes"])}


def _size(ctx: Ctx) -> dict[str, Any]:
    """1,000 one-line edits (120 with ``--quick``) of one 4 KiB document: the store's bytes on disk (defaults)."""
    edits = 120 if ctx.quick else 1000
    hub = _hub(ctx, "h-size", True)
    lines = [f"- line {k:02d}: a remembered fact about the project, kept short\n".encode() for k in range(69)]
    with hub, hub.client() as c:
        body = b"# Notes\n" + b"".join(lines)
        rev = c.call("upsert", {"path": "notes.md", "content": body, "expected_revision": "absent"})["revision"]
        for i in range(edits):
            edited = f"- line {i % len(lines):02d}: edited {i:04d} times, a remembered fact"
            lines[i % len(lines)] = edited.ljust(len(lines[0]) - 1).encode() + b"\n"  # the size stays 4 KiB
            body = b"# Notes\n" + b"".join(lines)
            rev = c.call("upsert", {"path": "notes.md", "content": body, "expected_revision": rev})["revision"]
        kept, cursor = 0, ""
        while True:
            page = c.call("history", {"path": "notes.md", "limit": 100, "cursor": cursor})
            kept += len(page["versions"])
            if page["next_cursor"] is None:
                break
            cursor = page["next_cursor"]
    folder = hub.home / "history"
    total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    return {"doc_bytes": len(body), "edits": edits, "store_bytes": total, "versions_kept": kept,
            "store_bytes_per_kept_version": round(total / max(kept, 1))}


APPEND_MODES = ("document only", "append + fdatasync", "fallocate + fdatasync", "zero-filled + fdatasync",
                "version file + index + fsyncs")


def _append_options(ctx: Ctx) -> dict[str, Any]:
    """Raw cost per durable document write (temp file, fsync, rename, fsync dir) plus each way to append history.

    The modes run interleaved, a block of writes each per round, so all see the same disk state.
    """
    rounds, block = (3, 10) if ctx.quick else (16, 25)
    n = rounds * block
    base = ctx.tmp / "h-raw"
    base.mkdir(exist_ok=True)
    record = os.urandom(2400)
    state: dict[str, dict[str, int]] = {}
    spent = dict.fromkeys(APPEND_MODES, 0.0)
    for k, mode in enumerate(APPEND_MODES):
        d = base / f"m{k}"
        d.mkdir(exist_ok=True)
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        seg = os.open(d / "seg", os.O_RDWR | os.O_CREAT, 0o600)
        if mode.startswith("fallocate"):
            os.posix_fallocate(seg, 0, n * len(record) + 4096)
            os.fsync(seg)
        elif mode.startswith("zero"):
            os.write(seg, b"\0" * (n * len(record) + 4096))
            os.fsync(seg)
        state[mode] = {"dfd": dfd, "seg": seg, "pos": 0, "i": 0}
    try:
        for _ in range(rounds):
            for mode in APPEND_MODES:
                st = state[mode]
                dfd, seg = st["dfd"], st["seg"]
                t0 = time.perf_counter()
                for _ in range(block):
                    st["i"] += 1
                    fd = os.open(".tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dfd)
                    os.write(fd, DOC)
                    os.fsync(fd)
                    os.close(fd)
                    os.rename(".tmp", "doc.md", src_dir_fd=dfd, dst_dir_fd=dfd)
                    os.fsync(dfd)
                    if mode == "document only":
                        continue
                    if mode.startswith("version file"):  # a content file per version + an index line
                        vfd = os.open(f"v{st['i']}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dfd)
                        os.write(vfd, record)
                        os.fsync(vfd)
                        os.close(vfd)
                        os.pwrite(seg, record[:200], st["pos"])
                        st["pos"] += 200
                        os.fdatasync(seg)
                        os.fsync(dfd)
                        continue
                    os.pwrite(seg, record, st["pos"])
                    st["pos"] += len(record)
                    os.fdatasync(seg)
                spent[mode] += time.perf_counter() - t0
    finally:
        for st in state.values():
            os.close(st["seg"])
            os.close(st["dfd"])
    rates = {mode: round(n / spent[mode], 1) for mode in APPEND_MODES}
    base_rate = rates["document only"]
    return {"writes_per_s": rates, "ratio_to_document_only": {k: round(v / base_rate, 3) for k, v in rates.items()},
            "writes_per_mode": n}


def run(ctx: Ctx) -> dict[str, Any]:
    """Section h: the three history rows of the bench (PASS/FAIL) and the raw append options (figures only)."""
    out: dict[str, Any] = {"throughput": _throughput(ctx), "latency": _latency(ctx), "size": _size(ctx),
                           "append_options": _append_options(ctx)}
    tp, lat, size = out["throughput"], out["latency"], out["size"]
    ctx.log(f"h. throughput on {tp['on_per_s']}/s off {tp['off_per_s']}/s = {tp['ratio']}; history p50 "
            f"{lat['history']['p50']} ms, log p50 {lat['log']['p50']} ms; size {size['store_bytes']} B; raw "
            f"options {out['append_options']['writes_per_s']}")
    ctx.target("h. upsert throughput with history on ≥ 0.8 × with history off, same run",
               tp["ratio"] >= THROUGHPUT_GOAL,
               f"{tp['on_per_s']:.0f}/s vs {tp['off_per_s']:.0f}/s = {tp['ratio']:.2f} (upsert p50 "
               f"{tp['upsert_on']['p50']:.2f} vs {tp['upsert_off']['p50']:.2f} ms, {tp['n']} each)",
               f"≥ {THROUGHPUT_GOAL}")
    ctx.target("h. `history` and `log` p50 ≤ 5 ms (50 versions; scope of 5,000 changes)",
               max(lat["history"]["p50"], lat["log"]["p50"]) <= LATENCY_GOAL_MS,
               f"history p50 {lat['history']['p50']:.2f} ms, log p50 {lat['log']['p50']:.2f} ms over "
               f"{lat['changes']:,} changes; first call after a restart (segment scan) {lat['first_call_ms']:.1f} ms",
               f"≤ {LATENCY_GOAL_MS:g} ms")
    ctx.target("h. history store size after 1,000 small edits of one 4 KiB document",
               size["store_bytes"] <= SIZE_GOAL_BYTES,
               f"{size['store_bytes'] / 1024:.0f} KiB after {size['edits']:,} edits, {size['versions_kept']} "
               f"versions kept, of a {size['doc_bytes']:,}-byte document", f"≤ {SIZE_GOAL_BYTES >> 10} KiB")
    return out


def segment_path(home: Path, scope: str = "global") -> Path:
    """Where a scope's history segment lives under a Hub home."""
    return home / "history" / scope / "versions.log"
