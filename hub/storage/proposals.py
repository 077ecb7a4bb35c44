"""Proposals: agents' writes kept for a person to approve (``memory.review = agents``, DESIGN.md §21).

An agent's ``upsert`` or ``forget`` on a path under review (``memory.review_paths``) is not applied: the
Hub keeps it as a :class:`Proposal` and answers ``{proposed: true, proposal: ID, status: "pending", ...}``.
A person lists, shows and decides them (``review_list``, ``review_show``, ``review_decide``); approval is
an ordinary compare-and-swap write by the approver (:mod:`hub.methods.review` does all this).

On disk, outside ``memory/`` (search, list, get and quotas never see it)::

    <AMUX_HOME>/review/<scope relpath>/        0700
        <id>.json                              0600, one proposal, replaced durably on every change
        decisions.log                          0600, one JSON line per decision (approve, reject, expire,
                                               supersede, applied), appended with fdatasync

A proposal file is written like a document (temporary file, fsync, rename, fsync of the folder:
:func:`hub.storage.fsio.replace_file`) before the agent's answer goes out, so an acknowledged proposal survives
kill -9.  Decided proposals keep their file (approving twice applies once: the second finds it
decided) until twice ``memory.review_max_days`` after their decision.  Every method here runs in a worker
thread under the scope's write lock (``MemoryMethods.locked``), so the in-memory index needs no lock of its own.

Memory (DESIGN.md §21): only *pending* proposals are kept in memory, at most ``memory.review_max_pending`` a
scope, each with its content.  A decided one leaves the index as it is decided and is read from its file when
asked for again (``review_show``, deciding it twice); the sweep of old decided files lists the folder at most
once in :data:`DECIDED_SWEEP_SECONDS`.  Before, every decided proposal stayed in memory with its content for
twice ``memory.review_max_days``: 1.4 MB of the Hub's RSS a 1,000 proposals, and in ``python -m bench.soak``
``tracemalloc`` saw proposals and their contents grow ~0.4 MiB a minute; now ~7 KiB a minute.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from amux_memory.hub.storage import fsio
from amux_memory.hub.storage.faults import step
from amux_memory.hub.storage.history import Actor, utc_time, write_all
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.params import ABSENT

PENDING = "pending"
DECIDED = ("approved", "rejected", "expired", "superseded", "applied")
"""Every status a proposal can leave ``pending`` for."""

DECISIONS_LOG = "decisions.log"
"""The append-only log of a scope's decisions (one JSON line each)."""

DECIDED_SWEEP_SECONDS = 3600
"""A scope's folder is listed for decided proposals old enough to delete at most once an hour (their age is
counted in days, ``memory.review_max_days``)."""

_ID = re.compile(r"^p[0-9a-f]{12}$")


def new_id() -> str:
    """A fresh proposal id: ``p`` and 12 random hex digits (48 bits: ids are per scope and capped)."""
    return "p" + secrets.token_hex(6)


def valid_id(value: str) -> bool:
    """Whether ``value`` has the shape of a proposal id (the Hub's params check uses it)."""
    return bool(_ID.fullmatch(value))


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A ``memory.review_paths`` glob as a regex over a logical path: ``**`` any run (``/`` included, and
    ``**/`` zero or more folders), ``*`` any run within a segment, ``?`` one character of a segment."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def path_matcher(globs: str) -> Callable[[str], bool]:
    """``path -> under review?`` for a parsed ``memory.review_paths`` value (comma-separated globs)."""
    compiled = [glob_regex(g) for g in globs.split(",") if g]
    return lambda path: any(r.match(path) for r in compiled)


@dataclass
class Proposal:
    """One agent write kept for review.

    ``action`` is ``upsert`` or ``forget``; ``content`` the proposed bytes (None for a deletion);
    ``base_revision`` the document's revision when it was proposed (``absent`` for a create);
    ``proposed_revision`` the revision approval would write (``absent`` for a deletion); ``actor`` the
    proposer (principal, client, binding, session); ``time_ns`` when it was proposed (epoch ns);
    ``status`` ``pending`` or one of :data:`DECIDED`; ``decision`` once decided: ``{by, time, reason?,
    revision?}`` (``by`` an actor map, or None for the Hub itself).  ``allow_shrink`` is what the agent
    passed (the rewrite guard's warning is shown to the reviewer instead of refusing, DESIGN.md §12).
    """

    id: str
    path: str
    action: str
    base_revision: str
    proposed_revision: str
    content: bytes | None
    actor: dict[str, Any]
    time_ns: int
    allow_shrink: bool = False
    added: int = 0
    removed: int = 0
    status: str = PENDING
    decision: dict[str, Any] | None = None
    replaced: str | None = None
    """The id of the earlier pending proposal of the same session for the same path that this one replaced."""

    def to_json(self) -> bytes:
        """The proposal's file: one JSON object, the content as text (it is valid UTF-8)."""
        obj = {"id": self.id, "path": self.path, "action": self.action, "base_revision": self.base_revision,
               "proposed_revision": self.proposed_revision,
               "content": None if self.content is None else self.content.decode("utf-8"),
               "actor": self.actor, "time_ns": self.time_ns, "allow_shrink": self.allow_shrink,
               "added": self.added, "removed": self.removed, "status": self.status, "decision": self.decision,
               "replaced": self.replaced}
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"

    @classmethod
    def from_json(cls, data: bytes) -> Proposal:
        """Parse a proposal file; raises ``ValueError`` / ``KeyError`` / ``TypeError`` for a malformed one."""
        o = json.loads(data)
        content = o["content"]
        return cls(id=str(o["id"]), path=str(o["path"]), action=str(o["action"]),
                   base_revision=str(o["base_revision"]), proposed_revision=str(o["proposed_revision"]),
                   content=None if content is None else str(content).encode("utf-8"), actor=dict(o["actor"]),
                   time_ns=int(o["time_ns"]), allow_shrink=bool(o.get("allow_shrink")),
                   added=int(o.get("added", 0)), removed=int(o.get("removed", 0)), status=str(o["status"]),
                   decision=o.get("decision"), replaced=o.get("replaced"))

    def same_proposer(self, actor: Actor) -> bool:
        """Whether ``actor`` is this proposal's principal, client and session (a session's newer proposal for
        the same path replaces its pending one)."""
        return (self.actor.get("principal") == actor.principal and self.actor.get("client") == actor.client
                and self.actor.get("session") == actor.session)

    def entry(self, now_ns: int, current_revision: str) -> dict[str, Any]:
        """The ``review_list`` entry: ``{id, path, action, status, actor, session, time, age_seconds, added,
        removed, bytes, base_revision, proposed_revision, current_revision, changed}``; ``changed``: the
        document is no longer at ``base_revision``."""
        return {"id": self.id, "path": self.path, "action": self.action, "status": self.status,
                "actor": self.actor, "session": self.actor.get("session"), "time": utc_time(self.time_ns),
                "age_seconds": max(0, (now_ns - self.time_ns) // 10**9), "added": self.added,
                "removed": self.removed, "bytes": 0 if self.content is None else len(self.content),
                "base_revision": self.base_revision, "proposed_revision": self.proposed_revision,
                "current_revision": current_revision, "changed": current_revision != self.base_revision,
                **({"decision": self.decision} if self.decision is not None else {})}


def unknown_proposal(proposal_id: str) -> HubError:
    """The answer for a proposal id a scope does not hold, or holds for someone else to see (``not_found``,
    ``data.proposal``; the same words whichever: DESIGN.md §21)."""
    return HubError(ErrorCode.NOT_FOUND, f"no proposal {proposal_id} in this memory (list them with "
                    "'amux memory review')", {"proposal": proposal_id},
                    next_step="List the pending proposals with 'amux memory review' and use an id it shows; "
                    "a decided proposal is kept for memory.review_max_days only.")


@dataclass
class ScopeProposals:
    """The proposals of one scope: the folder, and the index of its pending ones loaded from it on first use.

    ``proposals`` maps an id to a *pending* proposal; a decided one is read from its file when asked for
    (:meth:`get`), never kept.
    """

    directory: str
    proposals: dict[str, Proposal] = field(default_factory=dict)
    loaded: bool = False
    unreadable: list[str] = field(default_factory=list)
    swept_ns: int = 0
    """When :meth:`forget_decided` last listed the folder (epoch ns; 0: never)."""

    def load(self) -> None:
        """Read every ``<id>.json`` once, keeping the pending ones (a malformed file is left alone and named
        in :attr:`unreadable`)."""
        if self.loaded:
            return
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            names = []
        except OSError as exc:
            raise HubError(ErrorCode.STORAGE_ERROR, f"cannot read the review folder: {exc.strerror}",
                           {"errno": exc.errno, "operation": "list review", "path": "/", "uncertain": False}) from None
        for name in sorted(names):
            if not name.endswith(".json") or not valid_id(name[:-5]):
                continue
            p = self._read(name[:-5])
            if p is None:
                self.unreadable.append(name)
            elif p.status == PENDING:
                self.proposals[p.id] = p
        self.loaded = True

    def _read(self, proposal_id: str) -> Proposal | None:
        """The proposal in ``<proposal_id>.json``; None when there is none or it is malformed."""
        try:
            with open(os.path.join(self.directory, f"{proposal_id}.json"), "rb") as f:
                return Proposal.from_json(f.read())
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def pending(self) -> Iterator[Proposal]:
        """Pending proposals, oldest first."""
        self.load()
        yield from sorted((p for p in self.proposals.values() if p.status == PENDING), key=lambda p: (p.time_ns, p.id))

    def get(self, proposal_id: str) -> Proposal:
        """The proposal ``proposal_id``, pending or decided (a decided one read from its file); raises
        ``not_found`` (``data.proposal``)."""
        self.load()
        p = self.proposals.get(proposal_id)
        if p is None and valid_id(proposal_id):
            p = self._read(proposal_id)
        if p is None or p.id != proposal_id:
            raise unknown_proposal(proposal_id)
        return p

    def save(self, p: Proposal) -> None:
        """Write ``p``'s file durably (folders made 0700 and fsynced first); index it while pending, drop it
        from the index once decided."""
        with step("make review folder", "/"):
            fsio.make_directories(self.directory)
        fsio.replace_file(os.path.join(self.directory, f"{p.id}.json"), p.to_json())
        if p.status == PENDING:
            self.proposals[p.id] = p
        else:
            self.proposals.pop(p.id, None)

    def decide(self, p: Proposal, status: str, by: Actor | None, now_ns: int, **extra: Any) -> None:
        """Mark ``p`` decided (``status`` one of :data:`DECIDED`), durably, and append the decision to
        ``decisions.log``.  ``by`` is the person (None: the Hub, for an expiry or a replacement)."""
        p.status = status
        p.decision = {"by": None if by is None else by.as_dict(), "time": utc_time(now_ns),
                      **{k: v for k, v in extra.items() if v is not None}}
        self.save(p)
        line = json.dumps({"proposal": p.id, "path": p.path, "status": status, "proposer": p.actor,
                           **p.decision}, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        with step("append review decision", p.path, uncertain=True):
            fd = os.open(os.path.join(self.directory, DECISIONS_LOG),
                         os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                write_all(fd, line)
                os.fdatasync(fd)
            finally:
                os.close(fd)

    def forget_decided(self, before_ns: int, now_ns: int) -> None:
        """Delete the files of proposals decided before ``before_ns`` (their file last written then; their
        decision stays in the log).  Lists the folder at most once in :data:`DECIDED_SWEEP_SECONDS` of
        ``now_ns``."""
        if self.swept_ns and now_ns - self.swept_ns < DECIDED_SWEEP_SECONDS * 10**9:
            return
        self.swept_ns = now_ns
        try:
            entries = list(os.scandir(self.directory))
        except OSError:
            return
        for entry in entries:
            pid = entry.name[:-5]
            if not entry.name.endswith(".json") or not valid_id(pid) or pid in self.proposals:
                continue
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_mtime_ns < before_ns:
                    os.unlink(entry.path)


class ProposalStore:
    """Every scope's proposals under ``<AMUX_HOME>/review`` (one :class:`ScopeProposals` per scope)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._scopes: dict[str, ScopeProposals] = {}

    def scope(self, relpath: str) -> ScopeProposals:
        """The proposals of the scope at ``relpath`` (``global`` or ``users/<hex>``), not yet loaded."""
        s = self._scopes.get(relpath)
        if s is None:
            s = self._scopes[relpath] = ScopeProposals(os.path.join(self.root, relpath))
        return s


def revision_or_absent(data: bytes | None) -> str:
    """The revision of ``data`` (SHA-256 hex), ``absent`` for None."""
    import hashlib

    return ABSENT if data is None else hashlib.sha256(data).hexdigest()
