"""An MCP client over streamable HTTP for the other machine of ``tests/test_remote_machine.py``.

Run as a script (``python tests/remote_mcp_client.py URL --token T [--ca FILE] [--query WORD]``), inside
the test's network namespace: the ``mcp`` SDK's ``streamable_http_client`` with an HTTP client that sends
``Authorization: Bearer T`` and trusts only ``FILE`` (without ``--ca``: the system roots, which do not know
the Hub's private CA).  It initializes, lists the tools and calls one: ``memory_search`` with
``{"query": WORD}`` (the Hub's own MCP server, DESIGN.md §9.2).

Prints one JSON object on stdout: ``{"server", "tools", "called", "is_error", "text", "structured"}``;
exit status 0.  Any failure (TLS, HTTP, MCP) prints ``ERROR <type>: <message>`` lines on stderr, one per
nested exception, and exits 3.  Everything is bounded by 60 s.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
from typing import Any

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

TIMEOUT_SECONDS = 60.0
"""The whole run's bound (connect, TLS, initialize, list, call)."""


async def run(url: str, token: str, ca: str | None, query: str) -> dict[str, Any]:
    """Initialize, list the tools and call one; the summary printed by :func:`main`."""
    verify = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, verify=verify,
                              timeout=httpx2.Timeout(30.0, read=60.0))
    with anyio.fail_after(TIMEOUT_SECONDS):
        async with (http, streamable_http_client(url, http_client=http) as (read, write),
                    ClientSession(read, write) as session):
            init = await session.initialize()
            tools = [t.name for t in (await session.list_tools()).tools]
            name = "memory_search"
            result = await session.call_tool(name, {"query": query})
            text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
            return {"server": init.server_info.name, "tools": tools, "called": name, "is_error": result.is_error,
                    "text": text, "structured": result.structured_content}


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc`` (exception groups and causes unwrapped), outermost first."""
    out: list[BaseException] = [exc]
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            out += _leaves(inner)
    cause = exc.__cause__ or exc.__context__
    if cause is not None and cause not in out:
        out += _leaves(cause)
    return out


def main() -> int:
    """Parse the arguments, run, print; 0 on success, 3 on any failure."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url")
    parser.add_argument("--token", required=True)
    parser.add_argument("--ca")
    parser.add_argument("--query", default="amux")
    args = parser.parse_args()
    try:
        doc = anyio.run(run, args.url, args.token, args.ca, args.query)
    except BaseException as exc:  # noqa: BLE001 - report every failure the same way
        for leaf in _leaves(exc):
            print(f"ERROR {type(leaf).__name__}: {leaf}", file=sys.stderr)
        return 3
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
