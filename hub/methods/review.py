"""The review queue: agents' writes kept as proposals, and the ``review_*`` methods (DESIGN.md §21).

:class:`ReviewQueue` is what the Hub does with proposals (:mod:`hub.storage.proposals` keeps them on disk): whether a
write waits for review (:meth:`ReviewQueue.reviewed`), keeping an agent's write as a proposal
(:meth:`ReviewQueue.propose`), ``get``'s ``pending_proposal`` (:meth:`ReviewQueue.pending_for`), expiry and
the settling of crash leftovers (:meth:`ReviewQueue.scope_proposals`), and the answers of ``review_list``,
``review_show`` and ``review_decide``.  An approval is the service's own write with history
(:class:`Writes`), so it is checked and recorded like any other write.

Every method is blocking: :class:`hub.methods.memory.MemoryMethods` runs it in a worker thread under the scope's
lock, so a proposal is never decided, settled or expired while a write to its scope runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from amux_memory.hub.access.config import HubConfig
from amux_memory.hub.access.identity import MCP_CLIENT, Scope
from amux_memory.hub.access.mounts import MAINTAIN, Mount, check_role
from amux_memory.hub.methods.secrets import Finding, scrubbed
from amux_memory.hub.storage.history import Actor, HistoryStore, line_changes, time_ns
from amux_memory.hub.storage.proposals import (
    PENDING,
    Proposal,
    ProposalStore,
    ScopeProposals,
    new_id,
    path_matcher,
    revision_or_absent,
    unknown_proposal,
)
from amux_memory.hub.storage.rewrite_guard import check_rewrite
from amux_memory.hub.storage.store import Store, revision_of
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import Limits
from amux_memory.protocol.messages import (
    MSGPACK_INT_MAX,
    MSGPACK_STR_HEADER_MAX,
    PAGE_RESERVE_BYTES,
    packed_size,
    response_room,
)
from amux_memory.protocol.params import (
    ABSENT,
    ReviewDecideParams,
    ReviewListParams,
    ReviewShowParams,
    revision_matches,
)

Result = dict[str, Any]

log = logging.getLogger("amux.hub")


class Writes(Protocol):
    """The service's writes that proposing and approving reuse (:class:`hub.methods.memory.MemoryMethods`; each is
    called in a worker thread holding the scope's lock)."""

    def scope_dir(self, scope: Scope) -> str:
        """The folder of ``scope`` under the memory root."""
        ...

    def check_secrets(self, path: str, content: bytes, allow_secret: bool, actor: Actor) -> list[Finding]:
        """The credential check of a write: its findings when it may go ahead; raises ``secret_detected`` or
        ``bad_request`` (DESIGN.md §16)."""
        ...

    def write(self, scope: Scope, path: str, content: bytes, expected_revision: str, allow_shrink: bool,
              actor: Actor, restored_from: str | None = None, allow_secret: bool = False,
              review: dict[str, Any] | None = None) -> Result:
        """An upsert with history (``review``: the approved proposal, recorded with the version)."""
        ...

    def delete(self, scope: Scope, path: str, expected_revision: str, actor: Actor,
               review: dict[str, Any] | None = None) -> Result:
        """A forget with history (``review`` as for :meth:`write`)."""
        ...


def require_person(actor: Actor) -> None:
    """Refuse an agent caller (:func:`hub.access.identity.agent_reason`) a review decision, whatever it asks.

    Raises ``unauthorized`` (``data.reason`` ``agent_caller``, ``data.agent`` the kind of agent) when
    ``actor`` is an agent; returns None for a person (DESIGN.md §21).
    """
    if actor.agent is not None:
        raise HubError(ErrorCode.UNAUTHORIZED, "an agent cannot approve or reject memory changes: a person "
                       "decides with 'amux memory review' (this caller is an agent: "
                       f"{actor.agent}); nothing was changed", {"reason": "agent_caller", "agent": actor.agent},
                       next_step="A person must decide: tell the user memory changes await review; they run "
                       "'amux memory review' outside the agent session (without AMUX_SESSION_ID or an agent's "
                       "token).")


def refuse_tidy_run(actor: Actor, method: str) -> None:
    """Raise ``unauthorized`` (``data.reason`` ``agent_caller``, ``agent`` ``tidy``) when ``actor`` belongs to a
    review-forced tidy run: its changes are proposals a person decides, and erasing history (``method``,
    ``purge``) is none (DESIGN.md §21)."""
    if actor.forced:
        raise HubError(ErrorCode.UNAUTHORIZED, "a tidy run cannot purge history: its changes are proposals a "
                       "person decides; nothing was erased", {"reason": "agent_caller", "agent": "tidy"},
                       next_step="Leave history as it is; a person purges with 'amux memory purge'.")


def sees_all(scope: Scope) -> bool:
    """Whether the caller holding ``scope`` sees every proposal of it: its own scope, or a team it maintains.  Any
    other member of a team sees only the proposals its own principal made, and nothing of the others: not their
    ids, paths or count (DESIGN.md §21)."""
    return scope.kind != "team" or scope.maintainer


def may_see(scope: Scope, proposal: Proposal, actor: Actor) -> bool:
    """Whether ``actor`` (holding ``scope``) may see ``proposal``: :func:`sees_all`, or it is the proposer."""
    return sees_all(scope) or (actor.principal is not None and proposal.actor.get("principal") == actor.principal)


class ReviewQueue:
    """Every scope's proposals and what the Hub does with them, for a Hub with fixed settings.

    ``config`` gives ``memory.review``, ``review_paths``, ``review_max_days`` and ``review_max_pending``;
    ``store`` and ``history`` are the service's; ``writes`` the service itself (:class:`Writes`).
    Every method is blocking and runs in a worker thread under the scope's lock.
    """

    def __init__(self, config: HubConfig, limits: Limits, store: Store, history: HistoryStore,
                 writes: Writes) -> None:
        self.config = config
        self.limits = limits
        self.store = store
        self.history = history
        self.writes = writes
        self.proposals = ProposalStore(str(config.review_root))
        self.under_review = path_matcher(config.review_paths)
        """``path -> bool``: whether ``memory.review_paths`` names the logical path (DESIGN.md §21)."""
        self.clock: Callable[[], int] = time_ns
        """Epoch nanoseconds for proposals' times and expiry (replaceable in tests)."""

    def rule(self, scope: Scope) -> str:
        """The review rule of ``scope``: a team's own (DESIGN.md §7.8), else ``memory.review`` (DESIGN.md §21)."""
        return self.config.review if scope.review is None else scope.review

    def reviewed(self, scope: Scope, actor: Actor, path: str | None) -> bool:
        """The one answer to "is this write kept for review?" (DESIGN.md §21, §7.8).  A caller's own scope:
        ``memory.review = agents``, an agent caller, a path under review (``None``: some path may be).  A team's:
        ``agents`` reviews an agent's writes, ``all`` also a person's unless the person maintains the team.  A
        caller of a review-forced tidy run proposes every write, in every scope and on every path
        (:mod:`hub.access.tidy_runs`)."""
        if actor.forced:
            return True
        if scope.review is None:
            return (self.config.review == "agents" and actor.agent is not None
                    and (path is None or self.under_review(path)))
        if scope.review == "agents":
            return actor.agent is not None
        return scope.review == "all" and (actor.agent is not None or not scope.maintainer)

    def may_review_agents(self, scopes: list[Scope], forced: bool) -> bool:
        """Whether some write of an agent of a caller whose scopes (its own and its teams') are ``scopes`` may be
        kept for review (:meth:`reviewed` for an agent, on some path): ``tools/list`` then publishes the
        proposal schemas.  ``forced``: the caller belongs to a tidy run."""
        agent = Actor(None, MCP_CLIENT, agent="mcp", forced=forced)
        return any(self.reviewed(scope, agent, None) for scope in scopes)

    def scope_proposals(self, scope: Scope, settle: bool = True) -> ScopeProposals:
        """The scope's proposals, loaded, with expired ones marked and (``settle``) crash leftovers settled
        (:meth:`settle`)."""
        sp = self.proposals.scope(scope.relpath)
        sp.load()
        now = self.clock()
        max_age = self.config.review_max_days * 86_400 * 10**9
        for p in list(sp.pending()):
            if now - p.time_ns > max_age:
                log.info("proposal %s for %s expired after %d days", p.id, p.path, self.config.review_max_days)
                sp.decide(p, "expired", None, now)
            elif settle:
                self.settle(scope, sp, p)
        sp.forget_decided(now - 2 * max_age, now)
        return sp

    def settle(self, scope: Scope, sp: ScopeProposals, p: Proposal) -> None:
        """A pending proposal the document already holds is decided: ``approved`` when history records its
        approval (a crash came between the write and marking it), else ``applied`` (someone wrote the same)."""
        current = self.store.read(self.writes.scope_dir(scope), p.path)
        if revision_or_absent(current) != p.proposed_revision or p.proposed_revision == p.base_revision:
            return
        newest = self.history.scope(scope.relpath).newest(p.path)
        if newest is not None and newest.review is not None and newest.review.get("proposal") == p.id:
            p.status, p.decision = "approved", {"by": newest.actor, "time": newest.time, "revision": newest.revision,
                                                "recovered": True}
            sp.save(p)
        else:
            sp.decide(p, "applied", None, self.clock(), revision=p.proposed_revision)

    def propose(self, scope: Scope, path: str, content: bytes | None, expected_revision: str, actor: Actor,
                allow_shrink: bool = False, allow_secret: bool = False) -> Result:
        """Keep an agent's upsert (``content``) or forget (None) as a pending proposal.

        The checks of the write run now and refuse as they would (credentials, compare-and-swap, quotas, the
        rewrite guard); over ``memory.review_max_pending`` it is ``review_backlog``.  A pending proposal of the
        same principal, client and session for ``path`` is replaced (``superseded``).  The proposal is durable
        before this returns ``{proposed: true, proposal, status: "pending", path, action, base_revision,
        proposed_revision, bytes, replaced?}``.  A forget of an absent document, or an upsert of the bytes the
        document holds, changes nothing and answers as today.
        """
        root = self.writes.scope_dir(scope)
        findings: list[Finding] = []
        if content is not None:
            findings = self.writes.check_secrets(path, content, allow_secret, actor)
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
        sp = self.scope_proposals(scope, settle=False)
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

    def pending_for(self, scope: Scope, path: str, actor: Actor) -> str | None:
        """The id of the newest pending proposal for ``path`` by ``actor``'s principal, if any (for ``get``)."""
        sp = self.proposals.scope(scope.relpath)
        sp.load()
        mine = [p for p in sp.pending() if p.path == path and p.actor.get("principal") == actor.principal]
        return mine[-1].id if mine else None

    def review_list(self, scope: Scope, p: ReviewListParams, actor: Actor) -> Result:
        """``review_list``: one page of the pending proposals ``actor`` may see (:func:`may_see`), oldest first
        (DESIGN.md §21).

        Result ``{proposals: [entry], next_cursor, pending, review}``: each entry as
        :meth:`hub.storage.proposals.Proposal.entry`; ``pending`` counts every pending proposal of the scope the
        caller may see; ``next_cursor`` the last id shown when more follow (None at the end); ``review`` the
        scope's rule.  The page stays within the response budget (:func:`protocol.messages.response_room`).
        """
        sp = self.scope_proposals(scope)
        now = self.clock()
        pending = [q for q in sp.pending() if may_see(scope, q, actor)]
        shown = [q for q in pending if q.path.startswith(p.path_prefix)]
        if p.cursor:
            ids = [q.id for q in shown]
            shown = shown[ids.index(p.cursor) + 1:] if p.cursor in ids else shown
        result: Result = {"proposals": [], "next_cursor": None, "pending": len(pending),
                          "review": self.rule(scope)}
        budget = response_room(self.limits, {**result, "next_cursor": "p" + "0" * 12}, PAGE_RESERVE_BYTES)
        root = self.writes.scope_dir(scope)
        for q in shown:
            entry = q.entry(now, revision_or_absent(self.store.read(root, q.path)))
            size = packed_size(entry)
            if size > budget:
                result["next_cursor"] = result["proposals"][-1]["id"] if result["proposals"] else None
                break
            budget -= size
            result["proposals"].append(entry)
        return result

    def visible(self, sp: ScopeProposals, proposal_id: str, scope: Scope, actor: Actor) -> Proposal:
        """The proposal ``proposal_id`` of ``sp`` when ``actor`` may see it (:func:`may_see`); else the answer for an
        id the scope does not hold (:func:`hub.storage.proposals.unknown_proposal`), word for word."""
        q = sp.get(proposal_id)
        if not may_see(scope, q, actor):
            raise unknown_proposal(proposal_id)
        return q

    def review_show(self, scope: Scope, p: ReviewShowParams, actor: Actor) -> Result:
        """``review_show``: one proposal and a page of one of its texts (DESIGN.md §21).

        Result ``{proposal: entry (with status and decision), text, exists, content (bin), truncated,
        next_offset, total_bytes, base_stored, warnings}``: ``text`` is ``proposed`` (the agent's bytes; a
        deletion has none: ``exists`` false), ``base`` (the document the agent saw, from the history when
        it changed since: ``base_stored`` false when the history does not hold it) or ``current``.
        ``warnings`` holds what the rewrite guard would say of the change (DESIGN.md §12).  Raises
        ``not_found`` for an unknown id or one ``actor`` may not see (:meth:`visible`), ``bad_request`` for an
        offset past the end.
        """
        sp = self.scope_proposals(scope)
        q = self.visible(sp, p.id, scope, actor)
        current = self.store.read(self.writes.scope_dir(scope), q.path)
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
        budget = response_room(self.limits, result, MSGPACK_STR_HEADER_MAX + MSGPACK_INT_MAX)  # bin header, next_offset
        stop = min(len(body), p.offset + max(budget, 256))
        result["content"] = body[p.offset:stop]
        if stop < len(body):
            result["truncated"], result["next_offset"] = True, stop
        return result

    def review_decide(self, scope: Scope, p: ReviewDecideParams, actor: Actor, mount: Mount | None = None) -> Result:
        """``review_decide``: approve or reject a proposal, as a person (DESIGN.md §21; the caller refused
        agents first with :func:`require_person`).

        Only the scope's owner or a maintainer decides: a proposal ``actor`` may not see is ``not_found`` as an
        unknown id is (:meth:`visible`); its own proposal in a team ``mount`` it does not maintain is
        ``unauthorized`` (``data.reason`` ``role``, :func:`hub.access.mounts.check_role`).

        A proposal decided the same way before answers ``{proposal, status, already_decided: true, decision,
        path}`` and changes nothing (approving twice applies once); deciding the other way (approving a
        rejected, expired or superseded one, rejecting an approved one) is ``conflict`` (``data.status``).
        ``reject`` records the decision (``reason``).  ``approve`` is a compare-and-swap write by the approver
        on ``expected_revision``, of the proposed bytes or the person's ``content``, recorded in history with
        ``review: {proposal, proposed_by}``; the credential check and quotas run again, the rewrite guard only
        warns (``warnings``).  Approving as proposed when the document is no longer at the proposal's base is
        ``conflict`` (nothing written; show it and approve an edited merge).  Result: the upsert's or forget's
        answer plus ``{proposal, status: "approved", already_decided: false, warnings?}``.
        """
        sp = self.scope_proposals(scope)
        q = self.visible(sp, p.id, scope, actor)
        if not sees_all(scope):
            if mount is None:  # the mounts layer hands every team's part in; never a silent decision
                raise unknown_proposal(p.id)
            check_role(mount, MAINTAIN)
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
        current = self.store.read(self.writes.scope_dir(scope), q.path)
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
                result = self.writes.delete(scope, q.path, p.expected_revision, actor, review)
        else:
            content = q.content if p.content is None else p.content
            assert content is not None
            if current is not None:
                try:
                    check_rewrite(q.path, current, content)
                except HubError as exc:
                    warnings.append(exc.message)
            result = self.writes.write(scope, q.path, content, p.expected_revision, True, actor, review=review)
        sp.decide(q, "approved", actor, now, reason=p.reason, revision=result["revision"],
                  edited=True if p.content is not None else None)
        log.info("proposal %s for %s approved by %s", q.id, q.path, actor.principal)
        result.update({"proposal": q.id, "status": "approved", "already_decided": False})
        if warnings:
            result["warnings"] = [*result.get("warnings", []), *warnings]
        return result
