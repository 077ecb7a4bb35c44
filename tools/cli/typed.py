"""``amux memory new|remove|index|lint``: typed memories (DESIGN.md §11).

Each works on the caller's Hub scope, or with ``--project DIR`` on
``DIR/.agent/memory/`` directly.  Output and errors follow the data commands
(:mod:`tools.cli.output.contract`); ``index --check`` and ``lint`` exit
:attr:`ExitStatus.PROBLEMS_FOUND` (20) when the library is not clean, which
is not a failure of the command.  The work lives in :mod:`tools.typed`;
this module only parses options and prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from amux_memory.protocol.errors import ErrorCode, ExitStatus, HubError
from amux_memory.tools.cli.options import AsJson, Project, parse_today
from amux_memory.tools.cli.output.contract import emit, fail, human_output, say, write_bytes
from amux_memory.tools.cli.output.renderer_choice import RendererChoice


def _library(project: Path | None) -> Any:
    from amux_memory.tools.typed.library import open_library

    return open_library(project)


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
    project: Project = None,
    repo: Path | None = None,
    today: str | None = None,
    as_json: AsJson = False,
) -> int:
    """Create a typed topic TYPE/NAME.md with valid frontmatter, then add it to the index.

    A project topic with --repo DIR lives with that repository's notes instead,
    projects/IDENTITY/NAME.md (see 'amux memory project'), its frontmatter
    naming the identity as project.

    Feedback and project topics get '**Why:**' and '**How to apply:**'
    sections (placeholders to fill in, unless the body has them); feedback
    expires 90 days after today unless --expires says otherwise.  Refuses a
    name that exists in any type (exit 5, conflict), a type at its cap and
    a topic the index has no room for (exit 6), writing nothing; warns on
    stderr about similar topics.  Prints {created, revision, index, warnings}; an
    agent's topic the Hub keeps for review prints {proposed, proposal, index: null,
    warnings} and writes nothing until a person approves it.

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
    repo
        For a project topic: a directory in the git repository it is about.
    today
        The creation date, YYYY-MM-DD (default: today).
    """
    from amux_memory.tools.client.project import find_project
    from amux_memory.tools.typed.create import build_topic, create, parse_tags

    try:
        if body is not None and file is not None:
            raise HubError(ErrorCode.BAD_REQUEST, "give the body with --body or --file, not both")
        if file is not None:
            try:
                body = file.read_text("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise HubError(ErrorCode.BAD_REQUEST, f"cannot read {file}: {exc}", {"file": str(file)}) from None
        repository = find_project(repo).identity if repo is not None else ""
        new = build_topic(type, name, description, parse_tags(tags), today=parse_today(today), expires=expires,
                          body=body, repository=repository)
        lib = _library(project)
        try:
            result = create(lib, new)
        finally:
            lib.close()
    except HubError as exc:
        return fail(exc, as_json=as_json)
    for warning in result["warnings"]:
        say(f"warning: {warning['message']}")
    emit(result, RendererChoice("typed_new"), as_json=as_json)
    return 0


def memory_remove(name: str, /, *, expected_revision: str | None = None, project: Project = None,
                  as_json: AsJson = False) -> int:
    """Delete the typed topic NAME (any type, archived feedback too) and rebuild the index.

    The topic is deleted at the revision read (or --expected-revision), so a
    concurrent change is a conflict (exit 5) and nothing is deleted; an
    unknown name exits 4 (not_found), a name several topics share exits 2.
    Use this rather than 'amux memory forget', which would leave a dead
    index link. Prints {removed, revision, index} (under review: {proposed,
    proposal, revision, index: null}, nothing deleted yet).

    Parameters
    ----------
    name
        The topic's name (its file name without .md).
    expected_revision
        Delete only if the topic still has this revision: the full one or a
        prefix of at least 12 hex digits, as 'amux memory show' prints it
        ("absent" is refused: a delete needs a topic).
    """
    from amux_memory.tools.typed.remove import remove

    try:
        lib = _library(project)
        try:
            result = remove(lib, name, expected_revision)
        finally:
            lib.close()
    except HubError as exc:
        return fail(exc, as_json=as_json)
    emit(result, RendererChoice("typed_remove"), as_json=as_json)
    return 0


def memory_index(*, project: Project = None, check: bool = False, as_json: AsJson = False) -> int:
    """Rebuild the typed index: one group per type with (count/cap), one line per topic.

    In a Hub scope the index is index.md and MEMORY.md keeps one pointer line
    to it (an index MEMORY.md still holds is moved there, its other lines
    kept); with --project it is DIR/.agent/memory/MEMORY.md. Lines outside
    the generated groups (a preamble, your own sections) are kept. Nothing
    is written when the result is identical ("changed": false) or when it
    would pass the index's size limit (exit 6, quota_exceeded, with the
    sizes).  Archived feedback is not listed.

    Parameters
    ----------
    check
        Only report whether the index (and its pointer) is up to date ("up_to_date"); exit 20 when it is not.
    """
    from amux_memory.tools.typed.index import update_index

    try:
        lib = _library(project)
        try:
            result = update_index(lib, check=check)
        finally:
            lib.close()
    except HubError as exc:
        return fail(exc, as_json=as_json)
    emit(result, RendererChoice("typed_index"), as_json=as_json)
    if check and not result["up_to_date"]:
        if not human_output(as_json):  # the rendered text already says it
            say(f"{result['path']} is out of date; run 'amux memory index'")
        return ExitStatus.PROBLEMS_FOUND
    return 0


def memory_lint(*, project: Project = None, json: bool = False, today: str | None = None) -> int:
    """Check the typed topics and the index: schema, caps, index, sections, expiry, links, paths.

    Prints one line per problem ('path:line: severity: message; fix: what to
    run or edit'), or with
    --json {problems, errors, warnings, infos}.  Exit 20 when there is an
    error; warnings (missing Why/How, expired feedback, unknown fields) and
    infos ([[name]] links to no topic) alone exit 0.  A Hub or input failure
    exits with its error's status (2-13) and prints {"error": ...}.

    Parameters
    ----------
    json
        Print JSON instead of lines.
    today
        The date expiry is judged against, YYYY-MM-DD (default: today).
    """
    from amux_memory.tools.typed.lint import lint_library, summary

    try:
        day = parse_today(today)
        lib = _library(project)
        try:
            problems = lint_library(lib, day)
            label = lib.label
        finally:
            lib.close()
    except HubError as exc:
        return fail(exc)
    counts = summary(problems)
    if json:
        emit({"problems": [p.as_dict() for p in problems], **counts, "library": label})
    else:
        out = "".join(p.render() + "\n" for p in problems)
        write_bytes(out.encode("utf-8", "backslashreplace"))  # a lone surrogate shows as \udcff
        from amux_memory.tools.client.wording import counted

        say(f"{label}: {counted(counts['errors'], 'error')}, {counted(counts['warnings'], 'warning')}, "
            f"{counted(counts['infos'], 'info')}")
    return ExitStatus.PROBLEMS_FOUND if counts["errors"] else 0
