"""The ``amux`` MCP server: the SDK server, its lifespan and instructions, and ``amux mcp``'s ``main`` (DESIGN.md §9).

It is the ``mcp`` SDK's low-level ``Server``, so it has exactly the handlers
it registers, ``tools/list`` and ``tools/call``, and its ``initialize`` result
advertises the ``tools`` capability only (no prompts, no resources).  Both
handlers go to one :class:`~tools.mcp.catalog.ToolCatalog`, which answers
every call, failures included, with a result of one shape.

Instructions
    The server's MCP ``instructions`` are the fixed protocol
    (``amux protocol show``); ``$AMUX_MCP_INSTRUCTIONS=off`` leaves them out,
    for launchers that already put the protocol in the agent's instructions.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

import mcp.types as types
import trio
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from protocol.agent_protocol import render as render_protocol
from protocol.version import package_version
from tools.mcp.catalog import ToolCatalog
from tools.mcp.handlers import MemoryTools

SERVER_NAME = "amux"
"""The server's name in ``initialize`` (clients prefix tools with it: ``mcp__amux__memory_get``)."""
SERVER_TITLE = "amux memory"
"""The server's human-readable title in ``initialize``."""

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
"""The level names ``$AMUX_MCP_LOG`` accepts."""


def build_server(state: MemoryTools | None = None) -> Server[MemoryTools]:
    """The ``amux`` MCP server over ``state`` (default: a fresh :class:`MemoryTools` from the environment).

    Its lifespan runs the start-up check in the background while the server
    serves, and on exit (the client closed stdin, or cancellation) cancels
    the check and closes the Hub connection.
    """
    state = state or MemoryTools()
    catalog = ToolCatalog(state)

    @asynccontextmanager
    async def lifespan(_: Server[MemoryTools]) -> AsyncIterator[MemoryTools]:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(state.startup_check)
            try:
                yield state
            finally:
                nursery.cancel_scope.cancel()
                await state.client.aclose()

    async def list_tools(_: ServerRequestContext[MemoryTools],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=catalog.listing())

    async def call_tool(_: ServerRequestContext[MemoryTools],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        return await catalog.call(params.name, params.arguments)

    return Server(
        SERVER_NAME,
        version=package_version(),
        title=SERVER_TITLE,
        instructions=server_instructions(),
        lifespan=lifespan,
        get_tool_input_schema=catalog.input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def server_instructions() -> str | None:
    """The MCP ``instructions``: the fixed protocol, unless ``$AMUX_MCP_INSTRUCTIONS`` is ``off``.

    ``amux launch`` puts the protocol into the agent's own instructions and
    turns this copy off, so the model sees one block, not two (clients show
    server instructions as a second block: Claude Code in a message, Codex
    as the tool namespace's description).  DESIGN.md §9.2.
    """
    return None if os.environ.get("AMUX_MCP_INSTRUCTIONS", "").lower() == "off" else render_protocol("mcp")


def log_level() -> LogLevel:
    """The log level from ``$AMUX_MCP_LOG`` (case-insensitive); ``WARNING`` when unset or not a level name."""
    level = os.environ.get("AMUX_MCP_LOG", "WARNING").upper()
    match level:
        case "DEBUG" | "INFO" | "WARNING" | "ERROR" | "CRITICAL":
            return level
    return "WARNING"


async def serve_stdio(server: Server[MemoryTools]) -> None:
    """Serve ``server`` on stdin/stdout until the client closes stdin; cancellation stops it (lifespan exits)."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main() -> int:
    """``amux mcp``: serve on stdin/stdout until the client closes stdin; returns the exit status (130 on ^C)."""
    logging.basicConfig(stream=sys.stderr, level=log_level(), format="%(name)s: %(levelname)s: %(message)s")
    server = build_server()
    try:
        trio.run(serve_stdio, server)
    except KeyboardInterrupt:
        return 130
    return 0
