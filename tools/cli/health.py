"""``amux memory health``: what rots in memory, and what to do about each finding (DESIGN.md §23).

One report (:func:`tools.typed.health.full_report`: the Hub's ``health`` plus
the typed-memory lint), printed as ``lint`` prints its problems: in a terminal
one line per finding, grouped by code, each with its next step; piped (or with
``--json``) the report as JSON.  Exit :attr:`ExitStatus.PROBLEMS_FOUND` (20)
when there is a finding, 0 when none, as ``lint`` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from cyclopts import Parameter

from amux_memory.protocol.errors import ExitStatus, HubError
from amux_memory.tools.cli.options import AsJson, parse_today
from amux_memory.tools.cli.output.contract import emit, fail, human_output, write_bytes

Repo = Annotated[Path | None, Parameter(
    name="--repo", help="Also check the citations of this git repository's notes (projects/IDENTITY/ in your "
                        "scope and mounts) against its work tree; default: the current directory's repository, "
                        "when it has notes.")]
"""``--repo DIR`` of ``amux memory health`` and ``tidy`` (DESIGN.md §24)."""


def health(*, path_prefix: str = "", repo: Repo = None, as_json: AsJson = False, today: str | None = None) -> int:
    """Report what rots in memory: duplicates, dangling links, stale notes, limits, credentials, lint.

    Codes: duplicate (one paragraph of 2+ lines or 80+ characters in several
    documents), near_duplicate (paragraphs 90 % alike), dangling_link (a
    relative .md link or [[name]] to a document that does not exist),
    stale (unchanged for memory.stale_days, default 180), entry_near_limit
    (MEMORY.md at 90 % of 2 KiB or 64 lines), scope_near_quota (a scope at
    90 % of its documents or bytes), secret (a stored credential, shown
    redacted as 'amux memory scan' shows it), and lint_CODE for what
    'amux memory lint' finds in typed topics. Team mounts (@NAME/) are
    included for their members.

    In a git work tree (--repo DIR, or the current directory when the
    repository has notes), every citation PATH#LSTART-LEND@COMMIT in the
    notes under projects/IDENTITY/ (see 'amux memory project'), in your
    scope and every mount, is checked against the work tree, uncommitted
    changes included: source_changed (the cited lines changed; the finding
    carries their diff), source_moved (unchanged but elsewhere: the finding
    says how the citation should now read), source_gone (file or lines
    deleted), source_unknown (the commit or file is not in this repository).

    In a terminal: the findings grouped by code, each with its documents and
    lines and the next step. Piped or with --json: {"findings": [{"code",
    "paths", "lines", "message", "next"}], "counts": {code: n}, "documents",
    "elapsed_ms"}; with a repository also "repository" and "citations", and
    citation findings carry "citation", "now" (the citation to write instead;
    empty while the file has uncommitted changes: commit, then cite) and
    "diff". Exit 20 when there are findings, 0 when none.

    Parameters
    ----------
    path_prefix
        Only documents whose path starts with this (e.g. projects/ or @web/).
    today
        The date lint judges feedback expiry by, YYYY-MM-DD (default: today).
    """
    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.client.source_health import with_sources
    from amux_memory.tools.typed.health import full_report

    try:
        day = parse_today(today)
        with HubClient() as client:
            report = full_report(client, path_prefix, day)
            report = with_sources(client, report, list(client.hello.get("mounts") or []),
                                  str(repo) if repo is not None else None, path_prefix)
    except HubError as exc:
        return fail(exc, as_json=as_json)
    if human_output(as_json):
        write_bytes(render_text(report).encode("utf-8", "backslashreplace"))
    else:
        emit(report)
    return ExitStatus.PROBLEMS_FOUND if sum(report["counts"].values()) else 0


def render_text(report: dict[str, Any]) -> str:
    """The report for a person: per code a heading with its count, then ``path:start-end: message`` and
    ``next: ...`` per finding; a closing summary.  Every text from memory is made inert (DESIGN.md §17)."""
    from amux_memory.tools.client.inert import inert
    from amux_memory.tools.client.wording import counted

    out: list[str] = []
    findings = report.get("findings") or []
    counts: dict[str, int] = report.get("counts") or {}
    for code in dict.fromkeys(f["code"] for f in findings):
        group = [f for f in findings if f["code"] == code]
        out.append(f"{code} ({counts.get(code, len(group))})")
        for f in group:
            places = [inert(p) + (f":{a}" if a == b else f":{a}-{b}") if i < len(f["lines"]) and f["lines"][i]
                      else inert(p) for i, (p, (a, b)) in enumerate(zip(f["paths"], f["lines"] or
                                                                         [[0, 0]] * len(f["paths"]), strict=False))]
            where = ", ".join(places) if places else "-"
            out.append(f"  {where}: {inert(f['message'])}")
            out.append(f"    next: {inert(f['next'])}")
            # At newlines only: splitlines() takes \r\n (and U+2028, \x0c, ...) for a line end, hiding a CRLF change.
            out.extend(f"      {inert(line, multiline=True)}" for line in str(f.get("diff") or "").split("\n") if line)
    total, shown = sum(counts.values()), len(findings)
    if total > shown:
        out.append(f"{total - shown} more not shown: narrow with --path-prefix, or fix these and run it again")
    summary = ", ".join(f"{code} {n}" for code, n in counts.items())
    out.append(f"{counted(total, 'finding')} in {counted(int(report.get('documents') or 0), 'document')}"
               + (f" ({summary})" if summary else ""))
    cited, repository = report.get("citations"), report.get("repository")
    if cited and repository:
        out.append(f"{counted(cited['citations'], 'citation')} in {counted(cited['notes'], 'note')} of "
                   f"{inert(repository['path'])} checked against {inert(repository['root'])}; "
                   f"{counted(len(cited['stale_notes']), 'note')} "
                   f"{'cites' if len(cited['stale_notes']) == 1 else 'cite'} code that changed")
    return "\n".join(out) + "\n"
