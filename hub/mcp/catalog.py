"""The published tools and the one place a ``tools/call`` is answered (DESIGN.md §9).

:class:`ToolCatalog` lists the five tools (name, title, description,
annotations, input schema from the handler's signature, output schema from
:mod:`hub.mcp.schemas`) and dispatches a call: it validates the arguments
against the input schema, runs the handler, and turns every failure into a
tool error of one shape, ``{"error": {code, message, data, next_step}}`` plus
the text (:func:`hub.mcp.render.error_result`):

* an unknown tool name: ``bad_request``, ``data`` = ``{tool, tools}``;
* arguments that fail the input schema (a wrong type, a missing required
  argument, a value out of bounds), checked strictly (no coercion: ``"yes"``
  is not ``true``, ``"3"`` and ``2.0`` are not integers): ``bad_request``, ``data`` =
  ``{tool, errors: [{argument, problem}]}``; the rejected values are not
  echoed (they are the caller's data, and can be a whole document);
* a bug in the server itself: ``internal``, logged with its traceback.

Arguments the schema does not name are ignored, as JSON Schema allows by
default (the input schemas do not set ``additionalProperties``).
"""

from __future__ import annotations

import logging
from typing import Any

import mcp.types as types
from mcp.server.mcpserver.tools import Tool
from pydantic import ValidationError

from amux_memory.hub.mcp.render import error_result
from amux_memory.hub.mcp.schemas import OUTPUT_SCHEMAS, REVIEW_OUTPUT_SCHEMAS
from amux_memory.hub.mcp.tools import TOOL_NAMES, MemoryTools
from amux_memory.protocol.errors import ErrorCode, HubError

log = logging.getLogger("amux.mcp")

MAX_NAME_ECHO = 64
"""Characters of an unknown tool name repeated in the error (a name is the caller's text, of any length)."""

DESCRIPTIONS = {
    "memory_search": "Search long-term memory for literal keywords. Use it before answering about earlier work, "
    "decisions, preferences, agreements or recurring problems; skip it for tasks that need no history. Returns "
    "ranked documents with path, line and a snippet; read the relevant ones with memory_get. incomplete=true "
    "means the scan stopped early: an empty result is then no proof that nothing matches.",
    "memory_get": "Read a bounded fragment of one memory document and its whole-file revision. Read MEMORY.md once "
    "at the start of a conversation. A missing document gives exists=false and revision \"absent\". If "
    "truncated, call again with offset=next_offset. Read a document before changing it.",
    "memory_upsert": "Create or replace a whole memory document. Read it first with memory_get and pass the "
    "revision you read as expected_revision (\"absent\" to create); the write happens only if the document "
    "still has that revision. On a conflict, read again, merge and retry. Keep MEMORY.md small and put details "
    "in topic documents. Never store secrets. Say something is saved only after this succeeds.",
    "memory_forget": "Delete one memory document if it still has expected_revision. To forget a single fact, "
    "rewrite the documents that mention it with memory_upsert instead, and remove stale pointers from MEMORY.md "
    "and from any index that links to the document (such as index.md).",
    "result_continue": "Fetch the next page of a tool result that was too large for one reply. Pass the "
    "continuation token of the previous page; the pages' data joined in order is the full result.",
}
"""Tool name → the description a model reads when choosing a tool."""

ANNOTATIONS = {
    "memory_search": types.ToolAnnotations(title="Search memory", read_only_hint=True, idempotent_hint=True,
                                           open_world_hint=False),
    "memory_get": types.ToolAnnotations(title="Read a memory document", read_only_hint=True, idempotent_hint=True,
                                        open_world_hint=False),
    "memory_upsert": types.ToolAnnotations(title="Write a memory document", read_only_hint=False,
                                           destructive_hint=True, idempotent_hint=True, open_world_hint=False),
    "memory_forget": types.ToolAnnotations(title="Delete a memory document", read_only_hint=False,
                                           destructive_hint=True, idempotent_hint=True, open_world_hint=False),
    "result_continue": types.ToolAnnotations(title="Next page of a result", read_only_hint=True,
                                             idempotent_hint=True, open_world_hint=False),
}
"""Tool name → its title and behaviour hints (writes are compare-and-swap, hence idempotent)."""


def unknown_tool(name: str) -> HubError:
    """The ``bad_request`` for a call to a tool this server does not have."""
    shown = name[:MAX_NAME_ECHO]
    return HubError(ErrorCode.BAD_REQUEST,
                    f"unknown tool {shown!r}: this server's tools are {', '.join(TOOL_NAMES)}",
                    {"tool": shown, "tools": list(TOOL_NAMES)})


def invalid_arguments(tool: str, exc: ValidationError) -> HubError:
    """The ``bad_request`` for arguments that fail ``tool``'s input schema: which argument, and what is wrong."""
    errors = []
    for error in exc.errors(include_url=False, include_input=False):
        argument = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        problem = "required argument missing" if error["type"] == "missing" else error["msg"]
        errors.append({"argument": argument, "problem": problem})
    said = "; ".join(f"{e['argument']}: {e['problem']}" for e in errors)
    return HubError(ErrorCode.BAD_REQUEST, f"invalid arguments for {tool}: {said}",
                    {"tool": tool, "errors": errors})


async def _no_backend(method: str, params: dict[str, Any]) -> dict[str, Any]:
    raise HubError(ErrorCode.INTERNAL, "the catalog's template state runs no requests")


class ToolCatalog:
    """The published tools (their listing and input schemas) and calls by name on a session's state.

    Built once per process (:func:`catalog`): the schemas and argument models
    come from the handlers' signatures, the same for every session; a call runs
    the handler of the session's own :class:`MemoryTools`.
    """

    def __init__(self) -> None:
        template = MemoryTools(_no_backend)
        self.tools: dict[str, Tool] = {
            name: Tool.from_function(getattr(template, name), name=name, title=ANNOTATIONS[name].title,
                                     description=DESCRIPTIONS[name], annotations=ANNOTATIONS[name])
            for name in TOOL_NAMES
        }
        """Tool name → the SDK's description of the handler (input schema and argument validation)."""

    def listing(self, review: bool = False) -> list[types.Tool]:
        """The ``tools/list`` entries, in :data:`TOOL_NAMES` order; ``review``: the Hub keeps agents' writes for
        review (``memory.review = agents``), so upsert and forget may answer a proposal (DESIGN.md §21)."""
        schemas = REVIEW_OUTPUT_SCHEMAS if review else OUTPUT_SCHEMAS
        return [
            types.Tool(name=tool.name, title=tool.title, description=tool.description,
                       input_schema=tool.parameters, output_schema=schemas[tool.name],
                       annotations=tool.annotations)
            for tool in self.tools.values()
        ]

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """The input schema of tool ``name``, or ``None`` for a tool this server does not have."""
        tool = self.tools.get(name)
        return None if tool is None else tool.parameters

    async def call(self, state: MemoryTools, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        """Answer ``tools/call`` on ``state``: the handler's result, or a tool error (see the module docstring).

        Never raises, except on cancellation, which propagates; a write
        cancelled after it was sent may or may not have happened.
        """
        tool = self.tools.get(name)
        if tool is None:
            log.info("call to an unknown tool %r", name[:MAX_NAME_ECHO])
            return error_result(unknown_tool(name))
        try:
            # Strict: what the published schema refuses is refused ("yes" is not a boolean, "3" and 2.0 are not
            # integers, true is not a line number).  The SDK's own validation is lax and also parses JSON
            # inside strings, so it is not used.
            kwargs = tool.fn_metadata.arg_model.model_validate(arguments or {}, strict=True).model_dump_one_level()
        except ValidationError as exc:
            refused = invalid_arguments(name, exc)
            log.info("tool %s rejected arguments: %s", name, [e["argument"] for e in refused.data["errors"]])
            return error_result(refused)
        try:
            result = await getattr(state, name)(**kwargs)
            if not isinstance(result, types.CallToolResult):
                raise TypeError(f"tool {name} returned {type(result).__name__}, not a CallToolResult")
        except Exception as exc:
            log.exception("tool %s failed", name)
            return error_result(HubError(ErrorCode.INTERNAL, f"the MCP server failed on {name} "
                                         f"({type(exc).__name__}); its log on stderr has the details",
                                         {"tool": name}))
        return result


_CATALOG: list[ToolCatalog] = []


def catalog() -> ToolCatalog:
    """The process's one :class:`ToolCatalog` (built on first use: it builds a pydantic model per tool)."""
    if not _CATALOG:
        _CATALOG.append(ToolCatalog())
    return _CATALOG[0]
