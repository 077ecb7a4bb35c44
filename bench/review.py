"""(r) Review of agents' writes (DESIGN.md §21): an agent's proposal (``memory.review = agents``, a ``hello``
with a session) against a direct upsert (review off), in the same run, alternating blocks on the same disk."""

from __future__ import annotations

import time
from typing import Any

from amux_memory.hub.access.config import set_value
from bench.context import Ctx
from bench.util import HubProc, ms, summary

DOC = b"# Preferences\n\n" + b"- prefer small, reviewed changes; run the tests before committing\n" * 30  # ~2 KiB
PROPOSAL_THROUGHPUT_GOAL = 0.5
"""Proposals per second, at least this fraction of direct upserts per second."""


def _agent(hub: HubProc) -> Any:
    """A connection that says ``hello`` with a session, as a launched agent's does."""
    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.client.settings import ClientSettings

    settings = ClientSettings.from_env({"AMUX_SESSION_ID": "bench-agent"}, socket_path=hub.socket)
    c = HubClient(hub.socket, settings=settings, timeout=60.0)
    c.connect()
    return c


def run(ctx: Ctx) -> dict[str, Any]:
    """Section r: proposal vs direct upsert throughput (PASS/FAIL against :data:`PROPOSAL_THROUGHPUT_GOAL`)."""
    n = 40 if ctx.quick else 600
    block = 10
    reviewed, direct = HubProc.create(ctx.tmp / "r-review"), HubProc.create(ctx.tmp / "r-direct")
    set_value(reviewed.home, "memory.review", "agents")
    times: dict[str, list[float]] = {"proposal": [], "direct": []}
    spent = {"proposal": 0.0, "direct": 0.0}
    with reviewed, direct, _agent(reviewed) as agent, direct.client() as person:
        rev = person.call("upsert", {"path": "notes.md", "content": DOC, "expected_revision": "absent"})["revision"]
        i = 0
        while len(times["proposal"]) < n:
            for label in ("direct", "proposal"):
                t_block = time.perf_counter()
                for _ in range(block):
                    i += 1
                    content = DOC + f"<!-- edit {i} -->\n".encode()
                    t0 = time.perf_counter()
                    if label == "direct":
                        rev = person.call("upsert", {"path": "notes.md", "content": content,
                                                     "expected_revision": rev})["revision"]
                    else:  # the same session and path: each proposal replaces the one before
                        r = agent.call("upsert", {"path": "notes.md", "content": content,
                                                  "expected_revision": "absent"})
                        assert r["proposed"] is True
                    times[label].append(ms(time.perf_counter() - t0))
                spent[label] += time.perf_counter() - t_block
    tp = {k: len(times[k]) / spent[k] for k in times}
    ratio = tp["proposal"] / tp["direct"]
    out: dict[str, Any] = {"n": n, "proposal_per_s": round(tp["proposal"], 1), "direct_per_s": round(tp["direct"], 1),
           "ratio": round(ratio, 3), "proposal": summary(times["proposal"]), "direct": summary(times["direct"])}
    ctx.log(f"r. proposals {out['proposal_per_s']}/s vs direct upserts {out['direct_per_s']}/s = {out['ratio']}")
    ctx.target("r. agent proposal throughput vs direct upsert, same run", ratio >= PROPOSAL_THROUGHPUT_GOAL,
               f"{tp['proposal']:.0f}/s vs {tp['direct']:.0f}/s = {ratio:.2f} (p50 {out['proposal']['p50']:.2f} vs "
               f"{out['direct']['p50']:.2f} ms; {n} each, 2 KiB note)", f"≥ {PROPOSAL_THROUGHPUT_GOAL}")
    return out
