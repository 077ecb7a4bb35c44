"""What the route table is made of (DESIGN.md §2.2): a :class:`Route` per method, and the :class:`Call` its
handler gets.

A handler of the route table (:mod:`hub.methods.routes`) gets a :class:`Call` and nothing else: the route
decided before it who may call, which scopes the call's paths name and whether memory is on, so a handler
only does its method's work.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from amux_memory.hub.access.identity import Identity, Scope
from amux_memory.hub.access.mounts import Part
from amux_memory.hub.access.registry import Registry
from amux_memory.hub.storage.history import Actor


@dataclass(frozen=True)
class Call:
    """One call of a method, resolved.

    ``scope`` is where it runs: the part its path names (a team's scope for ``@NAME/…``), else the caller's own
    scope.  ``params`` is what the route's parser returned (a ``protocol.params`` dataclass).  ``actor`` is the
    caller as history records it; ``identity`` the caller (None for an in-process caller).  ``parts`` are the
    parts a whole-view method reads (``search``, ``health``) or the two documents of a ``copy``, in the order
    the route's reach gives them; empty for a method of one scope.  ``registry`` gives the call's one registry
    snapshot (blocking: a data call's was read before it began, an operator's or a tidy run's is read on first
    use; None for an in-process caller) and ``now`` is the wall clock in epoch seconds when the call began.
    ``visible`` maps the binding of every scope the caller may read to the prefix it sees it under: ``""`` for
    its own scope, ``@NAME/`` for each of its team mounts (:func:`hub.methods.across_mounts.visible_scopes`).  An
    answer names another scope (a copy's or move's other side in history, DESIGN.md §15.7) only when it is here;
    empty (the default) names none.  ``proposes`` is the route's: whether this write may be kept as a proposal
    at all (the review queue then decides whether it is, :meth:`hub.methods.review.ReviewQueue.reviewed`).
    """

    scope: Scope
    params: Any
    actor: Actor
    identity: Identity | None = None
    parts: Sequence[Part] = ()
    registry: Callable[[], Registry] | None = None
    now: float = 0.0
    visible: Mapping[str, str] = field(default_factory=dict)
    proposes: bool = False


Result = dict[str, Any]

Handler = Callable[[Any, Call], Awaitable[Result]]
"""An awaited handler, given the :class:`~hub.methods.memory.MemoryMethods` and the call: it does its own file
work in worker threads (and takes locks itself, if any)."""

BlockingHandler = Callable[[Any, Call], Result]
"""A blocking handler (the same arguments), run in a worker thread while its scope's lock is held (a route with
``locked``)."""

Parser = Callable[[dict[str, Any]], Any]
"""``protocol.params``' parser of a method: the request's map to a dataclass, or ``bad_request``/``invalid_path``."""


class Kind(enum.Enum):
    """What a method is to the connection and to ``Hub.call``."""

    HANDSHAKE = "handshake"
    """``hello``: the one method before a session exists; answered at once on the connection (§3.3)."""
    SESSION = "session"
    """``mcp_open``: the connection becomes an MCP session (§9.2)."""
    DATA = "data"
    """A memory method: listed in ``hello``, needs memory on, runs over the caller's view (§3.4, §7.8)."""
    RUN = "run"
    """A person begins or ends a review-forced tidy run (§21); outside any scope, not listed in ``hello``."""
    OPERATOR = "operator"
    """The Hub's operator only, refused to anyone else before its parameters are read (§7.8)."""
    ENROL = "enrol"
    """A caller with no identity yet, before or without ``hello``: the CA it checks its pin against, the invitation
    it redeems, the token it gives up (§7.4); answered at once on the connection, outside any scope, not listed in
    ``hello``."""


class Reach(enum.Enum):
    """How a data method meets the caller's team mounts (DESIGN.md §7.8)."""

    NONE = "none"
    """Not a data method: no mount."""
    ROOT = "root"
    """The caller's own scope only (``scan``)."""
    DOCUMENT = "document"
    """One document: ``path`` names the root or one mount; the answer's paths are shown mounted."""
    DOCUMENTS = "documents"
    """Two documents, ``source`` and ``destination``, each in the root or a mount (``copy``)."""
    EVERY = "every"
    """Every part ``path_prefix`` covers, read in one answer (``search``, ``health``)."""
    PAGED = "paged"
    """Every part ``path_prefix`` covers, one part's page per answer (``list``, ``log``, ``review_list``)."""
    PROPOSAL = "proposal"
    """A proposal by id: the root, then each mount (``review_show``, ``review_decide``); the handler, given the
    mount, shows a member its own proposals only and checks the route's role once the id is found."""


class Who(enum.Enum):
    """Who may call, beyond the role on a mount."""

    ANYONE = "anyone"
    """Any authenticated caller."""
    PERSON = "person"
    """Not an agent (checked after parsing: ``review_decide``, DESIGN.md §21)."""
    NO_TIDY_RUN = "no_tidy_run"
    """Anyone but a review-forced tidy run (checked before parsing: ``purge``, whose erasure is no proposal)."""
    OPERATOR = "operator"
    """The Hub's operator: its own OS account on the Unix socket, not an agent (DESIGN.md §7.8)."""


@dataclass(frozen=True)
class Route:
    """One method of the Hub.

    ``role`` is the role a data method needs on a team mount (``reader``, ``writer``, ``maintainer``), None for
    the others.  ``locked``: ``handler`` is a :data:`BlockingHandler` run under the scope's lock; else a
    :data:`Handler`.  ``proposes``: an agent's write through this method may be kept as a proposal
    (DESIGN.md §21).  ``parse`` and ``handler`` are None only for the handshake and the MCP switch, which the
    connection answers.  ``command`` is what a person runs to call an operator method (named in its refusal).
    """

    name: str
    kind: Kind
    reach: Reach
    role: str | None
    locked: bool
    proposes: bool
    parse: Parser | None
    handler: Handler | BlockingHandler | None
    who: Who = Who.ANYONE
    command: str = ""
    items: str = ""
    """A ``paged`` method's list in a page (``entries``, ``changes``): a part whose page holds none passes on."""
    scans: bool = False
    """Answered by the bounded scan (DESIGN.md §5.4): the metrics count its cut-short answers by reason."""


def route(name: str, kind: Kind, reach: Reach, role: str | None, *, locked: bool, proposes: bool,
          parse: Parser | None, handler: Handler | BlockingHandler | None, who: Who = Who.ANYONE,
          command: str = "", items: str = "", scans: bool = False) -> tuple[str, Route]:
    """``(name, Route(...))``, for building a table as a dict."""
    return name, Route(name, kind, reach, role, locked, proposes, parse, handler, who, command, items, scans)


def check_routes(table: Mapping[str, Route]) -> None:
    """Raise ``ValueError`` naming the first entry of ``table`` that contradicts itself: a key that is not its
    route's name, a data method without a reach, role, parser or handler, another kind with a reach or role, an
    operator method that is not the operator's or names no command, the handshake or MCP switch with a handler."""
    for name, r in table.items():
        problem = None
        if name != r.name:
            problem = f"is filed under {name!r}"
        elif r.kind is Kind.DATA and (r.reach is Reach.NONE or r.role is None or r.parse is None or r.handler is None):
            problem = "is a data method without a reach, a role, a parser or a handler"
        elif (r.reach is Reach.PAGED) != bool(r.items):
            problem = "must name the list its pages hold (items) if and only if it is paged"
        elif r.kind is not Kind.DATA and (r.reach is not Reach.NONE or r.role is not None):
            problem = "meets mounts but is not a data method"
        elif (r.kind is Kind.OPERATOR) != (r.who is Who.OPERATOR) or (r.kind is Kind.OPERATOR and not r.command):
            problem = "must be an operator method with a command, or neither"
        elif r.kind in (Kind.HANDSHAKE, Kind.SESSION) and (r.handler is not None or r.locked or r.proposes):
            problem = "is answered by the connection: it takes no handler, lock or proposal"
        elif r.kind in (Kind.RUN, Kind.OPERATOR, Kind.ENROL) and (r.parse is None or r.handler is None or r.locked):
            problem = "needs a parser and an awaited handler"
        if problem:
            raise ValueError(f"route {r.name!r} {problem}")
    kinds = [r.kind for r in table.values()]
    if kinds.count(Kind.HANDSHAKE) != 1:
        raise ValueError("a route table needs exactly one handshake method")
