"""The ``list`` method: the logical paths of a scope's documents, in pages.

Search finds documents by keyword; tools that keep a library in shape (the
typed-memory index and lint, archive) need every path instead.  The walk
never follows symlinks, skips names that are not valid logical paths (hand-
placed files the API could not address anyway) and is bounded by the same
directory-entry limits as the scan, counting only directories and ``*.md``
names; a folder it may not read is named in ``unreadable`` and the rest is
still listed (DESIGN.md §5.8, §6); the walk is :func:`hub.storage.walk.walk_documents`.  Pages are cut so
each response stays within the 8 KiB response budget; ``next_cursor`` is the
last path returned, and the next page starts after it.
"""

from __future__ import annotations

from typing import Any

from amux_memory.hub.storage.walk import walk_documents
from amux_memory.protocol.limits import Limits
from amux_memory.protocol.messages import LIST_RESERVE_BYTES, packed_size, response_room

Result = dict[str, Any]


def list_documents(scope_dir: str, prefix: str, cursor: str, limits: Limits) -> Result:
    """One page of the scope's documents, sorted by path (code point order).

    Returns ``{"entries": [{"path", "bytes"}], "next_cursor": str | None,
    "incomplete": bool, "incomplete_reasons": [str], "unreadable": [str]}``:
    ``next_cursor`` is set when more entries follow (pass it back as
    ``cursor``); ``incomplete`` means a directory-entry bound stopped the
    walk or something could not be read (``unreadable`` names it), so the
    listing may miss documents.  Blocking: run it in a worker thread.
    """
    walked = walk_documents(scope_dir, prefix, limits)
    found = walked.found
    found.sort()
    tail = {"incomplete": bool(walked.reasons), "incomplete_reasons": walked.reasons,
            "unreadable": walked.unreadable}
    budget = response_room(limits, tail, LIST_RESERVE_BYTES)
    entries: list[dict[str, Any]] = []
    used = 0
    next_cursor: str | None = None
    for path, size in found:
        if cursor and path <= cursor:
            continue
        item = {"path": path, "bytes": size}
        cost = packed_size(item)
        if entries and used + cost > budget:
            next_cursor = entries[-1]["path"]
            break
        entries.append(item)
        used += cost
    return {"entries": entries, "next_cursor": next_cursor, **tail}
