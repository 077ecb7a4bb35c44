"""What each page asks the Hub, as blocking functions of one connected client (DESIGN.md §20).

The page handlers in :mod:`tools.ui.app` run these in a Trio worker thread
with a fresh :class:`tools.client.blocking.HubClient` per page view, so they
share the request builders (:mod:`protocol.requests`), the paging helpers
(:mod:`tools.client.paging`), the typed library's counts and lint
(:mod:`tools.typed`) and the diff (:mod:`tools.client.textdiff`) with the CLI,
and a Hub restart between two page views costs nothing.  Each returns plain
values for the templates and raises :class:`~protocol.errors.HubError` as the
Hub answers.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.params import ABSENT
from amux_memory.protocol.requests import (
    export_params,
    forget_params,
    get_params,
    history_params,
    list_params,
    log_params,
    purge_params,
    restore_params,
    search_params,
    upsert_params,
)
from amux_memory.tools.client.blocking import HubClient
from amux_memory.tools.client.paging import list_report, read_version, review_text_head

OVERVIEW_LOG_LIMIT = 200
"""Changes of the scope's log read for the overview's "last change" column (newest first; older documents
show no last change)."""


def read_head(client: HubClient, path: str, *, whole_up_to: int, head_bytes: int) -> tuple[bytes, str, int]:
    """``(bytes, revision, total_bytes)`` of the live document, read in ``export`` pages pinned to the first
    page's revision: all of it when ``total_bytes`` is at most ``whole_up_to``, else only about its first
    ``head_bytes`` (a document put there by hand can be any size, and the page shows only its head).
    ``(b"", "absent", 0)`` when there is none; raises ``conflict`` if it changed between pages."""
    parts: list[bytes] = []
    offset, size, pinned = 0, 0, None
    while True:
        try:
            result = client.call("export", export_params(path, offset=offset, expected_revision=pinned))
        except HubError as exc:
            if exc.code is ErrorCode.NOT_FOUND and pinned is None:
                return b"", ABSENT, 0
            raise
        pinned = str(result["revision"])
        total = int(result.get("total_bytes", 0))
        parts.append(result["content"])
        size += len(result["content"])
        if not result["truncated"] or (total > whole_up_to and size >= head_bytes):
            return b"".join(parts), pinned, max(total, size)
        if int(result["next_offset"]) <= offset:
            raise HubError(ErrorCode.INTERNAL, f"export of {path} did not move past byte {offset}")
        offset = int(result["next_offset"])


def live_revision(client: HubClient, path: str) -> str:
    """The live document's revision (``"absent"`` when there is none), from a ``get`` of its first line."""
    try:
        answer = client.call("get", get_params(path, start_line=1, end_line=1))
    except HubError as exc:
        if exc.code is ErrorCode.NOT_FOUND:
            return ABSENT
        raise
    return str(answer.get("revision") or ABSENT) if answer.get("exists", True) else ABSENT


def overview(client: HubClient, cursor: str = "") -> dict[str, Any]:
    """``{hello, teams, index, index_revision, entries, next_cursor, incomplete, reasons, counts, index_path}``.

    ``teams`` are the caller's team mounts (:func:`mounts_of`; their documents follow the caller's own in
    ``list``'s pages, DESIGN.md §7.8).

    ``entries`` are one ``list`` page (``cursor``; the Hub's page size, by path) as ``{path, bytes}``
    (:func:`with_changes` adds each one's last change), ``next_cursor`` the next page's cursor or
    ``None``: a scope of thousands of documents costs one page, not all of them.  ``counts`` maps each
    typed-memory type to ``(count, cap)``, from a listing of each type's folder only (a typed topic
    lives there, DESIGN.md §11).
    """
    from amux_memory.tools.typed.catalog import topic_from_doc
    from amux_memory.tools.typed.library import Doc
    from amux_memory.tools.typed.model import CAPS, ENTRY_PATH, TYPES

    hello = dict(client.hello)
    index, index_revision = read_version(client, ENTRY_PATH)
    page = client.call("list", list_params(cursor=cursor))
    entries = [{"path": e["path"], "bytes": e.get("bytes", 0)} for e in page.get("entries", [])]
    counts = dict.fromkeys(TYPES, 0)
    for kind in TYPES:
        for e in list_report(client, path_prefix=f"{kind}/")["entries"]:
            topic = topic_from_doc(Doc(str(e["path"]), b"", ""))
            if topic.indexable and topic.dir_type is not None:
                counts[topic.dir_type] += 1
    return {"hello": hello, "teams": mounts_of(hello), "index": index.decode("utf-8", "replace"),
            "index_revision": index_revision,
            "entries": entries, "next_cursor": page.get("next_cursor"), "cursor": cursor,
            "incomplete": bool(page.get("incomplete")), "reasons": list(page.get("incomplete_reasons") or []),
            "counts": {t: (counts[t], CAPS[t]) for t in TYPES}, "index_path": ENTRY_PATH}


def with_changes(data: dict[str, Any], changes: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`overview`'s ``data`` plus ``recent`` (the 10 newest of ``changes``) and each entry's ``last``:
    the newest change to its path among ``changes`` (``None`` when older than all of them)."""
    last: dict[str, dict[str, Any]] = {}
    for change in changes:
        last.setdefault(str(change["path"]), change)
    entries = [{**e, "last": last.get(str(e["path"]))} for e in data["entries"]]
    return {**data, "entries": entries, "recent": changes[:10]}


def recent_changes(client: HubClient) -> list[dict[str, Any]]:
    """The scope's newest :data:`OVERVIEW_LOG_LIMIT` changes (one ``log`` page; ``[]`` when history is off)."""
    if client.hello.get("history") is False:
        return []
    return list(log_page(client, limit=OVERVIEW_LOG_LIMIT)["changes"])


def lint(client: HubClient) -> list[dict[str, Any]]:
    """``amux memory lint``'s findings for the caller's scope: ``[{severity, code, path, line, message}]``.

    Reads every document once (the typed library's catalog), so it is its own page, not the overview's.
    """
    from amux_memory.tools.typed.library import HubLibrary
    from amux_memory.tools.typed.lint import lint_library

    problems = lint_library(HubLibrary(client), dt.date.today())
    return [{"severity": p.severity, "code": p.code, "path": p.path, "line": p.line, "message": p.message}
            for p in problems]


def health(client: HubClient, path_prefix: str = "") -> dict[str, Any]:
    """``amux memory health``'s report (:func:`tools.typed.health.full_report`: the Hub's findings with the lint
    folded in) grouped for the page: ``{groups: [{code, count, findings: [{places: [{path, lines}], message,
    next}]}], total, shown, documents}`` in the report's order (DESIGN.md §23).  ``lines`` is ``"12"``,
    ``"12-15"`` or ``""``; the template escapes every text."""
    from amux_memory.tools.typed.health import full_report

    report = full_report(client, path_prefix)
    counts: dict[str, int] = report["counts"]
    groups: dict[str, dict[str, Any]] = {}
    for f in report["findings"]:
        group = groups.setdefault(f["code"], {"code": f["code"], "count": counts.get(f["code"], 0), "findings": []})
        spans = list(f["lines"]) + [[]] * (len(f["paths"]) - len(f["lines"]))
        places = [{"path": path, "lines": "" if not span else str(span[0]) if span[0] == span[1]
                   else f"{span[0]}-{span[1]}"} for path, span in zip(f["paths"], spans, strict=False)]
        group["findings"].append({"places": places, "message": f["message"], "next": f["next"]})
    return {"groups": list(groups.values()), "total": sum(counts.values()), "shown": len(report["findings"]),
            "documents": report["documents"]}


def document(client: HubClient, path: str) -> dict[str, Any]:
    """``{text, shown, cut, mount, read_only, editable, max_bytes, bytes, revision, exists, versions,
    history_next}``: the live document and its newest versions (:func:`read_head`: only the head of a document
    too large to edit).  ``mount`` is the team mount it lies in (:func:`mount_for`, None for the caller's own
    memory), ``read_only`` true when the caller only reads that team (the page offers no editor).

    ``shown`` is the first ``SHOWN_MAX_CHARS`` characters of ``text`` (``cut`` when that is not all of
    it); ``editable`` is false for a document over the Hub's ``document_max_bytes`` (put there by hand:
    no save of it could succeed, so the page offers no editor).
    """
    from amux_memory.protocol.limits import LIMITS
    from amux_memory.tools.ui.render import SHOWN_MAX_CHARS

    data, revision, total = read_head(client, path, whole_up_to=LIMITS.document_max_bytes,
                                      head_bytes=4 * SHOWN_MAX_CHARS)
    text = data.decode("utf-8", "replace")
    try:
        page = client.call("history", history_params(path, limit=20))
    except HubError as exc:
        if exc.code is not ErrorCode.NOT_FOUND:
            raise
        page = {"versions": [], "next_cursor": None}
    mount = mount_for(client.hello, path)
    return {"text": text, "shown": text[:SHOWN_MAX_CHARS], "cut": len(text) > SHOWN_MAX_CHARS or total > len(data),
            "mount": mount, "read_only": mount is not None and mount["role"] == "reader",
            "editable": total <= LIMITS.document_max_bytes,
            "max_bytes": LIMITS.document_max_bytes, "bytes": total, "revision": revision,
            "exists": revision != ABSENT, "versions": page.get("versions", []),
            "history_next": page.get("next_cursor")}


def history(client: HubClient, path: str, cursor: str = "") -> dict[str, Any]:
    """One page of the document's history (``{versions, next_cursor}``, newest first) and its live revision
    (:func:`live_revision`: a one-line ``get``, not the whole document)."""
    page = client.call("history", history_params(path, limit=50, cursor=cursor))
    return {"versions": page.get("versions", []), "next_cursor": page.get("next_cursor"),
            "revision": live_revision(client, path)}


def diff(client: HubClient, path: str, old_revision: str | None, new_revision: str | None) -> dict[str, Any]:
    """``{old, new, hunks, added, removed}``: the unified diff between two versions (``None``: the live one)."""
    from amux_memory.tools.client.textdiff import diff_hunks, hunks_as_data, line_counts

    old, old_rev = read_version(client, path, old_revision)
    new, new_rev = read_version(client, path, new_revision)
    hunks = diff_hunks(old, new)
    added, removed = line_counts(hunks)
    return {"old": old_rev, "new": new_rev, "hunks": hunks_as_data(hunks), "added": added, "removed": removed}


def text_diff(old: str, new: str) -> dict[str, Any]:
    """The diff of two texts, shaped like :func:`diff` without revisions (for a conflict)."""
    from amux_memory.tools.client.textdiff import diff_hunks, hunks_as_data, line_counts

    hunks = diff_hunks(old.encode("utf-8"), new.encode("utf-8"))
    added, removed = line_counts(hunks)
    return {"hunks": hunks_as_data(hunks), "added": added, "removed": removed}


def log_page(client: HubClient, *, since: str | None = None, limit: int = 100, cursor: str = "") -> dict[str, Any]:
    """One page of the scope's activity log: ``{changes, next_cursor}``, newest first."""
    return client.call("log", log_params(since=since, limit=limit, cursor=cursor))


def search(client: HubClient, query: str) -> dict[str, Any]:
    """The Hub's ``search`` for ``query`` (keywords separated by spaces), as many matches as it allows
    (``LIMITS.search_max_limit``)."""
    from amux_memory.protocol.limits import LIMITS

    return client.call("search", search_params(query, limit=LIMITS.search_max_limit))


def save(client: HubClient, path: str, content: str, expected_revision: str, allow_shrink: bool) -> dict[str, Any]:
    """``upsert``: ``{path, revision, created, bytes}``; raises ``conflict``, ``destructive_rewrite``, ...."""
    return client.call("upsert", upsert_params(path, content.encode("utf-8"), expected_revision,
                                               allow_shrink=allow_shrink))


def forget(client: HubClient, path: str, expected_revision: str) -> dict[str, Any]:
    """``forget`` (compare-and-swap delete)."""
    return client.call("forget", forget_params(path, expected_revision))


def restore(client: HubClient, path: str, revision: str, expected_revision: str) -> dict[str, Any]:
    """``restore`` one stored version (compare-and-swap)."""
    return client.call("restore", restore_params(path, revision, expected_revision))


def purge(client: HubClient, path: str, revision: str | None, all_versions: bool) -> dict[str, Any]:
    """``purge`` one stored version or all of a path's."""
    return client.call("purge", purge_params(path, revision=revision, all_versions=all_versions))


# -- review (DESIGN.md §21) ----------------------------------------------------------------------


def review_state(client: HubClient) -> dict[str, Any]:
    """``{review, pending, mounts}`` for the navigation: the Hub's ``memory.review`` setting, how many proposals
    the caller may decide wait (its own scope's, plus each team it maintains, DESIGN.md §7.8), and its team
    mounts (:func:`mounts_of`).  ``review`` ``off`` and ``pending`` 0 when the Hub cannot say (memory disabled,
    an older Hub), so the navigation simply shows no count."""
    from amux_memory.protocol.requests import review_list_params

    mounts = mounts_of(client.hello)
    try:
        answer = client.call("review_list", review_list_params())
        # Over teams the first page is one part's (``part``); a part that showed nothing had nothing pending.
        counts = {str(answer.get("part", "")): int(answer.get("pending", 0))}
        for m in mounts:
            if m["role"] == "maintainer" and m["mount"] not in counts:
                team = client.call("review_list", review_list_params(path_prefix=m["mount"]))
                counts[m["mount"]] = int(team.get("pending", 0))
    except HubError:
        return {"review": "off", "pending": 0, "mounts": mounts}
    return {"review": str(answer.get("review", "off")), "pending": sum(counts.values()), "mounts": mounts}


def mounts_of(hello: dict[str, Any]) -> list[dict[str, str]]:
    """The caller's team mounts from its ``hello`` (DESIGN.md §7.8): ``[{mount, name, role, review}]`` in name
    order (``mount`` the ``@NAME/`` label, ``name`` without ``@`` and ``/``); entries that are not a team's
    label are left out, so nothing odd reaches a URL or a page; ``[]`` from a Hub without teams."""
    from amux_memory.protocol.agent_protocol import MOUNT_LABEL

    found = hello.get("mounts")
    if not isinstance(found, list):
        return []
    out = [{"mount": str(m["mount"]), "name": str(m["mount"])[1:-1], "role": str(m.get("role", "")),
            "review": str(m.get("review", ""))}
           for m in found if isinstance(m, dict) and MOUNT_LABEL.fullmatch(str(m.get("mount", "")))]
    return sorted(out, key=lambda m: m["mount"])


def mount_for(hello: dict[str, Any], path: str) -> dict[str, str] | None:
    """The caller's mount ``path`` lies in (:func:`mounts_of`'s entry), or None for its own memory."""
    return next((m for m in mounts_of(hello) if path.startswith(m["mount"])), None)


TEAM_LOG_LIMIT = 20
"""Changes of a team's log its page shows (newest first; the Activity page has them all)."""


def team(client: HubClient, name: str, cursor: str = "") -> dict[str, Any]:
    """One team's page (DESIGN.md §7.8, §20): ``{team, entries, next_cursor, cursor, incomplete, reasons, changes,
    proposals, pending}``.

    ``team`` is the caller's mount entry (:func:`mounts_of`); ``entries`` one ``list`` page of ``@NAME/``
    (``cursor``), ``changes`` its newest :data:`TEAM_LOG_LIMIT` changes (``[]`` when history is off),
    ``proposals`` its pending proposals when the caller is a maintainer (else ``None``: the Hub would refuse).
    Raises the Hub's ``not_found`` (reason ``no_mount``) when the caller is not a member, as for a team that
    does not exist.
    """
    from amux_memory.tools.client.paging import review_all

    label = f"@{name}/"
    page = client.call("list", list_params(path_prefix=label, cursor=cursor))
    mount = next((m for m in mounts_of(client.hello) if m["mount"] == label), None)
    if mount is None:  # a member since this connection said hello: the Hub answered, so it is one now
        mount = {"mount": label, "name": name, "role": "reader", "review": "?"}
    changes: list[dict[str, Any]] = []
    if client.hello.get("history") is not False:
        changes = list(client.call("log", log_params(path_prefix=label, limit=TEAM_LOG_LIMIT))["changes"])
    proposals: list[dict[str, Any]] | None = None
    if mount["role"] == "maintainer":
        proposals = list(review_all(client, path_prefix=label)["proposals"])
    return {"team": mount, "entries": [{"path": e["path"], "bytes": e.get("bytes", 0)} for e in page["entries"]],
            "next_cursor": page.get("next_cursor"), "cursor": cursor, "incomplete": bool(page.get("incomplete")),
            "reasons": list(page.get("incomplete_reasons") or []), "changes": changes, "proposals": proposals,
            "pending": len(proposals or [])}


def review_list(client: HubClient) -> dict[str, Any]:
    """Every pending proposal, oldest first: ``{proposals: [entry], pending, review}``
    (:func:`tools.client.paging.review_all`; an entry as ``review_list`` answers it)."""
    from amux_memory.tools.client.paging import review_all

    return review_all(client)


def proposal(client: HubClient, proposal_id: str) -> dict[str, Any]:
    """One proposal as its page shows it (DESIGN.md §21): ``{proposal, proposed, base, current, expected,
    base_stored, warnings, cut, diff, diff_current}``.

    ``proposal`` is the ``review_show`` entry (path, action, actor, session, time, status, changed, ...);
    ``proposed``/``base``/``current`` the three texts decoded (``None`` when absent), each at most
    ``document_max_bytes`` read (``cut`` names the ones that were longer); ``expected`` the revision of the
    current text read (what an approval from this page compares against: ``absent`` when there is no
    document); ``diff`` the hunks base → proposed and ``diff_current`` current → proposed when the document
    changed since the agent read it (else None), as :func:`tools.client.textdiff.hunks_as_data` with
    ``added``/``removed`` counts.
    """
    import hashlib

    from amux_memory.protocol.limits import LIMITS
    from amux_memory.tools.client.textdiff import diff_hunks, hunks_as_data, line_counts

    cap = LIMITS.document_max_bytes
    proposed, meta, proposed_cut = review_text_head(client, proposal_id, "proposed", cap)
    base, _, base_cut = review_text_head(client, proposal_id, "base", cap)
    current, now, current_cut = review_text_head(client, proposal_id, "current", cap)
    entry = now["proposal"]  # the freshest entry: current_revision as of the current text's read
    if current is None:
        expected = ABSENT
    elif current_cut:
        expected = str(entry["current_revision"])
    else:
        expected = hashlib.sha256(current).hexdigest()

    def diff(old: bytes | None, new: bytes | None) -> dict[str, Any]:
        hunks = diff_hunks(old or b"", new or b"")
        added, removed = line_counts(hunks)
        return {"hunks": hunks_as_data(hunks), "added": added, "removed": removed}

    def text(data: bytes | None) -> str | None:
        return None if data is None else data.decode("utf-8", "replace")

    changed = expected != entry["base_revision"]
    return {"proposal": {**entry, "changed": changed}, "proposed": text(proposed), "base": text(base),
            "current": text(current), "expected": expected, "base_stored": bool(meta.get("base_stored", True)),
            "warnings": list(meta.get("warnings") or []),
            "cut": [name for name, was in (("proposed", proposed_cut), ("base", base_cut), ("current", current_cut))
                    if was],
            "diff": diff(base, proposed), "diff_current": diff(current, proposed) if changed else None}


def review_decide(client: HubClient, proposal_id: str, decision: str, *, expected_revision: str | None,
                  content: bytes | None = None, reason: str | None = None) -> dict[str, Any]:
    """``review_decide``: approve (a compare-and-swap write at ``expected_revision`` of the proposed bytes, or
    of ``content`` when the person edited them) or reject (``reason`` kept with the decision).  Returns the
    Hub's answer (``{proposal, path, status, already_decided, revision?, warnings?}``); raises ``conflict``
    when the document is not where the approval expects it (nothing written), ``unauthorized`` for an agent
    caller, and what else the write raises."""
    from amux_memory.protocol.requests import review_decide_params

    return client.call("review_decide", review_decide_params(
        proposal_id, decision, expected_revision=expected_revision if decision == "approve" else None,
        content=content, reason=reason))


def approve_edited(client: HubClient, proposal_id: str, text: str, *, unedited: bool, base_revision: str,
                   expected_revision: str | None, reason: str | None) -> dict[str, Any]:
    """Approve from the page's editor: ``text`` is what it held (line breaks as the document uses them).

    Left ``unedited`` (the textarea came back as the proposed text, up to what forms do to line breaks), the
    proposal is approved as proposed, so its exact bytes are written, when the document is still at
    ``base_revision``; when it moved on (the person chose to put the proposal over the newer version) the
    exact proposed bytes are sent as the edited content.  Otherwise ``text`` is the content.  Raises as
    :func:`review_decide`.
    """
    content: bytes | None = text.encode("utf-8")
    if unedited:
        content = None
        if expected_revision != base_revision:
            proposed, _, cut = review_text_head(client, proposal_id, "proposed")
            content = proposed if proposed is not None and not cut else text.encode("utf-8")
    return review_decide(client, proposal_id, "approve", expected_revision=expected_revision, content=content,
                         reason=reason)


def change_set_page(client: HubClient, session: str) -> dict[str, Any]:
    """One change set as its page shows it (DESIGN.md §21): ``{session, proposals: [{entry, diff}]}``, each
    ``diff`` the hunks base → proposed (as :func:`proposal`'s), texts read up to ``document_max_bytes``.  Raises
    ``not_found`` when the session has nothing pending (:func:`tools.client.changeset.change_set`)."""
    from amux_memory.protocol.limits import LIMITS
    from amux_memory.tools.client.changeset import change_set
    from amux_memory.tools.client.textdiff import diff_hunks, hunks_as_data, line_counts

    shown = []
    for e in change_set(client, session):
        proposed, _, _ = review_text_head(client, e["id"], "proposed", LIMITS.document_max_bytes)
        base, _, _ = review_text_head(client, e["id"], "base", LIMITS.document_max_bytes)
        hunks = diff_hunks(base or b"", proposed or b"")
        added, removed = line_counts(hunks)
        shown.append({"entry": e, "diff": {"hunks": hunks_as_data(hunks), "added": added, "removed": removed}})
    return {"session": session, "proposals": shown}


def decide_change_set(client: HubClient, session: str, decision: str, reason: str | None) -> dict[str, Any]:
    """Approve or reject a whole change set (:func:`tools.client.changeset.decide_change_set`): ``{session,
    decision, applied, conflicts, errors}``."""
    from amux_memory.tools.client.changeset import decide_change_set as decide

    return decide(client, session, decision, reason)
