"""Both MCP protocol eras against a real Hub (DESIGN.md §22.2, §22.3): the SDK's ``Client`` in ``legacy``
(the ``initialize`` handshake, sessions), ``auto`` (discovery, falling back) and ``2026-07-28`` (no handshake,
no session) modes, over streamable HTTP (answered with JSON, not an event stream) and through the relay."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.helpers import mcp_http_hub

MODES = ("legacy", "auto", "2026-07-28")


def request(url: str, body: Any, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One POST on a new connection: ``(status, headers lower-cased, body)``."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.request("POST", u.path, json.dumps(body).encode(), {
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


async def _use(client_target: Any, mode: str, name: str) -> dict[str, Any]:
    """Write a note named for ``mode`` and read it back with the SDK's ``Client``; what came back."""
    from mcp.client.client import Client

    path = f"eras/{name}.md"
    async with Client(client_target, mode=mode, cache=None) as client:
        made = await client.call_tool("memory_upsert", {"path": path, "content": f"# {name}\n",
                                                        "expected_revision": "absent"})
        got = await client.call_tool("memory_get", {"path": path})
        tools = [t.name for t in (await client.list_tools()).tools]
    return {"made": made.structured_content, "got": got.structured_content, "tools": tools}


@pytest.mark.slow  # a Hub, nine SDK clients and three relays
def test_every_sdk_mode_works_over_http_and_through_the_relay(tmp_path: Path) -> None:
    """Each mode writes and reads its own note over HTTP and through ``amux mcp``; a 2025 session's tool call
    is answered as one JSON body (no event stream) and a 2026-07-28 call gets no session id."""
    import anyio
    import httpx2
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    from amux_memory.tools.client.installation import amux_command

    h, url = mcp_http_hub(tmp_path)
    h.cli("hub", "principal", "add", "alice")
    token = h.cli("hub", "token", "issue", "alice").json["token"]
    argv = amux_command()
    results: dict[str, dict[str, Any]] = {}

    async def run() -> None:
        for mode in MODES:
            with anyio.fail_after(60):
                http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30.0))
                async with http:
                    results[f"http-{mode}"] = await _use(streamable_http_client(url, http_client=http), mode,
                                                         f"http-{mode}")
                relay = StdioServerParameters(command=argv[0], args=[*argv[1:], "mcp"],
                                              env={"AMUX_HOME": str(h.home), "AMUX_HUB": str(h.socket)})
                results[f"relay-{mode}"] = await _use(relay, mode, f"relay-{mode}")

    anyio.run(run)
    for key, out in results.items():
        assert out["made"] and out["made"]["revision"], (key, out)
        assert out["got"]["content"] == f"# {key}\n", (key, out)
        assert "memory_search" in out["tools"], (key, out)
    entries = [e["path"] for e in h.cli("memory", "list").json["entries"]]
    assert sorted(entries) == sorted(f"eras/{k}.md" for k in results)

    # The wire: a legacy tool call is one JSON body; a 2026-07-28 one has no session.
    hdrs = {"Authorization": f"Bearer {token}"}
    status, headers, _ = request(url, body={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        headers=hdrs)
    assert status == 200 and headers["content-type"].startswith("application/json"), headers
    sid = {"Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
    assert request(url, body={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=hdrs | sid)[0] == 202
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "memory_get", "arguments": {"path": "eras/http-legacy.md"}}}
    status, headers, body = request(url, body=call, headers=hdrs | sid)
    assert status == 200 and headers["content-type"].startswith("application/json"), headers
    assert json.loads(body)["result"]["structuredContent"]["content"] == "# http-legacy\n"
