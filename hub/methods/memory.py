"""Hub methods on top of the store and the scan, for one authenticated caller.

``MemoryMethods.call`` takes an already-validated caller scope and a request,
looks the method up in :data:`HANDLERS` (one entry per name in
:data:`protocol.messages.DATA_METHODS`), and returns the result map or raises
:class:`HubError`.  Each handler validates its parameters
(:mod:`protocol.params`) and calls :class:`hub.storage.store.Store`,
:func:`hub.methods.search.search_scope` or :func:`hub.storage.document_list.list_documents`.
Writes to one scope are serialised by that scope's :class:`trio.Lock` (check
revision → check quota → write; DESIGN.md §4): :meth:`MemoryMethods.locked`
runs the work in a worker thread under it, as all file I/O runs in worker
threads so the event loop keeps serving other connections.  The search scan
runs under a Trio cancel scope with the 250 ms budget (DESIGN.md §5, §6).
An agent's write under review, and the ``review_*`` methods, are the review
queue's work (:mod:`hub.methods.review`, DESIGN.md §21).

With ``memory.history`` on, every acknowledged ``upsert``, ``forget`` and
``restore`` is recorded in the scope's history (:mod:`hub.storage.history`) in this
order, in one worker thread under the scope's lock: a hand edit found on disk
is recorded as ``external``; the document is written durably; its version is
appended durably; then the answer goes out (DESIGN.md §15).

Before an ``upsert`` or ``restore`` is written, under the scope's lock, its
content is checked for credentials (:func:`hub.methods.secrets.find_secrets`,
``memory.secret_scan``): ``block`` refuses it with ``secret_detected``
(nothing written, nothing recorded), ``warn`` writes it and says so in the
answer; a person's ``allow_secret`` writes it and the history version records
the override (not from ``amux mcp`` or an agent session).  A path holding a
credential is refused whatever the setting, and never echoed (nor by an
``invalid_path`` error).  The secret itself is never in an answer, a log line or an
exception: only rule names, line numbers and redacted previews (DESIGN.md §16).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, TypeVarTuple, cast

import trio

from amux_memory.hub.access.config import HubConfig
from amux_memory.hub.access.identity import MCP_CLIENT, Identity, Scope, agent_reason
from amux_memory.hub.access.mounts import Part
from amux_memory.hub.access.registry import Registry
from amux_memory.hub.access.tidy_runs import RunBook
from amux_memory.hub.methods.calls import BlockingHandler, Call, Handler, Route, Who
from amux_memory.hub.methods.review import ReviewQueue, refuse_tidy_run, require_person
from amux_memory.hub.methods.scan_report import document_entries, report, version_entries
from amux_memory.hub.methods.search import Reader, SearchPart, read_file_nofollow, search_parts
from amux_memory.hub.methods.secrets import Finding, credentials, find_secrets, refusal, scrub, scrubbed
from amux_memory.hub.storage.cache import ContentCache
from amux_memory.hub.storage.document_list import list_documents
from amux_memory.hub.storage.history import Actor, HistoryStore, Retention, ScopeHistory
from amux_memory.hub.storage.store import BeforeWrite, Store, revision_of
from amux_memory.hub.storage.walk import walk_documents
from amux_memory.hub.storage.watch import Watcher
from amux_memory.protocol.config_file import enable_command, home_option
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import Limits
from amux_memory.protocol.messages import PAGE_RESERVE_BYTES, response_room
from amux_memory.protocol.params import (
    ABSENT,
    HistoryParams,
    LogParams,
    ScanParams,
    SearchParams,
)

Result = dict[str, Any]
T = TypeVar("T")
Ts = TypeVarTuple("Ts")

log = logging.getLogger("amux.hub")

__all__ = ["MCP_CLIENT", "MemoryMethods"]


def _stop_when_cancelled() -> bool:
    """Poll, from a worker thread, whether the calling task's cancel scope fired."""
    try:
        trio.from_thread.check_cancelled()
    except trio.Cancelled:
        return True
    return False


def actor_of(identity: Identity | None) -> Actor:
    """The actor history records for ``identity`` (None: an in-process caller, client ``hub``)."""
    if identity is None:
        return Actor(None, "hub")
    return Actor(identity.principal, identity.client, identity.binding, identity.session, agent_reason(identity),
                 identity.review_forced)


ANOTHER_MEMORY = "another"
"""What a copy's or move's other side is to a caller who may not read it: ``{"memory": "another"}``."""

ORIGIN_FIELDS = ("scope", "document", "revision")
"""The members a recorded side of an origin has (:attr:`hub.storage.history.Version.origin`)."""

AUTHOR_FIELDS = ("principal", "client", "time")
"""The members of a scope copy's ``origin.author`` (:func:`hub.methods.copies.source_author`)."""


def origin_seen(origin: Mapping[str, Any], visible: Mapping[str, str]) -> dict[str, Any]:
    """A copy's or move's ``origin`` as a caller sees it (DESIGN.md §15.7): each side (``from``, ``to``) whose
    scope is in ``visible`` (binding → the prefix the caller sees it under, :attr:`hub.methods.calls.Call.visible`)
    keeps its ``scope``, ``document`` and ``revision`` and gains ``mounted``, the document's path as the caller
    names it (``@ops/secret.md``; ``secret.md`` in its own scope); any other side is ``{"memory": "another"}``:
    no scope, path or revision.  A scope copy's ``author`` (who wrote the text this scope now holds) is shown to
    whoever reads the version."""
    seen: dict[str, Any] = {}
    author = origin.get("author")
    if isinstance(author, dict):
        seen["author"] = {key: author.get(key) for key in AUTHOR_FIELDS}
    for side in ("from", "to"):
        named = origin.get(side)
        if named is None:
            continue
        scope = named.get("scope") if isinstance(named, dict) else None
        label = visible.get(scope) if isinstance(scope, str) else None
        if label is None or not isinstance(named.get("document"), str):
            seen[side] = {"memory": ANOTHER_MEMORY}
            continue
        seen[side] = {key: named[key] for key in ORIGIN_FIELDS if key in named}
        seen[side]["mounted"] = label + named["document"]
    return seen


def _before_change(hist: ScopeHistory | None, path: str, seen: list[bytes | None]) -> BeforeWrite:
    """The hook a write or forget runs once every check passed, just before it touches the document (worker
    thread, scope lock held): it keeps the bytes it replaces in ``seen`` and, with history on, first records a
    hand edit found on disk as ``external`` (DESIGN.md §15.3 step 2)."""

    def before(old: bytes | None, mtime_ns: int) -> None:
        seen.append(old)
        if hist is not None:
            hist.sync(path, old, mtime_ns)

    return before


class MemoryMethods:
    """Dispatch of data methods for a Hub with fixed settings.

    ``reader`` is the scan's file reader (replaceable to slow it down in tests
    of the time budget).  ``review`` is the Hub's review queue (DESIGN.md §21).
    """

    def __init__(self, config: HubConfig, limits: Limits, reader: Reader = read_file_nofollow) -> None:
        self.config = config
        self.limits = limits
        self.store = Store(limits)
        self.reader = reader
        self.cache = ContentCache(limits.cache_max_bytes, Watcher.start() if config.watch_files else None)
        self._search_limiter = trio.CapacityLimiter(limits.search_threads)
        self._locks: dict[str, trio.Lock] = {}
        self.history = HistoryStore(str(config.history_root), Retention(
            config.history_max_versions, config.history_max_days, config.history_max_bytes))
        self.review = ReviewQueue(config, limits, self.store, self.history, self)
        self.runs = RunBook(str(config.review_root))
        """The review-forced tidy runs (:mod:`hub.access.tidy_runs`, DESIGN.md §21), marked on every ``hello``."""

    def _lock(self, scope: Scope) -> trio.Lock:
        lock = self._locks.get(scope.relpath)
        if lock is None:
            lock = self._locks[scope.relpath] = trio.Lock()
        return lock

    async def locked(self, scope: Scope, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        """Run ``fn(*args)`` in a worker thread while holding ``scope``'s :class:`trio.Lock`; return its result or
        raise its exception.

        Every data method that changes a scope's files, or reads what a write must not change halfway, does its
        file work through here, so read → compare → quota → write never interleaves with another write to the
        scope (DESIGN.md §4.4).

        Cancellation: while waiting for the lock, or for a worker thread (``trio.to_thread.run_sync`` checks on
        entry and while it waits for the thread limiter), :class:`trio.Cancelled` is raised and nothing was
        done.  Once ``fn`` runs it cannot be cancelled (``abandon_on_cancel=False``): this waits for the thread
        to finish and returns what ``fn`` returned (or raises what it raised), even past a deadline; the
        cancellation is delivered at the caller's next checkpoint (releasing the lock is not one), so finished
        work is answered.  ``fn`` may poll :func:`trio.from_thread.check_cancelled` to end early.
        """
        async with self._lock(scope):
            return await trio.to_thread.run_sync(fn, *args)

    def scope_dir(self, scope: Scope) -> str:
        """The folder of ``scope`` under the memory root (DESIGN.md §7.1)."""
        return scope.directory(str(self.config.memory_root))

    async def run(self, route: Route, scope: Scope, params: dict[str, Any], identity: Identity | None = None, *,
                  parts: Sequence[Part] = (), registry: Callable[[], Registry] | None = None, now: float = 0.0,
                  parsed: Any = None, visible: Mapping[str, str] | None = None) -> Result:
        """Run ``route``'s handler on ``scope`` (DESIGN.md §2.2): the route's caller check, its parser, then its
        handler, in a worker thread under ``scope``'s lock when the route is ``locked``.

        The caller of this checked memory is on (:meth:`check_enabled`) and resolved the call's mounts
        (:mod:`hub.methods.across_mounts`); ``parts``, ``registry``, ``now`` and ``visible`` (the scopes the
        caller may read; None: ``scope`` alone, at the root) are handed to the handler in its
        :class:`~hub.methods.calls.Call`; ``parsed``, when given, is what the route's parser already made of
        ``params`` (a ``copy`` resolves its parsed paths).  ``identity`` is the caller (None: an in-process
        caller, recorded as client ``hub``).  A tidy run is refused a ``no_tidy_run`` route before its
        parameters are read, an agent a ``person`` route after.  Raises what the parser and the handler raise; an
        ``invalid_path`` is scrubbed
        of credentials (DESIGN.md §16.3).  On cancellation while waiting for the scope's lock or a worker
        thread, nothing was done; once a worker runs, it finishes before this returns.
        """
        actor = actor_of(identity)
        try:
            if route.who is Who.NO_TIDY_RUN:
                refuse_tidy_run(actor, route.name)
            assert route.parse is not None and route.handler is not None, f"{route.name} is answered elsewhere"
            arguments = route.parse(params) if parsed is None else parsed
            seen = visible if visible is not None else {scope.binding: ""}
            call = Call(scope, arguments, actor, identity, parts, registry, now, seen, route.proposes)
            if route.who is Who.PERSON:
                require_person(actor)
            if route.locked:
                return await self.locked(scope, cast(BlockingHandler, route.handler), self, call)
            return await cast(Handler, route.handler)(self, call)
        except HubError as exc:
            if exc.code is ErrorCode.INVALID_PATH and self.config.secret_scan != "off":
                raise scrubbed(exc) from None  # a path holding a credential is not echoed (DESIGN.md §16.3)
            raise

    def check_enabled(self) -> None:
        """Raise ``disabled`` (naming the command that enables memory) while ``memory.enabled`` is off."""
        if not self.config.memory_enabled:
            raise HubError(
                ErrorCode.DISABLED,
                "memory is disabled on this Hub; the files are kept. Enable it with "
                f"'{enable_command(self.config.home)}' and restart the Hub "
                f"('amux hub restart{home_option(self.config.home)}')",
                {"setting": "memory.enabled"},
            )

    def review_rule(self, scope: Scope) -> str:
        """The review rule of ``scope`` (:meth:`hub.methods.review.ReviewQueue.rule`)."""
        return self.review.rule(scope)

    # -- writes with history (the review queue's proposals and approvals reuse them) --

    def _recording(self, scope: Scope) -> ScopeHistory | None:
        """The scope's history when changes are recorded (``memory.history``), else None."""
        return self.history.scope(scope.relpath) if self.config.history else None

    def check_secrets(self, path: str, content: bytes, allow_secret: bool, actor: Actor) -> list[Finding]:
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

    def write(self, scope: Scope, path: str, content: bytes, expected_revision: str, allow_shrink: bool,
              actor: Actor, restored_from: str | None = None, allow_secret: bool = False,
              review: dict[str, Any] | None = None, origin: dict[str, Any] | None = None) -> Result:
        """Upsert (or restore: ``restored_from`` is the version's revision) with history: credential check →
        external check → durable document → durable version (DESIGN.md §15.3).  Blocking: run it through
        :meth:`locked`.

        Returns :meth:`hub.storage.store.Store.upsert`'s ``{path, revision, created, bytes}``, plus ``restored_from``,
        and ``secret_findings`` and ``warnings`` when it was written holding credentials; ``review``
        (``{proposal, proposed_by}``) is recorded with an approved proposal's version.  Raises what
        :meth:`check_secrets` and the store raise (``conflict``, ``quota_exceeded``, ``destructive_rewrite``,
        ``storage_*``).  ``origin`` is where a copy took the text from (:attr:`hub.storage.history.Version.origin`).  A
        write that goes ahead holding credentials is logged once it is written; an error it then meets quotes
        none of them."""
        findings = self.check_secrets(path, content, allow_secret, actor)
        override = sorted({f.rule for f in findings}) if findings and allow_secret else None
        hist = self._recording(scope)
        seen: list[bytes | None] = []
        try:
            result = self.store.upsert(self.scope_dir(scope), path, content, expected_revision, allow_shrink,
                                       _before_change(hist, path, seen))
        except HubError as exc:
            if findings:
                raise scrubbed(exc, content) from None
            raise
        old = seen[0] if seen else None
        if hist is not None and not (old is not None and old == content):  # same bytes: no new version
            action = "restore" if restored_from is not None else "create" if old is None else "update"
            hist.record(path, content, action, actor, previous=old, restored_from=restored_from, after_change=True,
                        secret_override=override, review=review, origin=origin)
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

    def delete(self, scope: Scope, path: str, expected_revision: str, actor: Actor,
               review: dict[str, Any] | None = None, origin: dict[str, Any] | None = None) -> Result:
        """Forget with history: hand edit recorded first, unlink durably, tombstone durably (``review`` as for
        :meth:`write`).  Blocking: run it through :meth:`locked`.  Returns :meth:`hub.storage.store.Store.forget`'s
        ``{path, deleted, already_absent, revision}``; raises ``conflict`` and ``storage_*``."""
        hist = self._recording(scope)
        seen: list[bytes | None] = []
        result = self.store.forget(self.scope_dir(scope), path, expected_revision, _before_change(hist, path, seen))
        if hist is not None:
            if result["deleted"]:
                hist.record(path, None, "forget", actor, previous=seen[0] if seen else None, after_change=True,
                            review=review, origin=origin)
            else:
                hist.sync(path, None, 0, create=False)  # deleted by hand: an external tombstone
        return result

    # -- data methods -------------------------------------------------------------

    async def handle_search(self, call: Call) -> Result:
        """``search`` over ``call.parts`` (the caller's root and mounts its prefix covers, DESIGN.md §7.8) as one
        scan under one budget: :func:`hub.methods.search.search_parts`; cancellation as :meth:`search_parts`'s
        budget says (the worker returns what it has)."""
        p: SearchParams = call.params
        searched = [SearchPart(part.label, self.scope_dir(part.scope), part.inner, self.cache.scope(part.scope.relpath))
                    for part in call.parts]
        return await self._scan_within_budget(searched, p.keywords, p.limit)

    async def _scan_within_budget(self, parts: list[SearchPart], keywords: tuple[str, ...], limit: int) -> Result:
        """:func:`hub.methods.search.search_parts` in a search worker thread under the 250 ms budget, which starts when
        the scan holds its caches (DESIGN.md §5.4); adds ``elapsed_ms``."""
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

            # The worker polls the cancel scope between files and returns what it
            # has; we wait for it rather than abandon it, so no thread outlives us.
            def scan() -> Result:
                found = search_parts(parts, keywords, limit, self.limits, _stop_when_cancelled, self.reader, started)
                found["elapsed_ms"] = round((time.perf_counter() - clock[0]) * 1000, 3)
                self.cache.trim([part.cache for part in parts])  # in this thread: eviction copies what it keeps
                return found

            return await trio.to_thread.run_sync(scan, limiter=self._search_limiter)
        raise HubError(ErrorCode.INTERNAL, "search was cancelled before it could start")

    async def stored_version(self, scope: Scope, path: str, revision: str, answer: Callable[[bytes], Result]) -> Result:
        """``answer(data)`` for the version of ``path`` whose revision is ``revision``, read from ``scope``'s history
        in a worker thread (``get``/``export`` with ``revision``, DESIGN.md §3 and §15).  Takes no scope lock: history
        is append-only.  Raises ``not_found`` when history holds no such version; on cancellation the read runs
        to its end in the thread and its answer is dropped."""

        def read() -> Result:
            _, data = self.history.scope(scope.relpath).find(path, revision)
            return answer(data)

        return await trio.to_thread.run_sync(read)

    async def handle_get(self, call: Call) -> Result:
        """``get``: a bounded fragment of the live document (or of a stored version, with ``revision``), with the
        caller's pending proposal for it where the scope reviews (DESIGN.md §21)."""
        scope, p, actor = call.scope, call.params, call.actor
        if p.revision is not None:
            return await self.stored_version(
                scope, p.path, p.revision,
                lambda data: self.store.fragment_of(p.path, data, p.start_line, p.end_line, p.offset))
        result = await trio.to_thread.run_sync(self.store.get, self.scope_dir(scope), p.path, p.start_line,
                                               p.end_line, p.offset)
        if self.review.rule(scope) != "off":
            pending = await self.locked(scope, self.review.pending_for, scope, p.path, actor)
            if pending is not None:
                result["pending_proposal"] = pending
        return result

    async def handle_export(self, call: Call) -> Result:
        """``export``: a page of the whole document's bytes (or of a stored version's)."""
        scope, p = call.scope, call.params
        if p.revision is not None:
            return await self.stored_version(
                scope, p.path, p.revision,
                lambda data: self.store.export_of(p.path, data, p.offset, p.expected_revision))
        return await trio.to_thread.run_sync(self.store.export_page, self.scope_dir(scope), p.path, p.offset,
                                             p.expected_revision)

    def handle_upsert(self, call: Call) -> Result:
        """``upsert`` (worker thread, the scope's lock held): a proposal where the scope reviews this write
        (:meth:`hub.methods.review.ReviewQueue.reviewed`), else :meth:`write`."""
        scope, p, actor = call.scope, call.params, call.actor
        if call.proposes and self.review.reviewed(scope, actor, p.path):
            return self.review.propose(scope, p.path, p.content, p.expected_revision, actor, p.allow_shrink,
                                       p.allow_secret)
        return self.write(scope, p.path, p.content, p.expected_revision, p.allow_shrink, actor, None, p.allow_secret)

    def handle_forget(self, call: Call) -> Result:
        """``forget`` (worker thread, the scope's lock held): a proposal where the scope reviews it, else
        :meth:`delete`."""
        scope, p, actor = call.scope, call.params, call.actor
        if call.proposes and self.review.reviewed(scope, actor, p.path):
            return self.review.propose(scope, p.path, None, p.expected_revision, actor)
        return self.delete(scope, p.path, p.expected_revision, actor)

    # -- review (DESIGN.md §21): the work is the review queue's -----------------

    def handle_review_list(self, call: Call) -> Result:
        """``review_list`` (worker thread, the scope's lock held): a team's other members see their own proposals
        only (:func:`hub.methods.review.may_see`).  Where some part the prefix covers (``call.parts``) reviews,
        the page gains ``reviews``: for each part ``{mount, review, role?}`` (``mount`` ``""`` for the caller's own
        scope, ``role`` the caller's in a team), so a caller learns which of its memories review and whether it
        decides there (DESIGN.md §21); with review off everywhere the page is as it was."""
        result = self.review.review_list(call.scope, call.params, call.actor)
        reviews = [{"mount": part.label, "review": self.review_rule(part.scope)}
                   | ({} if part.mount is None else {"role": part.mount.role}) for part in call.parts]
        if any(r["review"] != "off" for r in reviews):
            result["reviews"] = reviews
        return result

    def handle_review_show(self, call: Call) -> Result:
        """``review_show`` (worker thread, the scope's lock held), as :meth:`handle_review_list` filters."""
        return self.review.review_show(call.scope, call.params, call.actor)

    def handle_review_decide(self, call: Call) -> Result:
        """``review_decide`` by a person (the route checked it; worker thread, the scope's lock held); ``call.parts``
        holds the mount the proposal was looked for in, whose role decides (:mod:`hub.methods.across_mounts`)."""
        mount = call.parts[0].mount if call.parts else None
        return self.review.review_decide(call.scope, call.params, call.actor, mount)

    async def handle_review_run(self, call: Call) -> Result:
        """``review_run``: begin (or, with ``end``, end) the review-forced run of ``session``
        (:class:`hub.access.tidy_runs.RunBook`): from then on every caller the Hub ties to it writes proposals only.

        A person only (an agent is ``unauthorized``, reason ``agent_caller``); the launcher's process is the
        kernel's ``SO_PEERCRED`` pid of the connection, never a parameter; ``token_id`` names the delegated token
        the launch issued for the agent (forced too).  Result ``{session, principal, pid, expires, began}`` or
        ``{session, ended}``.  Raises ``bad_request`` for bad params, ``conflict`` for a session that is another
        principal's run.  ``call.registry`` is the call's registry snapshot.
        """
        p, identity, registry = call.params, call.identity, call.registry
        assert identity is not None and registry is not None
        if p.end:
            return await trio.to_thread.run_sync(self.runs.end, identity, p.session, call.now)

        def begin() -> Result:
            return self.runs.begin(identity, p.session, p.token_id, registry(), call.now)

        return await trio.to_thread.run_sync(begin)

    # -- history (DESIGN.md §15) --------------------------------------------------

    def handle_history(self, call: Call) -> Result:
        """``history`` (worker thread, the scope's lock held): :meth:`history_page`."""
        return self.history_page(call.scope, call.params, call.visible)

    def history_page(self, scope: Scope, p: HistoryParams, visible: Mapping[str, str]) -> Result:
        """``history``: a hand edit recorded first (with ``memory.history``), then a page of the path's versions,
        each copy's or move's other side named only if it is in ``visible`` (:func:`origin_seen`)."""
        hist = self.history.scope(scope.relpath)
        if self.config.history:
            current, mtime_ns = self.store.read_stat(self.scope_dir(scope), p.path)
            hist.sync(p.path, current, mtime_ns, create=False)
        # The sample cursor (18 digits) is as long as any seq the page may end at.
        room = response_room(self.limits, {"path": p.path, "versions": [], "next_cursor": "9" * 18}, PAGE_RESERVE_BYTES)
        versions, cursor = hist.page(p.path, p.cursor, p.limit, room, seen=lambda o: origin_seen(o, visible))
        return {"path": p.path, "versions": versions, "next_cursor": cursor}

    def handle_log(self, call: Call) -> Result:
        """``log`` (worker thread, the scope's lock held): :meth:`log_page`."""
        return self.log_page(call.scope, call.params, call.visible)

    def log_page(self, scope: Scope, p: LogParams, visible: Mapping[str, str]) -> Result:
        """``log``: the scope reconciled with one walk (with ``memory.history``), then a page of its changes, their
        origins shown as :meth:`history_page` shows them."""
        hist = self.history.scope(scope.relpath)
        if self.config.history:  # hand edits, new files and deletions first, as history does (DESIGN.md §15.1)
            root = self.scope_dir(scope)
            walked = walk_documents(root, "", self.limits)
            hist.reconcile(walked.found, walked.mtimes, not walked.reasons,
                           lambda path: self.store.read_stat(root, path))
        room = response_room(self.limits, {"versions": [], "next_cursor": "9" * 18}, PAGE_RESERVE_BYTES)
        changes, cursor = hist.page(None, p.cursor, p.limit, room, path_prefix=p.path_prefix, since=p.since,
                                    seen=lambda o: origin_seen(o, visible))
        return {"changes": changes, "next_cursor": cursor}

    def handle_restore(self, call: Call) -> Result:
        """``restore`` (worker thread, the scope's lock held)."""
        scope, p, actor = call.scope, call.params, call.actor
        version, data = self.history.scope(scope.relpath).find(p.path, p.revision)  # a prefix: the full one
        # an agent's restore is a write like any other (DESIGN.md §21)
        if call.proposes and self.review.reviewed(scope, actor, p.path):
            return self.review.propose(scope, p.path, data, p.expected_revision, actor, allow_shrink=True,
                                       allow_secret=p.allow_secret)
        return self.write(scope, p.path, data, p.expected_revision, True, actor, restored_from=version.revision,
                          allow_secret=p.allow_secret)

    def handle_purge(self, call: Call) -> Result:
        """``purge`` (worker thread, the scope's lock held; a tidy run was refused by the route): erase stored
        versions of a path, never the one the live document holds."""
        scope, p = call.scope, call.params
        current = self.store.read(self.scope_dir(scope), p.path)
        live = ABSENT if current is None else revision_of(current)
        erased = self.history.scope(scope.relpath).purge(p.path, p.revision, live)
        return {"path": p.path, "erased": erased}

    def handle_scan(self, call: Call) -> Result:
        """``scan``: the documents (and with ``history`` the stored versions) holding credentials (DESIGN.md §16).

        Result ``{"documents": [{"path", "revision", "findings", "commands"}],
        "versions": [{"path", "revision", "time", "action", "findings",
        "commands"}], "truncated", "rules"}``; findings are ``{rule, line,
        preview}`` (never the value), at most
        :data:`hub.methods.scan_report.SCAN_MAX_FINDINGS` each,
        :data:`hub.methods.scan_report.SCAN_MAX_ENTRIES` entries in all (``truncated``
        when more were found; the report is :mod:`hub.methods.scan_report`).
        ``memory.secret_allow`` applies; ``memory.secret_scan`` does not (a
        scan is always asked for).  Runs under the scope's lock.
        """
        return self.scan_scope(call.scope, call.params)

    def scan_scope(self, scope: Scope, p: ScanParams) -> Result:
        """``scan``'s walk of the documents and, with ``p.history``, of the stored versions."""
        allowed = self.config.secret_allow
        root = self.scope_dir(scope)
        walked = walk_documents(root, "", self.limits)
        paths = [path for path, _ in sorted(walked.found)]
        documents = document_entries(paths, lambda path: self.store.read(root, path), allowed)
        versions = version_entries(self.history.scope(scope.relpath).stored(), allowed) if p.history else []
        return report(documents, versions, self.limits)

    async def handle_health(self, call: Call) -> Result:
        """``health`` over ``call.parts`` (the caller's root and the mounts its prefix covers): :meth:`health`."""
        return await self.health([(part.label, part.scope, part.inner) for part in call.parts])

    async def health(self, parts: list[tuple[str, Scope, str]]) -> Result:
        """The ``health`` answer over ``parts`` (``(label, scope, prefix inside it)``, the caller's root first):
        :func:`hub.methods.health.check_parts` in a worker thread, one at a time with the searches (it holds the
        GIL as a scan does), through the content cache (:mod:`hub.storage.cache`) as a search.  Takes no scope
        lock: like ``search`` it reads whole files and changes nothing.  Cancelled while waiting, nothing was done
        (DESIGN.md §23)."""
        from amux_memory.hub.methods.health import HealthPart, check_parts

        checked = [HealthPart(label, self.scope_dir(scope), prefix, self.history.scope(scope.relpath),
                              self.cache.scope(scope.relpath)) for label, scope, prefix in parts]
        try:
            return await trio.to_thread.run_sync(check_parts, checked, self.limits, self.config.stale_days,
                                                 self.config.secret_allow, None, _stop_when_cancelled,
                                                 limiter=self._search_limiter)
        finally:
            self.cache.trim()

    async def handle_list(self, call: Call) -> Result:
        """``list``: a page of the scope's logical paths (:func:`hub.storage.document_list.list_documents`)."""
        p = call.params
        return await trio.to_thread.run_sync(list_documents, self.scope_dir(call.scope), p.path_prefix, p.cursor,
                                             self.limits)
