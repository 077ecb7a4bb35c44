"""Talking MCP to the real ``amux mcp`` subprocess through the ``mcp`` SDK's stdio client.

:func:`mcp_session` starts ``amux mcp`` for a Hub home and initializes it;
:func:`call` calls a tool and checks every result against the output schema the
server published; :func:`ok` and :func:`err` unwrap a success or a tool error
(the error shape of DESIGN.md §9: ``{"error": {code, message, data, next_step}}``
plus the same text).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from amux_memory.protocol.errors import ErrorCode
from tests.conftest import amux_argv

_SCHEMAS: dict[int, dict[str, Any]] = {}
"""Per open session (``id(session)``): tool name -> the output schema ``tools/list`` published."""


@asynccontextmanager
async def mcp_session(home: Path, errlog: Path, **env: str) -> AsyncIterator[ClientSession]:
    """``amux mcp`` as a subprocess for ``home``, initialized; its stderr is appended to ``errlog``.

    ``env`` is the server's whole environment besides ``AMUX_HOME`` (e.g. ``AMUX_HUB``, ``AMUX_TOKEN``).
    Leaving the block (or cancellation) closes the session and ends the subprocess.
    """
    argv = amux_argv()
    params = StdioServerParameters(command=argv[0], args=[*argv[1:], "mcp"], env={"AMUX_HOME": str(home), **env})
    with open(errlog, "a") as err_file:
        async with stdio_client(params, errlog=err_file) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            try:
                yield session
            finally:
                _SCHEMAS.pop(id(session), None)


async def call(session: ClientSession, tool: str, **arguments: Any) -> CallToolResult:
    """Call a tool; every result, errors included, must match the output schema the server published.

    The Python SDK checks successes only; the TypeScript SDK checks errors too, so this does. Raises
    ``jsonschema.ValidationError`` when a structured result does not match.
    """
    if id(session) not in _SCHEMAS:
        _SCHEMAS[id(session)] = {t.name: t.output_schema for t in (await session.list_tools()).tools}
    result = await session.call_tool(tool, arguments)
    jsonschema.validate(result.structured_content, _SCHEMAS[id(session)][tool])
    return result


def text(result: CallToolResult) -> str:
    """The text rendering of a tool result: exactly one text block (asserted)."""
    block = result.content[0] if len(result.content) == 1 else None
    assert isinstance(block, TextContent), result.content
    return block.text


def ok(result: CallToolResult) -> dict[str, Any]:
    """The structured content of a successful tool result (asserted: not an error, a dict, non-empty text)."""
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    assert text(result)
    return result.structured_content


def err(result: CallToolResult, code: ErrorCode) -> dict[str, Any]:
    """The structured error of a tool error, checked to carry ``code``, a message and a next step.

    Also asserted: the text block says ``Error <code>: <message>`` and the next step.
    """
    assert result.is_error, result
    assert isinstance(result.structured_content, dict), result.content
    error: dict[str, Any] = result.structured_content["error"]
    assert error["code"] == code.value, error
    assert error["message"] and error["next_step"]
    rendered = text(result)
    assert f"Error {code.value}: {error['message']}" in rendered and error["next_step"] in rendered
    return error
