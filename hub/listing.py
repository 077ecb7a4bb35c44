"""The ``list`` method: the logical paths of a scope's documents, in pages.

Search finds documents by keyword; tools that keep a library in shape (the
typed-memory index and lint, archive) need every path instead.  The walk
never follows symlinks, skips names that are not valid logical paths (hand-
placed files the API could not address anyway) and is bounded by the same
directory-entry limits as the scan, counting only directories and ``*.md``
names; a folder it may not read is named in ``unreadable`` and the rest is
still listed (DESIGN.md §5.8, §6).  Pages are cut so
each response stays within the 8 KiB response budget; ``next_cursor`` is the
last path returned, and the next page starts after it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any

from hub.cache import RAW_ENTRIES_FACTOR
from hub.faults import MAX_REPORTED_PATHS, short_path
from protocol.limits import Limits
from protocol.messages import packed_size
from protocol.paths import is_canonical_path

Result = dict[str, Any]


@dataclass
class Walked:
    """What :func:`walk_documents` found: ``(logical path, bytes)`` entries (unsorted) and what it missed.

    ``reasons`` are the search's incomplete reasons that apply (``directory
    entries``, ``total entries``, ``unreadable``); ``unreadable`` names the
    folders and files that could not be read (logical, at most
    :data:`hub.faults.MAX_REPORTED_PATHS`).
    """

    found: list[tuple[str, int]] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    mtimes: dict[str, int] = field(default_factory=dict)
    """Each found document's mtime in epoch nanoseconds (the history's reconcile, DESIGN.md §15.1)."""

    def miss(self, reason: str, path: str | None = None) -> None:
        """Record that the walk missed something (``reason``), naming ``path`` if it was unreadable."""
        if reason not in self.reasons:
            self.reasons.append(reason)
        if path is not None and len(self.unreadable) < MAX_REPORTED_PATHS:
            self.unreadable.append(short_path(path))


def walk_documents(root: str, prefix: str, limits: Limits) -> Walked:
    """All ``(logical path, bytes)`` of regular ``.md`` files under ``root`` starting with ``prefix``.

    Symlinks are never followed; names that are not valid logical paths are
    skipped.  Only directories and ``*.md`` names count toward the
    directory-entry bounds (DESIGN.md §5.4, §5.8); a folder that cannot be
    read is reported and the rest is still walked.  Never raises for the
    tree's contents.
    """
    walked = Walked()
    stack = [(root, "")]
    seen = 0
    raw_max = limits.scan_max_dir_entries * RAW_ENTRIES_FACTOR
    while stack:
        absdir, rel = stack.pop()
        try:
            it = os.scandir(absdir)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            walked.miss("unreadable", rel or "/")
            continue
        with it:
            kept = 0
            for raw, entry in enumerate(it):
                name = entry.name
                if not name.endswith(".md") and not entry.is_dir(follow_symlinks=False):
                    if raw >= raw_max:
                        walked.miss("directory entries")
                        break
                    continue  # cannot be a document: costs no entry budget
                kept += 1
                seen += 1
                if kept > limits.scan_max_dir_entries or raw >= raw_max:
                    walked.miss("directory entries")
                    break
                if seen > limits.scan_max_total_entries:
                    walked.miss("total entries")
                    break
                logical = rel + name
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # gone since the listing (a write's temp file renamed, a forget): not there
                except OSError:
                    walked.miss("unreadable", logical)
                    continue
                if stat.S_ISDIR(st.st_mode):
                    sub = logical + "/"
                    if sub.startswith(prefix) or prefix.startswith(sub):
                        stack.append((entry.path, sub))
                elif (stat.S_ISREG(st.st_mode) and name.endswith(".md")
                      and logical.startswith(prefix) and is_canonical_path(logical)):
                    walked.found.append((logical, st.st_size))
                    walked.mtimes[logical] = st.st_mtime_ns
        if seen > limits.scan_max_total_entries:
            break
    return walked


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
    budget = limits.response_max_bytes - limits.response_envelope_bytes - 128 - packed_size(tail)
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
