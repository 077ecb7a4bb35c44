"""Data methods over a caller's view: its own scope and its team mounts (DESIGN.md §7.8).

:func:`call` is what the Hub runs for every data request once the caller's
:class:`~hub.access.mounts.View` is known.  Each method lands where its path says (a
call that names only the caller's own scope goes to
:meth:`hub.methods.memory.MemoryMethods.call` unchanged, and its answer is the same
as before teams existed; an ``@NAME/`` path of a caller with no such mount is
refused, whether or not it has other mounts):

* one document (``get``, ``export``, ``upsert``, ``forget``, ``history``,
  ``restore``, ``purge``): the part the path names, the path inside it passed
  on, the answer's and errors' paths shown mounted again;
* ``search``: the root and every mount in one scan under one budget
  (:meth:`~hub.methods.memory.MemoryMethods.search_mounted`), or the part its
  ``path_prefix`` names;
* ``list``, ``log`` and ``review_list``: part after part, each paged as
  before; a page's ``next_cursor`` carries the part it stopped in
  (:func:`cursor_of`), so a client pages through them all unchanged;
* ``review_show`` and ``review_decide``: the proposal is looked for in the
  root and then in the mounts the caller maintains;
* ``copy``: both paths resolved, the service copies between the two scopes;
* ``health``: the root and every mount the prefix covers, in one report
  (:meth:`~hub.methods.memory.MemoryMethods.health`);
* ``scan``: the caller's own scope.
"""

from __future__ import annotations

from typing import Any

from amux_memory.hub.access.identity import Identity
from amux_memory.hub.access.mounts import MAINTAIN, Part, View, shown, shown_error
from amux_memory.hub.methods.memory import MemoryMethods, actor_of
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.params import parse_copy, parse_health
from amux_memory.protocol.paths import normalize_prefix

Result = dict[str, Any]

ONE_DOCUMENT = frozenset({"get", "export", "upsert", "forget", "history", "restore", "purge"})
"""Methods whose ``path`` names one document."""

PAGED = frozenset({"list", "log", "review_list"})
"""Methods that page through a prefix, part after part."""

CURSOR_MARK = "|"
"""Between a part's label and its own cursor in a ``next_cursor`` that spans parts (``@web/|17``)."""


async def call(service: MemoryMethods, view: View, method: str, params: dict[str, Any],
               identity: Identity | None) -> Result:
    """Run one data method for the caller whose view is ``view``; the answer names documents by mounted path.

    Raises what the method raises (paths in errors mounted), ``not_found`` (``data.reason`` ``no_mount``) for
    a mount the caller does not have (the same for a team that does not exist), ``unauthorized``
    (``data.reason`` ``role``) when the caller's role does not allow the method on that mount.  Cancellation
    behaves as :meth:`hub.methods.memory.MemoryMethods.call` (a part started runs to its end).
    """
    if method in ONE_DOCUMENT:
        return await _one(service, view.document(params.get("path"), method), method, params, identity)
    if method == "search":
        return await _search(service, view, params, identity)
    if method in PAGED:
        return await _paged(service, view, method, params, identity)
    if method in ("review_show", "review_decide"):
        return await _by_proposal(service, view, method, params, identity)
    if method == "copy":
        return await _copy(service, view, params, identity)
    if method == "health":
        parse_health(params)
        return await service.health([(p.label, p.scope, p.inner) for p in _parts(view, params, "health")])
    return await service.call(view.root, method, params, identity)


async def _one(service: MemoryMethods, part: Part, method: str, params: dict[str, Any],
               identity: Identity | None) -> Result:
    """One call on one part, ``path`` rewritten to the path inside it and back."""
    inner = {**params, "path": part.inner} if part.mount is not None else params
    try:
        return shown(await service.call(part.scope, method, inner, identity), part.label)
    except HubError as exc:
        raise shown_error(exc, part) from exc.__cause__


def _parts(view: View, params: dict[str, Any], method: str) -> list[Part]:
    """The parts ``params["path_prefix"]`` covers (validated first, as the service would)."""
    return view.prefix(normalize_prefix(params.get("path_prefix")), method)


async def _search(service: MemoryMethods, view: View, params: dict[str, Any], identity: Identity | None) -> Result:
    parts = _parts(view, params, "search")
    if len(parts) == 1 and parts[0].mount is None:
        return await service.call(view.root, "search", params, identity)
    return await service.search_mounted([(p.label, p.scope, p.inner) for p in parts], params)


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


async def _paged(service: MemoryMethods, view: View, method: str, params: dict[str, Any],
                 identity: Identity | None) -> Result:
    """``list``, ``log``, ``review_list`` over the parts a prefix covers: one part's page per answer."""
    parts = _parts(view, params, method)
    if not parts:
        return _empty(service, view, method)
    if len(parts) == 1 and parts[0].mount is None:
        return await service.call(view.root, method, params, identity)
    index, inner_cursor = _resume(parts, params.get("cursor")) if len(parts) > 1 else (0, params.get("cursor"))
    while True:  # a part with nothing to show passes on to the next in the same answer
        part = parts[index]
        inner = {k: v for k, v in params.items() if k not in ("path_prefix", "cursor")}
        if part.inner:
            inner["path_prefix"] = part.inner
        if inner_cursor not in (None, ""):
            inner["cursor"] = inner_cursor
        try:
            result: Result = shown(await service.call(part.scope, method, inner, identity), part.label)
        except HubError as exc:
            raise shown_error(exc, part) from exc.__cause__
        items = result.get({"list": "entries", "log": "changes"}.get(method, "proposals"))
        if items or result.get("next_cursor") is not None or index + 1 == len(parts):
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


def _empty(service: MemoryMethods, view: View, method: str) -> Result:
    """The answer of a paged method whose prefix covers no part (``@x`` matching no mount of the caller)."""
    if method == "list":
        return {"entries": [], "next_cursor": None, "incomplete": False, "incomplete_reasons": [], "unreadable": []}
    if method == "log":
        return {"changes": [], "next_cursor": None}
    return {"proposals": [], "next_cursor": None, "pending": 0, "review": service.review_rule(view.root)}


async def _by_proposal(service: MemoryMethods, view: View, method: str, params: dict[str, Any],
                       identity: Identity | None) -> Result:
    """``review_show``/``review_decide``: the caller's own scope first, then each mount it maintains."""
    parts = [Part(view.root, None, "")] + [Part(m.scope, m, "") for m in view.mounted() if m.allows(MAINTAIN)]
    missing: HubError | None = None
    for part in parts:
        try:
            return shown(await service.call(part.scope, method, params, identity), part.label)
        except HubError as exc:
            if exc.code is not ErrorCode.NOT_FOUND or exc.data.get("path") is not None:
                raise shown_error(exc, part) from exc.__cause__
            missing = missing or exc
    assert missing is not None
    raise missing


async def _copy(service: MemoryMethods, view: View, params: dict[str, Any], identity: Identity | None) -> Result:
    """``copy`` (and move) across the caller's parts: read access to the source, write access to the destination
    (and to the source for a move)."""
    p = parse_copy(params)
    source = view.document(p.source, "forget" if p.move else "get")
    destination = view.document(p.destination, "upsert")
    try:
        result = await service.copy(source.scope, source.inner, destination.scope, destination.inner,
                                    expected_revision=p.expected_revision, source_revision=p.source_revision,
                                    move=p.move, allow_secret=p.allow_secret, actor=actor_of(identity))
    except HubError as exc:
        failed = source if exc.data.get("path") == source.inner and exc.code is ErrorCode.NOT_FOUND else destination
        raise shown_error(exc, failed) from exc.__cause__
    result = shown(result, destination.label)
    result["source"] = source.label + source.inner
    return result

