"""Typed-memory commands on ``amux memory``: ``new``, ``index``, ``lint`` (issue #7; seed 004).

Each works on the caller's Hub scope, or with ``--project DIR`` on
``DIR/.agent/memory/`` directly.  Output and errors follow the data commands:
JSON on stdout, ``{"error": ...}`` plus one stderr line on failure, exit
status from :data:`protocol.errors.EXIT_CODES` (``index --check`` and
``lint`` exit 1 when the library is not clean).  The work lives in
:mod:`tools.typed_memory`; this module only parses options and prints.
"""

from __future__ import annotations

import datetime as _dt
import sys
from pathlib import Path
from typing import Any

from protocol.errors import ErrorCode, HubError
from tools.cli import _emit, _fail, memory_app


def _today(text: str | None) -> _dt.date:
    """``--today`` as a date (default: today); raises ``bad_request`` unless it is ``YYYY-MM-DD``."""
    from tools.typed.model import parse_date

    if text is None:
        return _dt.date.today()
    day = parse_date(text)
    if day is None:
        raise HubError(ErrorCode.BAD_REQUEST, f"--today {text!r} is not a date (YYYY-MM-DD)", {"field": "today"})
    return day


def _library(project: Path | None) -> Any:
    from tools.typed.library import open_library

    return open_library(project)


@memory_app.command(name="new")
def memory_new(
    type: str,
    name: str,
    /,
    *,
    description: str = "",
    tags: str = "",
    expires: str | None = None,
    body: str | None = None,
    file: Path | None = None,
    project: Path | None = None,
    today: str | None = None,
) -> int:
    """Create a typed topic TYPE/NAME.md with valid frontmatter, then add it to MEMORY.md.

    Feedback and project topics get '**Why:**' and '**How to apply:**'
    sections (placeholders to fill in, unless the body has them); feedback
    expires 90 days after today unless --expires says otherwise.  Refuses a
    name that exists in any type (exit 5, conflict), a type at its cap and
    a topic MEMORY.md has no room for (exit 6), writing nothing; warns on
    stderr about similar topics.  Prints {created, revision, index, warnings}.

    Parameters
    ----------
    type
        user, feedback, project or reference.
    name
        The topic's identity and file name: lowercase a-z, 0-9, '-' and '_', at most 64.
    description
        One line (at most 200 characters, no control characters) with the words that should make an agent open it.
    tags
        1-10 comma-separated slugs, e.g. 'deploy,ci'.
    expires
        YYYY-MM-DD after which the topic is stale (feedback default: created + 90 days).
    body
        The body text (Markdown).
    file
        Read the body from this file instead.
    project
        Work on DIR/.agent/memory/ instead of the Hub scope.
    today
        The creation date, YYYY-MM-DD (default: today).
    """
    from tools.typed.create import build_topic, create, parse_tags

    try:
        if body is not None and file is not None:
            raise HubError(ErrorCode.BAD_REQUEST, "give the body with --body or --file, not both")
        if file is not None:
            try:
                body = file.read_text("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise HubError(ErrorCode.BAD_REQUEST, f"cannot read {file}: {exc}", {"file": str(file)}) from None
        new = build_topic(type, name, description, parse_tags(tags), today=_today(today), expires=expires, body=body)
        lib = _library(project)
        try:
            result = create(lib, new)
        finally:
            lib.close()
    except HubError as exc:
        return _fail(exc)
    for warning in result["warnings"]:
        print(f"amux: warning: {warning['message']}", file=sys.stderr)
    _emit(result)
    return 0


@memory_app.command(name="index")
def memory_index(*, project: Path | None = None, check: bool = False) -> int:
    """Rebuild MEMORY.md from the typed topics: one group per type with (count/cap), one line per topic.

    Lines outside the generated groups (a preamble, your own sections) are
    kept.  Nothing is written when the result is identical ("changed": false)
    or when it would pass the library's entry limit (exit 6, quota_exceeded,
    with the sizes).  Archived feedback is not listed.

    Parameters
    ----------
    project
        Work on DIR/.agent/memory/ instead of the Hub scope.
    check
        Only report whether MEMORY.md is up to date ("up_to_date"); exit 1 when it is not.
    """
    from tools.typed.index import update_index

    try:
        lib = _library(project)
        try:
            result = update_index(lib, check=check)
        finally:
            lib.close()
    except HubError as exc:
        return _fail(exc)
    _emit(result)
    if check and not result["up_to_date"]:
        print("amux: MEMORY.md is out of date; run 'amux memory index'", file=sys.stderr)
        return 1
    return 0


@memory_app.command(name="lint")
def memory_lint(*, project: Path | None = None, json: bool = False, today: str | None = None) -> int:
    """Check the typed topics and MEMORY.md: schema, caps, index, sections, expiry, links, paths.

    Prints one line per problem ('path:line: severity: message'), or with
    --json {problems, errors, warnings, infos}.  Exit 1 when there is an
    error; warnings (missing Why/How, expired feedback, unknown fields) and
    infos ([[name]] links to no topic) alone exit 0.

    Parameters
    ----------
    project
        Work on DIR/.agent/memory/ instead of the Hub scope.
    json
        Print JSON instead of lines.
    today
        The date expiry is judged against, YYYY-MM-DD (default: today).
    """
    from tools.typed.lint import lint_library, summary

    try:
        day = _today(today)
        lib = _library(project)
        try:
            problems = lint_library(lib, day)
            label = lib.label
        finally:
            lib.close()
    except HubError as exc:
        return _fail(exc)
    counts = summary(problems)
    if json:
        _emit({"problems": [p.as_dict() for p in problems], **counts, "library": label})
    else:
        out = "".join(p.render() + "\n" for p in problems)
        sys.stdout.flush()
        sys.stdout.buffer.write(out.encode("utf-8"))
        sys.stdout.buffer.flush()
        print(f"amux: {label}: {counts['errors']} error(s), {counts['warnings']} warning(s), "
              f"{counts['infos']} info(s)", file=sys.stderr)
    return 1 if counts["errors"] else 0
