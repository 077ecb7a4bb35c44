"""``amux memory history|log|diff|restore|purge``: every change the Hub kept, and the way back (DESIGN.md §15).

``history`` and ``log`` print one page of the Hub's answer (pass
``next_cursor`` back as ``--cursor`` for the next); ``restore`` and
``purge`` are one Hub call each; ``diff`` exports two versions and compares
them here (:mod:`tools.client.textdiff`).  Like :mod:`tools.cli.memory` these
import only the blocking client, and print with :mod:`tools.cli.output.contract`:
JSON when piped or with ``--json``, aligned tables in a terminal
(:mod:`tools.cli.output.versions`, DESIGN.md §17), errors from the closed set with
their exit status (DESIGN.md §8).
"""

from __future__ import annotations

from typing import Annotated, Any

from cyclopts import Parameter

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.cli.memory import call_hub
from amux_memory.tools.cli.options import AsJson
from amux_memory.tools.cli.output.contract import emit, fail, fail_quietly, human_output, say, write_shown
from amux_memory.tools.cli.output.renderer_choice import RendererChoice
from amux_memory.tools.client.when import DURATION_FORMS
from amux_memory.tools.client.wording import counted

HISTORY_OFF = ("history is off on this Hub (memory.history = false): nothing new is recorded, what is stored is "
               "shown; 'amux system config set memory.history true' and a Hub restart turn it back on")
"""The notice ``history`` and ``log`` print on stderr when the Hub's ``hello`` says ``history: false``."""


def read_history(method: str, params: dict[str, Any], view: RendererChoice, *, as_json: bool = False) -> int:
    """One ``history`` or ``log`` call, printed (JSON, or ``view`` in a terminal); a notice on stderr when the
    Hub records no history.

    Returns 0, or the error's exit status after :func:`tools.cli.output.contract.fail`.
    """
    from amux_memory.tools.client.blocking import HubClient

    try:
        with HubClient() as client:
            result = client.call(method, params)
            recording = client.hello.get("history")
    except HubError as exc:
        return fail(exc, as_json=as_json)
    emit(result, view, as_json=as_json)
    if recording is False:
        say(HISTORY_OFF)
    return 0


def history(path: str, /, *, limit: int = 20, cursor: str = "", as_json: AsJson = False) -> int:
    """Every stored version of one document, newest first, with who made each change.

    In a terminal, an aligned table; piped or with --json, {"path",
    "versions": [{"revision", "time", "action", "actor": {"principal",
    "client", "binding", "session"}, "bytes", "lines", "added", "removed"}],
    "next_cursor"}. action is create, update, forget (a
    tombstone: revision "absent"), restore (with restored_from) or external
    (the file was edited by hand; the Hub records what is on disk first, so
    the list always ends at the document as it is now). time is UTC; added and
    removed count lines against the version before. Pages hold at most 8 KiB:
    pass next_cursor back as --cursor for older versions.

    Parameters
    ----------
    path
        Logical path of the document, e.g. MEMORY.md.
    limit
        Versions per page, 1-100.
    cursor
        The next_cursor of the previous page ("" for the newest).
    """
    from amux_memory.protocol.requests import history_params

    again = ["amux", "memory", "history", path, *(["--limit", str(limit)] if limit != 20 else [])]
    return read_history("history", history_params(path, limit=limit, cursor=cursor),
                        RendererChoice("history", {"again": again}), as_json=as_json)


Since = Annotated[str | None, Parameter(
    name="--since", help="Only changes at or after WHEN: an ISO date/time (2026-12-01, 2026-12-01T08:00 local "
                         f"time, 2026-12-01T08:00Z UTC) or a duration back from now, such as 24h or 7d: "
                         f"{DURATION_FORMS}.")]
"""``--since WHEN`` of ``amux memory log`` (:func:`tools.client.when.parse_since`)."""


def log(*, path_prefix: str = "", since: Since = None, limit: int = 50, cursor: str = "",
        as_json: AsJson = False) -> int:
    """What changed in the whole memory scope, newest first: "what did my agents change today?".

    In a terminal, an aligned table; piped or with --json, {"changes":
    [...], "next_cursor"}, each change shaped like a history version plus
    its "path". Pages hold at most 8 KiB: pass
    next_cursor back as --cursor for older changes.

    Parameters
    ----------
    path_prefix
        Only documents whose path starts with this, e.g. projects/amux/.
    limit
        Changes per page, 1-200.
    cursor
        The next_cursor of the previous page ("" for the newest).
    """
    from amux_memory.protocol.requests import log_params
    from amux_memory.tools.client.when import parse_since

    try:
        since_wire = parse_since(since) if since is not None else None
    except HubError as exc:
        return fail(exc, as_json=as_json)
    again = ["amux", "memory", "log", *(["--since", since_wire] if since_wire is not None else []),
             *(["--path-prefix", path_prefix] if path_prefix else []),
             *(["--limit", str(limit)] if limit != 50 else [])]
    return read_history("log", log_params(path_prefix=path_prefix, since=since_wire, limit=limit, cursor=cursor),
                        RendererChoice("log", {"again": again}), as_json=as_json)


def diff(
    path: str,
    /,
    *,
    from_revision: Annotated[str, Parameter(name="--from")],
    to_revision: Annotated[str | None, Parameter(name="--to")] = None,
    as_json: Annotated[bool, Parameter(name="--json", negative="")] = False,
) -> int:
    """A unified diff of one document from one version to another.

    Both versions are read whole and compared here, line by line. The text
    applies with patch ('amux memory export PATH --revision FROM > f; patch f
    < the.diff' gives the newer version); it is empty when the versions are
    equal. A stored version that was pruned or purged is not_found, saying
    which. On error stdout stays empty (text) or holds {"error": ...}
    (--json).

    Parameters
    ----------
    path
        Logical path of the document.
    from_revision
        The older version's revision (from 'amux memory history'); "absent"
        compares from an empty document.
    to_revision
        The newer version's revision (default: the document as it is now;
        "absent" if it was forgotten).
    as_json
        Print {"path", "from", "to", "added", "removed", "hunks": [{"old_start",
        "old_lines", "new_start", "new_lines", "lines"}]} instead of the text.
    """
    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.client.paging import read_version
    from amux_memory.tools.client.textdiff import diff_hunks, hunks_as_data, line_counts, render_unified

    try:
        with HubClient() as client:
            old, old_rev = read_version(client, path, from_revision)
            new, new_rev = read_version(client, path, to_revision)
    except HubError as exc:
        return fail(exc, as_json=True) if as_json else fail_quietly(exc)
    hunks = diff_hunks(old, new)
    if as_json:
        added, removed = line_counts(hunks)
        emit({"path": path, "from": old_rev, "to": new_rev, "added": added, "removed": removed,
              "hunks": hunks_as_data(hunks)})
    else:
        write_shown(render_unified(hunks, f"a/{path}\t{old_rev}", f"b/{path}\t{new_rev}"), RendererChoice("diff"))
    return 0


def restore(path: str, /, *, revision: str, expected_revision: str | None = None, allow_secret: bool = False,
            as_json: AsJson = False) -> int:
    """Write an old version back as the document (undo), if it still has the expected revision.

    A normal compare-and-swap write of that version's bytes, recorded in the
    history as a restore with restored_from; a stale --expected-revision is a
    conflict and changes nothing. The rewrite guard does not apply (bringing
    back a long version over a short one is the point); quotas do. Prints the
    upsert result plus "restored_from".

    Parameters
    ----------
    path
        Logical path of the document.
    revision
        The stored version to bring back (from 'amux memory history'); a
        forget's tombstone ("absent") cannot be restored: forget the document
        instead.
    expected_revision
        Required: the document's current revision (from show or history), or
        "absent" to bring back a forgotten document.
    allow_secret
        Restore even though the version holds a credential (the Hub otherwise
        refuses with secret_detected); the history records the override.
    """
    if expected_revision is None:
        from amux_memory.tools.cli.memory import missing_revision

        return fail(missing_revision("restore", path), as_json=as_json)
    from amux_memory.protocol.requests import restore_params

    return call_hub("restore", restore_params(path, revision, expected_revision, allow_secret=allow_secret),
                    RendererChoice("upsert"), as_json=as_json)


def purge(
    path: str,
    /,
    *,
    revision: str | None = None,
    all_versions: Annotated[bool, Parameter(name="--all", negative="")] = False,
    as_json: AsJson = False,
) -> int:
    """Erase stored versions of one document from the history, for good (a secret saved by mistake).

    Give exactly one of --revision (one stored version) or --all (every
    stored version and tombstone of PATH). The bytes are removed from every
    file of the history store, compressed or packed copies included; there is
    no undo. It never touches the live document: to get rid of the text
    everywhere, first forget the document (or rewrite it without the text),
    then purge its history. A version the document still holds is refused
    (bad_request), so --all needs the document forgotten first. Prints
    {"path", "erased": [{"revision", "time", "action", "bytes"}]}, what was
    erased.

    Parameters
    ----------
    path
        Logical path of the document.
    revision
        Erase this one stored version. The document's current revision cannot
        be purged while the document still holds it.
    all_versions
        Erase every stored version and tombstone of PATH.
    """
    if (revision is None) == (not all_versions):
        return fail(HubError(ErrorCode.BAD_REQUEST, "memory purge: give exactly one of --revision REV or --all "
                             "(see 'amux memory purge --help')", {"field": "revision"}), as_json=as_json)
    from amux_memory.protocol.requests import purge_params
    from amux_memory.tools.client.blocking import HubClient

    try:
        with HubClient() as client:
            result = client.call("purge", purge_params(path, revision=revision, all_versions=all_versions))
    except HubError as exc:
        return fail(exc, as_json=as_json)
    emit(result, RendererChoice("purge"), as_json=as_json)
    if human_output(as_json):
        return 0  # the rendered line already says it
    erased: list[Any] = result.get("erased") or []
    say(f"erased {counted(len(erased), 'stored version')} of {path} from the history; "
        "the live document was not touched")
    return 0
