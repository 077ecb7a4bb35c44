"""A soak of one shared Hub under mixed team traffic: does its memory level off? (DESIGN.md §6).

Run: ``python -m bench.soak [--minutes N] [--rate R] [--out FILE]`` from the repository root (not part of
``python -m bench``: the documented run is 30 minutes).  One real Hub (``amux hub serve``, isolation ``user``,
MCP over HTTP on a free loopback port, the per-token MCP rate raised so the load is not refused) in a temporary
home, :data:`PRINCIPALS` principals with a token each and :data:`TEAMS` teams (two review ``agents``, one
``all``, the rest ``off``; every principal a member of two, the first member of each its maintainer).  Then, for
``N`` minutes (default 30), open loop at about ``R`` requests a second (default :data:`RATE`) in all:

* :data:`SOCKET_WORKERS` threads on the Unix socket, each a principal as a person and as its agent (client
  ``amux-mcp``): gets, searches, upserts (own memory and team notes), forgets, agents' writes kept as proposals
  in the review teams, maintainers approving and rejecting the pending ones, history reads, and reads of a team
  the principal is not in (refused);
* :data:`MCP_WORKERS` threads with one MCP streamable-HTTP session each (``memory_search``, ``memory_get``,
  ``memory_upsert``: an agent, so a proposal in a review team), a new session every :data:`MCP_SESSION_CALLS`
  calls (the old one ended with DELETE);
* ``amux hub backup`` every :data:`BACKUP_SECONDS` (the archive deleted after).

Every :data:`SAMPLE_SECONDS` it records the Hub's ``VmRSS`` (``/proc/PID/status``), threads and open files, and
from its ``/metrics`` (``hub.metrics_listen`` on another free port) the two parts of its memory with a bound of
their own: the search cache's bytes and the versions its history indexes hold.  Prints one JSON object: the
samples, RSS at 0/5/10/20/30/45/60 minutes, the least-squares slope over the last third of the run (MiB a
minute), the requests made by kind, the errors by code and a verdict: ``levelled`` when that slope is at most
:data:`LEVEL_MIB_PER_MINUTE` and every sample stays under :func:`bound_mib` (DESIGN.md §6).  The history
indexes fill for about 40 minutes at the default rate (150,000 versions); a run past that shows the level.
``--code DIR`` runs the Hub from another checkout of the repository (``git worktree add``: a before/after
comparison).  Expected errors (``conflict`` between writers of one note, ``not_found`` of a forgotten note, the
refused reads) are counted, not failures; anything else (a 5xx, a lost connection) is.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from amux_memory.hub.access import registry as reg
from amux_memory.hub.access.config import set_value
from amux_memory.hub.storage.history import INDEX_MAX_VERSIONS
from amux_memory.protocol.errors import HubError
from amux_memory.protocol.settings import default_value
from amux_memory.tools.client.blocking import HubClient
from bench.mcp_http import Session
from bench.util import HubProc, amux_argv, free_port, rss_kib

PRINCIPALS = 40
"""Principals, a token each."""
TEAMS = 6
"""Teams: ``t0`` and ``t1`` review ``agents``, ``t2`` reviews ``all``, the others ``off``."""
SOCKET_WORKERS = 24
"""Threads on the Unix socket (each a person's connection and its agent's)."""
MCP_WORKERS = 6
"""Threads with an MCP HTTP session each."""
MCP_SESSION_CALLS = 200
"""Calls on one MCP session before it is ended and a new one opened."""
RATE = 500.0
"""Requests a second in all (open loop; the workers share it evenly)."""
BACKUP_SECONDS = 20.0
"""Seconds between two ``amux hub backup`` runs."""
SAMPLE_SECONDS = 10.0
"""Seconds between two RSS samples."""
OWN_NOTES = 20
"""Notes in each principal's own memory the load writes."""
TEAM_NOTES = 30
"""Notes in each team's memory the load writes."""
START_TIMEOUT_SECONDS = 120.0
"""How long the Hub may take to answer after it is started (a loaded machine, or ``tracemalloc`` on)."""
LEVEL_MIB_PER_MINUTE = 0.5
"""The last third's RSS slope (MiB a minute) at or under which a run has levelled off."""
BASE_MIB = 128.0
"""What the Hub holds besides its bounded parts, for :func:`bound_mib`: an idle Hub with its MCP listener is
~80 MiB (interpreter, libraries, the MCP SDK); the rest is room for requests in flight and the allocators'
free lists."""
INDEX_VERSION_BYTES = 600
"""Bytes a history index version holds in memory (``hub.storage.history.INDEX_MAX_VERSIONS``' measure)."""
EXPECTED = {"conflict", "not_found", "unauthorized", "review_backlog", "bad_request", "tool_error"}
"""Error codes the mix provokes by design (racing writers, forgotten notes, refused reads)."""

WORDS = ["deploy", "build", "cache", "token", "index", "scope", "team", "review", "agent", "memory", "history",
         "backup", "search", "proposal", "release", "branch", "merge", "lint", "test", "socket", "thread",
         "latency", "budget", "quota", "schema"]


def body(rng: random.Random, label: str) -> bytes:
    """A note of 0.5-4 KiB, different every time."""
    lines = [f"# {label}", f"written {time.time_ns()} {rng.random()}"]
    for _ in range(rng.randrange(8, 64)):
        lines.append("- " + " ".join(rng.choice(WORDS) for _ in range(rng.randrange(4, 10))))
    return ("\n".join(lines) + "\n").encode()


def setup(home: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Principals ``p00``..., their tokens and the teams; returns (principal -> token, team -> members)."""
    names = [f"p{i:02d}" for i in range(PRINCIPALS)]
    teams: dict[str, list[str]] = {f"t{k}": [] for k in range(TEAMS)}
    for i, name in enumerate(names):
        teams[f"t{i % TEAMS}"].append(name)
        teams[f"t{(i + 1) % TEAMS}"].append(name)

    def change(r: reg.Registry, now: float) -> tuple[reg.Registry, dict[str, str]]:
        tokens: dict[str, str] = {}
        for name in names:
            r, _ = r.add_principal(name, "service", now)
            r, tokens[name], _ = r.issue_token(name, now, None, None)
        for k, (team, members) in enumerate(teams.items()):
            r, _ = r.add_team(team, "agents" if k < 2 else "all" if k == 2 else "off", now)
            for j, m in enumerate(members):
                r, _ = r.add_member(team, m, "maintainer" if j == 0 else "writer")
        return r, tokens

    tokens: dict[str, str] = reg.modify(home, change)
    return tokens, teams


class Tally:
    """Requests by kind and errors by code, shared by the workers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.unexpected: list[str] = []

    def call(self, kind: str) -> None:
        with self.lock:
            self.calls[kind] += 1

    def error(self, kind: str, code: str, detail: str = "") -> None:
        with self.lock:
            self.errors[f"{kind}:{code}"] += 1
            if code not in EXPECTED and len(self.unexpected) < 50:
                self.unexpected.append(f"{kind}: {code} {detail}"[:300])


class Pacer:
    """Open-loop pacing of one worker: ``next()`` sleeps until its next slot (``rate`` a second)."""

    def __init__(self, rate: float, stop: threading.Event) -> None:
        self.interval = 1.0 / rate
        self.due = time.monotonic()
        self.stop = stop

    def next(self) -> bool:
        self.due += self.interval
        delay = self.due - time.monotonic()
        if delay > 0:
            return not self.stop.wait(delay)
        if delay < -1.0:  # behind by more than a second: do not burst to catch up
            self.due = time.monotonic()
        return not self.stop.is_set()


def socket_worker(n: int, hub: HubProc, tokens: dict[str, str], teams: dict[str, list[str]], rate: float,
                  stop: threading.Event, tally: Tally) -> None:
    """One principal as a person and as its agent on the Unix socket, a mix of every kind of request."""
    rng = random.Random(n)
    me = f"p{n % PRINCIPALS:02d}"
    mine = [t for t, ms in teams.items() if me in ms]
    others = [t for t in teams if t not in mine]
    maintains = [t for t, ms in teams.items() if ms[0] == me]
    revisions: dict[str, str] = {}
    person = HubClient(hub.socket, token=tokens[me], timeout=60)
    agent = HubClient(hub.socket, token=tokens[me], timeout=60, client_name="amux-mcp")
    person.connect()
    agent.connect()
    pacer = Pacer(rate, stop)

    def note() -> str:
        if rng.random() < 0.4:
            return f"notes/{me}-{rng.randrange(OWN_NOTES)}.md"
        return f"@{rng.choice(mine)}/notes/n{rng.randrange(TEAM_NOTES)}.md"

    def call(client: HubClient, kind: str, method: str, params: dict[str, Any]) -> Any:
        tally.call(kind)
        try:
            return client.call(method, params)
        except HubError as exc:
            tally.error(kind, str(exc.code), exc.message)
            data = exc.data or {}
            path = params.get("path")
            if isinstance(path, str) and isinstance(data.get("observed_revision"), str):
                revisions[path] = data["observed_revision"]
            return None

    try:
        while pacer.next():
            r = rng.random()
            if r < 0.25:
                path = note()
                got = call(person, "get", "get", {"path": path})
                if got is not None:
                    revisions[path] = got["revision"]
            elif r < 0.37:
                call(person, "search", "search", {"query": " ".join(rng.sample(WORDS, rng.randrange(1, 4))),
                                                  "limit": 10})
            elif r < 0.62:
                path = note()
                done = call(person, "upsert", "upsert", {"path": path, "content": body(rng, path),
                                                          "expected_revision": revisions.get(path, "absent"),
                                                          "allow_shrink": True})
                if done is not None and "revision" in done and not done.get("proposed"):
                    revisions[path] = done["revision"]
            elif r < 0.72:
                path = f"@{rng.choice(mine[:1] if mine[0] in ('t0', 't1', 't2') else mine)}/notes/n" \
                       f"{rng.randrange(TEAM_NOTES)}.md"
                call(agent, "propose", "upsert", {"path": path, "content": body(rng, path),
                                                   "expected_revision": revisions.get(path, "absent"),
                                                   "allow_shrink": True})
            elif r < 0.77:
                path = note()
                if call(person, "forget", "forget", {"path": path, "expected_revision": revisions.get(path, "absent")}
                        ) is not None:
                    revisions[path] = "absent"
            elif r < 0.85 and maintains:
                team = rng.choice(maintains)
                listed = call(person, "review_list", "review_list", {"path_prefix": f"@{team}/"})
                for entry in (listed or {}).get("proposals", [])[:3]:  # a stale one is rejected, as a person would
                    if not entry["changed"] and rng.random() < 0.8:
                        call(person, "approve", "review_decide", {"id": entry["id"], "decision": "approve",
                                                                  "expected_revision": entry["current_revision"]})
                    else:
                        call(person, "reject", "review_decide", {"id": entry["id"], "decision": "reject",
                                                                 "reason": "soak"})
            elif r < 0.90:
                path = note()
                call(person, "history", "history", {"path": path, "limit": 20})
            elif r < 0.95 and others:
                call(person, "refused", "get", {"path": f"@{rng.choice(others)}/notes/n0.md"})
            else:
                call(person, "list", "list", {"path_prefix": f"@{rng.choice(mine)}/"})
    except (OSError, ConnectionError) as exc:
        tally.error("socket", "connection", repr(exc))
    finally:
        person.close()
        agent.close()


def _text_of(result: dict[str, Any]) -> dict[str, Any]:
    structured = result.get("structuredContent")
    return structured if isinstance(structured, dict) else {}


def mcp_worker(n: int, url: str, tokens: dict[str, str], teams: dict[str, list[str]], rate: float,
               stop: threading.Event, tally: Tally) -> None:
    """One agent over MCP HTTP: search, get and upsert (a proposal in a review team), sessions renewed."""
    rng = random.Random(1000 + n)
    me = f"p{(n * 7 + 3) % PRINCIPALS:02d}"
    mine = [t for t, ms in teams.items() if me in ms]
    pacer = Pacer(rate, stop)
    session: Session | None = None
    calls = 0
    revisions: dict[str, str] = {}
    try:
        while pacer.next():
            if session is None or calls >= MCP_SESSION_CALLS:
                if session is not None:
                    session.close()
                session = Session(url, tokens[me])
                tally.call("mcp_session")
                session.open()
                calls = 0
            calls += 1
            r = rng.random()
            path = (f"notes/{me}-mcp-{rng.randrange(OWN_NOTES)}.md" if r < 0.3 else
                    f"@{rng.choice(mine)}/notes/n{rng.randrange(TEAM_NOTES)}.md")
            try:
                if r < 0.4:
                    tally.call("mcp_search")
                    session.request("tools/call", {"name": "memory_search", "arguments": {
                        "query": " ".join(rng.sample(WORDS, 2)), "limit": 5}})
                elif r < 0.75:
                    tally.call("mcp_get")
                    got = _text_of(session.request("tools/call", {"name": "memory_get", "arguments": {"path": path}}))
                    if isinstance(got.get("revision"), str):
                        revisions[path] = got["revision"]
                else:
                    tally.call("mcp_upsert")
                    done = _text_of(session.request("tools/call", {"name": "memory_upsert", "arguments": {
                        "path": path, "content": body(rng, path).decode(),
                        "expected_revision": revisions.get(path, "absent"), "allow_shrink": True}}))
                    if isinstance(done.get("revision"), str) and not done.get("proposed"):
                        revisions[path] = done["revision"]
            except RuntimeError as exc:  # a tool error (conflict, not found...) or an HTTP status
                text = str(exc)
                code = "tool_error" if "HTTP 200" in text else text.split(":", 1)[0]
                tally.error("mcp", code, text[:200])
    except (OSError, RuntimeError) as exc:
        tally.error("mcp", "connection", repr(exc))
    finally:
        if session is not None:
            with contextlib.suppress(OSError):
                session.close()


def backups(hub: HubProc, folder: Path, stop: threading.Event, tally: Tally) -> None:
    """``amux hub backup`` every :data:`BACKUP_SECONDS`; the archive is deleted after."""
    for i in itertools.count():
        if stop.wait(BACKUP_SECONDS):
            return
        target = folder / f"backup-{i}.tar.gz"
        tally.call("backup")
        proc = subprocess.run([*amux_argv(), "hub", "backup", str(target), "--json"], env=hub.env,
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            tally.error("backup", "failed", proc.stderr[-300:])
        target.unlink(missing_ok=True)


def _open_files(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def code_path(code: Path, tmp: Path) -> str:
    """A ``PYTHONPATH`` entry under which ``amux_memory`` is the checkout ``code`` (its four top-level folders
    linked as the package's subpackages, ahead of this installation's editable finder)."""
    root = tmp / "code" / "amux_memory"
    root.mkdir(parents=True)
    for name in ("hub", "launch", "protocol", "tools"):
        (root / name).symlink_to(code.resolve() / name)
    return str(root.parent)


def run(minutes: float, rate: float, tmp: Path, sample_seconds: float = SAMPLE_SECONDS,
        log: Any = None, code: Path | None = None) -> dict[str, Any]:
    """The soak (module docstring); returns the summary (samples in MiB, minutes since the load started).
    ``code``: run the Hub (and the backup CLI) from that checkout."""
    hub = HubProc.create(tmp / "soak", isolation="user")
    if code is not None:
        hub.env["PYTHONPATH"] = os.pathsep.join(filter(None, [code_path(code, tmp), hub.env.get("PYTHONPATH")]))
    port, metrics_port = free_port(), free_port()
    for key, value in (("hub.mcp_listen", f"127.0.0.1:{port}"), ("hub.mcp_rate", "1000"), ("hub.mcp_burst", "1000"),
                       ("hub.metrics_listen", f"127.0.0.1:{metrics_port}")):
        set_value(hub.home, key, value)
    tokens, teams = setup(hub.home)
    tally = Tally()
    stop = threading.Event()
    samples: list[dict[str, float]] = []
    url = f"http://127.0.0.1:{port}/mcp"
    workers = SOCKET_WORKERS + MCP_WORKERS
    each = rate / workers
    hub.start(timeout=START_TIMEOUT_SECONDS)
    try:
        threads = [threading.Thread(target=socket_worker, args=(n, hub, tokens, teams, each, stop, tally), daemon=True)
                   for n in range(SOCKET_WORKERS)]
        threads += [threading.Thread(target=mcp_worker, args=(n, url, tokens, teams, each, stop, tally), daemon=True)
                    for n in range(MCP_WORKERS)]
        threads.append(threading.Thread(target=backups, args=(hub, tmp, stop, tally), daemon=True))
        start = time.monotonic()
        for t in threads:
            t.start()
        end = start + minutes * 60
        while True:
            now = time.monotonic()
            st = rss_kib(hub.pid)
            with tally.lock:
                total = sum(tally.calls.values())
            sample = {"minute": round((now - start) / 60, 3), "rss_mib": round(st["VmRSS"] / 1024, 1),
                      "hwm_mib": round(st["VmHWM"] / 1024, 1), "threads": st.get("Threads", 0),
                      "fds": _open_files(hub.pid), "requests": total, "load1": round(os.getloadavg()[0], 2),
                      **scrape_parts(f"http://127.0.0.1:{metrics_port}")}
            samples.append(sample)
            if log is not None:
                log(json.dumps(sample))
            if now >= end or hub.proc is None or hub.proc.poll() is not None:
                break
            time.sleep(min(sample_seconds, max(0.0, end - now)))
        stop.set()
        for t in threads:
            t.join(60)
    finally:
        stop.set()
        hub.stop()
    return summarize(samples, tally, minutes)


def bound_mib(cache_max_bytes: int = default_value("hub.cache_max_bytes"),
              index_versions: int = INDEX_MAX_VERSIONS) -> float:
    """The documented bound of a Hub's RSS in MiB (DESIGN.md §6): :data:`BASE_MIB` plus the search cache's bound
    plus the history indexes' (``index_versions`` × :data:`INDEX_VERSION_BYTES`): 470 MiB with the defaults.
    Pending proposals come on top (at most ``memory.review_max_pending`` a scope, each one document): this load
    keeps a few dozen."""
    return BASE_MIB + (cache_max_bytes + index_versions * INDEX_VERSION_BYTES) / 2**20


def scrape_parts(base: str) -> dict[str, float]:
    """``amux_search_cache_bytes`` and ``amux_history_index_versions`` from the Hub's ``/metrics`` (those it
    has: a Hub from ``--code`` may predate them); empty when the scrape fails."""
    wanted = {"amux_search_cache_bytes": "cache_mib", "amux_history_index_versions": "index_versions"}
    try:
        with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
    except (OSError, ValueError, http.client.HTTPException):  # a Hub restarting, a cut answer: no figures this time
        return {}
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in wanted:
                key = wanted[sample.name]
                out[key] = round(sample.value / 2**20, 1) if key == "cache_mib" else sample.value
    return out


def slope(points: list[tuple[float, float]]) -> float | None:
    """The least-squares slope of ``(x, y)`` points; None for fewer than three."""
    if len(points) < 3:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else None


def rss_at(samples: list[dict[str, float]], minute: float) -> float | None:
    """The RSS (MiB) of the first sample at or after ``minute``; None when the run was shorter."""
    return next((s["rss_mib"] for s in samples if s["minute"] >= minute - 0.05), None)


def summarize(samples: list[dict[str, float]], tally: Tally, minutes: float) -> dict[str, Any]:
    """The figures of a run: RSS at 0/5/10/20/30/45/60 minutes, the last third's slope, the requests and errors,
    and the verdict (module docstring)."""
    span = samples[-1]["minute"] or 1.0
    bound = bound_mib()
    last = slope([(s["minute"], s["rss_mib"]) for s in samples if s["minute"] >= span * 2 / 3])
    first = slope([(s["minute"], s["rss_mib"]) for s in samples if s["minute"] <= span / 3])
    return {
        "minutes": minutes, "requests": dict(tally.calls),
        "requests_per_s": round(samples[-1]["requests"] / span / 60, 1),
        "errors": dict(tally.errors), "unexpected": tally.unexpected,
        "rss_mib_at": {m: rss_at(samples, m) for m in (0, 1, 5, 10, 20, 30, 45, 60) if m <= span + 0.05},
        "rss_mib_end": samples[-1]["rss_mib"], "hwm_mib_end": samples[-1]["hwm_mib"],
        "slope_mib_per_min_last_third": None if last is None else round(last, 3),
        "slope_mib_per_min_first_third": None if first is None else round(first, 3),
        "threads_end": samples[-1]["threads"], "fds_end": samples[-1]["fds"],
        "bound_mib": round(bound, 1), "rss_mib_max": max(s["rss_mib"] for s in samples),
        "index_versions_end": samples[-1].get("index_versions"), "cache_mib_end": samples[-1].get("cache_mib"),
        "verdict": "levelled" if last is not None and last <= LEVEL_MIB_PER_MINUTE
        and all(s["rss_mib"] < bound for s in samples) else "not levelled",
        "samples": samples,
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.soak``: run, print the summary as JSON (the samples as they come on stderr)."""
    ap = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--rate", type=float, default=RATE)
    ap.add_argument("--sample-seconds", type=float, default=SAMPLE_SECONDS)
    ap.add_argument("--out", type=Path, help="also write the summary to this JSON file")
    ap.add_argument("--tmp", type=Path, help="where the Hub's home is made (default: a new temp dir)")
    ap.add_argument("--code", type=Path, help="run the Hub from this checkout (e.g. a git worktree of an older commit)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="amux-soak-", dir=args.tmp) as tmp:
        result = run(args.minutes, args.rate, Path(tmp), args.sample_seconds,
                     log=lambda line: print(line, file=sys.stderr, flush=True), code=args.code)
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 1 if result["unexpected"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
