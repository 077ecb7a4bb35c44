"""Change sets: the pending proposals of one session, shown and decided together (DESIGN.md §21).

A tidy run (``amux memory tidy``) writes only proposals, all under its launch's session, so its work is one
*change set*.  Nothing here is new on the wire: a change set is the session's pending proposals from
``review_list`` (:func:`change_set`); deciding it (:func:`decide_change_set`) is one ``review_decide`` per
proposal, approved by compare-and-swap at the revision the proposal was based on, so a document changed since
is the Hub's ``conflict`` and stays pending while the rest apply.  The CLI (``amux memory review
--session``) and the web page (``/review/session/S``) both use these.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.requests import review_decide_params


class Caller(Protocol):
    """What is needed of a Hub client: one ``call``."""

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request, return its result map; raises :class:`HubError`."""
        ...


def sessions_of(proposals: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pending proposals grouped by session, oldest change set first: ``[{session (None: no session),
    proposals: [entry], paths, added, removed, changed (entries whose document changed since), first}]``."""
    groups: dict[str | None, dict[str, Any]] = {}
    for e in proposals:
        session = e.get("session") or (e.get("actor") or {}).get("session")
        g = groups.setdefault(session, {"session": session, "proposals": [], "added": 0, "removed": 0,
                                        "changed": 0, "first": e.get("time")})
        g["proposals"].append(e)
        g["added"] += int(e.get("added", 0))
        g["removed"] += int(e.get("removed", 0))
        g["changed"] += 1 if e.get("changed") else 0
    for g in groups.values():
        g["paths"] = [e["path"] for e in g["proposals"]]
    return list(groups.values())


def change_set(client: Caller, session: str) -> list[dict[str, Any]]:
    """The pending proposals of ``session``, oldest first (``review_list`` entries).  Raises ``not_found`` when the
    session has none pending (``data.session``), and what ``review_list`` raises."""
    from amux_memory.tools.client.paging import review_all

    found = [e for e in review_all(client)["proposals"] if (e.get("session") or e["actor"].get("session")) == session]
    if not found:
        raise HubError(ErrorCode.NOT_FOUND, f"no pending memory changes of session {session[:128]!r} (list the "
                       "change sets with 'amux memory review')", {"session": session[:128]},
                       next_step="List the pending change sets with 'amux memory review' and use a session it shows.")
    return found


def decide_change_set(client: Caller, session: str, decision: str, reason: str | None = None) -> dict[str, Any]:
    """Approve or reject every pending proposal of ``session`` at once.

    Each approval is a compare-and-swap at the proposal's base revision: a document changed since its proposal
    is the Hub's ``conflict``, reported and left pending; the rest are applied.  Returns ``{session, decision,
    applied: [review_decide answers], conflicts: [{proposal, path, message, current_revision?}], errors:
    [{proposal, path, error}]}``.  Raises ``not_found`` for a session with nothing pending.
    """
    entries = change_set(client, session)
    out: dict[str, Any] = {"session": session, "decision": decision, "applied": [], "conflicts": [], "errors": []}
    for e in entries:
        if decision == "approve":
            params = review_decide_params(e["id"], "approve", expected_revision=e["base_revision"], reason=reason)
        else:
            params = review_decide_params(e["id"], "reject", reason=reason)
        try:
            out["applied"].append(client.call("review_decide", params))
        except HubError as exc:
            if exc.code is ErrorCode.CONFLICT:
                out["conflicts"].append({"proposal": e["id"], "path": e["path"], "message": exc.message,
                                         "current_revision": exc.data.get("observed_revision")})
            else:
                out["errors"].append({"proposal": e["id"], "path": e["path"], "error": exc.to_wire()})
    return out
