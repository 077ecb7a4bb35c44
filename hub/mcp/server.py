"""The ``amux`` MCP server inside the Hub: one SDK low-level ``Server`` per MCP session (DESIGN.md §9.2).

:func:`build_server` is the one entry point every transport uses: the Hub's
socket and TLS connections (:mod:`hub.mcp.session`, after ``mcp_open``), and
the streamable-HTTP front door, which runs one shared server
(:func:`build_shared_server`, through :mod:`hub.mcp.http_servers`) under the SDK's
session manager.  It takes how to reach the memory service for the session's
caller (a :data:`hub.mcp.handlers.Backend`, normally
:func:`hub.mcp.handlers.hub_backend` over ``Hub.call`` with the caller's
identity and scope) and whether to send the instructions.

The server has exactly the handlers it registers, ``tools/list`` and
``tools/call``, and its ``initialize`` result advertises the ``tools``
capability only (no prompts, no resources).  Both handlers go to the one
:class:`~hub.mcp.catalog.ToolCatalog`, which answers every call, failures
included, with a result of one shape.

Instructions
    The server's MCP ``instructions`` are the fixed protocol
    (``amux protocol show``), unless the session asked for none
    (``amux mcp`` with ``$AMUX_MCP_INSTRUCTIONS=off``, for launchers that
    already put the protocol in the agent's instructions).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import mcp.types as types
from mcp.server import Server, ServerRequestContext

from amux_memory.hub.mcp.catalog import catalog
from amux_memory.hub.mcp.handlers import Backend, MemoryTools
from amux_memory.hub.mcp.pager import DEFAULT_PAGE_TTL, Pager
from amux_memory.protocol.agent_protocol import render as render_protocol
from amux_memory.protocol.version import package_version

SERVER_NAME = "amux"
"""The server's name in ``initialize`` (clients prefix tools with it: ``mcp__amux__memory_get``)."""
SERVER_TITLE = "amux memory"
"""The server's human-readable title in ``initialize``."""

Review = bool | Callable[[], Awaitable[bool]]
"""Whether ``tools/list`` publishes the review output schemas (DESIGN.md §21): fixed, or asked of the Hub at each
listing (the caller's teams may review its writes though ``memory.review`` is off, DESIGN.md §7.8)."""


def build_server(backend: Backend, *, instructions: bool = True, page_ttl: float = DEFAULT_PAGE_TTL,
                 review: Review = False) -> Server[MemoryTools]:
    """A fresh ``amux`` MCP server for one session whose tool calls go to ``backend``.

    ``instructions`` False leaves the protocol text out of ``initialize``;
    ``page_ttl`` is how many seconds this session's paged results stay
    readable; ``review`` True (or a coroutine function answering True at a
    listing) publishes the output schemas of a Hub that may keep the caller's
    agent writes for review (DESIGN.md §21).  The state (pages) belongs to
    this server alone: build one per MCP session.  Run it with ``await server.run(read, write,
    server.create_initialization_options())`` on anyio memory streams of
    ``SessionMessage`` (or give it to the SDK's streamable-HTTP manager).
    """
    state = MemoryTools(backend, Pager(ttl=page_ttl))
    tools = catalog()

    @asynccontextmanager
    async def lifespan(_: Server[MemoryTools]) -> AsyncIterator[MemoryTools]:
        yield state

    async def list_tools(_: ServerRequestContext[MemoryTools],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.listing(review if isinstance(review, bool) else await review()))

    async def call_tool(_: ServerRequestContext[MemoryTools],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        return await tools.call(state, params.name, params.arguments)

    return Server(
        SERVER_NAME,
        version=package_version(),
        title=SERVER_TITLE,
        instructions=render_protocol("mcp") if instructions else None,
        lifespan=lifespan,
        get_tool_input_schema=tools.input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def build_shared_server(tools_for: Callable[[ServerRequestContext[Any]], MemoryTools], *,
                        instructions: bool = True,
                        review: bool | Callable[[ServerRequestContext[Any]], Awaitable[bool]] = False) -> Server[Any]:
    """An ``amux`` MCP server shared by many sessions, as the SDK's streamable-HTTP manager runs one.

    The same ``initialize`` and ``tools/list`` answers as :func:`build_server`
    (name, version, title, instructions, tools), but no per-session state of
    its own: each ``tools/call`` runs on ``tools_for(ctx)``, the
    :class:`MemoryTools` of the caller and session of that request (built by
    :mod:`hub.mcp.http_servers` from the HTTP request).  ``instructions`` and
    ``review`` as in :func:`build_server`; a callable ``review`` is asked with the
    listing's request context (its caller).
    """
    tools = catalog()

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.listing(review if isinstance(review, bool) else await review(ctx)))

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        return await tools.call(tools_for(ctx), params.name, params.arguments)

    return Server(
        SERVER_NAME,
        version=package_version(),
        title=SERVER_TITLE,
        instructions=render_protocol("mcp") if instructions else None,
        get_tool_input_schema=tools.input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
