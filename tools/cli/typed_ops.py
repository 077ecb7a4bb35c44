"""``amux memory archive`` and ``amux memory import``: typed-memory upkeep.

Both work on the Hub scope (through the Hub, like every data command) or, with
``--project DIR``, on ``DIR/.agent/memory/``.  Output is one JSON report on
stdout (piped, ``--json``, ``AMUX_OUTPUT=json``), or in a terminal a few lines
for a person (:func:`tools.cli.output.plain.show`); on failure the JSON report carries
an ``error`` member ``{code, message, data}`` as for the other data commands,
the error goes to stderr and the exit status is the error code's
(:data:`protocol.errors.ERRORS`).  DESIGN.md §11, §17.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from cyclopts import Parameter

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.cli.options import Project, parse_today
from amux_memory.tools.cli.output.contract import emit, fail, human_output, say
from amux_memory.tools.cli.output.plain import Json, show

TypeName = Literal["user", "feedback", "project", "reference"]


def _finish(report: dict[str, Any], error: dict[str, Any] | None, lines: Callable[[], list[str]],
            json: bool) -> int:
    """Print the report (JSON, or ``lines()`` for a person); with an error, add it as ``error`` (JSON) or print
    it after the lines (a person) and exit with its code's status."""
    if error is None:
        show(report, lines, json_flag=json)
        return 0
    exc = HubError(ErrorCode(error["code"]), f"{error['step']} {error['path']}: {error['message']}", error["data"])
    if human_output(json):
        show(report, lines, json_flag=json)
        return fail(exc)
    emit({**report, "error": exc.to_wire()})
    say(f"{exc.code.value}: {exc.message}")
    return exc.exit_code


def _archive_lines(report: dict[str, Any]) -> list[str]:
    from amux_memory.tools.client.inert import inert
    from amux_memory.tools.client.wording import counted

    verb = "would move" if report.get("dry_run") else "moved"
    out = [f"{inert(report.get('library'))}: {verb} {counted(len(report['moved']), 'expired feedback topic')}"
           " to the archive"]
    out += [f"  {inert(m.get('from'))} -> {inert(m.get('to'))} (expired {inert(m.get('expires'))})"
            for m in report["moved"]]
    if report["skipped"]:
        out.append(f"skipped {counted(len(report['skipped']), 'topic')}:")
        out += [f"  {inert(s.get('path'))}: {inert(s.get('reason'))}" for s in report["skipped"]]
    if report.get("dry_run") and report["moved"]:
        out.append("run it again without --dry-run to move them")
    return out


def _import_lines(report: dict[str, Any]) -> list[str]:
    from amux_memory.tools.cli.output.plain import table
    from amux_memory.tools.client.inert import inert
    from amux_memory.tools.client.wording import counted

    summary = report["summary"]
    if report["mode"] == "apply":
        head = f"created {counted(len(report.get('created') or []), 'topic')} in {inert(report['library'])}"
        if report.get("proposed"):  # kept for review (DESIGN.md §21)
            head += (f"; {counted(len(report['proposed']), 'topic')} proposed for review: a person approves them "
                     "with 'amux memory review', then runs 'amux memory index'")
    else:
        head = (f"dry run: would create {summary['create']} of {counted(summary['candidates'], 'candidate')} from "
                f"{inert(report['from'])} in {inert(report['library'])}")
    rows: list[list[object]] = [["ACTION", "TYPE", "NAME", "TARGET", "WHY"]]
    rows += [[i.get("action"), i.get("type"), i.get("name"), i.get("target"), i.get("reason")]
             for i in report["items"]]
    out = [head, *(table(rows) if report["items"] else [])]
    out += [f"note: {inert(n)}" for n in report.get("notes") or []]
    if report["mode"] != "apply" and summary["create"]:
        out.append("write them with --apply")
    return out


def archive_command(*, today: str | None = None, project: Project = None, dry_run: bool = False,
                    json: Json = False) -> int:
    """Move expired feedback to feedback/_archive/ and drop its lines from MEMORY.md.

    Feedback is expired when its 'expires' date is before today (without
    'expires': 90 days after 'created'). Each move copies the topic into the
    archive, deletes the original at the revision read, then rebuilds the
    index, every step a compare-and-swap. A conflict stops the run: the
    report's 'errors' names the file, the step and where the topic is now;
    no file is ever half-written, and a run that stopped between copy and
    delete is finished by the next one. Prints {moved, skipped, errors, index}.

    Parameters
    ----------
    today
        The date to judge expiry on, YYYY-MM-DD (default: today).
    dry_run
        Only report what would move.
    """
    from amux_memory.tools.typed.archive import archive
    from amux_memory.tools.typed.library import open_library

    try:
        day = parse_today(today)
        lib = open_library(project)
    except HubError as exc:
        return fail(exc, as_json=json)
    try:
        report = archive(lib, today=day, dry_run=dry_run)
    except HubError as exc:
        return fail(exc, as_json=json)
    finally:
        lib.close()
    return _finish(report, report["errors"][0] if report["errors"] else None, lambda: _archive_lines(report), json)


def import_command(
    *,
    from_: Annotated[str, Parameter(name="--from")],
    project: Project = None,
    apply: bool = False,
    dry_run: bool = False,
    type_: Annotated[TypeName, Parameter(name="--type")] = "reference",
    cwd: Path | None = None,
    all_projects: bool = False,
    json: Json = False,
) -> int:
    """Bring memories other agents keep privately into this library as typed topics.

    Reads the host's files and never writes, moves or deletes them. Without
    --apply it only prints the plan: for each candidate, create or skip, why
    (already imported, same body, same name, similar body, cap, limits) and
    the target path. With --apply it creates each topic (expected revision
    'absent'), then rebuilds MEMORY.md; the first conflict or error stops it
    and the report says what was created.

    Parameters
    ----------
    from_
        claude-code (CONFIG_DIR/projects/PROJECT/memory/), codex
        (~/.codex/memories/), minimax (~/.minimax/memory/), qoder
        (~/.qoder-cn/memories/USER_HASH/...), or a directory of Markdown
        files (write ./codex for a directory with a host's name).
    apply
        Write the topics and the index (default: dry run).
    dry_run
        Only print the plan (the default; refused together with --apply).
    type_
        Type for candidates whose host says none (default: reference).
    cwd
        The project whose Claude Code / Qoder memory to read (default: the current directory).
    all_projects
        Read every project's Claude Code / Qoder memory, not just one.
    """
    from amux_memory.tools.typed.hosts import SourceError, discover
    from amux_memory.tools.typed.importer import apply_plan, plan_import
    from amux_memory.tools.typed.library import open_library

    if apply and dry_run:
        return fail(HubError(ErrorCode.BAD_REQUEST, "--apply and --dry-run exclude each other"), as_json=json)
    try:
        found = discover(from_, cwd=cwd, all_projects=all_projects)
    except SourceError as exc:
        return fail(HubError(ErrorCode.BAD_REQUEST, str(exc), {"from": from_}), as_json=json)
    try:
        lib = open_library(project)
    except HubError as exc:
        return fail(exc, as_json=json)
    try:
        plan = plan_import(lib, found, default_type=type_)
        report: dict[str, Any] = {"mode": "apply" if apply else "dry-run", **plan.as_dict()}
        if not apply:
            return _finish(report, None, lambda: _import_lines(report), json)
        outcome = apply_plan(lib, plan)
    except HubError as exc:
        return fail(exc, as_json=json)
    finally:
        lib.close()
    report.update(created=outcome["created"], not_attempted=outcome["not_attempted"], index=outcome["index"])
    if outcome.get("proposed"):
        report["proposed"] = outcome["proposed"]
    return _finish(report, outcome["error"], lambda: _import_lines(report), json)
