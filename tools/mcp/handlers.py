"""The tool handlers: each builds one Hub request and forwards it over one connection (DESIGN.md §9).

The handlers' signatures are the tools' input schemas (parameter types,
bounds, defaults and descriptions, read by :mod:`tools.mcp.catalog`); their
results are ``CallToolResult`` values built by :mod:`tools.mcp.render` and
:mod:`tools.mcp.pager`.  A Hub error becomes a tool error, never an exception.

Start-up: one ``hello`` to the Hub, bounded to :data:`STARTUP_TIMEOUT`
seconds, runs beside the MCP handshake (``initialize`` never waits for it).
Whatever it finds, the server serves and lists its tools; when the Hub is
unreachable or memory is disabled each call fails with the reason and what to
do.
"""

from __future__ import annotations

import logging
import os
from typing import Annotated, Any

import trio
from mcp.types import CallToolResult
from pydantic import Field

from protocol.errors import HubError
from protocol.limits import ENTRY_NAME, KIB, LIMITS
from protocol.requests import forget_params, get_params, search_params, upsert_params
from tools.client.trio_client import AsyncHubClient
from tools.mcp.pager import DEFAULT_PAGE_TTL, PAGE_TTL_ENV, Pager
from tools.mcp.render import RENDERERS, error_result

log = logging.getLogger("amux.mcp")

STARTUP_TIMEOUT = 2.0
"""Seconds the start-up capability check may take."""
TOOL_NAMES = ("memory_search", "memory_get", "memory_upsert", "memory_forget", "result_continue")
"""The tools, in the order they are listed (``launch.agents.MCP_TOOL_NAMES`` keeps a copy)."""

PATH_DOC = "Relative Markdown path inside memory, e.g. 'MEMORY.md' or 'projects/amux/decisions.md'."
"""Input description of every ``path`` argument."""
REVISION_DOC = ("The revision you last read with memory_get (64 hex digits), or 'absent' to create a document "
                "that must not exist yet.")
"""Input description of ``memory_upsert``'s ``expected_revision``."""


def env_seconds(name: str, default: float) -> float:
    """Seconds from environment variable ``name`` (negative values count as 0); ``default`` when unset, empty
    or not a number (logged as a warning)."""
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return max(0.0, float(raw))
    except ValueError:
        log.warning("ignoring %s=%r (not a number)", name, raw)
        return default


class MemoryTools:
    """The state behind the tools: the Hub connection, the start-up check and the pages.

    ``client`` defaults to an :class:`AsyncHubClient` named ``amux-mcp`` that
    finds the Hub from the environment; ``pager`` to a :class:`Pager` whose
    lifetime comes from ``$AMUX_MCP_PAGE_TTL`` (seconds).
    """

    def __init__(self, client: AsyncHubClient | None = None, pager: Pager | None = None) -> None:
        self.client = client or AsyncHubClient(client_name="amux-mcp")
        self.pager = pager or Pager(ttl=env_seconds(PAGE_TTL_ENV, DEFAULT_PAGE_TTL))
        self.checked = trio.Event()
        """Set once the start-up check has finished (whatever it found, or when it was cancelled)."""
        self.startup: dict[str, Any] = {"state": "pending"}
        """What the start-up check found: ``state`` is pending, ready, disabled or error (with code, message)."""

    async def startup_check(self) -> None:
        """Ask the Hub once, within :data:`STARTUP_TIMEOUT` seconds, whether memory is reachable and enabled.

        Never raises a :class:`HubError`: the outcome goes to :attr:`startup`
        and the log.  :attr:`checked` is set however it ends, cancellation
        included (a cancelled check leaves :attr:`startup` as it was).
        """
        try:
            with trio.move_on_after(STARTUP_TIMEOUT) as scope:
                try:
                    hello = await self.client.connect()
                except HubError as exc:
                    self.startup = {"state": "error", "code": exc.code.value, "message": exc.message}
                    log.warning("the Hub is not usable (%s): %s; tools will report it on each call",
                                exc.code.value, exc.message)
                else:
                    enabled = bool(hello.get("memory_enabled"))
                    self.startup = {"state": "ready" if enabled else "disabled", "scope": hello.get("scope"),
                                    "memory_enabled": enabled}
                    if enabled:
                        log.info("connected to the Hub at %s (scope %s)", self.client.endpoint,
                                 hello.get("scope"))
                    else:
                        log.warning("memory is disabled on the Hub at %s; calls will fail with "
                                    "'disabled'", self.client.endpoint)
            if scope.cancelled_caught:
                self.startup = {"state": "error", "code": "unavailable",
                                "message": f"the Hub did not answer within {STARTUP_TIMEOUT:g} s"}
                log.warning("the Hub at %s did not answer within %g s", self.client.endpoint,
                            STARTUP_TIMEOUT)
        finally:
            self.checked.set()

    async def forward(self, tool: str, method: str, params: dict[str, Any]) -> CallToolResult:
        """Call Hub ``method`` with ``params`` for ``tool``.

        A result becomes its structured content plus text (paged when over the
        budget), a :class:`HubError` a tool error.  Waits for the start-up
        check first, at most ``STARTUP_TIMEOUT + 1`` seconds, so the first call
        reuses its connection.  On cancellation the request may or may not
        have reached the Hub; the client drops the connection.
        """
        with trio.move_on_after(STARTUP_TIMEOUT + 1):
            await self.checked.wait()
        try:
            result = await self.client.call(method, params)
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
