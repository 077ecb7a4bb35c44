"""``amux memory search|show|upsert|list|forget|export|copy|move``: the memory operations, one Hub call each.

Each command builds the method's parameters from its options, makes one
blocking call through :class:`tools.client.HubClient` (``list`` and
``export`` page through several) and prints the result with
:mod:`tools.cli.output.contract`: JSON when piped or with ``--json``, else its
terminal view (:mod:`tools.cli.output.reading`, :mod:`tools.cli.output.writes`; DESIGN.md §17).
These are the commands agents without MCP use, so they import only the blocking client: no Trio, no
``mcp``, no typed-memory machinery (DESIGN.md §2, §5).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

from cyclopts import Parameter

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import LIMITS
from amux_memory.protocol.params import ABSENT
from amux_memory.protocol.requests import copy_params, forget_params, get_params, search_params
from amux_memory.tools.cli.options import AsJson
from amux_memory.tools.cli.output.contract import emit, fail, fail_quietly, write_shown
from amux_memory.tools.cli.output.renderer_choice import RendererChoice


def call_hub(method: str, params: dict[str, Any], view: RendererChoice | None = None, *, as_json: bool = False) -> int:
    """Make one Hub call and print its result (:func:`tools.cli.output.contract.emit`: JSON, or ``view`` in a terminal).

    Returns 0, or the error's exit status after :func:`tools.cli.output.contract.fail`.
    """
    from amux_memory.tools.client.blocking import HubClient

    try:
        with HubClient() as client:
            emit(client.call(method, params), view, as_json=as_json)
    except HubError as exc:
        return fail(exc, as_json=as_json)
    return 0


def search(
    words: Annotated[list[str], Parameter(consume_multiple=True)],
    /,
    *,
    path_prefix: str = "",
    limit: int = LIMITS.search_default_limit,
    as_json: AsJson = False,
) -> int:
    """Search memory for literal keywords (any keyword makes a candidate).

    Matching ignores case; no regex, glob or shell meaning. Results are ranked
    by distinct keywords matched, then matches in path or title, then path.
    It covers your own memory and every team you are in (@TEAM/...), each
    with its own budget; an answer cut short says which (--json: "parts").
    Put keywords that start with '-' after '--'.

    Parameters
    ----------
    words
        1-16 keywords, 512 bytes at most in all.
    path_prefix
        Only documents whose path starts with this; @TEAM/ searches one team.
    limit
        Documents to return, 1-20.
    """
    return call_hub("search", search_params(" ".join(words), path_prefix=path_prefix, limit=limit),
                    RendererChoice("search", {"words": words}), as_json=as_json)


def show(path: str, /, *, start_line: int = 0, end_line: int = 0, offset: int = 0,
         revision: str | None = None, as_json: AsJson = False) -> int:
    """Read a bounded fragment of a document, with its whole-file revision.

    In a terminal, a header line (path, lines, short revision) and the text;
    piped or with --json, the JSON result. A missing document is exists:
    false and revision "absent". With --revision it reads that old version
    from the history instead (see 'amux memory history'); one that was never
    stored, pruned or purged is not_found, and data.reason says which.

    Parameters
    ----------
    path
        Logical path, e.g. MEMORY.md or projects/amux/decisions.md.
    start_line
        First line, 1-based (0: from the start).
    end_line
        Last line, inclusive (0: as far as the 8 KiB response allows).
    offset
        Continue a truncated fragment from its next_offset (keep the same end line).
    revision
        A stored version's revision, from 'amux memory history'.
    """
    return call_hub("get", get_params(path, start_line=start_line, end_line=end_line, offset=offset,
                                      revision=revision),
                    RendererChoice("get", {"start_line": start_line, "end_line": end_line, "offset": offset,
                                 "revision": revision}),
                    as_json=as_json)


def read_content(file: Path | None) -> bytes:
    """The bytes of ``file``, or of standard input when it is ``None``.

    Raises :class:`HubError` ``bad_request`` when the file cannot be read.
    """
    try:
        return file.read_bytes() if file is not None else sys.stdin.buffer.read()
    except OSError as exc:
        raise HubError(ErrorCode.BAD_REQUEST, f"cannot read {file}: {exc.strerror}") from None


def missing_revision(command: str, path: str, current: str | None = None) -> HubError:
    """The ``bad_request`` for ``amux memory COMMAND PATH`` without ``--expected-revision``: where to get one.

    ``current`` is the document's revision when the caller asked the Hub (:func:`current_revision`): ``absent``
    says to pass ``absent``, a revision names it (``data.current_revision``).  DESIGN.md §18.3.
    """
    import shlex

    quoted = shlex.quote(path)
    if current == ABSENT and command in ("upsert", "restore"):
        return HubError(ErrorCode.BAD_REQUEST, f"memory {command} needs --expected-revision: {path} does not exist "
                        f"yet, so pass '--expected-revision absent' to create it",
                        {"field": "expected_revision", "current_revision": ABSENT},
                        next_step=f"Run it again with --expected-revision absent: amux memory {command} {quoted} "
                        "--expected-revision absent")
    if current is not None and current != ABSENT:
        return HubError(ErrorCode.BAD_REQUEST, f"memory {command} needs --expected-revision: the revision you last "
                        f"read; {path} is now at {current[:12]} ('--expected-revision {current[:12]}' if that is "
                        "the version you mean)",
                        {"field": "expected_revision", "current_revision": current})
    create = {"upsert": ", or 'absent' to create a new document",
              "restore": ", or 'absent' to bring back a forgotten document"}.get(command, "")
    return HubError(ErrorCode.BAD_REQUEST,
                    f"memory {command} needs --expected-revision: the document's current revision, which "
                    f"`amux memory show {quoted}` prints (its first 12 characters are enough){create}",
                    {"field": "expected_revision"})


def current_revision(path: str) -> str | None:
    """``path``'s current revision (``absent`` when missing) from one small ``get``; ``None`` when the Hub does not
    say (unreachable, refused): the hint of :func:`missing_revision` is then the generic one."""
    from amux_memory.tools.client.blocking import HubClient

    try:
        with HubClient() as client:
            found = client.call("get", get_params(path, start_line=1, end_line=1))
    except HubError:
        return None
    revision = found.get("revision") if isinstance(found, dict) else None
    return revision if isinstance(revision, str) else None


def waiting_on_terminal(path: str) -> None:
    """When standard input is a terminal, say on stderr that the content is read from it and how to end it (an
    ``upsert`` with nothing piped in otherwise waits silently; DESIGN.md §18.3)."""
    try:
        interactive = sys.stdin.isatty()
    except (AttributeError, ValueError):
        return
    if interactive:
        from amux_memory.tools.client.inert import inert

        print(inert(f"amux: reading the new content of {path} from this terminal: type or paste it, then press "
                    "Ctrl-D at the start of a line (Ctrl-C cancels; pipe it in or pass --file FILE instead)"),
              file=sys.stderr, flush=True)


def upsert(path: str, /, *, expected_revision: str | None = None, file: Path | None = None,
           allow_shrink: bool = False, allow_empty: bool = False, allow_secret: bool = False,
           as_json: AsJson = False) -> int:
    """Replace (or create) a whole document, if it still has the expected revision.

    The new content is raw UTF-8 Markdown from --file, or standard input
    (piped: echo '# Notes' | amux memory upsert notes.md --expected-revision
    absent); never an argument. On a terminal it says it reads the text you
    type, up to Ctrl-D.

    Parameters
    ----------
    path
        Logical path of the document.
    expected_revision
        Required: the revision you last read (from show/search; its first 12
        hex digits are enough), or 'absent' to create.
    file
        Read the content from this file instead of standard input.
    allow_shrink
        Let a deliberate cut through the guard that otherwise refuses a rewrite
        dropping more than half of a document's lines (and over 20 lines) or
        bytes (and over 2 KiB), or one that adds an elision placeholder such
        as '[rest unchanged]'.
    allow_empty
        Store empty (0-byte) content; without it an empty stdin or file is
        refused (to delete a document, use 'amux memory forget').
    allow_secret
        Write even though the Hub finds a credential in the content (it
        otherwise refuses with secret_detected). For a person who means it,
        e.g. an example key in documentation; the history records the override.
    """
    if expected_revision is None:
        return fail(missing_revision("upsert", path, current_revision(path)), as_json=as_json)
    if file is None:
        waiting_on_terminal(path)
    try:
        content = read_content(file)
    except HubError as exc:
        return fail(exc, as_json=as_json)
    from amux_memory.protocol.requests import upsert_params

    return call_hub("upsert", upsert_params(path, content, expected_revision, allow_shrink=allow_shrink,
                                            allow_empty=allow_empty, allow_secret=allow_secret),
                    RendererChoice("upsert"), as_json=as_json)


def list_documents(*, path_prefix: str = "", as_json: AsJson = False) -> int:
    """List the documents in memory (path and size in bytes), sorted by path.

    In a terminal, an aligned table; piped or with --json, {"entries":
    [{"path", "bytes"}], "incomplete", "incomplete_reasons", "unreadable"};
    incomplete is true when a directory-entry bound cut the walk short or a
    folder could not be read (unreadable names it).

    Parameters
    ----------
    path_prefix
        Only documents whose path starts with this, e.g. feedback/.
    """
    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.client.paging import list_report

    try:
        with HubClient() as client:
            report = list_report(client, path_prefix)
    except HubError as exc:
        return fail(exc, as_json=as_json)
    emit(report, RendererChoice("list"), as_json=as_json)
    return 0


def forget(path: str, /, *, expected_revision: str | None = None, as_json: AsJson = False) -> int:
    """Delete one document, if it still has the expected revision.

    Parameters
    ----------
    path
        Logical path of the document.
    expected_revision
        Required: the revision you last read (its first 12 hex digits are enough).
    """
    if expected_revision is None:
        return fail(missing_revision("forget", path, current_revision(path)), as_json=as_json)
    return call_hub("forget", forget_params(path, expected_revision), RendererChoice("forget"), as_json=as_json)


def export(path: str, /, *, revision: str | None = None) -> int:
    """Write one whole document to standard output, as raw Markdown (in a terminal: control sequences made visible).

    Pages are read at one revision; if the document changes meanwhile nothing
    at all is written to stdout (the error goes to stderr only) and the exit
    status is that of 'conflict'. With --revision it writes that old version
    from the history instead; one that was never stored, pruned or purged is
    not_found (stderr says which).

    Parameters
    ----------
    path
        Logical path of the document.
    revision
        A stored version's revision, from 'amux memory history'.
    """
    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.client.paging import export_document

    try:
        with HubClient() as client:
            data, _ = export_document(client, path, revision=revision)
    except HubError as exc:
        return fail_quietly(exc)
    write_shown(data, RendererChoice("document"))
    return 0


def copy_document(source: str, destination: str, /, *, expected_revision: str = ABSENT,
                  source_revision: str | None = None, allow_secret: bool = False, as_json: AsJson = False) -> int:
    """Copy one document to another path: in your memory, or to or from a team's at @TEAM/ (amux memory copy
    notes.md @web/deploy.md).

    The Hub reads the source and writes the destination as an upsert by you,
    compare-and-swap on --expected-revision (default 'absent': create it,
    never overwrite); its history names the source. Into a team whose review
    rule covers your write, the copy becomes a proposal a maintainer decides.
    In a terminal, one line saying what went where; piped or with --json the
    Hub's answer (path, revision, bytes, source, source_revision, moved,
    proposed and proposal when it awaits review).

    Parameters
    ----------
    source
        The document to copy, e.g. notes/deploy.md or @web/deploy.md.
    destination
        Where the copy goes.
    expected_revision
        The destination's current revision when replacing it on purpose (from show; its first 12 hex digits are
        enough); default 'absent': it must not exist.
    source_revision
        Copy only if the source still has this revision (the one you read).
    allow_secret
        Write even though the Hub finds a credential in the text (it otherwise refuses with secret_detected).
    """
    return call_hub("copy", copy_params(source, destination, expected_revision, source_revision=source_revision,
                                        allow_secret=allow_secret), RendererChoice("copy", {"move": False}),
                    as_json=as_json)


def move_document(source: str, destination: str, /, *, expected_revision: str = ABSENT,
                  source_revision: str | None = None, allow_secret: bool = False, as_json: AsJson = False) -> int:
    """Move one document to another path: in your memory, or to or from a team's at @TEAM/ (amux memory move
    notes/deploy.md @web/deploy.md).

    A copy (see 'amux memory copy'), then the source is forgotten by
    compare-and-swap on the revision read; both histories name the other
    side. The source is kept, and the answer's source_kept says why, when
    the destination became a proposal awaiting review, when forgetting the
    source is itself a proposal, or when the source changed meanwhile: a
    move never loses text. Piped or with --json, the Hub's answer (moved:
    true once the source is gone).

    Parameters
    ----------
    source
        The document to move.
    destination
        Where it goes.
    expected_revision
        The destination's current revision when replacing it on purpose; default 'absent': it must not exist.
    source_revision
        Move only if the source still has this revision (the one you read).
    allow_secret
        Write even though the Hub finds a credential in the text (it otherwise refuses with secret_detected).
    """
    return call_hub("copy", copy_params(source, destination, expected_revision, source_revision=source_revision,
                                        move=True, allow_secret=allow_secret), RendererChoice("copy", {"move": True}),
                    as_json=as_json)
