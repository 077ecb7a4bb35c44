"""The bounded literal scan behind ``search`` (design record §3 and §6).

No index: every call walks the scope in path order and tests each Markdown
document for the query's literal keywords (Unicode casefold, so case is
ignored; CJK text matches as contiguous characters).  The scan stops at the
first of: ``scan_max_files`` documents, ``scan_max_bytes`` read, the caller's
``should_stop()`` (the Hub wires this to a Trio cancel scope with the 250 ms
budget), or the directory-entry limits; the result then says ``incomplete``.
"""

from __future__ import annotations

import hashlib
import os
import stat
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import HubError
from protocol.limits import Limits
from protocol.messages import packed_size
from protocol.paths import normalize_path

Reader = Callable[[str], bytes]
"""Reads one file (absolute path) without following symlinks; returns its bytes."""


def read_file_nofollow(abspath: str) -> bytes:
    """Default :data:`Reader`: ``O_NOFOLLOW | O_NONBLOCK`` open, whole-file read."""
    fd = os.open(abspath, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def fold(text: str) -> str:
    """The matching form of text: NFC, then Unicode casefold (newlines preserved)."""
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    return text.casefold()


@dataclass
class _Doc:
    path: str
    data: bytes
    folded: str
    matched: list[int]
    title_hits: int = 0


@dataclass
class _Walk:
    """Traversal state: counters against the scan budget."""

    limits: Limits
    entries: int = 0
    incomplete: bool = False
    reasons: list[str] = field(default_factory=list)

    def stop(self, reason: str) -> None:
        self.incomplete = True
        if reason not in self.reasons:
            self.reasons.append(reason)


def _walk(root: str, prefix: str, walk: _Walk) -> Iterator[tuple[str, str, int]]:
    """Yield ``(logical path, absolute path, size)`` of ``.md`` files in path order.

    Symlinks are skipped, never followed; directories that cannot lead to a
    path starting with ``prefix`` are pruned.
    """
    def visit(absdir: str, rel: str) -> Iterator[tuple[str, str, int]]:
        try:
            with os.scandir(absdir) as it:
                entries: list[os.DirEntry[str]] = []
                for entry in it:
                    if len(entries) >= walk.limits.scan_max_dir_entries:
                        walk.stop("directory entries")
                        break
                    entries.append(entry)
        except OSError:
            return
        entries.sort(key=lambda e: e.name)
        for entry in entries:
            walk.entries += 1
            if walk.entries > walk.limits.scan_max_total_entries:
                walk.stop("total entries")
                return
            logical = rel + entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                sub = logical + "/"
                if sub.startswith(prefix) or prefix.startswith(sub):
                    yield from visit(entry.path, sub)
            elif stat.S_ISREG(st.st_mode) and entry.name.endswith(".md") and logical.startswith(prefix):
                yield logical, entry.path, st.st_size

    yield from visit(root, "")


def _valid_logical(path: str) -> bool:
    try:
        return normalize_path(path) == path
    except HubError:
        return False


def _title_line(text: str) -> str:
    """The document's first Markdown heading (after any frontmatter), or ""."""
    lines = text.split("\n", 400)[:400]
    i = 0
    if lines and lines[0].strip() == "---":
        for j in range(1, len(lines)):
            if lines[j].strip() in ("---", "..."):
                i = j + 1
                break
    for line in lines[i:]:
        if line.startswith("#"):
            return line
    return ""


def _snippet(line: str, folded_kw: str, max_bytes: int) -> tuple[str, bool]:
    """A window of ``line`` around the keyword, at most ``max_bytes`` UTF-8 bytes."""
    line = line.strip()
    if len(line.encode("utf-8", "replace")) <= max_bytes:
        return line, False
    # Map the keyword's position in the folded line back to a character index
    # (in NFC, so that per-character folding lines up with the folded line).
    line = unicodedata.normalize("NFC", line)
    target = fold(line).find(folded_kw)
    at = 0
    if target > 0:
        acc = 0
        for at, ch in enumerate(line):
            acc += len(fold(ch))
            if acc > target:
                break
    start = max(0, at - max_bytes // 6)
    out: list[str] = []
    used = 0
    for ch in line[start:]:
        size = len(ch.encode("utf-8", "replace"))
        if used + size > max_bytes:
            break
        out.append(ch)
        used += size
    text = "".join(out)
    return text, True


def _best_line(doc: _Doc, folded_kws: list[str]) -> tuple[int, int]:
    """``(line index, keyword index)`` of the earliest line with the most distinct keywords."""
    best = (-1, 0, doc.matched[0])
    for i, fl in enumerate(doc.folded.split("\n")):
        hits = [k for k in doc.matched if folded_kws[k] in fl]
        if len(hits) > best[1]:
            best = (i, len(hits), hits[0])
            if len(hits) == len(doc.matched):
                break
    return best[0], best[2]


def search_scope(
    root: str,
    keywords: tuple[str, ...],
    path_prefix: str,
    limit: int,
    limits: Limits,
    should_stop: Callable[[], bool] = lambda: False,
    reader: Reader = read_file_nofollow,
) -> dict[str, Any]:
    """Scan ``root`` for documents containing any keyword and rank them.

    Ranking: number of distinct keywords matched (desc), then keywords found
    in the path or title (desc), then path (asc).  Returns ``{matches,
    candidates, incomplete, incomplete_reasons, scanned_files, scanned_bytes,
    truncated}``; each match is ``{path, line, snippet, truncated, revision,
    matched}`` with a 1-based ``line``.  The serialized result stays within
    ``limits.response_max_bytes``; matches cut for that or for ``limit`` set
    ``truncated``.
    """
    folded_kws = [fold(k) for k in keywords]
    walk = _Walk(limits)
    docs: list[_Doc] = []
    scanned = scanned_bytes = 0
    for logical, abspath, size in _walk(root, path_prefix, walk):
        if walk.incomplete:
            break
        if scanned >= limits.scan_max_files:
            walk.stop("files")
            break
        if scanned_bytes + size > limits.scan_max_bytes:
            walk.stop("bytes")
            break
        if should_stop():
            walk.stop("time")
            break
        if not _valid_logical(logical):
            continue
        try:
            data = reader(abspath)
        except OSError:
            continue
        scanned += 1
        scanned_bytes += len(data)
        folded = fold(data.decode("utf-8", "replace"))
        matched = [i for i, k in enumerate(folded_kws) if k in folded]
        if matched:
            docs.append(_Doc(logical, data, folded, matched))
    for doc in docs:
        where = fold(doc.path) + "\n" + fold(_title_line(doc.data.decode("utf-8", "replace")))
        doc.title_hits = sum(1 for i in doc.matched if folded_kws[i] in where)
    docs.sort(key=lambda d: (-len(d.matched), -d.title_hits, d.path))
    result: dict[str, Any] = {
        "matches": [], "candidates": len(docs), "incomplete": walk.incomplete,
        "incomplete_reasons": walk.reasons, "scanned_files": scanned,
        "scanned_bytes": scanned_bytes, "truncated": len(docs) > limit,
    }
    size = packed_size(result)
    for doc in docs[:limit]:
        match = _match(doc, keywords, folded_kws, limits)
        grow = packed_size(match) + 2
        if size + grow > limits.response_max_bytes - limits.response_envelope_bytes:
            result["truncated"] = True
            break
        result["matches"].append(match)
        size += grow
    return result


def _match(doc: _Doc, keywords: tuple[str, ...], folded_kws: list[str], limits: Limits) -> dict[str, Any]:
    line_index, kw = _best_line(doc, folded_kws)
    text = doc.data.decode("utf-8", "replace")
    line = text.split("\n")[line_index] if line_index >= 0 else ""
    snippet, cut = _snippet(line, folded_kws[kw], limits.snippet_max_bytes)
    return {
        "path": doc.path,
        "line": line_index + 1 if line_index >= 0 else 0,
        "snippet": snippet,
        "truncated": cut,
        "revision": hashlib.sha256(doc.data).hexdigest(),
        "matched": [keywords[i] for i in doc.matched],
    }
