"""(e) Footprint: the Hub's RSS idle, after searching 100 scopes (isolation ``user``: each OS uid is a
scope; the bench forks a child per uid and drops to it, as tests/other_users.py does), and with
256 idle connections.  Also the content cache's bound, checked in process on the same 100 scopes."""

from __future__ import annotations

import hashlib
import os
import pwd
import tempfile
import time
from pathlib import Path
from typing import Any

from amux_memory.hub.methods.search import search_scope
from amux_memory.hub.storage.cache import ContentCache
from amux_memory.protocol.limits import LIMITS
from amux_memory.tools.client.blocking import HubClient
from bench.context import Ctx
from bench.data import MIB, Synth, write_scope
from bench.util import HubProc, rss_kib


def _free_uids(count: int, start: int = 52001) -> list[int]:
    uids: list[int] = []
    uid = start
    while len(uids) < count:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            uids.append(uid)
        uid += 1
    return uids


def _scope_dir(hub: HubProc, principal: str) -> Path:
    return hub.home / "memory" / "users" / hashlib.sha256(principal.encode()).hexdigest()


def _search_as(uid: int, socket: Path, query: str) -> tuple[int, int]:
    """Search as ``uid`` in a forked child; returns ``(exit status, scanned files)``."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: drop to the uid, one search, report scanned_files
        code = 70
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            with HubClient(socket, timeout=30, binding="") as c:
                res = c.call("search", {"query": query, "limit": 5})
            os.write(w, f"{res['scanned_files']} {int(res['incomplete'])}".encode())
            code = 0
        except BaseException as exc:  # noqa: BLE001 - reported through the exit status
            os.write(2, f"child failed: {exc!r}\n".encode())
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        data = fh.read().decode()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    scanned = int(data.split()[0]) if code == 0 and data else -1
    return code, scanned


def run(ctx: Ctx) -> dict[str, Any]:
    n_scopes = 100 if not ctx.quick else 4
    docs_per_scope = 64 if not ctx.quick else 8
    doc_bytes = 16 * 1024
    n_conns = 256 if not ctx.quick else 16
    out: dict[str, Any] = {"cache_max_bytes": LIMITS.cache_max_bytes, "scopes": n_scopes,
                           "scope_bytes": docs_per_scope * doc_bytes, "connections": n_conns}
    root = os.geteuid() == 0
    sockdir = Path(tempfile.mkdtemp(prefix="amux-bench-sock-", dir="/tmp"))
    sockdir.chmod(0o755)
    hub = HubProc.create(ctx.tmp / "e-footprint", isolation="user" if root else "off", shared_socket_dir=sockdir)
    synth = Synth(seed=31)
    scope_docs = synth.scope(docs_per_scope, doc_bytes)
    uids = _free_uids(n_scopes) if root else []
    for uid in uids:
        write_scope(_scope_dir(hub, f"uid:{uid}"), scope_docs)
    try:
        with hub:
            time.sleep(0.5)
            out["idle"] = rss_kib(hub.pid)
            ctx.log(f"e. idle Hub RSS {out['idle']['VmRSS'] / 1024:.1f} MiB")
            out["before_connections"] = rss_kib(hub.pid)
            clients = []
            for _ in range(n_conns):
                c = HubClient(hub.socket, timeout=30, binding="")
                c.connect()
                clients.append(c)
            time.sleep(0.5)
            out["idle_connections"] = rss_kib(hub.pid)
            ctx.log(f"e. with {n_conns} idle connections: RSS {out['idle_connections']['VmRSS'] / 1024:.1f} MiB")
            for c in clients:
                c.close()
            if root:
                t0 = time.perf_counter()
                bad = 0
                for uid in uids:
                    code, scanned = _search_as(uid, hub.socket, "memory decision zq")
                    if code != 0 or scanned != docs_per_scope:
                        bad += 1
                if bad:
                    ctx.problem(f"e. {bad} of {n_scopes} per-uid searches failed or scanned the wrong scope")
                out["search_scopes_seconds"] = round(time.perf_counter() - t0, 2)
                time.sleep(0.3)
                out["after_scopes"] = rss_kib(hub.pid)
                ctx.log(f"e. after searching {n_scopes} scopes of {docs_per_scope * doc_bytes / MIB:.1f} MiB: RSS "
                        f"{out['after_scopes']['VmRSS'] / 1024:.1f} MiB "
                        f"(peak {out['after_scopes']['VmHWM'] / 1024:.1f})")
            else:
                ctx.notes.append("e. 100 scopes skipped: forking a client per OS uid needs root")
    finally:
        for p in sorted(sockdir.rglob("*"), reverse=True):
            p.unlink(missing_ok=True)
        sockdir.rmdir()
    # The cache's bound, in process on the same scopes: bytes held after each search never pass it.
    if root:
        cache = ContentCache(LIMITS.cache_max_bytes)
        held = []
        for uid in uids:
            d = _scope_dir(hub, f"uid:{uid}")
            search_scope(str(d), ("memory",), "", 5, LIMITS, cache=cache.scope(d.name))
            held.append(cache.trim())
        out["cache_in_process"] = {"max_held_bytes": max(held), "scopes_kept": cache.scopes,
                                   "unbounded_would_be": _cost(scope_docs) * n_scopes}
        ok = max(held) <= LIMITS.cache_max_bytes
        if not ok:
            ctx.problem(f"e. the content cache held {max(held)} bytes, over its bound {LIMITS.cache_max_bytes}")
    return out


def _cost(docs: dict[str, bytes]) -> int:
    """What the cache keeps for a scope: raw plus folded bytes (folded = raw length for these documents)."""
    return 2 * sum(map(len, docs.values()))
