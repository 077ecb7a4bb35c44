"""The citation findings of a repository's notes, beside its work tree (DESIGN.md §23, §24).

:func:`source_findings` reads the notes under the project's path (``projects/<identity>/``) in the caller's scope
and in each of its team mounts (``@TEAM/projects/<identity>/``) through the Hub, finds their citations
(:mod:`tools.client.citations`) and checks them against the work tree (:mod:`tools.client.source_check`): each
citation that is not ``ok`` becomes a health finding, in the shape of the Hub's ``health`` answer plus
``citation``, ``now`` and ``diff``::

    {"code": "source_changed", "paths": [note], "lines": [[line, line]], "message", "next",
     "citation", "now", "diff"}

The Hub never sees a work tree: this runs in the CLI's process (``amux memory health --repo``, ``amux memory
tidy --repo``, ``amux launch``) and in ``amux ui`` for the page of one document.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.wording import counted, plural
from amux_memory.tools.client.citations import Citation, find_citations
from amux_memory.tools.client.project import Project, git
from amux_memory.tools.client.source_check import Verdict, check_citations

if TYPE_CHECKING:
    from amux_memory.tools.client.paging import Caller

CODES = {"changed": "source_changed", "moved": "source_moved", "gone": "source_gone", "unknown": "source_unknown"}
"""The health code of each state of a citation that is not ``ok``."""


def note_prefixes(project: Project, mounts: list[dict[str, Any]]) -> list[str]:
    """Where the project's notes are: its path in the caller's scope, then in each mount (``@web/projects/...``),
    in the order of ``mounts`` (``hello``'s ``[{mount, role, review}]``)."""
    labels = [str(m.get("mount", "")) for m in mounts if str(m.get("mount", "")).startswith("@")]
    return [project.path] + [label + project.path for label in labels]


def project_notes(client: Caller, project: Project, mounts: list[dict[str, Any]],
                  deadline: float | None = None) -> list[tuple[str, str]]:
    """``(path as the caller names it, text)`` of every note under the project's paths (:func:`note_prefixes`).
    Raises ``unavailable`` past ``deadline`` (a ``time.monotonic()`` value), and what the Hub answers."""
    from amux_memory.tools.client.paging import export_document, list_all

    notes = []
    for prefix in note_prefixes(project, mounts):
        try:
            entries, _incomplete = list_all(client, prefix)
        except HubError as exc:
            if exc.code is ErrorCode.NOT_FOUND:
                continue  # a mount left meanwhile
            raise
        for entry in entries:
            if deadline is not None and time.monotonic() > deadline:
                raise HubError(ErrorCode.UNAVAILABLE, "reading the project's notes ran past its time")
            path = str(entry["path"])
            if not path.endswith(".md"):
                continue
            try:
                content, _revision = export_document(client, path)
            except HubError as exc:
                if exc.code is ErrorCode.NOT_FOUND:
                    continue  # forgotten meanwhile
                raise
            notes.append((path, content.decode("utf-8", "replace")))
    return notes


def offered(verdict: Verdict) -> str:
    """The citation a finding offers in place of the old one (``""`` for none): ``verdict.now``, unless its file has
    uncommitted changes, whose work tree line numbers at ``HEAD`` would name other lines (commit, then cite)."""
    return "" if verdict.uncommitted else verdict.now


def finding(note: str, verdict: Verdict, shallow: bool = False) -> dict[str, Any]:
    """One health finding for a citation in ``note`` that is not ``ok``, with its next step; ``shallow``: the
    repository is a shallow clone, whose missing commits a plain ``git fetch`` does not bring."""
    c = verdict.citation
    cited = c.text
    now = find_citations(verdict.now)
    location = (now[0].path + (f":{now[0].start}-{now[0].end}" if now[0].start else "")) if now else c.path
    message = f"cites {cited}: {verdict.why}"
    if verdict.state == "changed" and (verdict.uncommitted or not verdict.now):
        nxt = (f"read the diff and the code now at {location}, correct what {note} says, then cite the lines "
               f"again from the repository's root (amux memory cite {location})")
    elif verdict.state == "changed":
        message += f"; once corrected, it should read {verdict.now}"
        nxt = (f"read the diff and the code now at {location}, correct what {note} says about those lines, then "
               f"replace {cited} with {verdict.now} (as amux memory cite {location} gives it)")
    elif verdict.state == "moved" and verdict.uncommitted:
        nxt = (f"commit {now[0].path if now else c.path}, then replace {cited} in {note} with what amux memory cite "
               f"{location} gives (nothing else changed)")
    elif verdict.state == "moved":
        message += f"; it should now read {verdict.now}"
        nxt = f"replace {cited} with {verdict.now} in {note} (nothing else changed)"
    elif verdict.state == "gone":
        nxt = (f"drop what {note} says about that code, or cite where it went "
               f"(git log --follow --oneline -- {c.path} shows where it went)")
    elif verdict.reason == "path":
        nxt = (f"read the code {note} meant there and cite it from the repository's root (amux memory cite PATH or "
               "PATH:START-END gives the citation), or drop the citation")
    elif verdict.reason == "folder":
        nxt = (f"cite the files in {c.path} that {note} relies on (amux memory cite {c.path}/FILE), or drop the "
               "citation")
    elif verdict.reason == "range":
        nxt = (f"read {c.path} at {c.commit} (git show {c.commit}:{c.path}) for the lines {note} meant, then cite "
               f"them as they are now (amux memory cite {c.path}:START-END)")
    elif shallow and verdict.reason == "commit":
        nxt = (f"git fetch --unshallow (this clone is shallow: it has no commit before its first), or read the code "
               f"and cite it again: amux memory cite {location}" + (f":{c.start}-{c.end}" if c.start else ""))
    else:
        nxt = (f"git fetch (the commit may be on a branch or remote you have not fetched), or read the code and "
               f"cite it again: amux memory cite {location}" + (f":{c.start}-{c.end}" if c.start else ""))
    out: dict[str, Any] = {"code": CODES[verdict.state], "paths": [note], "lines": [[c.line, c.line]] if c.line else [],
                           "message": message, "next": nxt, "citation": cited, "now": offered(verdict)}
    if verdict.diff:
        out["diff"] = verdict.diff
    return out


def check_paths(root: Path, citations: list[Citation]) -> list[Verdict]:
    """:func:`tools.client.source_check.check_citations` of ``citations`` (in order; a path that names no file of
    the repository, :func:`tools.client.citations.path_problem`, is ``unknown`` there without asking git).  A git
    failure is ``unavailable`` with a next step about the repository (the code's own is about the Hub)."""
    try:
        return check_citations(root, citations)
    except HubError as exc:
        if exc.code is not ErrorCode.UNAVAILABLE or exc.refined is not None:
            raise
        quoted = shlex.quote(str(root))
        raise HubError(exc.code, exc.message, exc.data, next_step=(
            f"See what git says about the repository (git -C {quoted} status; git -C {quoted} fsck for a broken "
            "one), then run the command again.")) from None


def check_notes(project: Project, notes: list[tuple[str, str]]) -> dict[str, Any]:
    """The citations of ``notes`` (``(path, text)``) checked against the project's work tree:
    ``{findings, counts, notes, citations, stale_notes, verdicts}``; ``verdicts`` maps each note to its
    ``[Verdict]`` (for the web page)."""
    cited: list[tuple[str, Citation]] = [(path, c) for path, text in notes for c in find_citations(text)]
    verdicts = check_paths(project.root, [c for _, c in cited])
    shallow = any(v.state == "unknown" for v in verdicts) and git(
        project.root, ["rev-parse", "--is-shallow-repository"]).stdout.strip() == b"true"
    findings = [finding(path, v, shallow) for (path, _), v in zip(cited, verdicts, strict=True) if v.state != "ok"]
    counts: dict[str, int] = {}
    for f in findings:
        counts[f["code"]] = counts.get(f["code"], 0) + 1
    by_note: dict[str, list[Verdict]] = {}
    for (path, _), v in zip(cited, verdicts, strict=True):
        by_note.setdefault(path, []).append(v)
    return {"findings": findings, "counts": counts, "notes": len(notes), "citations": len(cited),
            "stale_notes": sorted({f["paths"][0] for f in findings}), "verdicts": by_note}


def source_findings(client: Caller, project: Project, mounts: list[dict[str, Any]],
                    deadline: float | None = None, path_prefix: str = "") -> dict[str, Any]:
    """:func:`check_notes` over the project's notes as the caller sees them (:func:`project_notes`), those under
    ``path_prefix`` only, plus ``repository`` (the project's identity and path) and ``elapsed_ms``; without
    ``verdicts``."""
    started = time.perf_counter()
    notes = [(path, text) for path, text in project_notes(client, project, mounts, deadline)
             if path.startswith(path_prefix)]
    result = check_notes(project, notes)
    del result["verdicts"]
    result["repository"] = {"identity": project.identity, "path": project.path, "root": str(project.root)}
    result["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 3)
    return result


def merge_into(report: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """``report`` (a health report) with ``part``'s findings and counts added, and ``repository`` and
    ``citations`` (``{notes, citations, stale_notes}``) beside them."""
    counts = dict(report.get("counts") or {})
    for code, n in part["counts"].items():
        counts[code] = counts.get(code, 0) + n
    return {**report, "findings": list(report.get("findings") or []) + part["findings"], "counts": counts,
            "repository": part["repository"],
            "citations": {"notes": part["notes"], "citations": part["citations"], "stale_notes": part["stale_notes"],
                          "elapsed_ms": part["elapsed_ms"]}}


def with_sources(client: Caller, report: dict[str, Any], mounts: list[dict[str, Any]], repo: str | None,
                 path_prefix: str = "") -> dict[str, Any]:
    """``report`` with the citation findings of a repository's notes (:func:`merge_into`), those under
    ``path_prefix`` only.  ``repo``: a directory of the work tree (a failure to find its repository raises
    ``not_found``), or None for the current directory, quietly left out when it is not in a work tree or the
    project has no note."""
    from amux_memory.tools.client.project import find_project

    try:
        project = find_project(repo if repo is not None else ".")
    except HubError:
        if repo is not None:
            raise
        return report
    part = source_findings(client, project, mounts, path_prefix=path_prefix)
    if repo is None and not part["notes"]:
        return report
    return merge_into(report, part)


LAUNCH_CHECK_SECONDS = 2.0
"""How long ``amux launch`` waits for the citation check of the work tree's repository before it starts the agent
without it, saying so (s)."""


def launch_notice(directory: str, agent: str, seconds: float = LAUNCH_CHECK_SECONDS) -> str:
    """The line ``amux launch`` prints on the terminal before the agent starts (DESIGN.md §24): how many of the
    repository's notes cite code that changed, with the commands that show and tidy them; ``""`` outside a work
    tree, with no such note, or when the Hub cannot be asked; a line saying the check was skipped when it takes
    longer than ``seconds`` (it goes on in a daemon thread, which the agent's start does not wait for)."""
    import threading

    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.client.project import find_project

    try:
        project = find_project(directory)
    except HubError:
        return ""
    answer: list[dict[str, Any]] = []

    def work() -> None:
        try:
            with HubClient() as client:
                answer.append(source_findings(client, project, list(client.hello.get("mounts") or []),
                                              time.monotonic() + seconds))
        except (HubError, OSError):
            pass

    thread = threading.Thread(target=work, name="amux-citation-check", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        return (f"amux: the check of {project.path}'s citations was skipped: it takes longer than {seconds:g} s; "
                f"run it with: amux memory health --repo {project.root}")
    if not answer or not answer[0]["stale_notes"]:
        return ""
    part = answer[0]
    changed = [f for f in part["findings"] if f["code"] != CODES["unknown"]]
    unknown = {f["paths"][0] for f in part["findings"]} - {f["paths"][0] for f in changed}
    said = []
    if changed:
        said.append(f"{len({f['paths'][0] for f in changed})} of {part['notes']} notes of {project.path} cite code "
                    f"that changed ({len(changed)} of {part['citations']} citations)")
    if unknown:
        n = len(unknown)
        whose = counted(n, "other note") if changed else f"{n} of {counted(part['notes'], 'note')} of {project.path}"
        said.append(f"{whose} only {plural(n, 'has')} citations this clone cannot check")
    return (f"amux: {'; '.join(said)}; see: amux memory health --repo {project.root}; tidy them: amux memory tidy "
            f"{agent} --repo {project.root}")


def document_citations(path: str, text: str, directory: str) -> dict[str, Any]:
    """Each citation of one document with its state, for the web page's document view (DESIGN.md §20, §24):
    ``{checked, repository, root, rows: [{citation, line, state, now, why, diff}]}``.  The citations are checked
    when ``directory`` (where ``amux ui`` runs) is in the work tree of the repository whose notes hold ``path``
    (``projects/<identity>/…``, also in a mount); otherwise ``checked`` is false and each state ``unchecked``.
    ``rows`` is empty for a document without citations.  Raises what the check raises."""
    from amux_memory.tools.client.project import find_project

    citations = find_citations(text)
    if not citations:
        return {"checked": False, "repository": "", "root": "", "rows": []}
    try:
        project: Project | None = find_project(directory)
    except HubError:
        project = None
    own = path.split("/", 1)[1] if path.startswith("@") and "/" in path else path
    if project is None or not own.startswith(project.path):
        return {"checked": False, "repository": project.path if project else "", "root": "",
                "rows": [{"citation": c.text, "line": c.line, "state": "unchecked", "now": "", "why": "",
                          "diff": ""} for c in citations]}
    verdicts = check_paths(project.root, citations)
    return {"checked": True, "repository": project.path, "root": str(project.root),
            "rows": [{"citation": v.citation.text, "line": v.citation.line, "state": v.state, "now": offered(v),
                      "why": v.why, "diff": v.diff} for v in verdicts]}
