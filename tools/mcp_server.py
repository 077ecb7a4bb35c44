"""``amux mcp``: memory for agents as an MCP stdio server (design record §3, §4, §6).

The server is the ``mcp`` SDK's ``MCPServer`` named ``amux``, run on Trio with
``trio.run(server.run_stdio_async)``.  Its five tools forward to the Hub over
one long-lived connection (:class:`tools.client.trio_client.AsyncHubClient`) with the
same semantics, limits and error codes as the CLI:

=================  ==========  =====================================================
tool               Hub method  annotations
=================  ==========  =====================================================
memory_search      search      read-only, idempotent
memory_get         get         read-only, idempotent
memory_upsert      upsert      destructive (replaces a whole document), idempotent
memory_forget      forget      destructive, idempotent
result_continue    (local)     read-only, idempotent
=================  ==========  =====================================================

(Writes are compare-and-swap: repeating one with the same arguments changes
nothing more, hence "idempotent".)

Results
    ``structuredContent`` is the Hub's result map, unchanged; the text content
    renders it for a model.  Hub errors become tool errors (``isError``) whose
    structured content is ``{"error": {code, message, data, next_step}}`` and
    whose text says the same: ``data`` is the Hub's (observed revision on
    conflict, current and maximum on quota), ``next_step`` tells a model what to do.

Pages
    A result whose serialized ``CallToolResult`` is over :data:`PAGE_BUDGET`
    bytes is returned in pages.  The result's compact JSON text (see
    :func:`result_json`) is cut into slices; each page carries one slice in
    ``data`` plus a ``continuation`` token for ``result_continue``; joining the
    slices in order gives that JSON text byte for byte.  Every page, as a
    whole ``CallToolResult``, fits the budget.  Paged results are kept for
    ``$AMUX_MCP_PAGE_TTL`` seconds (default 600), at most :data:`MAX_PAGED_RESULTS`
    of them; an unknown, evicted or expired token is a ``bad_request`` tool error.

Start-up
    One ``hello`` to the Hub, bounded to :data:`STARTUP_TIMEOUT` seconds, runs
    beside the MCP handshake (``initialize`` never waits for it).  Whatever it
    finds, the server serves and lists its tools; when the Hub is unreachable
    or memory is disabled each call fails with the reason and what to do.

Instructions
    The server's MCP ``instructions`` are the fixed protocol
    (``amux protocol show``); ``$AMUX_MCP_INSTRUCTIONS=off`` leaves them out,
    for launchers that already put the protocol in the agent's instructions.

Nothing is ever printed on stdout (it carries the protocol); logs go to
stderr (level from ``$AMUX_MCP_LOG``, default ``WARNING``).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import sys
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import trio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from protocol.agent_protocol import render as render_protocol
from protocol.errors import ErrorCode, HubError
from protocol.limits import ENTRY_NAME, LIMITS
from protocol.requests import upsert_params
from tools.client.trio_client import AsyncHubClient

log = logging.getLogger("amux.mcp")

SERVER_NAME = "amux"
PAGE_BUDGET = 6 * 1024
"""Bytes a serialized ``CallToolResult`` (one answer or one page) may take."""
STARTUP_TIMEOUT = 2.0
"""Seconds the start-up capability check may take."""
MAX_PAGED_RESULTS = 64
"""Paged results kept at once; the oldest is evicted past this."""
DEFAULT_PAGE_TTL = 600.0
"""Seconds a paged result's tokens stay valid (``$AMUX_MCP_PAGE_TTL`` overrides)."""
TOOL_NAMES = ("memory_search", "memory_get", "memory_upsert", "memory_forget", "result_continue")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("amux-memory")
    except PackageNotFoundError:
        return "0"


# -- serialization ---------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise TypeError(f"not JSON-serializable: {type(value).__name__}")


def result_json(result: dict[str, Any]) -> str:
    """The canonical JSON text of a result: compact, UTF-8 (not ASCII-escaped), keys in the Hub's order."""
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=_jsonable)


def result_size(result: CallToolResult) -> int:
    """Serialized size of a ``CallToolResult`` in bytes (JSON, as it goes on the wire)."""
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode("utf-8"))


# -- text renderings ----------------------------------------------------------------------


def _render_search(r: dict[str, Any]) -> str:
    matches = r.get("matches") or []
    candidates, scanned = r.get("candidates", len(matches)), r.get("scanned_files", 0)
    lines = [f"{len(matches)} of {candidates} matching documents (scanned {scanned} files)."]
    if r.get("incomplete"):
        reasons = ", ".join(str(x) for x in r.get("incomplete_reasons") or []) or "a scan limit"
        lines.append(f"The scan stopped early ({reasons}): a missing match is not proof of absence; "
                     "narrow path_prefix or change keywords.")
    if r.get("truncated"):
        lines.append("More matches were left out: raise limit, narrow path_prefix or add keywords.")
    for m in matches:
        cut = " [snippet cut]" if m.get("truncated") else ""
        matched = ", ".join(map(str, m.get("matched") or []))
        lines.append(f"- {m.get('path')} line {m.get('line')} (matched: {matched}){cut}")
        lines.append(f"  {m.get('snippet', '')}")
    if matches:
        lines.append("Read what is relevant with memory_get.")
    return "\n".join(lines)


def _render_get(r: dict[str, Any]) -> str:
    path = r.get("path")
    if not r.get("exists"):
        return (f'{path} does not exist (revision "absent"); '
                'create it with memory_upsert expected_revision="absent".')
    head = f"{path}: revision {r.get('revision')}, {r.get('total_lines')} lines, {r.get('total_bytes')} bytes."
    if r.get("truncated"):
        head += (f" This fragment is cut: continue with memory_get offset={r.get('next_offset')} "
                 "(same path and end_line).")
    return head + "\n---\n" + str(r.get("content", ""))


def _render_upsert(r: dict[str, Any]) -> str:
    how = "Created" if r.get("created") else "Replaced"
    return f"{how} {r.get('path')} ({r.get('bytes')} bytes); its revision is now {r.get('revision')}."


def _render_forget(r: dict[str, Any]) -> str:
    if r.get("already_absent"):
        return f"{r.get('path')} was already absent; nothing was deleted."
    return f"Deleted {r.get('path')}."


RENDERERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "memory_search": _render_search,
    "memory_get": _render_get,
    "memory_upsert": _render_upsert,
    "memory_forget": _render_forget,
}

NEXT_STEPS: dict[ErrorCode, str] = {
    ErrorCode.CONFLICT: "Nothing was changed. Read the document again with memory_get, merge your change into "
    "the current text, and retry with its revision (data.observed_revision).",
    ErrorCode.QUOTA_EXCEEDED: "Nothing was written. Make it smaller (data.current vs data.maximum, in data.unit): "
    f"keep {ENTRY_NAME} short and move details into topic documents, or remove stale documents.",
    ErrorCode.DISABLED: "Memory is switched off on this Hub. Carry on without memory; if the user asked you to "
    "remember or recall something, tell them memory is off (they can enable it with "
    "'amux system config set memory.enabled true' and restart the Hub).",
    ErrorCode.UNAVAILABLE: "The memory Hub cannot be reached. Carry on without memory and tell the user if it "
    "matters (a Hub is started with 'amux hub serve').",
    ErrorCode.INVALID_PATH: f"Use a relative path ending in .md inside memory, such as {ENTRY_NAME} or "
    "projects/NAME/notes.md (no '..', no absolute paths).",
    ErrorCode.BAD_REQUEST: "Fix the arguments as the message says, then call again.",
    ErrorCode.NOT_FOUND: "The document does not exist; search for the right path with memory_search.",
    ErrorCode.UNAUTHORIZED: "This caller may not use this memory; tell the user.",
    ErrorCode.BINDING_MISMATCH: "This conversation's memory no longer matches the Hub's: tell the user to start "
    "a new conversation.",
    ErrorCode.FRAME_TOO_LARGE: "The request is too large; send less content.",
    ErrorCode.DESTRUCTIVE_REWRITE: "Nothing was written: the content looked like a lossy rewrite (a placeholder "
    "such as '[rest unchanged]', or most lines dropped). Read the document with memory_get and write the complete "
    "new text; pass allow_shrink=true only if the cut is deliberate.",
    ErrorCode.BUSY: "The Hub is busy with this connection's other calls; wait and call again.",
    ErrorCode.INTERNAL: "The Hub failed; do not assume the call took effect. Tell the user.",
}


def error_result(exc: HubError) -> CallToolResult:
    """A tool error (``isError``) carrying the Hub's code, message and data, and what to do next."""
    next_step = NEXT_STEPS.get(exc.code, "")
    if exc.code is ErrorCode.UNAVAILABLE and exc.data.get("uncertain"):
        next_step = "Whether the write happened is unknown: read the document with memory_get before retrying."
    error = {**exc.to_wire(), "next_step": next_step}
    text = f"Error {exc.code.value}: {exc.message}\n{next_step}"
    if exc.data:
        text += "\ndata: " + result_json(exc.data)
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content={"error": error}, is_error=True)


# -- pages ----------------------------------------------------------------------------------


@dataclass
class _Paged:
    created: float
    pages: list[CallToolResult]


class Pager:
    """Cuts oversized results into pages and serves them to ``result_continue``.

    A token is ``<id>.<page>``: the pages of one result stay readable (again,
    too) until the result expires after ``ttl`` seconds or is evicted as the
    oldest of more than ``max_results``.
    """

    def __init__(self, budget: int = PAGE_BUDGET, ttl: float = DEFAULT_PAGE_TTL,
                 max_results: int = MAX_PAGED_RESULTS, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget = budget
        self.ttl = ttl
        self.max_results = max_results
        self.clock = clock
        self._results: OrderedDict[str, _Paged] = OrderedDict()
        self._gone: OrderedDict[str, str] = OrderedDict()  # recently dropped ids -> why

    def respond(self, tool: str, result: dict[str, Any], text: str) -> CallToolResult:
        """The whole result when it fits the budget, else its first page."""
        whole = CallToolResult(content=[TextContent(type="text", text=text)], structured_content=result)
        if result_size(whole) <= self.budget:
            return whole
        rid = secrets.token_urlsafe(9)
        pages = self._cut(tool, rid, result_json(result))
        self._expire()
        while len(self._results) >= self.max_results:
            old, _ = self._results.popitem(last=False)
            self._forget(old, f"evicted: at most {self.max_results} paged results are kept")
        self._results[rid] = _Paged(self.clock(), pages)
        return pages[0]

    def page(self, token: str) -> CallToolResult:
        """The page a continuation token names; raises ``bad_request`` when it is unknown or expired."""
        rid, _, number = token.strip().rpartition(".")
        entry = self._results.get(rid)
        if entry is not None and self.clock() - entry.created > self.ttl:
            del self._results[rid]
            self._forget(rid, f"expired: pages are kept for {self.ttl:g} s")
            entry = None
        if entry is None or not (number.isascii() and number.isdigit()) or not 2 <= int(number) <= len(entry.pages):
            why = self._gone.get(rid, "unknown: it does not name a page of a result from this server")
            raise HubError(
                ErrorCode.BAD_REQUEST,
                f"continuation token {token[:40]!r} is {why}; call the original tool again for a fresh result",
                {"token": token[:40], "reason": why.split(":")[0]},
            )
        return entry.pages[int(number) - 1]

    def _forget(self, rid: str, why: str) -> None:
        self._gone[rid] = why
        while len(self._gone) > 4 * self.max_results:
            self._gone.popitem(last=False)

    def _expire(self) -> None:
        now = self.clock()
        for rid in [rid for rid, e in self._results.items() if now - e.created > self.ttl]:
            del self._results[rid]
            self._forget(rid, f"expired: pages are kept for {self.ttl:g} s")

    def _cut(self, tool: str, rid: str, text: str) -> list[CallToolResult]:
        total = len(text.encode("utf-8"))
        placeholder = f"{rid}.{10**6}"  # as long as any real token; real page numbers are shorter

        def build(data: str, page: int, pages: int, token: str | None) -> CallToolResult:
            return _page_result(tool, data, page, pages, token, total)

        slices: list[str] = []
        start = 0
        while start < len(text):
            # The longest slice whose page fits: binary search on its length in characters.
            lo, hi = 1, len(text) - start
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if result_size(build(text[start:start + mid], 10**6, 10**6, placeholder)) <= self.budget:
                    lo = mid
                else:
                    hi = mid - 1
            slices.append(text[start:start + lo])
            start += lo
        n = len(slices)
        return [build(s, i + 1, n, f"{rid}.{i + 2}" if i + 1 < n else None) for i, s in enumerate(slices)]


def _page_result(tool: str, data: str, page: int, pages: int, token: str | None, total: int) -> CallToolResult:
    structured = {"tool": tool, "page": page, "pages": pages, "data": data, "continuation": token,
                  "total_bytes": total}
    if token is not None:
        how = f'Call result_continue with token "{token}" for page {page + 1}.'
    else:
        how = "This is the last page."
    head = (f"[Page {page} of {pages} of a {tool} result too large for one reply ({total} bytes of JSON). {how} "
            "The pages' text after this first line, joined in order, is the result's JSON.]")
    return CallToolResult(content=[TextContent(type="text", text=head + "\n" + data)], structured_content=structured)


# -- schemas ----------------------------------------------------------------------------------

_STR = {"type": "string"}
_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}

PAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One page of a result too large for one reply; join the data of pages 1..pages in order.",
    "properties": {
        "tool": {"type": "string", "description": "The tool that produced the result."},
        "page": {"type": "integer", "minimum": 1},
        "pages": {"type": "integer", "minimum": 2},
        "data": {"type": "string", "description": "This page's slice of the result's JSON text."},
        "continuation": {"type": ["string", "null"],
                         "description": "Token for result_continue to fetch the next page; null on the last page."},
        "total_bytes": {"type": "integer", "description": "UTF-8 size of the whole result's JSON text."},
    },
    "required": ["tool", "page", "pages", "data", "continuation", "total_bytes"],
}


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or list(properties)}


SEARCH_SCHEMA = _obj({
    "matches": {"type": "array", "items": _obj({
        "path": _STR, "line": {"type": "integer", "description": "1-based line of the best match (0: path only)."},
        "snippet": _STR, "truncated": {"type": "boolean", "description": "The snippet was cut."},
        "revision": {"type": "string", "description": "Whole-file revision when scanned."},
        "matched": {"type": "array", "items": _STR, "description": "The keywords this document contains."},
    })},
    "candidates": {"type": "integer", "description": "Documents that matched any keyword."},
    "incomplete": {"type": "boolean", "description": "The scan stopped before covering memory: "
                   "a missing match is not proof of absence."},
    "incomplete_reasons": {"type": "array", "items": _STR},
    "scanned_files": _INT, "scanned_bytes": _INT,
    "truncated": {"type": "boolean", "description": "Matches were left out (limit or reply size)."},
    "elapsed_ms": {"type": "number"},
}, ["matches", "candidates", "incomplete", "scanned_files", "truncated"])

GET_SCHEMA = _obj({
    "path": _STR,
    "exists": _BOOL,
    "revision": {"type": "string", "description": 'Whole-file SHA-256, or "absent"; pass it as expected_revision.'},
    "content": {"type": "string", "description": "The fragment read."},
    "truncated": {"type": "boolean", "description": "The fragment ends before the range asked for."},
    "next_offset": {"type": ["integer", "null"], "description": "Pass as offset to continue a truncated read."},
    "total_bytes": _INT,
    "total_lines": _INT,
})

UPSERT_SCHEMA = _obj({
    "path": _STR, "revision": {"type": "string", "description": "The document's new revision."},
    "created": _BOOL, "bytes": _INT,
})

FORGET_SCHEMA = _obj({"path": _STR, "deleted": _BOOL, "already_absent": _BOOL, "revision": _STR})


ERROR_SCHEMA: dict[str, Any] = _obj({"error": _obj({
    "code": {"type": "string", "enum": [code.value for code in ErrorCode]},
    "message": {"type": "string"},
    "data": {"type": "object", "description": "What the caller needs to recover, e.g. observed_revision on "
             "conflict, current and maximum on quota_exceeded."},
    "next_step": {"type": "string", "description": "What to do about it."},
})})
"""The structured content of a tool error (``isError``).  It is part of every output schema because
some clients (the TypeScript SDK's, in the MCP Inspector) validate error results against it too."""


def _or_page(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's output schema: its result, a page of it, or an error."""
    return {"type": "object", "anyOf": [schema, PAGE_SCHEMA, ERROR_SCHEMA]}


# -- the server -------------------------------------------------------------------------------

PATH_DOC = "Relative Markdown path inside memory, e.g. 'MEMORY.md' or 'projects/amux/decisions.md'."
REVISION_DOC = ("The revision you last read with memory_get (64 hex digits), or 'absent' to create a document "
                "that must not exist yet.")


class MemoryTools:
    """The state behind the tools: the Hub connection, the start-up check and the pages."""

    def __init__(self, client: AsyncHubClient | None = None, pager: Pager | None = None) -> None:
        self.client = client or AsyncHubClient(client_name="amux-mcp")
        self.pager = pager or Pager(ttl=_env_float("AMUX_MCP_PAGE_TTL", DEFAULT_PAGE_TTL))
        self.checked = trio.Event()
        self.startup: dict[str, Any] = {"state": "pending"}

    async def startup_check(self) -> None:
        """Ask the Hub once, within :data:`STARTUP_TIMEOUT`, whether memory is reachable and enabled."""
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
        """Call the Hub; a result becomes structured content plus text (paged if large), an error a tool error."""
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
        query: Annotated[str, Field(description="Literal keywords separated by spaces (1-16, at most 512 bytes); "
                                    "a document containing any one is a candidate. Case-insensitive; no regex, "
                                    "wildcards or quotes. For synonyms, search again with other words.")],
        path_prefix: Annotated[str, Field(description="Only documents whose path starts with this, "
                                          "e.g. 'projects/amux/'. Empty: all of memory.")] = "",
        limit: Annotated[int, Field(ge=1, le=LIMITS.search_max_limit,
                                    description="Documents to return, 1-20.")] = LIMITS.search_default_limit,
    ) -> CallToolResult:
        params: dict[str, Any] = {"query": query, "limit": limit}
        if path_prefix:
            params["path_prefix"] = path_prefix
        return await self.forward("memory_search", "search", params)

    async def memory_get(
        self,
        path: Annotated[str, Field(description=PATH_DOC)],
        start_line: Annotated[int, Field(ge=0, description="First line, 1-based; 0 reads from the start.")] = 0,
        end_line: Annotated[int, Field(ge=0, description="Last line, inclusive; 0 reads to the end "
                                       "(as far as one reply allows).")] = 0,
        offset: Annotated[int, Field(ge=0, description="To continue a truncated read, its next_offset "
                                     "(keep path and end_line; leave start_line 0).")] = 0,
    ) -> CallToolResult:
        return await self.forward("memory_get", "get", {"path": path, "start_line": start_line,
                                                        "end_line": end_line, "offset": offset})

    async def memory_upsert(
        self,
        path: Annotated[str, Field(description=PATH_DOC)],
        content: Annotated[str, Field(description="The complete new document as UTF-8 Markdown; it replaces the "
                                      f"whole file. {ENTRY_NAME}: at most 2 KiB and 64 lines; "
                                      "other documents: at most 64 KiB.")],
        expected_revision: Annotated[str, Field(description=REVISION_DOC)],
        allow_shrink: Annotated[bool, Field(description="Leave false. Set true only for a deliberate cut: when the "
                                            "new content really drops more than half of a long document, or "
                                            "really contains a phrase like '[unchanged]'. Never use it to "
                                            "write a placeholder instead of text you meant to keep.")] = False,
    ) -> CallToolResult:
        params = upsert_params(path, content, expected_revision, allow_shrink=allow_shrink)
        return await self.forward("memory_upsert", "upsert", params)

    async def memory_forget(
        self,
        path: Annotated[str, Field(description=PATH_DOC)],
        expected_revision: Annotated[str, Field(description="The document's revision as you last read it "
                                                "with memory_get.")],
    ) -> CallToolResult:
        return await self.forward("memory_forget", "forget", {"path": path, "expected_revision": expected_revision})

    async def result_continue(
        self,
        token: Annotated[str, Field(description="The continuation token of the previous page.")],
    ) -> CallToolResult:
        try:
            return self.pager.page(token)
        except HubError as exc:
            return error_result(exc)


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return max(0.0, float(raw))
    except ValueError:
        log.warning("ignoring %s=%r (not a number)", name, raw)
        return default


_DESCRIPTIONS = {
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
    "rewrite the documents that mention it with memory_upsert instead, and remove stale pointers from MEMORY.md.",
    "result_continue": "Fetch the next page of a tool result that was too large for one reply. Pass the "
    "continuation token of the previous page; the pages' data joined in order is the full result.",
}

_ANNOTATIONS = {
    "memory_search": ToolAnnotations(title="Search memory", read_only_hint=True, idempotent_hint=True,
                                     open_world_hint=False),
    "memory_get": ToolAnnotations(title="Read a memory document", read_only_hint=True, idempotent_hint=True,
                                  open_world_hint=False),
    "memory_upsert": ToolAnnotations(title="Write a memory document", read_only_hint=False, destructive_hint=True,
                                     idempotent_hint=True, open_world_hint=False),
    "memory_forget": ToolAnnotations(title="Delete a memory document", read_only_hint=False,
                                     destructive_hint=True, idempotent_hint=True, open_world_hint=False),
    "result_continue": ToolAnnotations(title="Next page of a result", read_only_hint=True, idempotent_hint=True,
                                       open_world_hint=False),
}

_OUTPUT_SCHEMAS = {
    "memory_search": _or_page(SEARCH_SCHEMA),
    "memory_get": _or_page(GET_SCHEMA),
    "memory_upsert": _or_page(UPSERT_SCHEMA),
    "memory_forget": _or_page(FORGET_SCHEMA),
    "result_continue": {"type": "object", "anyOf": [PAGE_SCHEMA, ERROR_SCHEMA]},
}


def build_server(state: MemoryTools | None = None) -> MCPServer[Any]:
    """The ``amux`` MCPServer with its five tools; the start-up check runs in its lifespan."""
    state = state or MemoryTools()
    tools = []
    for name in TOOL_NAMES:
        tool = Tool.from_function(getattr(state, name), name=name, title=_ANNOTATIONS[name].title,
                                  description=_DESCRIPTIONS[name], annotations=_ANNOTATIONS[name])
        # A schema set without an output model is published as is; results are built by hand.
        tool.fn_metadata.output_schema = _OUTPUT_SCHEMAS[name]
        tools.append(tool)

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(state.startup_check)
            try:
                yield {}
            finally:
                nursery.cancel_scope.cancel()
                await state.client.aclose()

    return MCPServer(
        SERVER_NAME,
        title="amux memory",
        instructions=server_instructions(),
        version=_version(),
        tools=tools,
        lifespan=lifespan,
        log_level=_log_level(),
    )


def server_instructions() -> str | None:
    """The MCP ``instructions``: the fixed protocol, unless ``$AMUX_MCP_INSTRUCTIONS`` is ``off``.

    ``amux launch`` puts the protocol into the agent's own instructions and
    turns this copy off, so the model sees one block, not two (clients show
    server instructions as a second block: Claude Code in a message, Codex
    as the tool namespace's description).
    """
    return None if os.environ.get("AMUX_MCP_INSTRUCTIONS", "").lower() == "off" else render_protocol("mcp")


def _log_level() -> Any:
    level = os.environ.get("AMUX_MCP_LOG", "WARNING").upper()
    return level if level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL") else "WARNING"


def main() -> int:
    """Serve on stdin/stdout until the client closes stdin; returns the exit status."""
    logging.basicConfig(stream=sys.stderr, level=_log_level(), format="%(name)s: %(levelname)s: %(message)s")
    server = build_server()
    try:
        trio.run(server.run_stdio_async)
    except KeyboardInterrupt:
        return 130
    return 0
