"""``amux hub scope copy SOURCE DESTINATION``: the operator copies one scope into another (DESIGN.md §7.8).

The copy runs in the Hub (method ``scope_copy``, page after page), under
each scope's lock, with history naming the operator and where each document
came from; only the Hub's own OS account, on its Unix socket, may call it.
The command connects to the socket of ``--home`` (else ``AMUX_HOME``, else
``~/.amux``) without a token, so the kernel names the caller.

This module also words what a change of ``memory.isolation`` left behind
(:func:`unreached_report`), for ``amux hub status`` and ``amux doctor``,
from :func:`hub.access.config.unreached_scopes` run in-process on the home.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from cyclopts import Parameter

from amux_memory.protocol.errors import HubError
from amux_memory.tools.cli.options import Home, resolve_home
from amux_memory.tools.cli.output.contract import fail
from amux_memory.tools.cli.output.plain import Json, show


def copy_all(client: Any, source: str, destination: str, *, move: bool = False,
             path_prefixes: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every page of ``scope_copy`` from ``source`` to ``destination`` (``move``: forgetting each source document
    the destination now holds; ``path_prefixes``: only the documents under one of them) on a connected client,
    joined: ``{source, destination, move, path_prefixes, copied, skipped, incomplete, incomplete_reasons,
    unreadable}``.

    Raises the Hub's :class:`HubError`; pages already answered stay copied (a second run skips them as
    ``identical``).
    """
    from amux_memory.protocol.requests import scope_copy_params

    joined: dict[str, Any] = {"source": source, "destination": destination, "move": move,
                              "path_prefixes": list(path_prefixes), "copied": [], "skipped": [], "incomplete": False,
                              "incomplete_reasons": [], "unreadable": []}
    cursor = ""
    while True:
        page = client.call("scope_copy", scope_copy_params(source, destination, cursor=cursor, move=move,
                                                           path_prefixes=path_prefixes))
        joined["copied"] += page.get("copied") or []
        joined["skipped"] += page.get("skipped") or []
        joined["incomplete"] = joined["incomplete"] or bool(page.get("incomplete"))
        for key in ("incomplete_reasons", "unreadable"):
            joined[key] += [item for item in page.get(key) or [] if item not in joined[key]]
        following = page.get("next_cursor")
        if not following or following == cursor:
            return joined
        cursor = following


SKIP_REASONS = {
    "identical": "already there, the same text",
    "exists": "a different document already has this path there (never overwritten)",
    "gone": "deleted while the copy ran",
}
"""What a ``skipped`` entry's ``reason`` means, in words; any other reason is an error code with its message."""


def copy_lines(doc: dict[str, Any]) -> list[str]:
    """The readable report of :func:`copy_all`: a summary line, the skipped documents and why, the copied ones
    (every path made inert: an agent may have named them)."""
    from amux_memory.tools.cli.output.plain import table
    from amux_memory.tools.client.inert import inert
    from amux_memory.tools.client.wording import counted

    copied, skipped = doc["copied"], doc["skipped"]
    under = ", ".join(inert(prefix) for prefix in doc.get("path_prefixes") or [])
    lines = [f"copied {counted(len(copied), 'document')} " + (f"under {under} " if under else "")
             + f"from {inert(doc['source'])} to {inert(doc['destination'])}"
             + (f"; skipped {len(skipped)}" if skipped else "")
             + ("; history records each as copied by you, naming its origin and who wrote it" if copied else "")]
    if doc.get("move"):
        moved = sum(1 for entry in [*copied, *skipped] if entry.get("moved"))
        kept = sum(1 for entry in [*copied, *skipped] if entry.get("moved") is False)
        lines.append(f"forgot {counted(moved, 'document')} in {inert(doc['source'])} (the destination holds them)"
                     + (f"; kept {kept} that changed meanwhile: run it again" if kept else ""))
    if skipped:
        rows: list[list[object]] = [["SKIPPED", "WHY"]]
        rows += [[s.get("path"), SKIP_REASONS.get(str(s.get("reason")), f"{s.get('reason')}: {s.get('message', '')}")]
                 for s in skipped]
        lines += [f"  {line}" for line in table(rows)]
    if copied:
        lines += [f"  copied  {inert(c.get('path'))}" for c in copied]
    if not copied and not skipped:
        lines.append(f"  {inert(doc['source'])} holds no documents" + (f" under {under}" if under else ""))
    if doc["incomplete"]:
        reasons = ", ".join(inert(r) for r in doc["incomplete_reasons"]) or "a bound"
        lines.append(f"incomplete: the walk of {inert(doc['source'])} stopped early ({reasons}); unreadable: "
                     f"{', '.join(inert(u) for u in doc['unreadable']) or 'none'}")
    return lines


PathPrefixes = Annotated[list[str] | None, Parameter(name="--path-prefix", consume_multiple=False, negative="")]
"""``--path-prefix PREFIX``, repeatable: only the documents whose path starts with one of them."""


def scope_copy(source: str, destination: str, /, *, move: bool = False, path_prefix: PathPrefixes = None,
               home: Home = None, json: Json = False) -> int:
    """Copy every document of one scope into another, through the running Hub: for the Hub's operator.

    SOURCE and DESTINATION are 'global', 'principal:NAME' or 'team:NAME'
    (e.g. after switching memory.isolation from off to user: amux hub scope
    copy global principal:alice). Each document is created at the same path
    in DESTINATION, under the Hub's locks, with history naming you, where
    it came from and who wrote it; one that already exists there is skipped, never
    overwritten; nothing is deleted from SOURCE unless --move. Only the OS account the Hub runs as may run it,
    on the Hub's host (no AMUX_TOKEN is sent). Piped or with --json:
    {"source", "destination", "move", "copied": [{path, revision, bytes,
    moved?}], "skipped": [{path, reason, revision?, message?, moved?}],
    "incomplete", "incomplete_reasons", "unreadable", "path_prefixes"}; reason is identical,
    exists, gone or an error code. Exit status 0 when it ran (skipped
    documents included), the error's otherwise.

    Parameters
    ----------
    source
        The scope to copy from: global, principal:NAME or team:NAME.
    destination
        The scope to copy into.
    move
        Then forget each document of SOURCE that DESTINATION now holds (copied, or already there with the same
        text), its history naming where it went; one held there differently stays in SOURCE, for you to merge.
    path_prefix
        Only the documents whose path starts with this (repeat it for several: --path-prefix projects/
        --path-prefix runbooks/), so a person's own preferences (MEMORY.md, prefs/) need not become the team's.
    """
    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.lifecycle.control import home_socket

    try:
        with HubClient(home_socket(resolve_home(home)), token="", binding="") as client:
            doc = copy_all(client, source, destination, move=move, path_prefixes=tuple(path_prefix or ()))
    except HubError as exc:
        return fail(exc, as_json=json)
    show(doc, lambda: copy_lines(doc), json_flag=json)
    return 0


def unreached_report(home: Path, isolation: str, operator: str) -> list[dict[str, Any]] | None:
    """The scopes of ``home`` holding documents nobody reaches under ``isolation``
    (:func:`hub.access.config.unreached_scopes`), as JSON-ready maps ``{directory, binding, documents, command}``;
    None when this user cannot read the home's memory folder or registry (then nothing can be said)."""
    from dataclasses import asdict

    from amux_memory.hub.access.config import unreached_scopes

    try:
        return [asdict(u) for u in unreached_scopes(home, isolation, operator)]
    except (OSError, HubError):
        return None


def unreached_line(entry: dict[str, Any], isolation: str) -> str:
    """One line for a person about an :func:`unreached_report` entry: where, how many, and the command (made
    inert: a principal's name is the registry's, a folder's the disk's)."""
    from amux_memory.tools.client.inert import inert
    from amux_memory.tools.client.wording import counted

    where = inert(entry["binding"] or entry["directory"])
    head = (f"memory/{inert(entry['directory'])} ({where}) holds {counted(entry['documents'], 'document')} nobody "
            f"reaches with isolation {inert(isolation)}")
    part = " (add --path-prefix PREFIX, repeatable, to bring only part: one person's notes need not become a team's)"
    if entry["command"]:
        return f"{head}; bring them over with '{inert(entry['command'])}'" + (part if entry["binding"] == "global"
                                                                             else "")
    if entry["binding"] == "global":
        return (f"{head}; several people shared them: make a team of them ('amux hub team add NAME'), then bring "
                f"them over with 'amux hub scope copy --move global team:NAME'{part}")
    return (f"{head}; no known principal's name hashes to it: bring them over with 'amux hub scope copy --move "
            "principal:NAME global' for the principal it belonged to")
