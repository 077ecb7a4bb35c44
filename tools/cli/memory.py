"""``amux memory search|show|upsert|list|forget|export``: the memory operations, one Hub call each.

Each command builds the method's parameters from its options, makes one
blocking call through :class:`tools.client.HubClient` (``list`` and
``export`` page through several) and prints the result with
:mod:`tools.cli.output`.  These are the commands agents without MCP use, so
they import only the blocking client: no Trio, no ``mcp``, no typed-memory
machinery (DESIGN.md §2, §5).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

from cyclopts import Parameter

from protocol.errors import ErrorCode, HubError
from protocol.limits import LIMITS
from protocol.requests import forget_params, get_params, search_params
from tools.cli.output import emit, fail, fail_quietly, write_bytes


def call_hub(method: str, params: dict[str, Any]) -> int:
    """Make one Hub call and print its result as JSON; return 0, or the error's exit status after :func:`fail`."""
    from tools.client.blocking import HubClient

    try:
        with HubClient() as client:
            emit(client.call(method, params))
    except HubError as exc:
        return fail(exc)
    return 0


def search(
    words: Annotated[list[str], Parameter(consume_multiple=True)],
    /,
    *,
    path_prefix: str = "",
    limit: int = LIMITS.search_default_limit,
) -> int:
    """Search memory for literal keywords (any keyword makes a candidate).

    Matching ignores case; no regex, glob or shell meaning. Results are ranked
    by distinct keywords matched, then matches in path or title, then path.
    Put keywords that start with '-' after '--'.

    Parameters
    ----------
    words
        1-16 keywords, 512 bytes at most in all.
    path_prefix
        Only documents whose path starts with this.
    limit
        Documents to return, 1-20.
    """
    return call_hub("search", search_params(" ".join(words), path_prefix=path_prefix, limit=limit))


def show(path: str, /, *, start_line: int = 0, end_line: int = 0, offset: int = 0,
         revision: str | None = None) -> int:
    """Read a bounded fragment of a document, with its whole-file revision.

    A missing document prints exists: false and revision "absent". With
    --revision it reads that old version from the history instead (see
    'amux memory history'); one that was never stored, pruned or purged is
    not_found, and data.reason says which.

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
                                      revision=revision))


def read_content(file: Path | None) -> bytes:
    """The bytes of ``file``, or of standard input when it is ``None``.

    Raises :class:`HubError` ``bad_request`` when the file cannot be read.
    """
    try:
        return file.read_bytes() if file is not None else sys.stdin.buffer.read()
    except OSError as exc:
        raise HubError(ErrorCode.BAD_REQUEST, f"cannot read {file}: {exc.strerror}") from None


def upsert(path: str, /, *, expected_revision: str, file: Path | None = None, allow_shrink: bool = False,
           allow_secret: bool = False) -> int:
    """Replace (or create) a whole document, if it still has the expected revision.

    The new content is raw UTF-8 Markdown from --file, or standard input.

    Parameters
    ----------
    path
        Logical path of the document.
    expected_revision
        The revision you last read (from show/search), or 'absent' to create.
    file
        Read the content from this file instead of standard input.
    allow_shrink
        Let a deliberate cut through the guard that otherwise refuses a rewrite
        dropping more than half of a document's lines (and over 20 lines) or
        bytes (and over 2 KiB), or one that adds an elision placeholder such
        as '[rest unchanged]'.
    allow_secret
        Write even though the Hub finds a credential in the content (it
        otherwise refuses with secret_detected). For a person who means it,
        e.g. an example key in documentation; the history records the override.
    """
    try:
        content = read_content(file)
    except HubError as exc:
        return fail(exc)
    from protocol.requests import upsert_params

    return call_hub("upsert", upsert_params(path, content, expected_revision, allow_shrink=allow_shrink,
                                            allow_secret=allow_secret))


def list_documents(*, path_prefix: str = "") -> int:
    """List the documents in memory (path and size in bytes), sorted by path.

    Prints {"entries": [{"path", "bytes"}], "incomplete", "incomplete_reasons",
    "unreadable"}; incomplete is true when a directory-entry bound cut the walk
    short or a folder could not be read (unreadable names it).

    Parameters
    ----------
    path_prefix
        Only documents whose path starts with this, e.g. feedback/.
    """
    from tools.client.blocking import HubClient
    from tools.client.paging import list_report

    try:
        with HubClient() as client:
            report = list_report(client, path_prefix)
    except HubError as exc:
        return fail(exc)
    emit(report)
    return 0


def forget(path: str, /, *, expected_revision: str) -> int:
    """Delete one document, if it still has the expected revision.

    Parameters
    ----------
    path
        Logical path of the document.
    expected_revision
        The revision you last read.
    """
    return call_hub("forget", forget_params(path, expected_revision))


def export(path: str, /, *, revision: str | None = None) -> int:
    """Write one whole document to standard output, as raw Markdown.

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
    from tools.client.blocking import HubClient
    from tools.client.paging import export_document

    try:
        with HubClient() as client:
            data, _ = export_document(client, path, revision=revision)
    except HubError as exc:
        return fail_quietly(exc)
    write_bytes(data)
    return 0
