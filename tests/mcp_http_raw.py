"""Raw HTTP to the Hub's MCP listener (``http.client``): issue a token through the CLI, one request, a session,
a JSON-RPC call and a tool call.  Shared by ``tests/test_mcp_http.py``, ``tests/test_metrics.py`` and the stress
runs."""

from __future__ import annotations

import contextlib
import http.client
import json
from typing import Any
from urllib.parse import urlsplit

from bench.mcp_http import rpc_message
from tests.conftest import HubProcess

PROTOCOL = "2025-06-18"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}


def issue(h: HubProcess, principal: str, *extra: str) -> tuple[str, str]:
    """``(token, token id)`` for ``principal`` (added first), through the real CLI."""
    h.cli("hub", "principal", "add", principal)
    r = h.cli("hub", "token", "issue", principal, *extra)
    assert r.returncode == 0, r.stderr
    return r.json["token"], r.json["id"]


def request(url: str, method: str = "POST", body: Any = None, headers: dict[str, str] | None = None,
            path: str | None = None, raw: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request on a new connection: ``(status, headers lower-cased, body)``."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    hdrs = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **(headers or {})}
    # A server refusing a body (413) answers and closes before reading all of it; the answer is already in
    # this socket's receive buffer, so it is read as a client that sent the whole body would.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        conn.request(method, path or u.path, body=data, headers=hdrs)
    resp = conn.getresponse()
    out = resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    conn.close()
    return out


def bearer(token: str, **more: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **more}


def open_session(url: str, token: str, **more: str) -> str:
    status, headers, body = request(url, body=INIT, headers=bearer(token, **more))
    assert status == 200, (status, body)
    sid = headers["mcp-session-id"]
    status, _, _ = request(url, body={"jsonrpc": "2.0", "method": "notifications/initialized"},
                           headers=bearer(token, **{"Mcp-Session-Id": sid, "MCP-Protocol-Version": PROTOCOL}, **more))
    assert status == 202
    return sid


def rpc(url: str, token: str, sid: str, method: str, params: dict[str, Any] | None = None,
        **more: str) -> tuple[int, Any]:
    """One JSON-RPC request on session ``sid``: ``(status, the JSON-RPC message)`` (the raw body unless 200)."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 2, "method": method}
    if params is not None:
        body["params"] = params
    status, _, raw = request(url, body=body, headers=bearer(
        token, **{"Mcp-Session-Id": sid, "MCP-Protocol-Version": PROTOCOL}, **more))
    return (status, rpc_message(raw)) if status == 200 else (status, raw)


def tool(url: str, token: str, sid: str, name: str = "memory_get", arguments: dict[str, Any] | None = None,
         **more: str) -> tuple[int, Any]:
    """``tools/call`` of ``name`` (default: ``memory_get`` of ``MEMORY.md``): ``(status, CallToolResult)``."""
    status, answer = rpc(url, token, sid, "tools/call",
                         {"name": name, "arguments": {"path": "MEMORY.md"} if arguments is None else arguments},
                         **more)
    return (status, answer["result"]) if status == 200 else (status, answer)
