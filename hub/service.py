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

With ``memory.history`` on, every acknowledged ``upsert``, ``forget`` and
``restore`` is recorded in the scope's history (:mod:`hub.history`) in this
order, in one worker thread under the scope's lock: a hand edit found on disk
is recorded as ``external``; the document is written durably; its version is
appended durably; then the answer goes out (DESIGN.md §15).

Before an ``upsert`` or ``restore`` is written, under the scope's lock, its
content is checked for credentials (:func:`hub.secrets.find_secrets`,
``memory.secret_scan``): ``block`` refuses it with ``secret_detected``
(nothing written, nothing recorded), ``warn`` writes it and says so in the
answer; a person's ``allow_secret`` writes it and the history version records
the override (not from ``amux mcp`` or an agent session).  A path holding a
credential is refused whatever the setting, and never echoed (nor by an
``invalid_path`` error).  The secret itself is never in an answer, a log line or an
exception: only rule names, line numbers and redacted previews (DESIGN.md §16).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import trio

from hub.cache import ContentCache
from hub.config import HubConfig
from hub.history import Actor, HistoryStore, Retention, ScopeHistory
from hub.identity import Identity, Scope
from hub.listing import list_documents
from hub.scan_report import document_entries, report, version_entries
from hub.search import Reader, read_file_nofollow, search_scope
from hub.secrets import Finding, find_secrets, refusal, scrub
from hub.store import Store, revision_of
from hub.walk import walk_documents
from protocol.config_file import enable_command, home_option
from protocol.errors import ErrorCode, HubError
from protocol.limits import Limits
from protocol.messages import DATA_METHODS
from protocol.params import (
    ABSENT,
    parse_export,
    parse_forget,
    parse_get,
    parse_history,
    parse_list,
    parse_log,
    parse_purge,
    parse_restore,
    parse_scan,
    parse_search,
    parse_upsert,
)

Result = dict[str, Any]

log = logging.getLogger("amux.hub")

MCP_CLIENT = "amux-mcp"
"""The ``hello`` client name of ``amux mcp``: a caller that may never override the credential check."""


def scrubbed(exc: HubError, source: bytes | None = None) -> HubError:
    """``exc`` with every credential in its message and its ``data``'s strings replaced by a redacted preview
    (:func:`hub.secrets.scrub`; ``source``: the document the error quotes, DESIGN.md §16)."""
    data = {key: scrub(value, source) if isinstance(value, str) else value for key, value in exc.data.items()}
    step = scrub(exc.refined, source) if exc.refined is not None else None
    return HubError(exc.code, scrub(exc.message, source), data, next_step=step)


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
        self.history = HistoryStore(str(config.history_root), Retention(
            config.history_max_versions, config.history_max_days, config.history_max_bytes))

    def _lock(self, scope: Scope) -> trio.Lock:
        lock = self._locks.get(scope.relpath)
        if lock is None:
            lock = self._locks[scope.relpath] = trio.Lock()
        return lock

    def _dir(self, scope: Scope) -> str:
        return scope.directory(str(self.config.memory_root))

    async def call(self, scope: Scope, method: str, params: dict[str, Any], identity: Identity | None = None) -> Result:
        """Run one data method for ``scope``: ``params`` is the request's map, the result a map of plain values.

        ``identity`` is the caller (its principal, and the client, binding and
        session its ``hello`` named): the actor recorded in history for a
        write (None: an in-process caller, recorded as client ``hub``).

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
                f"'{enable_command(self.config.home)}' and restart the Hub "
                f"('amux hub restart{home_option(self.config.home)}')",
                {"setting": "memory.enabled"},
            )
        actor = Actor(None, "hub") if identity is None else Actor(
            identity.principal, identity.client, identity.binding, identity.session)
        try:
            return await handler(self, scope, params, actor)
        except HubError as exc:
            if exc.code is ErrorCode.INVALID_PATH and self.config.secret_scan != "off":
                raise scrubbed(exc) from None  # a path holding a credential is not echoed (DESIGN.md §16.3)
            raise

    async def _run(self, fn: Callable[..., Result], *args: Any) -> Result:
        return await trio.to_thread.run_sync(functools.partial(fn, *args))

    async def _search(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
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

    def _recording(self, scope: Scope) -> ScopeHistory | None:
        """The scope's history when changes are recorded (``memory.history``), else None."""
        return self.history.scope(scope.relpath) if self.config.history else None

    async def _get(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        p = parse_get(params)
        if p.revision is not None:
            revision = p.revision

            def stored() -> Result:
                _, data = self.history.scope(scope.relpath).find(p.path, revision)
                return self.store.fragment_of(p.path, data, p.start_line, p.end_line, p.offset)

            return await self._run(stored)
        return await self._run(self.store.get, self._dir(scope), p.path, p.start_line, p.end_line, p.offset)

    async def _export(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        p = parse_export(params)
        if p.revision is not None:
            revision = p.revision

            def stored() -> Result:
                _, data = self.history.scope(scope.relpath).find(p.path, revision)
                return self.store.export_of(p.path, data, p.offset, p.expected_revision)

            return await self._run(stored)
        return await self._run(self.store.export_page, self._dir(scope), p.path, p.offset, p.expected_revision)

    def _check_secrets(self, path: str, content: bytes, allow_secret: bool, actor: Actor) -> list[Finding]:
        """The credential check of a write (DESIGN.md §16): its findings when the write may go ahead.

        Raises ``secret_detected`` (``data.findings``: rule, line, redacted
        preview; ``line`` 0 and ``"in": "path"`` for the path) when the path
        holds a credential (whatever ``memory.secret_scan`` other than ``off``
        and ``allow_secret`` say: a path is shown everywhere), or when
        ``memory.secret_scan`` is ``block``, the content holds one and no
        person passed ``allow_secret``; ``bad_request`` when ``amux mcp`` or
        an agent session (a ``hello`` with a session: ``amux launch``,
        ``AMUX_SESSION_ID``) passes ``allow_secret`` (an agent cannot switch
        the check off, DESIGN.md §16.4).
        """
        if allow_secret and actor.client == MCP_CLIENT:
            raise HubError(ErrorCode.BAD_REQUEST, "allow_secret is a person's override at the command line "
                           "('amux memory upsert --allow-secret'); an MCP client cannot pass it",
                           {"field": "allow_secret"})
        if allow_secret and actor.session is not None:
            raise HubError(ErrorCode.BAD_REQUEST, "allow_secret is a person's override at the command line; an "
                           "agent session (launched by 'amux launch', AMUX_SESSION_ID set) cannot pass it. Remove "
                           "the credential and store where it lives instead", {"field": "allow_secret"})
        if self.config.secret_scan == "off":
            return []
        in_path = find_secrets(path.encode("utf-8", "surrogatepass"))
        if in_path:
            log.info("refused a write of %s: its path holds %d credential(s)", scrub(path), len(in_path))
            raise refusal(path, in_path, in_path=True)
        findings = find_secrets(content, self.config.secret_allow)
        if not findings:
            return []
        if self.config.secret_scan == "block" and not allow_secret:
            shown = "; ".join(f"line {f.line} {f.rule} {f.preview}" for f in findings)
            log.info("refused a write of %s holding %d credential(s): %s", path, len(findings), shown)
            raise refusal(path, findings)
        return findings

    def _write(self, scope: Scope, path: str, content: bytes, expected_revision: str, allow_shrink: bool,
               actor: Actor, restored_from: str | None = None, allow_secret: bool = False) -> Result:
        """Upsert (or restore) with history: credential check → external check → durable document → durable
        version (worker thread).  A write that goes ahead holding credentials is logged once it is written;
        an error it then meets (``destructive_rewrite``, ``conflict``) quotes none of them."""
        findings = self._check_secrets(path, content, allow_secret, actor)
        override = sorted({f.rule for f in findings}) if findings and allow_secret else None
        hist = self._recording(scope)
        seen: list[bytes | None] = []

        def before(old: bytes | None, mtime_ns: int) -> None:
            seen.append(old)
            if hist is not None:
                hist.sync(path, old, mtime_ns)

        try:
            result = self.store.upsert(self._dir(scope), path, content, expected_revision, allow_shrink, before)
        except HubError as exc:
            if findings:
                raise scrubbed(exc, content) from None
            raise
        old = seen[0] if seen else None
        if hist is not None and not (old is not None and old == content):  # same bytes: no new version
            action = "restore" if restored_from is not None else "create" if old is None else "update"
            hist.record(path, content, action, actor, previous=old, restored_from=restored_from, after_change=True,
                        secret_override=override)
        if restored_from is not None:
            result["restored_from"] = restored_from
        if findings:
            how = "overridden by --allow-secret" if allow_secret else "memory.secret_scan = warn"
            log.warning("wrote %s holding %d credential(s) (%s): %s", path, len(findings), how,
                        "; ".join(f"line {f.line} {f.rule} {f.preview}" for f in findings))
            result["secret_findings"] = [f.wire() for f in findings]
            noun = "credential" if len(findings) == 1 else "credentials"
            result["warnings"] = [f"{path} holds {len(findings)} {noun} (secret_findings); "
                                  + ("written because --allow-secret overrode the check"
                                     if allow_secret else "written because memory.secret_scan is warn")]
        return result

    async def _upsert(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        p = parse_upsert(params)
        async with self._lock(scope):
            return await self._run(self._write, scope, p.path, p.content, p.expected_revision, p.allow_shrink,
                                   actor, None, p.allow_secret)

    async def _forget(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        p = parse_forget(params)

        def work() -> Result:
            hist = self._recording(scope)
            seen: list[bytes | None] = []

            def before(old: bytes | None, mtime_ns: int) -> None:
                seen.append(old)
                if hist is not None:
                    hist.sync(p.path, old, mtime_ns)

            result = self.store.forget(self._dir(scope), p.path, p.expected_revision, before)
            if hist is not None:
                if result["deleted"]:
                    hist.record(p.path, None, "forget", actor, previous=seen[0] if seen else None, after_change=True)
                else:
                    hist.sync(p.path, None, 0, create=False)  # deleted by hand: an external tombstone
            return result

        async with self._lock(scope):
            return await self._run(work)

    async def _history(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        p = parse_history(params)
        hist = self.history.scope(scope.relpath)

        def work() -> Result:
            if self.config.history:
                current, mtime_ns = self.store.read_stat(self._dir(scope), p.path)
                hist.sync(p.path, current, mtime_ns, create=False)
            versions, cursor = hist.page(p.path, p.cursor, p.limit, self._page_budget({"path": p.path}))
            return {"path": p.path, "versions": versions, "next_cursor": cursor}

        async with self._lock(scope):
            return await self._run(work)

    async def _log(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        p = parse_log(params)
        hist = self.history.scope(scope.relpath)

        def work() -> Result:
            if self.config.history:  # hand edits, new files and deletions first, as history does (DESIGN.md §15.1)
                root = self._dir(scope)
                walked = walk_documents(root, "", self.limits)
                hist.reconcile(walked.found, walked.mtimes, not walked.reasons,
                               lambda path: self.store.read_stat(root, path))
            changes, cursor = hist.page(None, p.cursor, p.limit, self._page_budget({}), path_prefix=p.path_prefix,
                                        since=p.since)
            return {"changes": changes, "next_cursor": cursor}

        async with self._lock(scope):
            return await self._run(work)

    def _page_budget(self, fixed: dict[str, Any]) -> int:
        """Bytes left for a page's entries: the response budget minus the envelope, ``fixed`` and a cursor."""
        from protocol.messages import packed_size

        return (self.limits.response_max_bytes - self.limits.response_envelope_bytes
                - packed_size({**fixed, "versions": [], "next_cursor": "9" * 18}) - 8)

    async def _restore(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        p = parse_restore(params)

        def work() -> Result:
            version, data = self.history.scope(scope.relpath).find(p.path, p.revision)  # a prefix: the full one
            return self._write(scope, p.path, data, p.expected_revision, True, actor, restored_from=version.revision,
                               allow_secret=p.allow_secret)

        async with self._lock(scope):
            return await self._run(work)

    async def _purge(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        p = parse_purge(params)

        def work() -> Result:
            current = self.store.read(self._dir(scope), p.path)
            live = ABSENT if current is None else revision_of(current)
            erased = self.history.scope(scope.relpath).purge(p.path, p.revision, live)
            return {"path": p.path, "erased": erased}

        async with self._lock(scope):
            return await self._run(work)

    async def _scan(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        """``scan``: the documents (and with ``history`` the stored versions) holding credentials (DESIGN.md §16).

        Result ``{"documents": [{"path", "revision", "findings", "commands"}],
        "versions": [{"path", "revision", "time", "action", "findings",
        "commands"}], "truncated", "rules"}``; findings are ``{rule, line,
        preview}`` (never the value), at most
        :data:`hub.scan_report.SCAN_MAX_FINDINGS` each,
        :data:`hub.scan_report.SCAN_MAX_ENTRIES` entries in all (``truncated``
        when more were found; the report is :mod:`hub.scan_report`).
        ``memory.secret_allow`` applies; ``memory.secret_scan`` does not (a
        scan is always asked for).  Runs under the scope's lock.
        """
        p = parse_scan(params)
        allowed = self.config.secret_allow

        def work() -> Result:
            root = self._dir(scope)
            walked = walk_documents(root, "", self.limits)
            paths = [path for path, _ in sorted(walked.found)]
            documents = document_entries(paths, lambda path: self.store.read(root, path), allowed)
            versions = version_entries(self.history.scope(scope.relpath).stored(), allowed) if p.history else []
            return report(documents, versions, self.limits)

        async with self._lock(scope):
            return await self._run(work)

    async def _list(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        p = parse_list(params)
        return await self._run(list_documents, self._dir(scope), p.path_prefix, p.cursor, self.limits)


Handler = Callable[[MemoryService, Scope, dict[str, Any], Actor], Awaitable[Result]]
"""A data method's implementation: ``(service, caller scope, request params, actor) -> result map``."""

HANDLERS: Final[Mapping[str, Handler]] = {
    "search": MemoryService._search,
    "get": MemoryService._get,
    "export": MemoryService._export,
    "upsert": MemoryService._upsert,
    "forget": MemoryService._forget,
    "list": MemoryService._list,
    "history": MemoryService._history,
    "log": MemoryService._log,
    "restore": MemoryService._restore,
    "purge": MemoryService._purge,
    "scan": MemoryService._scan,
}
"""The dispatch table: data method name → handler.  Its names are exactly :data:`DATA_METHODS`."""

if frozenset(HANDLERS) != DATA_METHODS:
    raise ImportError(f"hub.service.HANDLERS {sorted(HANDLERS)} does not match DATA_METHODS {sorted(DATA_METHODS)}")
