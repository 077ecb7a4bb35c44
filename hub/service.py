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

from amux_memory.hub.cache import ContentCache
from amux_memory.hub.config import HubConfig
from amux_memory.hub.history import Actor, HistoryStore, Retention, ScopeHistory, line_changes, time_ns
from amux_memory.hub.identity import MCP_CLIENT, Identity, Scope, agent_reason
from amux_memory.hub.listing import list_documents
from amux_memory.hub.review import (
    PENDING,
    Proposal,
    ProposalStore,
    ScopeProposals,
    new_id,
    path_matcher,
    revision_or_absent,
)
from amux_memory.hub.rewrite_guard import check_rewrite
from amux_memory.hub.scan_report import document_entries, report, version_entries
from amux_memory.hub.search import Reader, read_file_nofollow, search_scope
from amux_memory.hub.secrets import Finding, credentials, find_secrets, refusal, scrub
from amux_memory.hub.store import BeforeWrite, Store, revision_of
from amux_memory.hub.walk import walk_documents
from amux_memory.protocol.config_file import enable_command, home_option
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import Limits
from amux_memory.protocol.messages import DATA_METHODS
from amux_memory.protocol.params import (
    ABSENT,
    parse_export,
    parse_forget,
    parse_get,
    parse_history,
    parse_list,
    parse_log,
    parse_purge,
    parse_restore,
    parse_review_decide,
    parse_review_list,
    parse_review_show,
    parse_scan,
    parse_search,
    parse_upsert,
    revision_matches,
)

Result = dict[str, Any]

log = logging.getLogger("amux.hub")

__all__ = ["MCP_CLIENT", "MemoryService", "HANDLERS"]


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


def _before_change(hist: ScopeHistory | None, path: str, seen: list[bytes | None]) -> BeforeWrite:
    """The hook a write or forget runs once every check passed, just before it touches the document (worker
    thread, scope lock held): it keeps the bytes it replaces in ``seen`` and, with history on, first records a
    hand edit found on disk as ``external`` (DESIGN.md §15.3 step 2)."""

    def before(old: bytes | None, mtime_ns: int) -> None:
        seen.append(old)
        if hist is not None:
            hist.sync(path, old, mtime_ns)

    return before


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
        self.proposals = ProposalStore(str(config.review_root))
        self.under_review = path_matcher(config.review_paths)
        """``path -> bool``: whether ``memory.review_paths`` names the logical path (DESIGN.md §21)."""
        self.clock: Callable[[], int] = time_ns
        """Epoch nanoseconds for proposals' times and expiry (replaceable in tests)."""

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
            identity.principal, identity.client, identity.binding, identity.session, agent_reason(identity))
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
        result = await self._run(self.store.get, self._dir(scope), p.path, p.start_line, p.end_line, p.offset)
        if self.config.review == "agents":
            async with self._lock(scope):
                pending = await self._run(lambda: {"id": self._pending_for(scope, p.path, actor)})
            if pending["id"] is not None:
                result["pending_proposal"] = pending["id"]
        return result

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
        if allow_secret and actor.agent == "mcp":
            raise HubError(ErrorCode.BAD_REQUEST, "allow_secret is a person's override at the command line "
                           "('amux memory upsert --allow-secret'); an MCP client cannot pass it",
                           {"field": "allow_secret"})
        if allow_secret and actor.agent is not None:
            who = ("an agent session (launched by 'amux launch', AMUX_SESSION_ID set)" if actor.agent == "session"
                   else "a delegated token (one issued for a conversation)")
            raise HubError(ErrorCode.BAD_REQUEST, f"allow_secret is a person's override at the command line; {who} "
                           "cannot pass it. Remove the credential and store where it lives instead",
                           {"field": "allow_secret"})
        if self.config.secret_scan == "off":
            return []
        in_path = find_secrets(path.encode("utf-8", "surrogatepass"))
        if in_path:
            log.info("refused a write of %s: its path holds %s", scrub(path), credentials(len(in_path)))
            raise refusal(path, in_path, in_path=True)
        findings = find_secrets(content, self.config.secret_allow)
        if not findings:
            return []
        if self.config.secret_scan == "block" and not allow_secret:
            shown = "; ".join(f"line {f.line} {f.rule} {f.preview}" for f in findings)
            log.info("refused a write of %s holding %s: %s", path, credentials(len(findings)), shown)
            raise refusal(path, findings)
        return findings

    def _write(self, scope: Scope, path: str, content: bytes, expected_revision: str, allow_shrink: bool,
               actor: Actor, restored_from: str | None = None, allow_secret: bool = False,
               review: dict[str, Any] | None = None) -> Result:
        """Upsert (or restore) with history: credential check → external check → durable document → durable
        version (worker thread).  A write that goes ahead holding credentials is logged once it is written;
        an error it then meets (``destructive_rewrite``, ``conflict``) quotes none of them."""
        findings = self._check_secrets(path, content, allow_secret, actor)
        override = sorted({f.rule for f in findings}) if findings and allow_secret else None
        hist = self._recording(scope)
        seen: list[bytes | None] = []
        try:
            result = self.store.upsert(self._dir(scope), path, content, expected_revision, allow_shrink,
                                       _before_change(hist, path, seen))
        except HubError as exc:
            if findings:
                raise scrubbed(exc, content) from None
            raise
        old = seen[0] if seen else None
        if hist is not None and not (old is not None and old == content):  # same bytes: no new version
            action = "restore" if restored_from is not None else "create" if old is None else "update"
            hist.record(path, content, action, actor, previous=old, restored_from=restored_from, after_change=True,
                        secret_override=override, review=review)
        if restored_from is not None:
            result["restored_from"] = restored_from
        if findings:
            how = "overridden by --allow-secret" if allow_secret else "memory.secret_scan = warn"
            log.warning("wrote %s holding %s (%s): %s", path, credentials(len(findings)), how,
                        "; ".join(f"line {f.line} {f.rule} {f.preview}" for f in findings))
            result["secret_findings"] = [f.wire() for f in findings]
            result["warnings"] = [f"{path} holds {credentials(len(findings))} (secret_findings); "
                                  + ("written because --allow-secret overrode the check"
                                     if allow_secret else "written because memory.secret_scan is warn")]
        return result

    async def _upsert(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        p = parse_upsert(params)
        async with self._lock(scope):
            if self._reviewed(actor, p.path):
                return await self._run(self._propose, scope, p.path, p.content, p.expected_revision, actor,
                                       p.allow_shrink, p.allow_secret)
            return await self._run(self._write, scope, p.path, p.content, p.expected_revision, p.allow_shrink,
                                   actor, None, p.allow_secret)

    def _delete(self, scope: Scope, path: str, expected_revision: str, actor: Actor,
                review: dict[str, Any] | None = None) -> Result:
        """Forget with history (worker thread): hand edit recorded first, unlink durably, tombstone durably."""
        hist = self._recording(scope)
        seen: list[bytes | None] = []
        result = self.store.forget(self._dir(scope), path, expected_revision, _before_change(hist, path, seen))
        if hist is not None:
            if result["deleted"]:
                hist.record(path, None, "forget", actor, previous=seen[0] if seen else None, after_change=True,
                            review=review)
            else:
                hist.sync(path, None, 0, create=False)  # deleted by hand: an external tombstone
        return result

    async def _forget(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        p = parse_forget(params)
        async with self._lock(scope):
            if self._reviewed(actor, p.path):
                return await self._run(self._propose, scope, p.path, None, p.expected_revision, actor)
            return await self._run(self._delete, scope, p.path, p.expected_revision, actor)

    # -- review (DESIGN.md §21) ---------------------------------------------------

    def _reviewed(self, actor: Actor, path: str) -> bool:
        """Whether this write waits for review: ``memory.review = agents``, an agent caller, a path under review."""
        return self.config.review == "agents" and actor.agent is not None and self.under_review(path)

    def _proposals(self, scope: Scope, settle: bool = True) -> ScopeProposals:
        """The scope's proposals, loaded, with expired ones marked and (``settle``) crash leftovers settled
        (:meth:`_settle`; worker thread, under the scope's lock)."""
        sp = self.proposals.scope(scope.relpath)
        sp.load()
        now = self.clock()
        max_age = self.config.review_max_days * 86_400 * 10**9
        for p in list(sp.pending()):
            if now - p.time_ns > max_age:
                log.info("proposal %s for %s expired after %d days", p.id, p.path, self.config.review_max_days)
                sp.decide(p, "expired", None, now)
            elif settle:
                self._settle(scope, sp, p)
        sp.forget_decided(now - 2 * max_age)
        return sp

    def _settle(self, scope: Scope, sp: ScopeProposals, p: Proposal) -> None:
        """A pending proposal the document already holds is decided: ``approved`` when history records its
        approval (a crash came between the write and marking it), else ``applied`` (someone wrote the same)."""
        current = self.store.read(self._dir(scope), p.path)
        if revision_or_absent(current) != p.proposed_revision or p.proposed_revision == p.base_revision:
            return
        newest = self.history.scope(scope.relpath).newest(p.path)
        if newest is not None and newest.review is not None and newest.review.get("proposal") == p.id:
            p.status, p.decision = "approved", {"by": newest.actor, "time": newest.time, "revision": newest.revision,
                                                "recovered": True}
            sp.save(p)
        else:
            sp.decide(p, "applied", None, self.clock(), revision=p.proposed_revision)

    def _propose(self, scope: Scope, path: str, content: bytes | None, expected_revision: str, actor: Actor,
                 allow_shrink: bool = False, allow_secret: bool = False) -> Result:
        """Keep an agent's upsert (``content``) or forget (None) as a pending proposal (worker thread, scope lock).

        The checks of the write run now and refuse as they would (credentials, compare-and-swap, quotas, the
        rewrite guard); over ``memory.review_max_pending`` it is ``review_backlog``.  A pending proposal of the
        same principal, client and session for ``path`` is replaced (``superseded``).  The proposal is durable
        before this returns ``{proposed: true, proposal, status: "pending", path, action, base_revision,
        proposed_revision, bytes, replaced?}``.  A forget of an absent document, or an upsert of the bytes the
        document holds, changes nothing and answers as today.
        """
        root = self._dir(scope)
        findings: list[Finding] = []
        if content is not None:
            findings = self._check_secrets(path, content, allow_secret, actor)
            try:
                old = self.store.check_upsert(root, path, content, expected_revision, allow_shrink)
            except HubError as exc:
                raise (scrubbed(exc, content) if findings else exc) from None
            if old == content:
                return {"path": path, "revision": revision_of(content), "created": False, "bytes": len(content)}
        else:
            old = self.store.read(root, path)
            if old is None:
                return {"path": path, "deleted": False, "already_absent": True, "revision": ABSENT}
            observed = revision_of(old)
            if not revision_matches(expected_revision, observed):
                self.store.check_upsert(root, path, old, expected_revision)  # raises the usual conflict
        sp = self._proposals(scope, settle=False)
        earlier = next((q for q in sp.pending() if q.path == path and q.same_proposer(actor)), None)
        pending = sum(1 for _ in sp.pending()) - (earlier is not None)
        if pending >= self.config.review_max_pending:
            raise HubError(ErrorCode.REVIEW_BACKLOG,
                           f"memory changes already awaiting review: {pending} (memory.review_max_pending = "
                           f"{self.config.review_max_pending}); nothing was proposed. Ask the user to review pending "
                           "memory changes: amux memory review", {"current": pending,
                                                                    "maximum": self.config.review_max_pending})
        added, removed = line_changes(old, content)
        now = self.clock()
        proposal = Proposal(new_id(), path, "upsert" if content is not None else "forget", revision_or_absent(old),
                            revision_or_absent(content), content, actor.as_dict(), now, allow_shrink, added, removed,
                            replaced=None if earlier is None else earlier.id)
        sp.save(proposal)
        if earlier is not None:
            sp.decide(earlier, "superseded", None, now, by_proposal=proposal.id)
        log.info("proposal %s: %s %s by %s via %s, pending review", proposal.id, proposal.action, path,
                 actor.principal, actor.client)
        result: Result = {"proposed": True, "proposal": proposal.id, "status": PENDING, "path": path,
                          "action": proposal.action, "base_revision": proposal.base_revision,
                          "proposed_revision": proposal.proposed_revision,
                          "bytes": 0 if content is None else len(content)}
        if earlier is not None:
            result["replaced"] = earlier.id
        if findings:
            result["secret_findings"] = [f.wire() for f in findings]
        return result

    def _pending_for(self, scope: Scope, path: str, actor: Actor) -> str | None:
        """The id of the newest pending proposal for ``path`` by ``actor``'s principal, if any (for ``get``)."""
        sp = self.proposals.scope(scope.relpath)
        sp.load()
        mine = [p for p in sp.pending() if p.path == path and p.actor.get("principal") == actor.principal]
        return mine[-1].id if mine else None

    async def _review_list(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        """``review_list``: one page of pending proposals, oldest first (DESIGN.md §21).

        Result ``{proposals: [entry], next_cursor, pending, review}``: each entry as
        :meth:`hub.review.Proposal.entry`; ``pending`` counts every pending proposal of the scope;
        ``next_cursor`` the last id shown when more follow (None at the end); ``review`` the setting.
        """
        p = parse_review_list(params)

        def work() -> Result:
            from amux_memory.protocol.messages import packed_size

            sp = self._proposals(scope)
            now = self.clock()
            pending = list(sp.pending())
            shown = [q for q in pending if q.path.startswith(p.path_prefix)]
            if p.cursor:
                ids = [q.id for q in shown]
                shown = shown[ids.index(p.cursor) + 1:] if p.cursor in ids else shown
            result: Result = {"proposals": [], "next_cursor": None, "pending": len(pending),
                              "review": self.config.review}
            budget = (self.limits.response_max_bytes - self.limits.response_envelope_bytes
                      - packed_size({**result, "next_cursor": "p" + "0" * 12}) - 8)
            root = self._dir(scope)
            for q in shown:
                entry = q.entry(now, revision_or_absent(self.store.read(root, q.path)))
                size = packed_size(entry)
                if size > budget:
                    result["next_cursor"] = result["proposals"][-1]["id"] if result["proposals"] else None
                    break
                budget -= size
                result["proposals"].append(entry)
            return result

        async with self._lock(scope):
            return await self._run(work)

    async def _review_show(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        """``review_show``: one proposal and a page of one of its texts (DESIGN.md §21).

        Result ``{proposal: entry (with status and decision), text, exists, content (bin), truncated,
        next_offset, total_bytes, base_stored, warnings}``: ``text`` is ``proposed`` (the agent's bytes; a
        deletion has none: ``exists`` false), ``base`` (the document the agent saw, from the history when
        it changed since: ``base_stored`` false when the history does not hold it) or ``current``.
        ``warnings`` holds what the rewrite guard would say of the change (DESIGN.md §12).  Raises
        ``not_found`` for an unknown id, ``bad_request`` for an offset past the end.
        """
        p = parse_review_show(params)

        def work() -> Result:
            from amux_memory.protocol.messages import packed_size

            sp = self._proposals(scope)
            q = sp.get(p.id)
            current = self.store.read(self._dir(scope), q.path)
            current_revision = revision_or_absent(current)
            base: bytes | None = None
            base_stored = True
            if q.base_revision != ABSENT:
                if current_revision == q.base_revision:
                    base = current
                else:
                    try:
                        base = self.history.scope(scope.relpath).find(q.path, q.base_revision)[1]
                    except HubError:
                        base_stored = False
            data = {"proposed": q.content, "base": base, "current": current}[p.text]
            warnings: list[str] = []
            if q.content is not None and current is not None:
                try:
                    check_rewrite(q.path, current, q.content)
                except HubError as exc:
                    warnings.append(exc.message)
            body = data or b""
            if p.offset > len(body):
                raise HubError(ErrorCode.BAD_REQUEST, f"offset {p.offset} is past the end of the {len(body)}-byte text",
                               {"field": "offset"})
            result: Result = {"proposal": q.entry(self.clock(), current_revision), "text": p.text,
                              "exists": data is not None, "content": b"", "truncated": False, "next_offset": None,
                              "total_bytes": len(body), "base_stored": base_stored, "warnings": warnings}
            budget = (self.limits.response_max_bytes - self.limits.response_envelope_bytes - packed_size(result)
                      - 5 - 9)
            stop = min(len(body), p.offset + max(budget, 256))
            result["content"] = body[p.offset:stop]
            if stop < len(body):
                result["truncated"], result["next_offset"] = True, stop
            return result

        async with self._lock(scope):
            return await self._run(work)

    async def _review_decide(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        """``review_decide``: approve or reject a proposal, as a person (DESIGN.md §21).

        An agent caller (:func:`hub.identity.agent_reason`) is refused with ``unauthorized``
        (``data.reason`` ``agent_caller``), whatever it asks.  A proposal decided the same way before answers
        ``{proposal, status, already_decided: true, decision, path}`` and changes nothing (approving twice
        applies once); deciding the other way (approving a rejected, expired or superseded one, rejecting an
        approved one) is ``conflict`` (``data.status``).  ``reject`` records the decision (``reason``).
        ``approve`` is a compare-and-swap write by the approver on ``expected_revision``, of the proposed
        bytes or the person's ``content``,
        recorded in history with ``review: {proposal, proposed_by}``; the credential check and quotas run
        again, the rewrite guard only warns (``warnings``).  Approving as proposed when the document is no
        longer at the proposal's base is ``conflict`` (nothing written; show it and approve an edited
        merge).  Result: the upsert's or forget's answer plus ``{proposal, status: "approved",
        already_decided: false, warnings?}``.
        """
        p = parse_review_decide(params)
        if actor.agent is not None:
            raise HubError(ErrorCode.UNAUTHORIZED, "an agent cannot approve or reject memory changes: a person "
                           "decides with 'amux memory review' (this caller is an agent: "
                           f"{actor.agent}); nothing was changed", {"reason": "agent_caller", "agent": actor.agent},
                           next_step="A person must decide: tell the user memory changes await review; they run "
                           "'amux memory review' outside the agent session (without AMUX_SESSION_ID or an agent's "
                           "token).")

        def work() -> Result:
            sp = self._proposals(scope)
            q = sp.get(p.id)
            if q.status != PENDING:
                same = ("approved", "applied") if p.decision == "approve" else ("rejected",)
                if q.status not in same:  # deciding the other way: refused, not a silent success
                    raise HubError(ErrorCode.CONFLICT, f"proposal {q.id} for {q.path} was already {q.status}; it "
                                   f"cannot be {p.decision}d now and nothing was changed",
                                   {"proposal": q.id, "path": q.path, "status": q.status, "decision": q.decision},
                                   next_step=f"See who decided and why with 'amux memory review show {q.id}'; "
                                   "list the pending proposals with 'amux memory review'.")
                return {"proposal": q.id, "path": q.path, "status": q.status, "already_decided": True,
                        "decision": q.decision}
            now = self.clock()
            if p.decision == "reject":
                sp.decide(q, "rejected", actor, now, reason=p.reason)
                log.info("proposal %s for %s rejected by %s", q.id, q.path, actor.principal)
                return {"proposal": q.id, "path": q.path, "status": "rejected", "already_decided": False}
            assert p.expected_revision is not None
            root = self._dir(scope)
            current = self.store.read(root, q.path)
            observed = revision_or_absent(current)
            if p.content is None and observed != q.base_revision:
                raise HubError(ErrorCode.CONFLICT,
                               f"{q.path} changed since proposal {q.id} was made (its base {q.base_revision[:12]}, "
                               f"now {observed[:12]}); nothing was written. See all three with 'amux memory review "
                               f"show {q.id}' and approve a merge with 'amux memory review approve {q.id} --edit'",
                               {"path": q.path, "proposal": q.id, "base_revision": q.base_revision,
                                "expected_revision": q.base_revision, "observed_revision": observed},
                               next_step=f"Merge both changes with 'amux memory review approve {q.id} --edit' "
                               f"(see them with 'amux memory review show {q.id}'), or reject it.")
            review = {"proposal": q.id, "proposed_by": q.actor}
            warnings: list[str] = []
            if q.action == "forget":
                if p.content is not None:
                    raise HubError(ErrorCode.BAD_REQUEST, f"proposal {q.id} deletes {q.path}: there is no text to "
                                   "edit; approve or reject it as it is", {"field": "content"})
                result: Result
                if current is None:
                    result = {"path": q.path, "deleted": False, "already_absent": True, "revision": ABSENT}
                else:
                    result = self._delete(scope, q.path, p.expected_revision, actor, review)
            else:
                content = q.content if p.content is None else p.content
                assert content is not None
                if current is not None:
                    try:
                        check_rewrite(q.path, current, content)
                    except HubError as exc:
                        warnings.append(exc.message)
                result = self._write(scope, q.path, content, p.expected_revision, True, actor, review=review)
            sp.decide(q, "approved", actor, now, reason=p.reason, revision=result["revision"],
                      edited=True if p.content is not None else None)
            log.info("proposal %s for %s approved by %s", q.id, q.path, actor.principal)
            result.update({"proposal": q.id, "status": "approved", "already_decided": False})
            if warnings:
                result["warnings"] = [*result.get("warnings", []), *warnings]
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
        from amux_memory.protocol.messages import packed_size

        return (self.limits.response_max_bytes - self.limits.response_envelope_bytes
                - packed_size({**fixed, "versions": [], "next_cursor": "9" * 18}) - 8)

    async def _restore(self, scope: Scope, params: dict[str, Any], actor: Actor) -> Result:
        p = parse_restore(params)

        def work() -> Result:
            version, data = self.history.scope(scope.relpath).find(p.path, p.revision)  # a prefix: the full one
            if self._reviewed(actor, p.path):  # an agent's restore is a write like any other (DESIGN.md §21)
                return self._propose(scope, p.path, data, p.expected_revision, actor, allow_shrink=True,
                                     allow_secret=p.allow_secret)
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
    "review_list": MemoryService._review_list,
    "review_show": MemoryService._review_show,
    "review_decide": MemoryService._review_decide,
}
"""The dispatch table: data method name → handler.  Its names are exactly :data:`DATA_METHODS`."""

if frozenset(HANDLERS) != DATA_METHODS:
    raise ImportError(f"hub.service.HANDLERS {sorted(HANDLERS)} does not match DATA_METHODS {sorted(DATA_METHODS)}")
