"""``amux memory review [show|approve|reject]``: a person decides what agents proposed (DESIGN.md §21).

With ``memory.review = agents`` an agent's write waits as a proposal.  ``amux memory review`` lists
the pending ones (a table fitting 80 columns in a terminal, JSON when piped or with ``--json``);
``show ID`` prints the diff against the document the agent saw and, when the document changed since,
against the current text; ``approve ID... [--edit]`` writes them (compare-and-swap at the revision
shown; ``--edit`` opens ``$VISUAL``/``$EDITOR`` on the proposed text first, or, when the document changed
since, on the three-way merge of both changes, as ``amux memory edit`` does on a conflict),
``reject ID... [--reason TEXT]`` drops them; both take ``--path-prefix`` to decide every
pending proposal under a prefix.  Proposed text is an agent's: every byte shown in a terminal is made
inert (:func:`tools.client.inert.inert`, DESIGN.md §17).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.cli.options import AsJson
from amux_memory.tools.cli.output.contract import emit, fail, human_output, say, write_bytes
from amux_memory.tools.client.wording import counted, plural

WIDTH = 80
"""Columns the terminal table fits in."""


def _client() -> Any:
    from amux_memory.tools.client.blocking import HubClient

    return HubClient()


def _age(seconds: int) -> str:
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def table(entries: list[dict[str, Any]]) -> str:
    """The terminal table of pending proposals: id, age, action, +/- lines, ``!`` when the document changed
    since, the proposer's session (cut to :data:`tools.cli.output.versions.SHORT_SESSION` characters and ``…``, as
    ``log`` does; ``-`` for none), path and proposer, every row within :data:`WIDTH` columns, agent text
    made inert."""
    from amux_memory.tools.cli.output.versions import SHORT_SESSION
    from amux_memory.tools.client.inert import inert

    session_width = SHORT_SESSION + 1
    head = f"{'ID':13} {'AGE':>4} {'ACTION':6} {'+/-':>9} {'!':1} {'SESSION':{session_width}} {'PATH / BY':}"
    lines = [head]
    for e in entries:
        session = inert(e["actor"].get("session") or "-")
        if len(session) > session_width:
            session = session[:SHORT_SESSION] + "…"
        change = "delete" if e["action"] == "forget" else "write"
        lines_changed = f"+{e['added']}/-{e['removed']}"
        by = inert(e["actor"].get("principal") or "?") + " via " + inert(e["actor"].get("client") or "?")
        rest = WIDTH - (13 + 1 + 4 + 1 + 6 + 1 + 9 + 1 + 1 + 1 + session_width + 1)
        path = inert(e["path"])
        cell = _cut(f"{path}  ({by})", rest)
        lines.append(f"{e['id']:13} {_age(int(e['age_seconds'])):>4} {change:6} {_cut(lines_changed, 9):>9} "
                     f"{'!' if e['changed'] else ' '} {session:{session_width}} {cell}")
    return "\n".join(lines)


def rule_lines(reviews: list[dict[str, Any]], own: str) -> list[str]:
    """What a person is told of review (DESIGN.md §21): a line per memory of theirs that reviews (``reviews`` as
    ``review_list`` gives them when one does: their own, ``mount`` ``""``, and each team with their ``role``),
    saying whose writes wait and who decides; one line saying review is off when none does (without ``reviews``,
    ``own``, the own scope's rule, stands in)."""
    from amux_memory.tools.client.inert import inert

    what = {"agents": "agents' writes wait for review", "all": "every write but a maintainer's waits for review"}
    lines = []
    for r in reviews or [{"mount": "", "review": own}]:
        rule = str(r.get("review"))
        if rule not in what:
            continue
        if not r.get("mount"):
            lines.append(f"review: in your own memory {what[rule]} (memory.review = {inert(rule)}); you decide")
            continue
        role = str(r.get("role"))
        who = ("you decide them" if role == "maintainer" else
               f"you are a {inert(role)}: a maintainer decides, and you see only your own proposals")
        lines.append(f"review: in team {inert(r['mount'])} {what[rule]} (review {inert(rule)}); {who}")
    if not lines:
        lines.append("review is off: agents' writes are applied at once (memory.review = off, and no team of "
                     "yours reviews)")
    return lines


def review(*, path_prefix: str = "", as_json: AsJson = False) -> int:
    """The memory changes waiting for review: in your own memory, those agents proposed (memory.review =
    agents); in a team you maintain, every proposal; in a team you are a reader or writer of, your own (your
    agents') proposals, which a maintainer decides. It says which of your memories review, and how.

    In a terminal, a table: id, age, write or delete, lines added/removed, "!" when the document changed
    since the agent read it, the agent's session (shortened), path and who proposed it.
    Piped or with --json, {"proposals": [{"id",
    "path", "action", "status", "actor", "session", "time", "age_seconds", "added", "removed", "bytes",
    "base_revision", "proposed_revision", "current_revision", "changed"}], "pending", "review", "reviews":
    [{"mount", "review", "role"?}]}.
    Then: amux memory review show ID; approve ID; reject ID.

    Parameters
    ----------
    path_prefix
        Only proposals whose path starts with this.
    """
    from amux_memory.tools.client.paging import review_all

    try:
        with _client() as client:
            result = review_all(client, path_prefix)
    except HubError as exc:
        return fail(exc, as_json=as_json)
    if not human_output(as_json):
        emit(result)
        return 0
    for line in rule_lines(result.get("reviews") or [], str(result["review"])):
        say(line)
    if not result["proposals"]:
        print("no memory changes await review")
        return 0
    from amux_memory.tools.client.changeset import sessions_of
    from amux_memory.tools.client.inert import inert

    groups = sessions_of(result["proposals"])
    for i, g in enumerate(groups):
        if len(groups) > 1 or g["session"] is not None:
            if i:
                print()
            n = len(g["proposals"])
            tail = (f": {counted(n, 'document')}, +{g['added']}/-{g['removed']} lines"
                    + (f", {g['changed']} changed since" if g["changed"] else ""))
            # The whole session, to copy into --session, unless the line would pass WIDTH columns.
            name = "(no session)" if g["session"] is None else _cut(inert(g["session"]), WIDTH - 11 - len(tail))
            print(f"change set {name}{tail}")
        print(table(g["proposals"]))
    theirs = [r["mount"] for r in result.get("reviews") or [] if r.get("mount") and r.get("role") != "maintainer"]
    waiting = sum(1 for e in result["proposals"] if any(str(e["path"]).startswith(m) for m in theirs))
    print(f"{result['pending']} pending: 'amux memory review show ID'"
          + (", then approve ID or reject ID" if waiting < len(result["proposals"]) else "")
          + (f"; {waiting} of them wait for a team's maintainer" if waiting else ""))
    if any(g["session"] for g in groups):
        print("a whole change set: amux memory review show|approve|reject --session SESSION")
    return 0


def _diff(old: bytes | None, new: bytes | None, old_label: str, new_label: str) -> bytes:
    from amux_memory.tools.client.textdiff import diff_hunks, render_unified

    return render_unified(diff_hunks(old or b"", new or b""), old_label, new_label)


def show(proposal: str | None = None, /, *, session: str | None = None, as_json: AsJson = False) -> int:
    """One proposal: who proposed what, and the diff against the document it was based on; when the
    document changed since, the diff against its current text too (then approve with --edit to merge).
    With --session, the whole change set of that session as one diff (every pending proposal of it).

    Piped or with --json: {"proposal", "proposed", "base", "current" (texts, null when absent), "diff",
    "diff_current" (unified diffs, null when the document did not change), "base_stored", "warnings"}.

    Parameters
    ----------
    proposal
        The proposal's id, as 'amux memory review' lists it.
    session
        Show the change set of this session instead (piped or with --json: {"session", "proposals": [entry],
        "diff", "conflicts": [ids whose document changed since]}).
    """
    from amux_memory.tools.client.paging import review_text

    if (proposal is None) == (session is None):
        return fail(HubError(ErrorCode.BAD_REQUEST, "give a proposal id or --session SESSION (one of them)",
                             {"field": "id"}), as_json=as_json)
    if session is not None:
        return show_change_set(session, as_json=as_json)
    assert proposal is not None

    try:
        with _client() as client:
            proposed, meta = review_text(client, proposal, "proposed")
            base, _ = review_text(client, proposal, "base")
            current, _ = review_text(client, proposal, "current")
    except HubError as exc:
        return fail(exc, as_json=as_json)
    entry = meta["proposal"]
    path = entry["path"]
    diff = _diff(base, proposed, f"a/{path} (base {entry['base_revision'][:12]})", f"b/{path} (proposed)")
    diff_current = (_diff(current, proposed, f"a/{path} (current {entry['current_revision'][:12]})",
                          f"b/{path} (proposed)") if entry["changed"] else None)
    if not human_output(as_json):
        def text(data: bytes | None) -> str | None:
            return None if data is None else data.decode("utf-8", "replace")

        emit({"proposal": entry, "proposed": text(proposed), "base": text(base), "current": text(current),
              "diff": diff.decode("utf-8", "replace"),
              "diff_current": None if diff_current is None else diff_current.decode("utf-8", "replace"),
              "base_stored": meta["base_stored"], "warnings": meta["warnings"]})
        return 0
    from amux_memory.tools.client.inert import inert

    actor = entry["actor"]
    print(f"proposal {entry['id']} ({entry['status']}): {'delete' if entry['action'] == 'forget' else 'write'} "
          f"{inert(path)}")
    print(f"by {inert(actor.get('principal'))} via {inert(actor.get('client'))}"
          + (f", session {inert(actor.get('session'))}" if actor.get("session") else "") + f", {entry['time']}")
    decision = entry.get("decision")
    if entry["status"] != "pending" and isinstance(decision, dict):
        by = decision.get("by")
        who = (f"by {inert(by.get('principal'))} via {inert(by.get('client'))}" if isinstance(by, dict)
               else "by the Hub")
        print(f"decided: {entry['status']} {who}, {inert(decision.get('time'))}"
              + (f"; reason: {inert(decision.get('reason'))}" if decision.get("reason") else "")
              + (f"; revision {inert(decision.get('revision'))[:12]}" if decision.get("revision") else ""))
    elif entry["changed"]:
        print(f"! {inert(path)} changed since the agent read it: approving as proposed is refused; "
              f"'amux memory review approve {entry['id']} --edit' merges")
    for warning in meta["warnings"]:
        say(f"warning: {warning}")
    print("--- against the document the agent read:")
    print(inert(diff.decode("utf-8", "replace"), multiline=True), end="")
    if diff_current is not None:
        print("--- against the document now:")
        print(inert(diff_current.decode("utf-8", "replace"), multiline=True), end="")
    return 0


def change_set_diff(client: Any, session: str) -> tuple[list[dict[str, Any]], bytes]:
    """The pending proposals of ``session`` and one unified diff of them all, each against the document its
    proposal was based on (``a/PATH``, ``b/PATH``; a deletion against ``/dev/null``)."""
    from amux_memory.tools.client.changeset import change_set
    from amux_memory.tools.client.paging import review_text

    entries = change_set(client, session)
    parts: list[bytes] = []
    for e in entries:
        proposed, _ = review_text(client, e["id"], "proposed")
        base, _ = review_text(client, e["id"], "base")
        path = e["path"]
        old_label = f"a/{path} (base {e['base_revision'][:12]})" if base is not None else "/dev/null"
        new_label = f"b/{path} (proposal {e['id']})" if proposed is not None else f"/dev/null (proposal {e['id']})"
        parts.append(_diff(base, proposed, old_label, new_label))
    return entries, b"".join(parts)


def show_change_set(session: str, *, as_json: bool = False) -> int:
    """``amux memory review show --session S``: the change set as one diff (text made inert) or JSON."""
    try:
        with _client() as client:
            entries, diff = change_set_diff(client, session)
    except HubError as exc:
        return fail(exc, as_json=as_json)
    conflicts = [e["id"] for e in entries if e["changed"]]
    if not human_output(as_json):
        emit({"session": session, "proposals": entries, "diff": diff.decode("utf-8", "replace"),
              "conflicts": conflicts})
        return 0
    from amux_memory.tools.client.inert import inert

    actor = entries[0]["actor"]
    print(f"change set of session {inert(session)}: {counted(len(entries), 'document')}, proposed by "
          f"{inert(actor.get('principal'))} via {inert(actor.get('client'))}, from {entries[0]['time']}")
    for e in entries:
        mark = "! changed since: approving leaves it pending" if e["changed"] else ""
        print(f"  {e['id']}  {'delete' if e['action'] == 'forget' else 'write':6} {inert(e['path'])}"
              f"  +{e['added']}/-{e['removed']}  {mark}".rstrip())
    print(inert(diff.decode("utf-8", "replace"), multiline=True), end="")
    print(f"decide it at once: amux memory review approve --session {inert(session)} (or reject --session)")
    return 0


def decide_session(decision: str, session: str, reason: str | None, as_json: bool) -> int:
    """``approve/reject --session S``: the whole change set (:func:`tools.client.changeset.decide_change_set`);
    prints what was applied and what stayed pending as a conflict; exit status 0 when all were decided, else the
    ``conflict`` status (or the first error's)."""
    from amux_memory.tools.client.changeset import decide_change_set
    from amux_memory.tools.client.inert import inert

    try:
        with _client() as client:
            result = decide_change_set(client, session, decision, reason)
    except HubError as exc:
        return fail(exc, as_json=as_json)
    status = 0
    if result["errors"]:
        status = HubError(ErrorCode(result["errors"][0]["error"]["code"]), "").exit_code
    elif result["conflicts"]:
        status = HubError(ErrorCode.CONFLICT, "").exit_code
    if not human_output(as_json):
        emit(result)
        return status
    for r in result["applied"]:
        _say_result(r)
    for c in result["conflicts"]:
        print(f"{c['proposal']}: conflict, left pending: {inert(c['path'])} changed since the proposal "
              f"(merge it with 'amux memory review approve {c['proposal']} --edit', or reject it)")
    for e in result["errors"]:
        print(f"{e['proposal']}: {e['error']['code']}: {inert(e['error']['message'])}; left pending")
    verb = "applied" if decision == "approve" else "rejected"
    print(f"change set {inert(session)}: {len(result['applied'])} {verb}, "
          f"{counted(len(result['conflicts']), 'conflict')} left pending"
          + (f", {len(result['errors'])} failed" if result["errors"] else ""))
    return status


def _targets(client: Any, ids: tuple[str, ...], path_prefix: str) -> list[str]:
    if ids and path_prefix:
        raise HubError(ErrorCode.BAD_REQUEST, "give proposal ids or --path-prefix, not both", {"field": "path_prefix"})
    if ids:
        return list(ids)
    if not path_prefix:
        raise HubError(ErrorCode.BAD_REQUEST, "name the proposals to decide: their ids, or --path-prefix PREFIX "
                       "(list them with 'amux memory review')", {"field": "id"})
    from amux_memory.tools.client.paging import review_all

    found = [str(e["id"]) for e in review_all(client, path_prefix)["proposals"]]
    if not found:
        say(f"no pending proposals under {path_prefix}; nothing decided")
    return found


CURRENT_LABEL = b"current (in memory now)"
"""The label of the document's current side in an ``approve --edit`` merge's conflict markers."""

PROPOSED_LABEL = b"proposed (by the agent)"
"""The label of the proposal's side in an ``approve --edit`` merge's conflict markers."""


def _edited(text: bytes, path: str, merged: bool = False) -> bytes:
    """``text`` after the person edited it in ``$VISUAL``/``$EDITOR`` (a file in a fresh 0700 folder).

    ``merged``: ``text`` is a three-way merge (:func:`_merge`); saving it with conflict markers left is
    refused (``bad_request``, the file kept).  Raises ``bad_request`` when the editor fails (file kept).
    """
    from amux_memory.tools.cli.edit import has_markers, run_editor

    folder = Path(tempfile.mkdtemp(prefix="amux-review-"))
    file = folder / os.path.basename(path)
    file.write_bytes(text)
    os.chmod(file, 0o600)
    why = run_editor(file)
    if why is None and merged and has_markers(file.read_bytes(), CURRENT_LABEL[:7], PROPOSED_LABEL[:8]):
        why = ("conflict markers (<<<<<<< current ... >>>>>>> proposed) are left in the file: keep what you want "
               "and remove the markers")
    if why is not None:
        raise HubError(ErrorCode.BAD_REQUEST, f"{why}; nothing was approved (the text is kept in {file})",
                       {"kept_file": str(file)})
    data = file.read_bytes()
    file.unlink()
    folder.rmdir()
    return data


def _merge(base: bytes | None, current: bytes | None, proposed: bytes,
           entry: dict[str, Any]) -> tuple[bytes, int]:
    """The three-way merge ``approve --edit`` opens when the document changed since the proposal: base → current
    (:data:`CURRENT_LABEL`) with base → proposed (:data:`PROPOSED_LABEL`), ``(merged bytes, conflicts)``; says on
    stderr what it did (the merge of ``amux memory edit``, :func:`tools.cli.edit.merge_versions`)."""
    from amux_memory.tools.cli.edit import merge_versions

    merged, conflicts = merge_versions(base or b"", current or b"", proposed, PROPOSED_LABEL, CURRENT_LABEL)
    clash = (f"{counted(conflicts, 'part')} where both changed the same lines {plural(conflicts, 'is')} marked "
             "<<<<<<< current ... >>>>>>> "
             "proposed: keep what you want and remove the markers" if conflicts
             else "the changes did not overlap: check the result and save")
    say(f"{entry['path']} changed since proposal {entry['id']} (now {str(entry['current_revision'])[:12]}): "
        f"opening the proposal merged into the current text; {clash}")
    return merged, conflicts


def decide(decision: str, ids: tuple[str, ...], path_prefix: str, *, edit: bool = False, reason: str | None = None,
           as_json: bool = False) -> int:
    """Approve or reject proposals one by one; prints each answer (a JSON list when piped) and returns 0, or
    the exit status of the first failure (the others are still tried).  A single id that fails prints the
    error as every command does (``{"error": {...}}`` when piped) with its exit status."""
    from amux_memory.protocol.requests import review_decide_params
    from amux_memory.tools.client.paging import review_text

    results: list[dict[str, Any]] = []
    status = 0
    try:
        with _client() as client:
            targets = _targets(client, ids, path_prefix)
            if edit and len(targets) != 1:
                raise HubError(ErrorCode.BAD_REQUEST, "--edit approves one proposal at a time", {"field": "edit"})
            for pid in targets:
                try:
                    content: bytes | None = None
                    params: dict[str, Any]
                    if decision == "approve":
                        proposed, meta = review_text(client, pid, "proposed")
                        entry = meta["proposal"]
                        if edit:
                            if proposed is None:
                                raise HubError(ErrorCode.BAD_REQUEST, f"proposal {pid} deletes {entry['path']}: "
                                               "there is no text to edit", {"field": "edit"})
                            if entry["changed"]:  # merge base → current with base → proposed (DESIGN.md §21)
                                base, _ = review_text(client, pid, "base")
                                current, meta = review_text(client, pid, "current")
                                entry = meta["proposal"]  # approve against the revision merged with
                                merged, _ = _merge(base, current, proposed, entry)
                                content = _edited(merged, entry["path"], merged=True)
                            else:
                                content = _edited(proposed, entry["path"])
                        params = review_decide_params(pid, "approve", expected_revision=entry["current_revision"],
                                                      content=content, reason=reason)
                    else:
                        params = review_decide_params(pid, "reject", reason=reason)
                    result = client.call("review_decide", params)
                except HubError as exc:
                    if ids and len(ids) == 1:  # one id: the documented error shape and exit status
                        return fail(exc, as_json=as_json)
                    if not status:
                        status = exc.exit_code
                    results.append({"proposal": pid, "error": exc.to_wire()})
                    if human_output(as_json):
                        from amux_memory.tools.cli.output.terminal_errors import print_error

                        print_error(exc)
                    else:
                        say(f"{pid}: {exc.code.value}: {exc.message}")
                    continue
                results.append(result)
                if human_output(as_json):
                    _say_result(result)
    except HubError as exc:
        return fail(exc, as_json=as_json)
    if not human_output(as_json):
        write_bytes(__import__("json").dumps(results, ensure_ascii=False, indent=2).encode("utf-8",
                                                                                          "backslashreplace") + b"\n")
    return status


def _say_result(r: dict[str, Any]) -> None:
    from amux_memory.tools.client.inert import inert

    if r.get("already_decided"):
        print(f"{r['proposal']}: already decided ({r['status']}); nothing changed")
    elif r["status"] == "rejected":
        print(f"{r['proposal']}: rejected; {inert(r['path'])} unchanged")
    else:
        print(f"{r['proposal']}: approved; {inert(r['path'])} is now {str(r.get('revision'))[:12]}")
    for warning in r.get("warnings") or []:
        say(f"warning: {inert(warning)}")


def approve(*proposals: str, path_prefix: str = "", session: str | None = None, edit: bool = False,
            reason: str | None = None, as_json: AsJson = False) -> int:
    """Approve proposals: each is written as proposed (compare-and-swap at the revision the Hub shows), recorded
    in history as approved by you and proposed by the agent. A document that changed since the agent read it
    is never overwritten: that approval is refused (conflict); merge with --edit.

    Parameters
    ----------
    proposals
        Proposal ids, as 'amux memory review' lists them.
    path_prefix
        Approve every pending proposal whose path starts with this instead.
    session
        Approve the whole change set of this session (a tidy run's) instead: each document by compare-and-swap
        at the revision its proposal saw; one changed since is reported as a conflict and left pending, the
        rest are applied (exit status 5 when any conflict is left; --json: {"session", "decision",
        "applied", "conflicts", "errors"}).
    edit
        Open $VISUAL / $EDITOR on the proposed text first and approve what you save (one proposal). When the
        document changed since the agent read it, the editor gets both changes merged (conflict markers where
        they overlap; saving with markers left approves nothing).
    reason
        A short note kept with the decision.
    """
    if session is not None:
        if proposals or path_prefix or edit:
            return fail(HubError(ErrorCode.BAD_REQUEST, "--session decides a whole change set: give no proposal "
                                 "ids, --path-prefix or --edit with it", {"field": "session"}), as_json=as_json)
        return decide_session("approve", session, reason, as_json)
    return decide("approve", proposals, path_prefix, edit=edit, reason=reason, as_json=as_json)


def reject(*proposals: str, path_prefix: str = "", session: str | None = None, reason: str | None = None,
           as_json: AsJson = False) -> int:
    """Reject proposals: the documents stay as they are; the decision is recorded.

    Parameters
    ----------
    proposals
        Proposal ids, as 'amux memory review' lists them.
    path_prefix
        Reject every pending proposal whose path starts with this instead.
    session
        Reject the whole change set of this session (a tidy run's) instead.
    reason
        A short note kept with the decision.
    """
    if session is not None:
        if proposals or path_prefix:
            return fail(HubError(ErrorCode.BAD_REQUEST, "--session decides a whole change set: give no proposal "
                                 "ids or --path-prefix with it", {"field": "session"}), as_json=as_json)
        return decide_session("reject", session, reason, as_json)
    return decide("reject", proposals, path_prefix, reason=reason, as_json=as_json)
