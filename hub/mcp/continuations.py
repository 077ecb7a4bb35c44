"""Results too large for one reply, served in pages through ``result_continue`` (DESIGN.md §9).

A result whose serialized ``CallToolResult`` is over :data:`PAGE_BUDGET`
(6 KiB) is returned in pages.  The result's compact JSON text (see
:func:`hub.mcp.render.result_json`) is cut into slices; each page carries
one slice in ``data`` plus a ``continuation`` token for ``result_continue``;
joining the slices in order gives that JSON text byte for byte.  Every page,
as a whole ``CallToolResult``, fits the budget.  Paged results are kept for
``ttl`` seconds (the ``page_ttl`` of ``mcp_open``, which ``amux mcp`` takes from ``$AMUX_MCP_PAGE_TTL``;
default :data:`DEFAULT_PAGE_TTL`, 600 s), at
most :data:`MAX_PAGED_RESULTS` (64) of them; an unknown, evicted or expired token is
a ``bad_request`` error.  Each paged result keeps its grant, the team mounts it was read through (name ->
role): :class:`hub.mcp.tools.MemoryTools` checks it again before every page and drops (:meth:`Pager.drop`) a result
whose grant no longer holds, which then answers exactly as a token never issued.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp.types import CallToolResult

from amux_memory.hub.mcp.render import result_json, result_size, text_result
from amux_memory.protocol.errors import ErrorCode, HubError

PAGE_BUDGET = 6 * 1024
"""Bytes a serialized ``CallToolResult`` (one answer or one page) may take."""
MAX_PAGED_RESULTS = 64
"""Paged results kept at once; the oldest is evicted past this."""
DEFAULT_PAGE_TTL = 600.0
"""Seconds a paged result's tokens stay valid (``mcp_open``'s ``page_ttl`` overrides)."""


@dataclass
class _Paged:
    created: float
    pages: list[CallToolResult]
    grant: Mapping[str, str] | None = None


class Pager:
    """Cuts oversized results into pages and serves them to ``result_continue``.

    ``budget`` is in bytes of serialized ``CallToolResult``, ``ttl`` in seconds
    of ``clock`` (monotonic by default).  A token is ``<id>.<page>``: the pages
    of one result stay readable (again, too) until the result expires after
    ``ttl`` seconds or is evicted as the oldest of more than ``max_results``.
    Not safe for concurrent use from threads; Trio tasks are fine (no awaits).
    """

    def __init__(self, budget: int = PAGE_BUDGET, ttl: float = DEFAULT_PAGE_TTL,
                 max_results: int = MAX_PAGED_RESULTS, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget = budget
        self.ttl = ttl
        self.max_results = max_results
        self.clock = clock
        self._results: OrderedDict[str, _Paged] = OrderedDict()
        self._gone: OrderedDict[str, str] = OrderedDict()  # recently dropped ids -> why

    def respond(self, tool: str, result: dict[str, Any], text: str,
                grant: Mapping[str, str] | None = None) -> CallToolResult:
        """The whole result (``structuredContent`` = ``result``, text = ``text``) when it fits the budget,
        else the first page of it; the other pages are kept for :meth:`page`, with ``grant``
        (:meth:`grant_of`)."""
        whole = self.whole(result, text)
        return whole if whole is not None else self.paged(tool, result, grant)

    def whole(self, result: dict[str, Any], text: str) -> CallToolResult | None:
        """The whole result as one answer when it fits the budget, else ``None`` (then :meth:`paged`)."""
        whole = text_result(text, result)
        return whole if result_size(whole) <= self.budget else None

    def paged(self, tool: str, result: dict[str, Any], grant: Mapping[str, str] | None = None) -> CallToolResult:
        """The first page of ``result``; the other pages are kept for :meth:`page`, with ``grant``, what the
        result was read under (:meth:`grant_of`)."""
        rid = secrets.token_urlsafe(9)
        pages = self._cut(tool, rid, result_json(result))
        self._expire()
        while len(self._results) >= self.max_results:
            old, _ = self._results.popitem(last=False)
            self._forget(old, f"evicted: at most {self.max_results} paged results are kept")
        self._results[rid] = _Paged(self.clock(), pages, grant)
        return pages[0]

    def grant_of(self, token: str) -> Mapping[str, str] | None:
        """The grant kept with the result ``token`` names (``None`` when it names none, or none was kept)."""
        entry = self._results.get(token.strip().rpartition(".")[0])
        return None if entry is None else entry.grant

    def drop(self, token: str) -> None:
        """Forget the result ``token`` names, leaving no trace: its tokens then answer as tokens never issued
        (reason ``unknown``), not ``evicted`` or ``expired``."""
        rid = token.strip().rpartition(".")[0]
        self._results.pop(rid, None)
        self._gone.pop(rid, None)

    def page(self, token: str) -> CallToolResult:
        """The page a continuation token names.

        Raises :class:`HubError` ``bad_request`` when the token is malformed,
        unknown, evicted or expired; ``data.reason`` is ``unknown``,
        ``evicted`` or ``expired``.
        """
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
            return page_result(tool, data, page, pages, token, total)

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


def page_result(tool: str, data: str, page: int, pages: int, token: str | None, total: int) -> CallToolResult:
    """Page ``page`` (1-based) of ``pages`` of a ``tool`` result whose JSON text is ``total`` bytes.

    ``data`` is this page's slice of that text (characters); ``token`` names the
    next page (``None`` on the last).  ``structuredContent`` follows
    :data:`hub.mcp.schemas.PAGE_SCHEMA`; the text is a one-line head, a
    newline, then ``data``.
    """
    structured = {"tool": tool, "page": page, "pages": pages, "data": data, "continuation": token,
                  "total_bytes": total}
    if token is not None:
        how = f'Call result_continue with token "{token}" for page {page + 1}.'
    else:
        how = "This is the last page."
    head = (f"[Page {page} of {pages} of a {tool} result too large for one reply ({total} bytes of JSON). {how} "
            "The pages' text after this first line, joined in order, is the result's JSON.]")
    return text_result(head + "\n" + data, structured)
