"""A data method over a caller's view: its own scope and its team mounts (DESIGN.md §7.8).

:func:`run` is what ``Hub.call`` runs for every data request once the caller's
:class:`~hub.access.mounts.MountView` is known.  The method's route
(:mod:`hub.methods.routes`) says how it meets the mounts, by its
:class:`~hub.methods.calls.Reach` (a call that names only the caller's own scope
runs unchanged, and its answer is the same as before teams existed; an
``@NAME/`` path of a caller with no such mount is refused, whether or not it
has other mounts):

* ``document`` (``get``, ``export``, ``upsert``, ``forget``, ``history``,
  ``restore``, ``purge``): the part the path names, the path inside it passed
  on, the answer's and errors' paths shown mounted again;
* ``every`` (``search``, ``health``): the root and every mount its
  ``path_prefix`` covers, read in one answer;
* ``paged`` (``list``, ``log``, ``review_list``): part after part, each paged
  as before; a page's ``next_cursor`` carries the part it stopped in
  (:func:`cursor_of`), so a client pages through them all unchanged;
* ``proposal`` (``review_show``, ``review_decide``): the proposal is looked for
  in the root and then in every mount (the handler shows a member who does not
  maintain a team its own proposals only, and lets only a maintainer decide);
* ``documents`` (``copy``): both paths of the parsed parameters resolved;
* ``root`` (``scan``): the caller's own scope.

Whether memory is on is checked here, once per call, after the paths were
resolved (so a caller learns first whether a mount is theirs) and before any
part runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from amux_memory.hub.access.identity import Identity
from amux_memory.hub.access.mounts import READ, WRITE, MountView, Part, shown, shown_error
from amux_memory.hub.access.registry import Registry
from amux_memory.hub.methods.calls import Reach, Route
from amux_memory.hub.methods.memory import MemoryMethods
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.paths import normalize_prefix

Result = dict[str, Any]

CURSOR_MARK = "|"
"""Between a part's label and its own cursor in a ``next_cursor`` that spans parts (``@web/|17``)."""

async def run(memory: MemoryMethods, route: Route, view: MountView, params: dict[str, Any],
              identity: Identity | None, registry: Callable[[], Registry] | None = None, now: float = 0.0) -> Result:
    """Run the data method of ``route`` for the caller whose view is ``view``; the answer names documents by
    mounted path.

    ``registry`` and ``now`` (the call's registry snapshot and wall clock) are handed to the handler.  Raises
    what the method raises (paths in errors mounted), ``not_found`` (``data.reason`` ``no_mount``) for a mount
    the caller does not have (the same for a team that does not exist), ``unauthorized`` (``data.reason``
    ``role``) when the caller's role on that mount is weaker than the route's, ``disabled`` when memory is off.
    Cancellation behaves as :meth:`hub.methods.memory.MemoryMethods.run` (a part started runs to its end).
    """
    assert route.role is not None
    reach = route.reach
    visible = visible_scopes(view)
    if reach is Reach.DOCUMENT:
        part = view.document(params.get("path"), route.role)
        memory.check_enabled()
        return await _one(memory, route, part, params, identity, registry, now, visible)
    if reach is Reach.EVERY:
        parts = _parts(view, params, route.role)
        memory.check_enabled()
        return await memory.run(route, view.root, params, identity, parts=parts, registry=registry, now=now,
                                visible=visible)
    if reach is Reach.PAGED:
        return await _paged(memory, route, view, params, identity, registry, now, visible)
    if reach is Reach.PROPOSAL:
        memory.check_enabled()
        return await _by_proposal(memory, route, view, params, identity, registry, now, visible)
    if reach is Reach.DOCUMENTS:
        return await _copy(memory, route, view, params, identity, registry, now, visible)
    memory.check_enabled()
    return await memory.run(route, view.root, params, identity, registry=registry, now=now, visible=visible)


def visible_scopes(view: MountView) -> dict[str, str]:
    """The scopes the caller whose view is ``view`` may read, each binding with the prefix the caller sees it
    under: its own scope ``""``, each team mount its ``@NAME/`` (:attr:`hub.methods.calls.Call.visible`).  An
    answer names no other scope (DESIGN.md §15.7)."""
    return {view.root.binding: "", **{m.scope.binding: m.label for m in view.mounted()}}


async def _one(memory: MemoryMethods, route: Route, part: Part, params: dict[str, Any], identity: Identity | None,
               registry: Callable[[], Registry] | None, now: float, visible: Mapping[str, str]) -> Result:
    """One call on one part, ``path`` rewritten to the path inside it and back."""
    inner = {**params, "path": part.inner} if part.mount is not None else params
    try:
        return shown(await memory.run(route, part.scope, inner, identity, registry=registry, now=now,
                                      visible=visible), part.label)
    except HubError as exc:
        raise shown_error(exc, part) from exc.__cause__


def _parts(view: MountView, params: dict[str, Any], role: str) -> list[Part]:
    """The parts ``params["path_prefix"]`` covers (validated first, as the parser would)."""
    return view.prefix(normalize_prefix(params.get("path_prefix")), role)


def cursor_of(label: str, inner: object) -> str:
    """A ``next_cursor`` that spans parts: the part's label, :data:`CURSOR_MARK`, the part's own cursor."""
    return f"{label}{CURSOR_MARK}{inner}"


def _resume(parts: list[Part], cursor: object) -> tuple[int, object]:
    """Which part a spanning cursor resumes in, and that part's own cursor; no cursor: the first, from the start.
    A cursor naming no part of this call is ``bad_request``."""
    if cursor in (None, ""):
        return 0, cursor
    if not isinstance(cursor, str) or CURSOR_MARK not in cursor:
        raise HubError(ErrorCode.BAD_REQUEST, "cursor must be the next_cursor of the previous page",
                       {"field": "cursor"})
    label, _, inner = cursor.partition(CURSOR_MARK)
    for index, part in enumerate(parts):
        if part.label == label:
            return index, inner
    raise HubError(ErrorCode.BAD_REQUEST, "cursor must be the next_cursor of the previous page (of the same "
                   "path_prefix)", {"field": "cursor"})


async def _paged(memory: MemoryMethods, route: Route, view: MountView, params: dict[str, Any],
                 identity: Identity | None, registry: Callable[[], Registry] | None, now: float,
                 visible: Mapping[str, str]) -> Result:
    """``list``, ``log``, ``review_list`` over the parts a prefix covers: one part's page per answer."""
    assert route.role is not None
    parts = _parts(view, params, route.role)
    memory.check_enabled()
    if not parts or (len(parts) == 1 and parts[0].mount is None):
        # The caller's own scope alone; a prefix that covers no part (``@x``) names nothing there either.
        return await memory.run(route, view.root, params, identity, parts=parts, registry=registry, now=now,
                                visible=visible)
    index, inner_cursor = _resume(parts, params.get("cursor")) if len(parts) > 1 else (0, params.get("cursor"))
    while True:  # a part with nothing to show passes on to the next in the same answer
        part = parts[index]
        inner = {k: v for k, v in params.items() if k not in ("path_prefix", "cursor")}
        if part.inner:
            inner["path_prefix"] = part.inner
        if inner_cursor not in (None, ""):
            inner["cursor"] = inner_cursor
        try:
            result: Result = shown(await memory.run(route, part.scope, inner, identity, parts=parts,
                                                    registry=registry, now=now, visible=visible), part.label)
        except HubError as exc:
            raise shown_error(exc, part) from exc.__cause__
        if result.get(route.items) or result.get("next_cursor") is not None or index + 1 == len(parts):
            break
        index, inner_cursor = index + 1, ""
    if len(parts) > 1:
        following = result.get("next_cursor")
        if following is not None:
            result["next_cursor"] = cursor_of(part.label, following)
        elif index + 1 < len(parts):
            result["next_cursor"] = cursor_of(parts[index + 1].label, "")
        result["part"] = part.label
    return result


async def _by_proposal(memory: MemoryMethods, route: Route, view: MountView, params: dict[str, Any],
                       identity: Identity | None, registry: Callable[[], Registry] | None, now: float,
                       visible: Mapping[str, str]) -> Result:
    """``review_show``/``review_decide``: the caller's own scope first, then each of its mounts (the part is handed
    to the handler: in a team the caller does not maintain it sees its own proposals only, and decides none).  An
    id found nowhere the caller may see it is the root's answer for an unknown id."""
    parts = [Part(view.root, None, "")] + [Part(m.scope, m, "") for m in view.mounted()]
    missing: HubError | None = None
    for part in parts:
        try:
            return shown(await memory.run(route, part.scope, params, identity, parts=(part,), registry=registry,
                                          now=now, visible=visible), part.label)
        except HubError as exc:
            if exc.code is not ErrorCode.NOT_FOUND or exc.data.get("path") is not None:
                raise shown_error(exc, part) from exc.__cause__
            missing = missing or exc
    assert missing is not None
    raise missing


async def _copy(memory: MemoryMethods, route: Route, view: MountView, params: dict[str, Any],
                identity: Identity | None, registry: Callable[[], Registry] | None, now: float,
                visible: Mapping[str, str]) -> Result:
    """``copy`` (and move) across the caller's parts: its parameters parsed first (the paths resolved are the
    parsed ones), read access to the source, write access to the destination (and to the source for a move)."""
    assert route.parse is not None
    p = route.parse(params)
    source = view.document(p.source, WRITE if p.move else READ)
    destination = view.document(p.destination, WRITE)
    memory.check_enabled()
    parts: Sequence[Part] = (source, destination)
    try:
        result = await memory.run(route, view.root, params, identity, parts=parts, registry=registry, now=now,
                                  parsed=p, visible=visible)
    except HubError as exc:
        failed = source if exc.data.get("path") == source.inner and exc.code is ErrorCode.NOT_FOUND else destination
        raise shown_error(exc, failed) from exc.__cause__
    result = shown(result, destination.label)
    result["source"] = source.label + source.inner
    return result
