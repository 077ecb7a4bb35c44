"""(t) Team memory (DESIGN.md §7.8): a search over mounts against one scope, and many MCP HTTP sessions of teams.

1. Search.  One Hub (isolation ``user``), two principals with tokens: ``solo`` holds the whole scope (1,024
   synthetic 8 KiB documents, ``--quick`` 128) in its own memory; ``member`` holds half of the same
   documents in its own memory and a quarter in each of two teams it reads, mounted at ``@ta/`` and ``@tb/``,
   so one search of ``member`` covers the same bytes in three parts under one budget.  Per query, the two
   callers alternate on persistent connections (warm cache, each query's order swapped round by round); the
   round trip and the Hub's ``elapsed_ms`` are kept.  Target: the sum over the queries of the round-trip p50s,
   mounted over single, ≤ :data:`MOUNTED_GOAL`.  Also, as figures, *cold* searches (every file's mtime
   changed).  Both answers must find the same number of candidates, complete.
2. MCP HTTP load.  A Hub with ``hub.mcp_listen`` on a free loopback port, 10 teams of 20 members (one token and
   one session each: 200 sessions; ``--quick`` 3 teams of 4 for 5 s), each session calling every
   :data:`LOAD_INTERVAL_SECONDS` for 30 s, alternately ``memory_search`` (no prefix: the member's own memory
   and its team's mount) and ``memory_get`` of its team's note (:func:`http_load`, threads on plain
   ``http.client``).  Target: every call answered (HTTP 200, no tool error), each search finding its own
   team's note and nothing of another team.  ``tests/stress/test_team_mcp_load.py`` runs the same load.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from amux_memory.hub.access import registry as reg
from amux_memory.hub.access.config import set_value
from amux_memory.tools.client.blocking import HubClient
from bench import data
from bench.context import Ctx
from bench.mcp_http import Session, rpc_message
from bench.util import HubProc, free_port, ms, percentile, summary

MOUNTED_GOAL = 1.2
"""Target: a search over a personal scope and two team mounts, round trip, at most this many times a search of
one scope of the same total size (sum over the queries of the p50s)."""
LOAD_TEAMS, LOAD_MEMBERS, LOAD_SECONDS = 10, 20, 30.0
"""The MCP HTTP load: teams, members a team (one session each), seconds of calls."""
LOAD_INTERVAL_SECONDS = 4.0
"""Seconds between one session's calls (200 sessions: 50 calls a second, an agent's pace many times over)."""
REQUEST_TIMEOUT_SECONDS = 30.0
"""One HTTP request's bound in the load."""
LIMIT = 10


# -- registry and placement -----------------------------------------------------------------------


def register(home: Path, teams: dict[str, list[str]], role: str = "reader",
             alone: tuple[str, ...] = ()) -> dict[str, str]:
    """Principals (every member of ``teams``, and ``alone``) with one token each, and the teams with their
    members at ``role`` (review off), in one registry write; returns principal -> token."""
    def change(r: reg.Registry, now: float) -> tuple[reg.Registry, dict[str, str]]:
        tokens: dict[str, str] = {}
        for name in sorted({m for ms_ in teams.values() for m in ms_} | set(alone)):
            r, _ = r.add_principal(name, "service", now)
            r, tokens[name], _ = r.issue_token(name, now, None, None)
        for team, members in teams.items():
            r, _ = r.add_team(team, "off", now)
            for m in members:
                r, _ = r.add_member(team, m, role)
        return r, tokens

    tokens: dict[str, str] = reg.modify(home, change)
    return tokens


def scope_folder(home: Path, *, principal: str | None = None, team: str | None = None) -> Path:
    """The folder of a principal's own scope or of a team's (isolation ``user``, DESIGN.md §7.1, §7.8)."""
    if principal is not None:
        return home / "memory" / "users" / hashlib.sha256(principal.encode()).hexdigest()
    assert team is not None
    return home / "memory" / "teams" / hashlib.sha256(team.encode()).hexdigest()


def _client(socket_path: Path, token: str) -> HubClient:
    c = HubClient(socket_path, token=token, timeout=60.0)
    c.connect()
    return c


# -- 1. search over mounts --------------------------------------------------------------------------


def search(ctx: Ctx) -> dict[str, Any]:
    """Part 1: ``member`` (own + ``@ta/`` + ``@tb/``) against ``solo`` (one scope), the same documents."""
    files = 128 if ctx.quick else 1024
    docs = data.Synth(seed=11).scope(files, 8192)
    queries = data.derive_queries(docs)
    if ctx.quick:
        queries = [q for q in queries if q.name in ("en-common-4", "zh-rare-1", "en-rare-16")] or queries[:3]
    reps, cold = (3, 1) if ctx.quick else (15, 3)
    parts: dict[str, dict[str, bytes]] = {"own": {}, "ta": {}, "tb": {}}
    for i, path in enumerate(sorted(docs)):
        parts[("own", "own", "ta", "tb")[i % 4]][path] = docs[path]
    hub = HubProc.create(ctx.tmp / "t-search", isolation="user")
    tokens = register(hub.home, {"ta": ["member"], "tb": ["member"]}, alone=("solo",))
    folders = {"solo": scope_folder(hub.home, principal="solo"), "own": scope_folder(hub.home, principal="member"),
               "ta": scope_folder(hub.home, team="ta"), "tb": scope_folder(hub.home, team="tb")}
    data.write_scope(folders["solo"], docs)
    for name in ("own", "ta", "tb"):
        data.write_scope(folders[name], parts[name])
    ctx.log(f"t. search: {files} files, {sum(map(len, docs.values())) / data.MIB:.2f} MiB, as one scope and as own "
            f"{len(parts['own'])} + @ta/ {len(parts['ta'])} + @tb/ {len(parts['tb'])}; {len(queries)} queries")
    rows: list[dict[str, Any]] = []
    with hub, _client(hub.socket, tokens["solo"]) as solo, _client(hub.socket, tokens["member"]) as member:
        callers = {"single": solo, "mounted": member}
        for q in queries:
            params = {"query": " ".join(q.words), "limit": LIMIT}
            t: dict[str, list[float]] = {f"{k}_{w}": [] for k in callers for w in ("rtt", "hub", "cold")}
            answers: dict[str, dict[str, Any]] = {}
            for c in callers.values():
                c.call("search", params)  # warm this query's path once
            for i in range(reps):
                for label in (("single", "mounted") if i % 2 == 0 else ("mounted", "single")):
                    t0 = time.perf_counter()
                    answers[label] = callers[label].call("search", params)
                    t[f"{label}_rtt"].append(ms(time.perf_counter() - t0))
                    t[f"{label}_hub"].append(float(answers[label]["elapsed_ms"]))
            stamp = time.time() - 7200
            for i in range(cold):
                stamp -= 1
                for folder in folders.values():
                    data.backdate(folder, stamp, files_only=True)
                for label in (("single", "mounted") if i % 2 == 0 else ("mounted", "single")):
                    t0 = time.perf_counter()
                    callers[label].call("search", params)
                    t[f"{label}_cold"].append(ms(time.perf_counter() - t0))
            _compare(ctx, q.name, answers["single"], answers["mounted"])
            stats = {k: summary(v) for k, v in t.items()}
            rows.append({"query": q.name, "stats": stats,
                         "candidates": answers["single"]["candidates"],
                         "ratio_rtt": round(stats["mounted_rtt"]["p50"] / stats["single_rtt"]["p50"], 3)})
            ctx.log(f"   {q.name:16s} single {stats['single_rtt']['p50']:.2f} ms "
                    f"(Hub {stats['single_hub']['p50']:.2f}) mounted {stats['mounted_rtt']['p50']:.2f} ms "
                    f"(Hub {stats['mounted_hub']['p50']:.2f}) = {rows[-1]['ratio_rtt']:.2f}")
    total = {label: sum(r["stats"][f"{label}_rtt"]["p50"] for r in rows) for label in ("single", "mounted")}
    ratio = total["mounted"] / total["single"]
    worst = max(rows, key=lambda r: r["ratio_rtt"])
    cold_ratio = (sum(r["stats"]["mounted_cold"]["p50"] for r in rows)
                  / sum(r["stats"]["single_cold"]["p50"] for r in rows))
    ctx.target(f"t. search over own + 2 team mounts ≤ {MOUNTED_GOAL} × one scope of the same size (round trip)",
               ratio <= MOUNTED_GOAL,
               f"{ratio:.2f}: sum of p50s {total['mounted']:.1f} vs {total['single']:.1f} ms over {len(rows)} queries "
               f"({files} files, warm; worst {worst['query']} {worst['ratio_rtt']:.2f}); cold {cold_ratio:.2f}",
               f"≤ {MOUNTED_GOAL}")
    return {"files": files, "reps": reps, "cold_reps": cold, "queries": rows, "ratio": round(ratio, 3),
            "cold_ratio": round(cold_ratio, 3),
            "parts": {name: len(docs_) for name, docs_ in parts.items()}}


def _compare(ctx: Ctx, query: str, single: dict[str, Any], mounted: dict[str, Any]) -> None:
    """The same documents, split or not, must give the same number of candidates, both answers complete."""
    ctx.checked += 1
    if single["incomplete"] or mounted["incomplete"]:
        ctx.problem(f"t. {query}: incomplete (single {single['incomplete_reasons']}, mounted "
                    f"{mounted['incomplete_reasons']})")
    elif single["candidates"] != mounted["candidates"]:
        ctx.problem(f"t. {query}: {single['candidates']} candidates in one scope, {mounted['candidates']} over "
                    "the mounts")


# -- 2. many MCP HTTP sessions of teams ---------------------------------------------------------------


Check = Callable[[dict[str, Any]], str | None]
"""A tool result's structured content -> what is wrong with it (None: right)."""


@dataclass
class Plan:
    """One session of the load: its token and the calls it cycles through, each ``(tool, arguments, check)``."""

    token: str
    calls: list[tuple[str, dict[str, Any], Check]]


@dataclass
class Tally:
    """What the calls of the load saw, across sessions (threads)."""

    latencies: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    calls: int = 0
    answered: int = 0
    per_session: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, status: str, elapsed_ms: float | None, failure: str | None) -> None:
        with self.lock:
            self.calls += 1
            self.statuses[status] += 1
            if elapsed_ms is not None:
                self.latencies.append(elapsed_ms)
            if failure is None:
                self.answered += 1
            elif len(self.failures) < 20:
                self.failures.append(failure[:300])


def _session_loop(url: str, plan: Plan, start: threading.Barrier, deadline: list[float], interval: float,
                  tally: Tally, index: int, seed: int) -> None:
    rng = random.Random(seed)
    session = Session(url, plan.token)
    session.conn.timeout = REQUEST_TIMEOUT_SECONDS
    answered = 0
    try:
        try:
            session.open()
        except (OSError, http.client.HTTPException, RuntimeError) as exc:
            tally.record(type(exc).__name__, None, f"session {index} did not open: {exc}")
            return
        finally:
            start.wait()
        next_at = time.monotonic() + rng.uniform(0, interval)
        turn = rng.randrange(len(plan.calls))
        while True:
            time.sleep(max(0.0, next_at - time.monotonic()))
            if next_at >= deadline[0]:
                break
            name, arguments, check = plan.calls[turn % len(plan.calls)]
            turn += 1
            t0 = time.perf_counter()
            try:
                status, _, body = session.post({"jsonrpc": "2.0", "id": turn, "method": "tools/call",
                                                "params": {"name": name, "arguments": arguments}})
            except (OSError, http.client.HTTPException) as exc:
                tally.record(type(exc).__name__, None, f"session {index} {name}: {exc}")
                session.close()
                return
            elapsed = ms(time.perf_counter() - t0)
            failure = None
            if status != 200:
                failure = f"session {index} {name}: HTTP {status} {body[:200]!r}"
            else:
                result = rpc_message(body).get("result", {})
                structured = result.get("structuredContent") or {}
                if result.get("isError"):
                    failure = f"session {index} {name}: {json.dumps(structured)[:200]}"
                else:
                    problem = check(structured)
                    failure = None if problem is None else f"session {index} {name}: {problem}"
            tally.record(str(status), elapsed, failure)
            answered += failure is None
            next_at += interval
    finally:
        with tally.lock:
            tally.per_session.append(answered)
        session.close()


def http_load(url: str, plans: list[Plan], seconds: float, interval: float, seed: int = 3) -> dict[str, Any]:
    """Open one MCP session per plan (each on its own persistent HTTP/1.1 connection and thread), then every
    session calls its next tool every ``interval`` seconds (a random phase first) for ``seconds``.  Returns
    ``{sessions, calls, answered, statuses, failures (the first 20), latency_ms, per_session_min, seconds}``;
    a call is answered when it got HTTP 200, no tool error, and its check passed."""
    tally = Tally()
    start = threading.Barrier(len(plans) + 1)
    deadline = [float("inf")]
    rng = random.Random(seed)
    threads = [threading.Thread(target=_session_loop, args=(url, plan, start, deadline, interval, tally, i,
                                                            rng.randrange(1 << 30)), daemon=True)
               for i, plan in enumerate(plans)]
    for t in threads:
        t.start()
    start.wait()  # every session opened (or failed to)
    began = time.monotonic()
    deadline[0] = began + seconds
    for t in threads:
        t.join(seconds + 2 * REQUEST_TIMEOUT_SECONDS + 30)
    lat = tally.latencies
    return {"sessions": len(plans), "seconds": seconds, "interval": interval, "calls": tally.calls,
            "answered": tally.answered, "statuses": dict(tally.statuses), "failures": tally.failures,
            "latency_ms": {"n": len(lat), "p50": round(percentile(lat, 50), 2), "p99": round(percentile(lat, 99), 2),
                           "max": round(max(lat, default=0.0), 2)},
            "per_session_min": min(tally.per_session, default=0), "stuck_threads": sum(t.is_alive() for t in threads)}


def team_note(team: str) -> tuple[str, bytes, str]:
    """``(path inside the team, bytes, a line only this team's note holds)``."""
    line = f"- {team} deploys with make release-{team}, never on a Friday"
    return "notes/team.md", f"# {team}\n\n{line}\n".encode(), line


def team_plans(socket_path: Path, tokens: dict[str, str], teams: dict[str, list[str]]) -> list[Plan]:
    """Write each team's note (through its first member) and plan its members' sessions: ``memory_search`` of
    the team's word with no prefix (it must find the team's note and no other team's path) and ``memory_get``
    of the note (it must hold the team's line)."""
    plans: list[Plan] = []
    for team, members in teams.items():
        path, content, line = team_note(team)
        with _client(socket_path, tokens[members[0]]) as c:
            c.call("upsert", {"path": f"@{team}/{path}", "content": content, "expected_revision": "absent"})
        mounted = f"@{team}/{path}"

        def searched(r: dict[str, Any], mounted: str = mounted, team: str = team) -> str | None:
            paths = [str(m["path"]) for m in r.get("matches", [])]
            if mounted not in paths:
                return f"the search did not find {mounted}: {paths}"
            strangers = [p for p in paths if p.startswith("@") and not p.startswith(f"@{team}/")]
            return f"the search showed another team's notes: {strangers}" if strangers else None

        def got(r: dict[str, Any], line: str = line) -> str | None:
            return None if line in str(r.get("content", "")) else f"the note lacks its line: {str(r)[:200]}"

        for m in members:
            plans.append(Plan(tokens[m], [("memory_search", {"query": f"release-{team}"}, searched),
                                          ("memory_get", {"path": mounted}, got)]))
    return plans


def load_teams(teams: int, members: int) -> dict[str, list[str]]:
    """``teams`` teams of ``members`` principals each: ``team00`` ... with ``team00-m00`` ...."""
    return {f"team{t:02d}": [f"team{t:02d}-m{m:02d}" for m in range(members)] for t in range(teams)}


def mcp_load(ctx: Ctx) -> dict[str, Any]:
    """Part 2: 10 teams x 20 members in 200 MCP HTTP sessions, calling tools for 30 s."""
    n_teams, n_members, seconds, interval = ((3, 4, 5.0, 1.0) if ctx.quick
                                             else (LOAD_TEAMS, LOAD_MEMBERS, LOAD_SECONDS, LOAD_INTERVAL_SECONDS))
    hub = HubProc.create(ctx.tmp / "t-mcp", isolation="user")
    set_value(hub.home, "hub.mcp_listen", f"127.0.0.1:{free_port()}")
    teams = load_teams(n_teams, n_members)
    tokens = register(hub.home, teams, role="writer")
    with hub:
        plans = team_plans(hub.socket, tokens, teams)
        with _client(hub.socket, plans[0].token) as c:
            url = c.hello.get("mcp_url")
        if not isinstance(url, str) or urlsplit(url).scheme != "http":
            raise RuntimeError(f"the Hub's hello names no MCP URL: {url!r}")
        ctx.log(f"t. MCP HTTP load: {len(plans)} sessions ({n_teams} teams x {n_members} members), a call every "
                f"{interval:g} s for {seconds:g} s")
        result = http_load(url, plans, seconds, interval)
    expected = len(plans) * seconds / interval
    ok = (result["answered"] == result["calls"] >= 0.9 * expected and not result["failures"]
          and result["stuck_threads"] == 0 and result["per_session_min"] >= 0.9 * seconds / interval - 1)
    lat = result["latency_ms"]
    ctx.target(f"t. {len(plans)} MCP HTTP sessions ({n_teams} teams × {n_members} members) × {seconds:g} s: "
               "every call answered, each search only its own team's", ok,
               f"{result['answered']}/{result['calls']} answered (statuses {result['statuses']}), latency p50 "
               f"{lat['p50']} / p99 {lat['p99']} / max {lat['max']} ms; fewest answered in a session "
               f"{result['per_session_min']}" + (f"; first failure: {result['failures'][0]}" if result['failures']
                                                 else ""),
               "all answered, no error")
    return {"teams": n_teams, "members": n_members, **result}


def run(ctx: Ctx) -> dict[str, Any]:
    """Section t: the search over mounts, then the MCP HTTP load; two targets."""
    return {"search": search(ctx), "load": mcp_load(ctx)}
