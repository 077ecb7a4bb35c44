"""Whole results from paged methods, written once: a document from ``export`` pages, every entry from ``list``
pages (DESIGN.md §5).

Both take any blocking caller with ``call(method, params) -> dict`` (a
:class:`tools.client.blocking.HubClient`, or a test double) and raise what
its ``call`` raises, plus ``internal`` when the Hub makes no progress (so a
misbehaving Hub cannot loop a client forever).  The MCP server needs
neither: it reads with ``get`` and pages its own results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.params import ABSENT
from amux_memory.protocol.requests import export_params, list_params, review_list_params, review_show_params


class Caller(Protocol):
    """Anything that sends one request and returns its result map (raising :class:`HubError`)."""

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send ``method`` with ``params``; the result map, or raise :class:`HubError`."""
        ...


def export_document(client: Caller, path: str, *, revision: str | None = None,
                    between_pages: Callable[[int], None] | None = None) -> tuple[bytes, str]:
    """Read one whole document in pages, all at the first page's revision.

    Returns ``(content bytes, revision)``.  Raises ``conflict`` if the
    document changed between pages (nothing is returned in that case),
    ``not_found`` if it does not exist, and ``internal`` if a page's
    ``next_offset`` (bytes) does not move forward.  With ``revision`` it reads
    that stored version from the history instead (DESIGN.md §15): every page
    asks for it, and ``not_found`` (``data.reason``: ``unknown``, ``pruned``
    or ``purged``) means it is not stored.  ``between_pages(n)`` is called
    after page ``n`` (1-based) for every page but the last (a seam for tests).
    """
    parts: list[bytes] = []
    pinned: str | None = None
    offset = 0
    page = 0
    while True:
        params = (export_params(path, offset=offset, revision=revision) if revision is not None
                  else export_params(path, offset=offset, expected_revision=pinned))
        result = client.call("export", params)
        pinned = str(result["revision"])
        parts.append(result["content"])
        if not result["truncated"]:
            return b"".join(parts), pinned
        next_offset = result["next_offset"]
        if not isinstance(next_offset, int) or next_offset <= offset:
            raise HubError(ErrorCode.INTERNAL, f"export of {path} made no progress at offset {offset}")
        offset = next_offset
        page += 1
        if between_pages is not None:
            between_pages(page)


def read_version(client: Caller, path: str, revision: str | None = None) -> tuple[bytes, str]:
    """``(bytes, revision)`` of one version of ``path``: a stored one (``revision``), else the live document.

    ``"absent"`` (a tombstone, or "no document") is empty without asking the
    Hub; a live document that does not exist is ``(b"", "absent")``.  Raises
    ``not_found`` for a stored version the Hub does not hold (``data.reason``
    says whether it was never stored, pruned or purged), ``conflict`` if the
    live document changed between pages, and whatever else the Hub answers
    (DESIGN.md §5.7, §15).  Shared by ``amux memory diff``/``edit`` and the web page.
    """
    if revision == ABSENT:
        return b"", ABSENT
    if revision:
        return export_document(client, path, revision=revision)
    try:
        return export_document(client, path)
    except HubError as exc:
        if exc.code is ErrorCode.NOT_FOUND:
            return b"", ABSENT
        raise


def list_all(client: Caller, path_prefix: str = "") -> tuple[list[dict[str, Any]], bool]:
    """Every document under ``path_prefix``, from all ``list`` pages: ``([{"path", "bytes"}, ...], incomplete)``.

    Entries come sorted by path, as the Hub pages them; ``incomplete`` is true
    when any page said the Hub's walk missed something (an entry bound, an
    unreadable folder).  Raises ``internal`` if a page's ``next_cursor``
    repeats the cursor asked.
    """
    report = list_report(client, path_prefix)
    return report["entries"], report["incomplete"]


def list_report(client: Caller, path_prefix: str = "") -> dict[str, Any]:
    """All ``list`` pages joined: ``{entries, incomplete, incomplete_reasons, unreadable}`` (DESIGN.md §5.8).

    ``incomplete_reasons`` and ``unreadable`` (folders or files the Hub may
    not read) are the union over the pages, in first-seen order.  Raises
    ``internal`` if a page's ``next_cursor`` repeats the cursor asked, and
    whatever the Hub answers.
    """
    entries: list[dict[str, Any]] = []
    incomplete = False
    reasons: list[str] = []
    unreadable: list[str] = []
    cursor = ""
    while True:
        page = client.call("list", list_params(path_prefix, cursor))
        entries.extend(page.get("entries", []))
        incomplete = incomplete or bool(page.get("incomplete"))
        for into, key in ((reasons, "incomplete_reasons"), (unreadable, "unreadable")):
            into.extend(str(x) for x in page.get(key) or [] if str(x) not in into)
        next_cursor = page.get("next_cursor")
        if not next_cursor:
            return {"entries": entries, "incomplete": incomplete, "incomplete_reasons": reasons,
                    "unreadable": unreadable}
        if next_cursor == cursor:
            raise HubError(ErrorCode.INTERNAL, f"list made no progress after {cursor!r}")
        cursor = str(next_cursor)


def review_text(client: Caller, proposal: str, text: str = "proposed") -> tuple[bytes | None, dict[str, Any]]:
    """One whole text of a proposal from ``review_show`` pages (DESIGN.md §21): ``proposed``, ``base`` or
    ``current``.

    Returns ``(bytes, or None when that text does not exist (a deletion, an absent document, a base the
    history no longer holds), the first page's answer without its content)``.  Raises what ``call``
    raises (``not_found`` for an unknown id) and ``internal`` when the pages make no progress.
    """
    content, first, _ = review_text_head(client, proposal, text)
    return content, first


def review_text_head(client: Caller, proposal: str, text: str = "proposed",
                     max_bytes: int | None = None) -> tuple[bytes | None, dict[str, Any], bool]:
    """``(bytes, first answer without content, cut)``: one of a proposal's texts as :func:`review_text` reads
    it, but at most about ``max_bytes`` of it when given (``cut`` when there is more: a document put there by
    hand can be any size).  Raises as :func:`review_text` (also ``bad_request`` for a malformed id)."""
    parts: list[bytes] = []
    offset, size = 0, 0
    first: dict[str, Any] | None = None
    while True:
        page = client.call("review_show", review_show_params(proposal, text=text, offset=offset))
        if first is None:
            first = {k: v for k, v in page.items() if k != "content"}
        parts.append(page["content"])
        size += len(page["content"])
        if not page["truncated"] or (max_bytes is not None and size >= max_bytes):
            return (b"".join(parts) if page["exists"] else None), first, bool(page["truncated"])
        next_offset = page["next_offset"]
        if not isinstance(next_offset, int) or next_offset <= offset:
            raise HubError(ErrorCode.INTERNAL, f"review_show of {proposal} made no progress at offset {offset}")
        offset = next_offset


def review_all(client: Caller, path_prefix: str = "") -> dict[str, Any]:
    """Every pending proposal the caller may see from ``review_list`` pages: ``{proposals: [...], pending, review,
    reviews}`` (DESIGN.md §21).  Over team mounts (DESIGN.md §7.8) pages come part after part (``part``):
    ``pending`` adds up the parts', ``review`` is the caller's own scope's rule when its part answered, else the
    first part's; ``reviews`` (when some part reviews) each part's rule and the caller's role there.
    Raises what ``call`` raises, and ``internal`` when a page repeats its cursor."""
    entries: list[dict[str, Any]] = []
    pending: dict[str, int] = {}
    rules: dict[str, Any] = {}
    reviews: list[dict[str, Any]] | None = None
    cursor = ""
    while True:
        page = client.call("review_list", review_list_params(path_prefix=path_prefix, cursor=cursor))
        entries.extend(page["proposals"])
        part = str(page.get("part", ""))
        pending.setdefault(part, page["pending"])
        rules.setdefault(part, page["review"])
        if reviews is None:
            reviews = list(page.get("reviews") or [])
        nxt = page.get("next_cursor")
        if not nxt:
            review = rules.get("", next(iter(rules.values())))
            found: dict[str, Any] = {"proposals": entries, "pending": sum(pending.values()), "review": review}
            return found | ({"reviews": reviews} if reviews else {})
        if nxt == cursor:
            raise HubError(ErrorCode.INTERNAL, "review_list made no progress")
        cursor = str(nxt)
