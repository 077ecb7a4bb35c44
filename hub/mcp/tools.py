"""The tool handlers: each builds one Hub request and runs it for the session's caller (DESIGN.md §9.2).

The handlers' signatures are the tools' input schemas (parameter types,
bounds, defaults and descriptions, read by :mod:`hub.mcp.catalog`); their
results are ``CallToolResult`` values built by :mod:`hub.mcp.render` and
:mod:`hub.mcp.continuations`.  A Hub error becomes a tool error, never an exception.

A request goes to a :class:`Backend`: inside the Hub, the memory service with
the MCP session's identity and scope (:func:`hub_backend`, as
:meth:`hub.serve.hub.Hub.call` runs a socket request), not a client connection.

Pages outlive no right (DESIGN.md §9.2): a paged result keeps the mounts and roles it was read through
(:meth:`MemoryTools.read_through`), and ``result_continue`` asks :data:`Rights` (the Hub's registry, through
:meth:`hub.serve.hub.Hub.rights_of`) before every page; a revoked token, a removed member or a removed team drops
the result at once, and its token answers exactly as one never issued.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any

from mcp.types import CallToolResult
from pydantic import Field

from amux_memory.hub.access.identity import Identity, Scope
from amux_memory.hub.access.mounts import READ, MountView
from amux_memory.hub.mcp.continuations import Pager
from amux_memory.hub.mcp.render import RENDERERS, error_result
from amux_memory.hub.methods.calls import Reach
from amux_memory.hub.methods.routes import ROUTES
from amux_memory.hub.storage.faults import STORAGE_CODES, from_os_error, log_fault
from amux_memory.protocol.errors import HubError
from amux_memory.protocol.limits import ENTRY_NAME, KIB, LIMITS
from amux_memory.protocol.messages import Request
from amux_memory.protocol.paths import MOUNT_MARK
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

Rights = Callable[[], Awaitable[MountView]]
"""``await rights()``: the session's caller's view now, its team mounts and roles (DESIGN.md §7.8), from the registry
through the Hub (:meth:`hub.serve.hub.Hub.rights_of`); raises :class:`HubError` (``unauthorized``) when the caller's
token is no longer valid or the registry cannot be read."""


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

    One instance per MCP session, so pages of one session are never served to another.  With ``rights``
    (the Hub's, :data:`Rights`), every page is served only while the caller still has what its result was read
    through; without (in-process uses that have no registry), pages are not checked again.
    """

    def __init__(self, backend: Backend, pager: Pager | None = None, rights: Rights | None = None) -> None:
        self.backend = backend
        self.pager = pager or Pager()
        self.rights = rights

    async def forward(self, tool: str, method: str, params: dict[str, Any]) -> CallToolResult:
        """Run Hub ``method`` with ``params`` for ``tool``.

        A result becomes its structured content plus text (paged when over the
        budget, with the mounts it was read through), a :class:`HubError` a tool error.
        """
        try:
            result = await self.backend(method, params)
        except HubError as exc:
            return error_result(exc)
        text = RENDERERS[tool](result)
        whole = self.pager.whole(result, text)
        if whole is not None:
            return whole
        grant = None if self.rights is None else await self.read_through(method, params, result)
        return self.pager.paged(tool, result, grant)

    async def read_through(self, method: str, params: dict[str, Any], result: dict[str, Any]) -> dict[str, str]:
        """The team mounts a ``method`` result was read through, each with the role its route needs
        (``{name: role}``; ``{}``: the caller's own memory alone): the mount its ``path`` or ``path_prefix``
        names, every mount a whole-view prefix covers now (``""``, ``@N``), and every mount a path in the result
        lies in.  More rather than fewer: a page is refused when the caller lacks any of them."""
        route = ROUTES[method]
        role = route.role or READ
        names = _mounts_named(result)
        for key in ("path", "path_prefix"):
            value = params.get(key)
            if isinstance(value, str) and value.startswith(MOUNT_MARK) and "/" in value:
                names.add(value[1:].partition("/")[0])
        if route.reach in (Reach.EVERY, Reach.PAGED) and self.rights is not None:
            with contextlib.suppress(HubError, OSError):  # then the token fails the check of every page anyway
                view = await self.rights()
                names |= {part.mount.name for part in view.prefix(params.get("path_prefix", ""), role)
                          if part.mount is not None}
        return dict.fromkeys(names, role)

    async def still_granted(self, grant: Mapping[str, str]) -> bool:
        """Whether the caller's token is still valid and it still has each mount of ``grant`` with at least its
        role, in the registry as it is now (:data:`Rights`)."""
        if self.rights is None:
            return True
        try:
            view = await self.rights()
        except (HubError, OSError):
            return False
        return all(name in view.mounts and view.mounts[name].allows(role) for name, role in grant.items())

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
        """``result_continue``: the page ``token`` names, from the :class:`Pager`, while the caller keeps every
        right its result was read through (:meth:`still_granted`); else the result is dropped and the answer is
        exactly that for a token never issued."""
        grant = self.pager.grant_of(token)
        if grant is not None and not await self.still_granted(grant):
            self.pager.drop(token)
        try:
            return self.pager.page(token)
        except HubError as exc:
            return error_result(exc)


def _mounts_named(value: Any) -> set[str]:
    """The mount names (``web`` of ``@web/a.md``) of every ``path`` member of a map in ``value``, at any depth."""
    if isinstance(value, dict):
        out = set()
        for key, item in value.items():
            if key == "path" and isinstance(item, str) and item.startswith(MOUNT_MARK) and "/" in item:
                out.add(item[1:].partition("/")[0])
            else:
                out |= _mounts_named(item)
        return out
    if isinstance(value, list):
        return set().union(*(_mounts_named(item) for item in value)) if value else set()
    return set()
