"""The tool handlers: each builds one Hub request and runs it for the session's caller (DESIGN.md §9.2).

The handlers' signatures are the tools' input schemas (parameter types,
bounds, defaults and descriptions, read by :mod:`hub.mcp.catalog`); their
results are ``CallToolResult`` values built by :mod:`hub.mcp.render` and
:mod:`hub.mcp.continuations`.  A Hub error becomes a tool error, never an exception.

A request goes to a :class:`Backend`: inside the Hub, the memory service with
the MCP session's identity and scope (:func:`hub_backend`, as
:meth:`hub.serve.hub.Hub.call` runs a socket request), not a client connection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.types import CallToolResult
from pydantic import Field

from amux_memory.hub.access.identity import Identity, Scope
from amux_memory.hub.mcp.continuations import Pager
from amux_memory.hub.mcp.render import RENDERERS, error_result
from amux_memory.hub.storage.faults import STORAGE_CODES, from_os_error, log_fault
from amux_memory.protocol.errors import HubError
from amux_memory.protocol.limits import ENTRY_NAME, KIB, LIMITS
from amux_memory.protocol.messages import Request
from amux_memory.protocol.requests import forget_params, get_params, search_params, upsert_params

log = logging.getLogger("amux.mcp")

TOOL_NAMES = ("memory_search", "memory_get", "memory_upsert", "memory_forget", "result_continue")
"""The tools, in the order they are listed (``launch.agents.MCP_TOOL_NAMES`` keeps a copy)."""

PATH_DOC = "Relative Markdown path inside memory, e.g. 'MEMORY.md' or 'projects/amux/decisions.md'."
"""Input description of every ``path`` argument."""
REVISION_DOC = ("The revision you last read with memory_get (64 hex digits), or 'absent' to create a document "
                "that must not exist yet.")
"""Input description of ``memory_upsert``'s ``expected_revision``."""

Backend = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""``await backend(method, params)`` runs one Hub data method for the session's caller and returns its result
map, or raises :class:`HubError` (``disabled``, ``conflict``, ``busy``, ...)."""


class _Caller:
    """The Hub's memory service for one caller: ``(method, params)`` -> result, as a socket request would run."""

    def __init__(self, call: Callable[[Identity, Scope, Request], Awaitable[dict[str, Any]]],
                 identity: Identity, scope: Scope) -> None:
        self.run, self.identity, self.scope = call, identity, scope

    async def __call__(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self.run(self.identity, self.scope, Request(0, method, params))
        except HubError as exc:
            if exc.code in STORAGE_CODES:
                log_fault(log, method, exc)  # the full OSError stays in the log, not the answer
            raise
        except OSError as exc:  # a file-system failure no step named (DESIGN.md §4.8), as hub.connection does
            log.exception("tool request %s failed", method)
            raise from_os_error(exc, method, "") from None


def hub_backend(call: Callable[[Identity, Scope, Request], Awaitable[dict[str, Any]]],
                identity: Identity, scope: Scope) -> Backend:
    """A :data:`Backend` that runs each method through ``call`` (``hub.serve.hub.Hub.call``) for ``identity``/``scope``.

    The identity and scope are fixed when the MCP session opens (DESIGN.md §3.3: a request keeps the identity
    current when it started); a token revoked since is refused on the next call by ``Hub.call`` itself.
    """
    return _Caller(call, identity, scope)


class MemoryTools:
    """The per-session state behind the tools: where requests go (``backend``) and the session's pages.

    One instance per MCP session, so pages of one session are never served to another.
    """

    def __init__(self, backend: Backend, pager: Pager | None = None) -> None:
        self.backend = backend
        self.pager = pager or Pager()

    async def forward(self, tool: str, method: str, params: dict[str, Any]) -> CallToolResult:
        """Run Hub ``method`` with ``params`` for ``tool``.

        A result becomes its structured content plus text (paged when over the
        budget), a :class:`HubError` a tool error.
        """
        try:
            result = await self.backend(method, params)
        except HubError as exc:
            return error_result(exc)
        return self.pager.respond(tool, result, RENDERERS[tool](result))

    # The tools.  Parameter descriptions become the input schema a model sees.

    async def memory_search(
        self,
        query: Annotated[str, Field(description=f"Literal keywords separated by spaces (1-{LIMITS.query_max_keywords}"
                                    f", at most {LIMITS.query_max_bytes} bytes); a document containing any one is a "
                                    "candidate. Case-insensitive; no regex, wildcards or quotes. For synonyms, "
                                    "search again with other words.")],
        path_prefix: Annotated[str, Field(description="Only documents whose path starts with this, "
                                          "e.g. 'projects/amux/'. Empty: all of memory.")] = "",
        limit: Annotated[int, Field(ge=1, le=LIMITS.search_max_limit,
                                    description=f"Documents to return, 1-{LIMITS.search_max_limit}.")
                         ] = LIMITS.search_default_limit,
    ) -> CallToolResult:
        """``memory_search`` → Hub ``search`` (DESIGN.md §5)."""
        return await self.forward("memory_search", "search",
                                  search_params(query, path_prefix=path_prefix, limit=limit))

    async def memory_get(
        self,
        path: Annotated[str, Field(description=PATH_DOC)],
        start_line: Annotated[int, Field(ge=0, description="First line, 1-based; 0 reads from the start.")] = 0,
        end_line: Annotated[int, Field(ge=0, description="Last line, inclusive; 0 reads to the end "
                                       "(as far as one reply allows).")] = 0,
        offset: Annotated[int, Field(ge=0, description="To continue a truncated read, its next_offset "
                                     "(keep path and end_line; leave start_line 0).")] = 0,
    ) -> CallToolResult:
        """``memory_get`` → Hub ``get`` (DESIGN.md §5); lines are 1-based, ``offset`` is in bytes."""
        return await self.forward("memory_get", "get",
                                  get_params(path, start_line=start_line, end_line=end_line, offset=offset))

    async def memory_upsert(
        self,
        path: Annotated[str, Field(description=PATH_DOC)],
        content: Annotated[str, Field(description="The complete new document as UTF-8 Markdown; it replaces the "
                                      f"whole file. {ENTRY_NAME}: at most {LIMITS.entry_max_bytes // KIB} KiB and "
                                      f"{LIMITS.entry_max_lines} lines; other documents: at most "
                                      f"{LIMITS.document_max_bytes // KIB} KiB.")],
        expected_revision: Annotated[str, Field(description=REVISION_DOC)],
        allow_shrink: Annotated[bool, Field(description="Leave false. Set true only for a deliberate cut: when the "
                                            "new content really drops more than half of a long document, or "
                                            "really contains a phrase like '[unchanged]'. Never use it to "
                                            "write a placeholder instead of text you meant to keep.")] = False,
    ) -> CallToolResult:
        """``memory_upsert`` → Hub ``upsert`` (DESIGN.md §4; ``allow_shrink`` passes the rewrite guard, §12)."""
        params = upsert_params(path, content, expected_revision, allow_shrink=allow_shrink)
        return await self.forward("memory_upsert", "upsert", params)

    async def memory_forget(
        self,
        path: Annotated[str, Field(description=PATH_DOC)],
        expected_revision: Annotated[str, Field(description="The document's revision as you last read it "
                                                "with memory_get.")],
    ) -> CallToolResult:
        """``memory_forget`` → Hub ``forget`` (DESIGN.md §4)."""
        return await self.forward("memory_forget", "forget", forget_params(path, expected_revision))

    async def result_continue(
        self,
        token: Annotated[str, Field(description="The continuation token of the previous page.")],
    ) -> CallToolResult:
        """``result_continue``: the page ``token`` names, from the :class:`Pager` (no Hub call)."""
        try:
            return self.pager.page(token)
        except HubError as exc:
            return error_result(exc)
