"""Copy and move between a caller's scopes, and the operator's copy of a whole scope (DESIGN.md §7.8).

The ``copy`` route's handler (:func:`handle_copy`, both paths resolved by :mod:`hub.methods.across_mounts`) and
the operator's ``scope_copy`` (:func:`handle_scope_copy`): each step under its scope's lock through
:meth:`hub.methods.memory.MemoryMethods.locked`, every write a :meth:`~hub.methods.memory.MemoryMethods.write`
with its checks and history, a move's source forgotten only once the destination holds the text.
"""

from __future__ import annotations

from typing import Any

import trio

from amux_memory.hub.access.identity import Scope, known_principal, named_scope
from amux_memory.hub.methods.calls import Call
from amux_memory.hub.methods.memory import MemoryMethods
from amux_memory.hub.storage.history import Actor
from amux_memory.hub.storage.store import revision_of
from amux_memory.hub.storage.walk import walk_documents
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.messages import packed_size, response_room
from amux_memory.protocol.params import ABSENT, revision_matches

Result = dict[str, Any]


async def copy(memory: MemoryMethods, source: Scope, source_path: str, destination: Scope, destination_path: str, *,
               expected_revision: str, source_revision: str | None, move: bool, allow_secret: bool,
               actor: Actor, proposes: bool = True) -> Result:
    """Copy (or ``move``) one document between scopes or within one (DESIGN.md §7.8).

    Three steps, each under its scope's lock: read the source (``not_found`` when absent;
    ``conflict`` when ``source_revision`` is given and no longer matches); write it to the destination as an
    upsert by ``actor``, compare-and-swap on ``expected_revision`` (``absent`` to create), with the
    destination's review rule (it may become a proposal) and every write check; for ``move``, once the
    destination is written, forget the source by compare-and-swap on the revision read (a proposal where the
    source's rule says so).  History on the destination names the source (``origin.from``: scope binding,
    document, revision), the source's tombstone names the destination (``origin.to``).  Answer: the upsert's
    (or proposal's) plus ``source_revision``, ``moved`` and, when a move left its source, ``source_kept``
    (why: the destination awaits review, or the source changed after it was read; both exist).  Raises what
    ``get`` and ``upsert`` raise (nothing written when the destination refuses).  Cancelled before a step's
    worker runs, that step and the later ones do not happen.  Memory being on was checked by the route.
    """
    got = await memory.locked(source, _copy_source, memory, source, source_path, source_revision)
    data, revision = got
    origin = {"from": {"scope": source.binding, "document": source_path, "revision": revision}}
    result = await memory.locked(destination, _copy_into, memory, proposes, destination, destination_path, data,
                                 expected_revision, actor, allow_secret, origin)
    result["source_revision"] = revision
    result["moved"] = False
    if not move:
        return result
    if result.get("proposed"):
        result["source_kept"] = "the destination awaits review: forget the source once it is approved"
        return result
    gone = {"to": {"scope": destination.binding, "document": destination_path}}
    try:
        removed = await memory.locked(source, _copy_remove, memory, proposes, source, source_path, revision, actor,
                                      gone)
    except HubError as exc:
        if exc.code is not ErrorCode.CONFLICT:
            raise
        result["source_kept"] = "the source changed after it was read; both documents exist"
        return result
    if removed.get("proposed"):
        result["source_kept"] = f"forgetting the source awaits review (proposal {removed['proposal']})"
    else:
        result["moved"] = True
    return result


def _copy_source(memory: MemoryMethods, scope: Scope, path: str, expected: str | None) -> tuple[bytes, str]:
    """The source's bytes and revision (``not_found``; ``conflict`` when ``expected`` no longer matches)."""
    data = memory.store.read(memory.scope_dir(scope), path)
    if data is None:
        raise HubError(ErrorCode.NOT_FOUND, f"{path} does not exist; nothing was copied", {"path": path})
    observed = revision_of(data)
    if expected is not None and not revision_matches(expected, observed):
        raise HubError(ErrorCode.CONFLICT, f"{path} changed: its revision is {observed[:12]}, not "
                       f"{expected[:12]}; nothing was copied",
                       {"path": path, "expected_revision": expected, "observed_revision": observed})
    return data, observed


async def scope_copy(memory: MemoryMethods, source: Scope, destination: Scope, cursor: str, actor: Actor,
                     move: bool = False, path_prefixes: tuple[str, ...] = ()) -> Result:
    """One page of the operator's copy of every document of ``source`` into ``destination`` (DESIGN.md §7.8).

    Documents are taken in path order after ``cursor`` (``""``: from the first), as the bounded walk of
    ``source`` finds them (:func:`hub.storage.walk.walk_documents`; reserved ``@`` entries and names that are not
    logical paths are passed over), only those under one of ``path_prefixes`` when any is given.  Each is read
    under the source's lock and written under the
    destination's as a create: compare-and-swap ``absent``, every write check (credentials, quotas), no
    review (the operator writes), history naming ``actor`` and the origin as :func:`copy` records it, plus the
    origin's ``author`` (:func:`source_author`).  A
    destination document that exists is never overwritten: it is skipped (``identical`` when it holds the
    same bytes, else ``exists``, with its revision), as is a document any check refuses (``reason`` the
    error code, ``message`` its first 200 characters) or one gone since the walk (``gone``).  With ``move``,
    a document the destination now holds (copied, or ``identical``) is forgotten in ``source`` by
    compare-and-swap on the revision read, its tombstone naming the destination (``moved: true``); one that
    changed meanwhile is kept (``moved: false``).

    Answer: ``{source, destination, copied[{path, revision, bytes, moved?}], skipped[{path, reason,
    revision?, message?, moved?}], next_cursor, incomplete, incomplete_reasons, unreadable}``, within the
    response budget; ``next_cursor`` (the last path handled) when documents remain: call again with it.
    ``incomplete`` says the walk was cut short or met unreadable folders (``unreadable``).  Raises
    ``bad_request`` for the same scope on both sides (:meth:`handle_scope_copy` checked memory is on).
    Cancelled, the documents copied so far stay.
    """

    if source.relpath == destination.relpath:
        raise HubError(ErrorCode.BAD_REQUEST, "source and destination are the same scope; nothing to copy",
                       {"field": "destination"})
    walked = await trio.to_thread.run_sync(walk_documents, memory.scope_dir(source), "", memory.limits)
    paths = sorted(path for path, _ in walked.found
                   if path > cursor and (not path_prefixes or path.startswith(path_prefixes)))
    result: Result = {"source": source.binding, "destination": destination.binding, "copied": [], "skipped": [],
                      "next_cursor": None, "incomplete": bool(walked.reasons),
                      "incomplete_reasons": list(walked.reasons), "unreadable": list(walked.unreadable)}
    budget = response_room(memory.limits, {**result, "next_cursor": "x" * memory.limits.max_path_bytes})
    for path in paths:
        worst = packed_size({"path": path, "reason": "secret_detected", "revision": "0" * 64,
                             "message": "m" * 200, "bytes": 1 << 40, "moved": False})
        if worst > budget:
            break
        entry = await _copy_one(memory, source, destination, path, actor, move)
        budget -= packed_size(entry)
        result["skipped" if "reason" in entry else "copied"].append(entry)
        result["next_cursor"] = path
    else:
        result["next_cursor"] = None
    return result


async def handle_scope_copy(memory: MemoryMethods, call: Call) -> Result:
    """``scope_copy`` by the operator (the route checked who calls before parsing): the two named scopes of
    ``call.params`` resolved in the call's registry snapshot, then :func:`scope_copy`.

    Raises ``not_found`` for a team that does not exist or a destination principal nobody can be (neither
    registered nor an OS account), ``disabled`` when memory is off.  Not bound by the request-start deadline:
    a page copies document after document, and an answer ``busy`` could not say which were copied.
    """
    p, read_registry = call.params, call.registry
    assert read_registry is not None

    def resolve() -> tuple[Scope, Scope]:
        registry = read_registry()
        source, destination = named_scope(p.source, registry), named_scope(p.destination, registry)
        name = p.destination.partition(":")[2]
        if destination.kind == "principal" and not known_principal(name, registry):
            raise HubError(ErrorCode.NOT_FOUND, f"no principal {name!r}: it is neither registered nor an OS "
                           f"account of this host; register it first ('amux hub principal add {name}')",
                           {"scope": p.destination}, next_step="'amux hub principal list' shows the principals.")
        return source, destination

    source, destination = await trio.to_thread.run_sync(resolve)
    memory.check_enabled()
    return await scope_copy(memory, source, destination, p.cursor, call.actor, p.move, p.path_prefixes)


async def _copy_one(memory: MemoryMethods, source: Scope, destination: Scope, path: str, actor: Actor,
                    move: bool) -> Result:
    """One document of :func:`scope_copy`: ``{path, revision, bytes}`` when written, else ``{path, reason,
    ...}``; with ``move``, ``moved`` says whether the source was forgotten."""
    data, author = await memory.locked(source, _read_authored, memory, source, path)
    if data is None:
        return {"path": path, "reason": "gone"}
    revision = revision_of(data)
    origin: dict[str, Any] = {"from": {"scope": source.binding, "document": path, "revision": revision}}
    if author is not None:
        origin["author"] = author
    entry: Result
    try:
        written = await memory.locked(destination, _create_copy, memory, destination, path, data, actor, origin)
        entry = {"path": path, "revision": written["revision"], "bytes": written["bytes"]}
    except HubError as exc:
        observed = exc.data.get("observed_revision")
        if exc.code is not ErrorCode.CONFLICT or not isinstance(observed, str):
            return {"path": path, "reason": exc.code.value, "message": exc.message[:200]}
        entry = {"path": path, "reason": "identical" if observed == revision else "exists", "revision": observed}
        if entry["reason"] == "exists":
            return entry
    if move:
        gone = {"to": {"scope": destination.binding, "document": path}}
        try:
            await memory.locked(source, _forget_moved, memory, source, path, revision, actor, gone)
            entry["moved"] = True
        except HubError:
            entry["moved"] = False  # changed since it was read: both are kept, nothing lost
    return entry


def _read_authored(memory: MemoryMethods, scope: Scope, path: str) -> tuple[bytes | None, dict[str, Any] | None]:
    """:func:`scope_copy`'s read (worker thread, ``scope``'s lock held): the document's bytes (None when gone) and
    :func:`source_author` of them."""
    data = memory.store.read(memory.scope_dir(scope), path)
    return data, None if data is None else source_author(memory, scope, path, revision_of(data))


def source_author(memory: MemoryMethods, scope: Scope, path: str, revision: str) -> dict[str, Any] | None:
    """Who wrote revision ``revision`` of ``path`` in ``scope``, as a scope copy records it beside the operator
    (``origin.author``, DESIGN.md §15.7): ``{principal, client, time}`` of the newest version when it is that
    revision (an author a copy recorded there is passed on: the text's first author, not a copier), else None
    (history off, a hand edit not yet recorded)."""
    newest = memory.history.scope(scope.relpath).newest(path)
    if newest is None or newest.revision != revision:
        return None
    inherited = (newest.origin or {}).get("author")
    if isinstance(inherited, dict):
        return inherited
    return {"principal": newest.actor.get("principal"), "client": newest.actor.get("client"), "time": newest.time}


def _create_copy(memory: MemoryMethods, scope: Scope, path: str, data: bytes, actor: Actor, origin: dict[str,
                 Any]) -> Result:
    """:func:`scope_copy`'s write: a create (``absent``) by the operator, naming the origin."""
    return memory.write(scope, path, data, ABSENT, False, actor, origin=origin)


def _forget_moved(memory: MemoryMethods, scope: Scope, path: str, revision: str, actor: Actor,
                  gone: dict[str, Any]) -> Result:
    """:func:`scope_copy`'s forget of a moved source, by compare-and-swap on the revision read."""
    return memory.delete(scope, path, revision, actor, origin=gone)


def _copy_into(memory: MemoryMethods, proposes: bool, scope: Scope, path: str, data: bytes, expected: str,
               actor: Actor,
               allow_secret: bool,
               origin: dict[str, Any]) -> Result:
    """The copy's write: a proposal where the destination's rule says so, else a write naming its origin."""
    if proposes and memory.review.reviewed(scope, actor, path):
        return memory.review.propose(scope, path, data, expected, actor, allow_secret=allow_secret)
    return memory.write(scope, path, data, expected, False, actor, allow_secret=allow_secret, origin=origin)


def _copy_remove(memory: MemoryMethods, proposes: bool, scope: Scope, path: str, revision: str, actor: Actor,
                 gone: dict[str, Any]) -> Result:
    """A move's forget of its source: a proposal where the source's rule says so, else a tombstone naming
    where the text went."""
    if proposes and memory.review.reviewed(scope, actor, path):
        return memory.review.propose(scope, path, None, revision, actor)
    return memory.delete(scope, path, revision, actor, origin=gone)


async def handle_copy(memory: MemoryMethods, call: Call) -> Result:
    """``copy`` (and move): ``call.parts`` are the source's part and the destination's, resolved by the mounts
    layer (DESIGN.md §7.8); :func:`copy` does the work."""
    source, destination = call.parts
    p = call.params
    return await copy(memory, source.scope, source.inner, destination.scope, destination.inner,
                      expected_revision=p.expected_revision, source_revision=p.source_revision, move=p.move,
                      allow_secret=p.allow_secret, actor=call.actor, proposes=call.proposes)
