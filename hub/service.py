"""Hub methods on top of the store and the scan, for one authenticated caller.

``MemoryService.call`` takes an already-validated caller scope and a request,
looks the method up in :data:`HANDLERS` (one entry per name in
:data:`protocol.messages.DATA_METHODS`), and returns the result map or raises
:class:`HubError`.  Each handler validates its parameters
(:mod:`protocol.params`) and calls :class:`hub.store.Store`,
:func:`hub.search.search_scope` or :func:`hub.listing.list_documents`.
Writes to one scope are serialised by that scope's :class:`trio.Lock` (check
revision → check quota → write; DESIGN.md §4); all file I/O runs in worker
threads so the event loop keeps serving other connections.  The search scan
runs under a Trio cancel scope with the 250 ms budget (DESIGN.md §5, §6).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import trio

from hub.cache import ContentCache
from hub.config import HubConfig
from hub.identity import Scope
from hub.listing import list_documents
from hub.search import Reader, read_file_nofollow, search_scope
from hub.store import Store
from protocol.errors import ErrorCode, HubError
from protocol.limits import Limits
from protocol.messages import DATA_METHODS
from protocol.params import parse_export, parse_forget, parse_get, parse_list, parse_search, parse_upsert

Result = dict[str, Any]


def _stop_when_cancelled() -> bool:
    """Poll, from a worker thread, whether the calling task's cancel scope fired."""
    try:
        trio.from_thread.check_cancelled()
    except trio.Cancelled:
        return True
    return False


class MemoryService:
    """Dispatch of data methods for a Hub with fixed settings.

    ``reader`` is the scan's file reader (replaceable to slow it down in tests
    of the time budget).
    """

    def __init__(self, config: HubConfig, limits: Limits, reader: Reader = read_file_nofollow) -> None:
        self.config = config
        self.limits = limits
        self.store = Store(limits)
        self.reader = reader
        self.cache = ContentCache(limits.cache_max_bytes)
        self._search_limiter = trio.CapacityLimiter(limits.search_threads)
        self._locks: dict[str, trio.Lock] = {}

    def _lock(self, scope: Scope) -> trio.Lock:
        lock = self._locks.get(scope.relpath)
        if lock is None:
            lock = self._locks[scope.relpath] = trio.Lock()
        return lock

    def _dir(self, scope: Scope) -> str:
        return scope.directory(str(self.config.memory_root))

    async def call(self, scope: Scope, method: str, params: dict[str, Any]) -> Result:
        """Run one data method for ``scope``: ``params`` is the request's map, the result a map of plain values.

        Raises ``bad_request`` for a name that is not a data method (or bad
        parameters), ``disabled`` when memory is off, and whatever the handler
        raises (``invalid_path``, ``conflict``, ``quota_exceeded``, ...).  On
        cancellation while waiting for the scope's lock or a worker thread,
        nothing was done; once a worker runs, it finishes before this returns.
        """
        handler = HANDLERS.get(method)
        if handler is None:
            raise HubError(ErrorCode.BAD_REQUEST, f"{method} is not a data method")
        if not self.config.memory_enabled:
            raise HubError(
                ErrorCode.DISABLED,
                "memory is disabled on this Hub; the files are kept. Enable it with "
                "'amux system config set memory.enabled true' and restart the Hub",
                {"setting": "memory.enabled"},
            )
        return await handler(self, scope, params)

    async def _run(self, fn: Callable[..., Result], *args: Any) -> Result:
        return await trio.to_thread.run_sync(functools.partial(fn, *args))

    async def _search(self, scope: Scope, params: dict[str, Any]) -> Result:
        p = parse_search(params)
        cache = self.cache.scope(scope.relpath)
        clock: list[float] = []
        with trio.CancelScope() as budget:

            def start_budget() -> None:
                # The 250 ms start when the scan really begins (a worker picked it up and
                # it holds the scope's cache), not while it waits: a busy Hub answers
                # late, not "incomplete" at once.
                budget.deadline = trio.current_time() + self.limits.scan_budget_seconds

            def started() -> None:
                trio.from_thread.run_sync(start_budget)
                clock.append(time.perf_counter())

            def work() -> Result:
                return search_scope(
                    self._dir(scope), p.keywords, p.path_prefix, p.limit, self.limits,
                    _stop_when_cancelled, self.reader, cache, started,
                )

            # The worker polls the cancel scope between files and returns what it
            # has; we wait for it rather than abandon it, so no thread outlives us.
            result = await trio.to_thread.run_sync(work, limiter=self._search_limiter)
            result["elapsed_ms"] = round((time.perf_counter() - clock[0]) * 1000, 3)
            self.cache.trim()
            return result
        raise HubError(ErrorCode.INTERNAL, "search was cancelled before it could start")

    async def _get(self, scope: Scope, params: dict[str, Any]) -> Result:
        p = parse_get(params)
        return await self._run(self.store.get, self._dir(scope), p.path, p.start_line, p.end_line, p.offset)

    async def _export(self, scope: Scope, params: dict[str, Any]) -> Result:
        p = parse_export(params)
        return await self._run(self.store.export_page, self._dir(scope), p.path, p.offset, p.expected_revision)

    async def _upsert(self, scope: Scope, params: dict[str, Any]) -> Result:
        p = parse_upsert(params)
        async with self._lock(scope):
            return await self._run(self.store.upsert, self._dir(scope), p.path, p.content, p.expected_revision,
                                   p.allow_shrink)

    async def _forget(self, scope: Scope, params: dict[str, Any]) -> Result:
        p = parse_forget(params)
        async with self._lock(scope):
            return await self._run(self.store.forget, self._dir(scope), p.path, p.expected_revision)

    async def _list(self, scope: Scope, params: dict[str, Any]) -> Result:
        p = parse_list(params)
        return await self._run(list_documents, self._dir(scope), p.path_prefix, p.cursor, self.limits)


Handler = Callable[[MemoryService, Scope, dict[str, Any]], Awaitable[Result]]
"""A data method's implementation: ``(service, caller scope, request params) -> result map``."""

HANDLERS: Final[Mapping[str, Handler]] = {
    "search": MemoryService._search,
    "get": MemoryService._get,
    "export": MemoryService._export,
    "upsert": MemoryService._upsert,
    "forget": MemoryService._forget,
    "list": MemoryService._list,
}
"""The dispatch table: data method name → handler.  Its names are exactly :data:`DATA_METHODS`."""

if frozenset(HANDLERS) != DATA_METHODS:
    raise ImportError(f"hub.service.HANDLERS {sorted(HANDLERS)} does not match DATA_METHODS {sorted(DATA_METHODS)}")
