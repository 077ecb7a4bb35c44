"""Load: 200 MCP sessions over streamable HTTP, 10 teams of 20 members, each calling the tools on its team mount
(DESIGN.md §7.8, §22.3).

A real Hub (isolation ``user``, ``hub.mcp_listen`` on loopback); 200 principals with one token and one session
each (threads in this process, plain ``http.client``: :func:`bench.teams.http_load`, the load of bench row t),
each a writer of one of 10 teams whose note says a line of its own.  Every session calls every 4 s, alternately
``memory_search`` with no prefix (its own memory and its team's mount) and ``memory_get`` of its team's note.

Proof: every call is answered (HTTP 200, no tool error, no transport error), every search finds its own team's
note and no other team's path (the view is per caller under load), every get holds its team's line, and every
session made progress.  8 s in the normal suite; ``AMUX_STRESS=full`` runs the 30 s of the bench row.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from bench.teams import LOAD_INTERVAL_SECONDS, LOAD_MEMBERS, LOAD_TEAMS, http_load, load_teams, register, team_plans
from tests.conftest import make_hub
from tests.stress.scale import FULL, pick, report

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300 if FULL else 180)]


def test_200_sessions_of_10_teams_answer_every_call_with_their_own_team(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    h = make_hub(tmp_path, isolation="user", settings={"hub.mcp_listen": f"127.0.0.1:{port}"})
    try:
        assert h.log is not None
        url = re.findall(r"serving MCP on (http://\S+)", h.log.read_text())[-1]
        teams = load_teams(LOAD_TEAMS, LOAD_MEMBERS)
        tokens = register(h.home, teams, role="writer")
        plans = team_plans(h.socket, tokens, teams)
        seconds = float(pick(8, 30))
        result = http_load(url, plans, seconds, LOAD_INTERVAL_SECONDS)
    finally:
        h.stop()
    lat = result["latency_ms"]
    report(f"team MCP HTTP load: {result['sessions']} sessions ({LOAD_TEAMS} teams x {LOAD_MEMBERS} members) x "
           f"{seconds:.0f} s, a call every {LOAD_INTERVAL_SECONDS:g} s: {result['answered']} of {result['calls']} "
           f"answered, statuses {result['statuses']}, latency p50 {lat['p50']} / p99 {lat['p99']} / max {lat['max']} "
           f"ms, fewest answered in a session {result['per_session_min']}")
    assert result["sessions"] == len(plans) == 200
    assert result["failures"] == [] and result["answered"] == result["calls"], result
    assert set(result["statuses"]) == {"200"} and result["stuck_threads"] == 0, result
    assert result["calls"] >= 0.9 * len(plans) * seconds / LOAD_INTERVAL_SECONDS, result  # the load kept its pace
    assert result["per_session_min"] >= 2, result  # every session made progress
