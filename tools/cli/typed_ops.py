"""``amux memory archive`` and ``amux memory import``: typed-memory upkeep.

Both work on the Hub scope (through the Hub, like every data command) or, with
``--project DIR``, on ``DIR/.agent/memory/``.  Output is one JSON report on
stdout; on failure the report carries an ``error`` member ``{code, message,
data}`` as for the other data commands, one line goes to stderr and the exit
status is the error code's (:data:`protocol.errors.ERRORS`).  DESIGN.md §11.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from cyclopts import Parameter

from protocol.errors import ErrorCode, HubError
from tools.cli.options import Project, parse_today
from tools.cli.output import emit, fail, say

TypeName = Literal["user", "feedback", "project", "reference"]


def _finish(report: dict[str, Any], error: dict[str, Any] | None) -> int:
    """Print the report; with an error, add it as ``error`` and exit with its code's status."""
    if error is None:
        emit(report)
        return 0
    exc = HubError(ErrorCode(error["code"]), f"{error['step']} {error['path']}: {error['message']}", error["data"])
    emit({**report, "error": exc.to_wire()})
    say(f"{exc.code.value}: {exc.message}")
    return exc.exit_code


def archive_command(*, today: str | None = None, project: Project = None, dry_run: bool = False) -> int:
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
    from tools.typed.archive import archive
    from tools.typed.library import open_library

    try:
        day = parse_today(today)
        lib = open_library(project)
    except HubError as exc:
        return fail(exc)
    try:
        report = archive(lib, today=day, dry_run=dry_run)
    except HubError as exc:
        return fail(exc)
    finally:
        lib.close()
    return _finish(report, report["errors"][0] if report["errors"] else None)


def import_command(
    *,
    from_: Annotated[str, Parameter(name="--from")],
    project: Project = None,
    apply: bool = False,
    dry_run: bool = False,
    type_: Annotated[TypeName, Parameter(name="--type")] = "reference",
    cwd: Path | None = None,
    all_projects: bool = False,
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
    from tools.typed.hosts import SourceError, discover
    from tools.typed.importer import apply_plan, plan_import
    from tools.typed.library import open_library

    if apply and dry_run:
        return fail(HubError(ErrorCode.BAD_REQUEST, "--apply and --dry-run exclude each other"))
    try:
        found = discover(from_, cwd=cwd, all_projects=all_projects)
    except SourceError as exc:
        return fail(HubError(ErrorCode.BAD_REQUEST, str(exc), {"from": from_}))
    try:
        lib = open_library(project)
    except HubError as exc:
        return fail(exc)
    try:
        plan = plan_import(lib, found, default_type=type_)
        report: dict[str, Any] = {"mode": "apply" if apply else "dry-run", **plan.as_dict()}
        if not apply:
            return _finish(report, None)
        outcome = apply_plan(lib, plan)
    except HubError as exc:
        return fail(exc)
    finally:
        lib.close()
    report.update(created=outcome["created"], not_attempted=outcome["not_attempted"], index=outcome["index"])
    return _finish(report, outcome["error"])
