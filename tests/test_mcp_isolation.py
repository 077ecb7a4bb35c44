"""What an MCP session keeps outlives no right, and belongs to its own client (DESIGN.md §9.2, §22.3).

Through real processes: a Hub (isolation ``user``, team ``web`` with alice and bob as writers, carol in no team),
MCP over streamable HTTP with raw ``http.client`` requests, the real ``amux mcp`` relay on stdio, and the real
CLI for the changes an operator makes (``amux hub team member remove``, ``amux hub team remove``,
``amux hub token revoke``).

* Continuation pages: a result in pages (a ``memory_get`` of a 54 KiB document, a whole-view
  ``memory_search``) keeps the mounts it was read through; once the caller's token is revoked, or it is no
  longer a member, or the team is gone, ``result_continue`` answers byte for byte as for a token never issued,
  and the pages are dropped.  Pages of the caller's own memory stay readable after it leaves a team.
* Sessions: a request carrying another token's ``Mcp-Session-Id`` is answered exactly as one carrying an unknown
  id, and changes nothing of that session: its pages, its place in the session book (the
  ``amux_mcp_http_sessions`` gauge).
"""

from __future__ import annotations

import http.client
import json
import re
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from amux_memory.hub.access import registry as reg
from bench.mcp_http import rpc_message
from tests.conftest import HubProcess
from tests.helpers import free_port, mcp_http_hub, wait_until
from tests.mcp_http_raw import PROTOCOL, bearer, open_session, request, tool
from tests.relay_stdio import Relay

BIG = "".join(f"line {i} " + "x" * 80 + "\n" for i in range(600))  # ~54 KiB: a memory_get comes in pages
WORD = "pagedword"


def issue(h: HubProcess, name: str) -> tuple[str, str]:
    """A token for the registered principal ``name`` that never expires: ``(its text, its id)``."""

    def change(r: reg.Registry, now: float) -> tuple[reg.Registry, tuple[str, str]]:
        updated, text, record = r.issue_token(name, now, None, None)
        return updated, (text, record.id)

    issued: tuple[str, str] = reg.modify(h.home, change)
    return issued


def team_hub(tmp_path: Path, **settings: str) -> tuple[HubProcess, str, dict[str, str], dict[str, str]]:
    """A Hub (isolation ``user``, MCP over HTTP on) with team ``web`` (review ``off``: alice and bob writers) and
    carol in no team: ``(hub, MCP URL, {principal: token}, {principal: token id})``; ``@web/big.md`` and
    bob's own ``big.md`` hold :data:`BIG`, and 20 documents of ``@web/`` hold :data:`WORD` on a long line."""
    h, url = mcp_http_hub(tmp_path, isolation="user", **settings)
    tokens: dict[str, str] = {}
    ids: dict[str, str] = {}
    for name in ("alice", "bob", "carol"):
        reg.modify(h.home, lambda r, now, n=name: r.add_principal(n, "user", now))
        tokens[name], ids[name] = issue(h, name)
    reg.modify(h.home, lambda r, now: r.add_team("web", "off", now))
    for name in ("alice", "bob"):
        reg.modify(h.home, lambda r, now, n=name: r.add_member("web", n, "writer"))
    with h.client(token=tokens["alice"]) as alice:
        alice.call("upsert", {"path": "@web/big.md", "content": BIG.encode(), "expected_revision": "absent"})
        for i in range(20):
            line = f"{WORD} note {i} " + "y" * 400 + "\n"
            alice.call("upsert", {"path": f"@web/notes/n{i:02d}.md", "content": line.encode(),
                                  "expected_revision": "absent"})
    with h.client(token=tokens["bob"]) as bob:
        bob.call("upsert", {"path": "big.md", "content": BIG.encode(), "expected_revision": "absent"})
    return h, url, tokens, ids


def raw_tool(url: str, token: str, sid: str, name: str, arguments: dict[str, Any]) -> tuple[int, bytes]:
    """``tools/call`` on session ``sid`` with JSON-RPC id 7: ``(status, the body's bytes)``."""
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    status, _, raw = request(url, body=body, headers=bearer(token, **{"Mcp-Session-Id": sid,
                                                                       "MCP-Protocol-Version": PROTOCOL}))
    return status, raw


def paged(url: str, token: str, sid: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The first page of a result that comes in at least three pages (asserted)."""
    status, first = tool(url, token, sid, name, arguments)
    assert status == 200 and not first["isError"], first
    page: dict[str, Any] = first["structuredContent"]
    assert page.get("pages", 1) >= 2 and page["continuation"], page
    return page


def unknown_reason(raw: bytes) -> str:
    result = rpc_message(raw)["result"]
    assert result["isError"], result
    reason: str = result["structuredContent"]["error"]["data"]["reason"]
    return reason


def remove(h: HubProcess, change: str, ids: dict[str, str]) -> None:
    """The operator's change, through the real CLI."""
    argv = {"member": ("hub", "team", "member", "remove", "web", "bob"),
            "team": ("hub", "team", "remove", "web"),
            "revoke": ("hub", "token", "revoke", ids["bob"])}[change]
    r = h.cli(*argv)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("change", ["member", pytest.param("team", marks=pytest.mark.slow)])
def test_http_pages_of_a_removed_member_or_team_answer_as_never_issued(tmp_path: Path, change: str) -> None:
    """bob reads ``@web/big.md`` and searches all his memory, in pages; after he leaves ``web`` (or ``web`` is
    removed) the next page, and a page he already read, answer exactly as a token no session ever had; his own
    document's pages are still served."""
    h, url, tokens, ids = team_hub(tmp_path)
    bob = tokens["bob"]
    sid, fresh = open_session(url, bob), open_session(url, bob)
    web = paged(url, bob, sid, "memory_get", {"path": "@web/big.md"})
    found = paged(url, bob, sid, "memory_search", {"query": WORD, "limit": 20})
    own = paged(url, bob, sid, "memory_get", {"path": "big.md"})
    status, second = tool(url, bob, sid, "result_continue", {"token": web["continuation"]})
    assert status == 200 and not second["isError"], second  # while bob is a member, pages are served
    third = second["structuredContent"]["continuation"]
    assert third is not None

    remove(h, change, ids)
    status, now = tool(url, bob, sid, "memory_get", {"path": "@web/big.md"})
    assert now["isError"] and now["structuredContent"]["error"]["data"]["reason"] == "no_mount", now
    for token in (third, web["continuation"], found["continuation"]):
        dropped = raw_tool(url, bob, sid, "result_continue", {"token": token})
        never = raw_tool(url, bob, fresh, "result_continue", {"token": token})
        assert dropped == never, (dropped, never)
        assert dropped[0] == 200 and unknown_reason(dropped[1]) == "unknown"
    status, mine = tool(url, bob, sid, "result_continue", {"token": own["continuation"]})
    assert status == 200 and not mine["isError"], mine  # his own memory's pages outlive the team


@pytest.mark.slow  # over 1 s; the relay keeps a fast case (revoke)
@pytest.mark.parametrize("change", ["member", "team"])
def test_relay_pages_of_a_removed_member_or_team_answer_as_never_issued(tmp_path: Path, change: str) -> None:
    relay_case(tmp_path, change)


@pytest.mark.parametrize("change", ["revoke"])
def test_relay_pages_after_the_token_is_revoked_answer_as_never_issued(tmp_path: Path, change: str) -> None:
    """Through ``amux mcp`` with bob's token: after ``amux hub token revoke`` (a normal call now says
    ``unauthorized``), ``result_continue`` answers as for a token never issued, byte for byte."""
    relay_case(tmp_path, change)


def relay_case(tmp_path: Path, change: str) -> None:
    """bob's relay reads ``@web/big.md`` in pages; after ``change`` the next page's answer is the line a relay
    that never had the token writes (same JSON-RPC id), and a normal call is refused as the change says."""
    h, _, tokens, ids = team_hub(tmp_path)
    bob, witness = Relay(h.home, AMUX_TOKEN=tokens["bob"]), Relay(h.home, AMUX_TOKEN=tokens["carol"])
    try:
        bob.handshake()
        witness.handshake()
        first = bob.tool("memory_get", path="@web/big.md")["structuredContent"]
        assert first["pages"] >= 3, first
        second = bob.tool("result_continue", token=first["continuation"])
        assert not second["isError"], second
        third = second["structuredContent"]["continuation"]
        own = bob.tool("memory_get", path="big.md")["structuredContent"]

        remove(h, change, ids)
        refused = bob.tool("memory_get", path="@web/big.md")["structuredContent"]["error"]
        assert (refused["code"], refused["data"]["reason"]) == (
            ("unauthorized", "revoked") if change == "revoke" else ("not_found", "no_mount")), refused
        for token in (third, first["continuation"]):
            call = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                               "params": {"name": "result_continue", "arguments": {"token": token}}})
            dropped, never = bob.ask(call), witness.ask(call)
            assert dropped == never, (dropped, never)
            assert json.loads(dropped)["result"]["structuredContent"]["error"]["data"]["reason"] == "unknown"
        mine = bob.tool("result_continue", token=own["continuation"])
        assert mine["isError"] == (change == "revoke"), mine  # his own pages outlive a team, not his token
    finally:
        bob.close()
        witness.close()


def sessions_gauge(base: str) -> float:
    """``amux_mcp_http_sessions`` from the Hub's metrics listener."""
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    match = re.search(r"^amux_mcp_http_sessions (\S+)$", text, re.M)
    assert match, text
    return float(match.group(1))


def test_another_tokens_session_id_changes_nothing_of_the_session(tmp_path: Path) -> None:
    """carol, and bob with a second token, send requests carrying bob's ``Mcp-Session-Id`` (a tool call, a
    listing, DELETE): each answer is byte for byte the answer for an unknown session id, and bob's session
    keeps its pages and its place in the session book."""
    port = free_port()
    h, url, tokens, _ = team_hub(tmp_path, **{"hub.metrics_listen": f"127.0.0.1:{port}"})
    metrics = f"http://127.0.0.1:{port}"
    assert h.log is not None
    wait_until(lambda: "/metrics" in h.log.read_text(), 10, "the Hub to log its metrics URL")
    bob = tokens["bob"]
    second_token, _ = issue(h, "bob")
    sid = open_session(url, bob)
    first = paged(url, bob, sid, "memory_get", {"path": "@web/big.md"})
    assert sessions_gauge(metrics) == 1
    unknown = secrets.token_hex(16)
    calls: list[tuple[str, Any]] = [
        ("POST", {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                  "params": {"name": "result_continue", "arguments": {"token": first["continuation"]}}}),
        ("POST", {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
        ("DELETE", None),
    ]
    for other in (tokens["carol"], second_token):
        for method, body in calls:
            answers = [request(url, method, body, headers=bearer(other, **{"Mcp-Session-Id": s,
                                                                           "MCP-Protocol-Version": PROTOCOL}))
                       for s in (sid, unknown)]
            (status, _, raw), (status_unknown, _, raw_unknown) = answers
            assert (status, raw) == (status_unknown, raw_unknown) and status == 404, answers
    data, token = first["data"], first["continuation"]
    while token is not None:
        status, page = tool(url, bob, sid, "result_continue", {"token": token})
        assert status == 200 and not page["isError"], page
        data, token = data + page["structuredContent"]["data"], page["structuredContent"]["continuation"]
    assert BIG.startswith(json.loads(data)["content"])
    assert sessions_gauge(metrics) == 1
    assert request(url, "DELETE", headers=bearer(bob, **{"Mcp-Session-Id": sid,
                                                          "MCP-Protocol-Version": PROTOCOL}))[0] == 200
    assert sessions_gauge(metrics) == 0
