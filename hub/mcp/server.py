"""The ``amux`` MCP server inside the Hub: one SDK low-level ``Server`` per MCP session (DESIGN.md §9.2).

:func:`build_server` is the one entry point every transport uses: the Hub's
socket and TLS connections (:mod:`hub.mcp.session`, after ``mcp_open``), and
the streamable-HTTP front door, which runs one shared server
(:func:`build_shared_server`, through :mod:`hub.mcp.http_servers`) under the SDK's
session manager.  It takes how to reach the memory service for the session's
caller (a :data:`hub.mcp.tools.Backend`, normally
:func:`hub.mcp.tools.hub_backend` over ``Hub.call`` with the caller's
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
    already put the protocol in the agent's instructions).  A caller with team
    mounts (DESIGN.md §7.8) gets the protocol plus its team line
    (:func:`protocol.agent_protocol.team_sentence`), as its membership was when
    the session opened: a relay's session at ``mcp_open`` (``mounts`` of
    :func:`build_server`), an HTTP session at its ``initialize`` (the shared
    server's :class:`TeamInstructions`).  MCP has no way to change instructions
    within a session, so a membership changed later shows only in the calls,
    which resolve mounts from the registry on every call: a mount added later is
    searched and named in results, a mount removed answers ``not_found``
    (``no_mount``, the message listing the mounts the caller has now).  A relay
    that answered ``initialize`` itself before the Hub was up (its offline
    snapshot) names no mount.  A caller with no team gets the fixed text, byte
    for byte.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult

from amux_memory.hub.mcp.catalog import catalog
from amux_memory.hub.mcp.continuations import DEFAULT_PAGE_TTL, Pager
from amux_memory.hub.mcp.tools import Backend, MemoryTools, Rights
from amux_memory.protocol.agent_protocol import render as render_protocol
from amux_memory.protocol.errors import HubError
from amux_memory.protocol.version import package_version

SERVER_NAME = "amux"
"""The server's name in ``initialize`` (clients prefix tools with it: ``mcp__amux__memory_get``)."""
SERVER_TITLE = "amux memory"
"""The server's human-readable title in ``initialize``."""

INSTRUCTED_METHODS = frozenset({"initialize", "server/discover"})
"""The requests whose result carries the server's ``instructions`` (the handshake, and the 2026 protocol's
discovery)."""

Mounts = Sequence[Mapping[str, object]]
"""A caller's team mounts as ``hello`` answers them: ``[{mount, role, review}]``
(:func:`hub.access.mounts.mount_entries`)."""

log = logging.getLogger("amux.mcp")

Review = bool | Callable[[], Awaitable[bool]]
"""Whether ``tools/list`` publishes the review output schemas (DESIGN.md §21): fixed, or asked of the Hub at each
listing (the caller's teams may review its writes though ``memory.review`` is off, DESIGN.md §7.8)."""


def build_server(backend: Backend, *, instructions: bool = True, page_ttl: float = DEFAULT_PAGE_TTL,
                 review: Review = False, mounts: Mounts = (), rights: Rights | None = None) -> Server[MemoryTools]:
    """A fresh ``amux`` MCP server for one session whose tool calls go to ``backend``.

    ``instructions`` False leaves the protocol text out of ``initialize``; ``mounts``, the caller's team
    mounts when the session opened, add the team line to it (nothing when empty);
    ``page_ttl`` is how many seconds this session's paged results stay
    readable; ``review`` True (or a coroutine function answering True at a
    listing) publishes the output schemas of a Hub that may keep the caller's
    agent writes for review (DESIGN.md §21); ``rights``, the caller's view now through the Hub, is asked before
    every page (:class:`~hub.mcp.tools.MemoryTools`).  The state (pages) belongs to
    this server alone: build one per MCP session.  Run it with ``await server.run(read, write,
    server.create_initialization_options())`` on anyio memory streams of
    ``SessionMessage`` (or give it to the SDK's streamable-HTTP manager).
    """
    state = MemoryTools(backend, Pager(ttl=page_ttl), rights)
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
        instructions=render_protocol("mcp", mounts) if instructions else None,
        lifespan=lifespan,
        get_tool_input_schema=tools.input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


class TeamInstructions:
    """Server middleware (the SDK's ``Server.middleware``) that gives each session of a shared server the
    instructions of its own caller: ``initialize`` (and ``server/discover``) answered with instructions get the
    protocol with the team line of ``mounts_for(ctx)``, the mounts of that request's caller now.

    A caller with no mount, a server without instructions, or a caller ``mounts_for`` cannot name
    (``LookupError``, ``OSError``, a ``HubError`` such as an unusable registry: logged) keeps the answer as the
    SDK built it, byte for byte; its calls then answer for themselves.
    """

    def __init__(self, mounts_for: Callable[[ServerRequestContext[Any]], Awaitable[Mounts]]) -> None:
        self.mounts_for = mounts_for

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Run the rest of the chain; rewrite ``instructions`` in the result of :data:`INSTRUCTED_METHODS`."""
        result = await call_next(ctx)
        if ctx.method not in INSTRUCTED_METHODS or not isinstance(result, dict) or not result.get("instructions"):
            return result
        try:
            mounts = await self.mounts_for(ctx)
        except (LookupError, OSError, HubError) as exc:
            log.warning("%s: the caller's team mounts are unknown (%s); the instructions name none", ctx.method, exc)
            return result
        if mounts:
            result["instructions"] = render_protocol("mcp", mounts)
        return result


def build_shared_server(tools_for: Callable[[ServerRequestContext[Any]], MemoryTools], *,
                        instructions: bool = True,
                        review: bool | Callable[[ServerRequestContext[Any]], Awaitable[bool]] = False,
                        mounts_for: Callable[[ServerRequestContext[Any]], Awaitable[Mounts]] | None = None,
                        ) -> Server[Any]:
    """An ``amux`` MCP server shared by many sessions, as the SDK's streamable-HTTP manager runs one.

    The same ``initialize`` and ``tools/list`` answers as :func:`build_server`
    (name, version, title, instructions, tools), but no per-session state of
    its own: each ``tools/call`` runs on ``tools_for(ctx)``, the
    :class:`MemoryTools` of the caller and session of that request (built by
    :mod:`hub.mcp.http_servers` from the HTTP request).  ``instructions`` and
    ``review`` as in :func:`build_server`, a callable one asked with the listing's request context (its
    caller); ``mounts_for(ctx)``, the team mounts of a request's caller, makes each session's instructions its
    caller's (:class:`TeamInstructions`, read at ``initialize``).
    """
    tools = catalog()

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.listing(review if isinstance(review, bool) else await review(ctx)))

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        return await tools.call(tools_for(ctx), params.name, params.arguments)

    server: Server[Any] = Server(
        SERVER_NAME,
        version=package_version(),
        title=SERVER_TITLE,
        instructions=render_protocol("mcp") if instructions else None,
        get_tool_input_schema=tools.input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    if instructions and mounts_for is not None:
        server.middleware.append(TeamInstructions(mounts_for))
    return server
