"""The ``list`` method: the logical paths of a scope's documents, in pages.

Search finds documents by keyword; tools that keep a library in shape (the
typed-memory index and lint, archive) need every path instead.  The walk
never follows symlinks, skips names that are not valid logical paths (hand-
placed files the API could not address anyway) and is bounded by the same
directory-entry limits as the scan (DESIGN.md §5, §6).  Pages are cut so
each response stays within the 8 KiB response budget; ``next_cursor`` is the
last path returned, and the next page starts after it.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from protocol.limits import Limits
from protocol.messages import packed_size
from protocol.paths import is_canonical_path

Result = dict[str, Any]


def walk_documents(root: str, prefix: str, limits: Limits) -> tuple[list[tuple[str, int]], bool]:
    """All ``(logical path, bytes)`` of regular ``.md`` files under ``root`` starting with ``prefix``.

    Returns the entries (unsorted) and whether a directory-entry bound cut the walk short.
    Symlinks are never followed; names that are not valid logical paths are skipped.
    """
    found: list[tuple[str, int]] = []
    stack = [(root, "")]
    seen = 0
    incomplete = False
    while stack:
        absdir, rel = stack.pop()
        try:
            it = os.scandir(absdir)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        with it:
            for n, entry in enumerate(it):
                seen += 1
                if n >= limits.scan_max_dir_entries or seen > limits.scan_max_total_entries:
                    incomplete = True
                    break
                logical = rel + entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # gone since the listing (a write's temp file renamed, a forget): not there
                if stat.S_ISDIR(st.st_mode):
                    sub = logical + "/"
                    if sub.startswith(prefix) or prefix.startswith(sub):
                        stack.append((entry.path, sub))
                elif (stat.S_ISREG(st.st_mode) and entry.name.endswith(".md")
                      and logical.startswith(prefix) and is_canonical_path(logical)):
                    found.append((logical, st.st_size))
        if seen > limits.scan_max_total_entries:
            break
    return found, incomplete


def list_documents(scope_dir: str, prefix: str, cursor: str, limits: Limits) -> Result:
    """One page of the scope's documents, sorted by path (code point order).

    Returns ``{"entries": [{"path", "bytes"}], "next_cursor": str | None,
    "incomplete": bool}``: ``next_cursor`` is set when more entries follow
    (pass it back as ``cursor``); ``incomplete`` means a directory-entry
    bound stopped the walk, so the listing may miss documents.  Blocking:
    run it in a worker thread.
    """
    found, incomplete = walk_documents(scope_dir, prefix, limits)
    found.sort()
    budget = limits.response_max_bytes - limits.response_envelope_bytes - 128
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
    return {"entries": entries, "next_cursor": next_cursor, "incomplete": incomplete}
