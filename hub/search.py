"""The bounded literal scan behind ``search`` (design record §3 and §6).

No index: every call walks the scope in path order and tests each Markdown
document for the query's literal keywords (Unicode casefold, so case is
ignored; CJK text matches as contiguous characters).  The scan stops at the
first of: ``scan_max_files`` documents, ``scan_max_bytes`` read, the caller's
``should_stop()`` (the Hub wires this to a Trio cancel scope with the 250 ms
budget), or the directory-entry limits; the result then says ``incomplete``.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import ahocorasick_rs

from hub.cache import DIR, MARKDOWN, CachedDoc, Haystack, ScopeCache, fold
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


@dataclass
class _Walk:
    """Traversal state against the scan budget.

    ``skip`` marks the result incomplete but goes on (a directory listing cut
    at its entry limit, a file too large for the bytes left); ``stop`` also
    ends the scan (files, time or total entries exhausted).
    """

    limits: Limits
    entries: int = 0
    incomplete: bool = False
    halted: bool = False
    reasons: list[str] = field(default_factory=list)

    def skip(self, reason: str) -> None:
        self.incomplete = True
        if reason not in self.reasons:
            self.reasons.append(reason)

    def stop(self, reason: str) -> None:
        self.skip(reason)
        self.halted = True


FileEntry = tuple[str, str]
"""``(logical path, absolute path)`` of one Markdown file."""


def _walk(root: str, prefix: str, walk: _Walk, cache: ScopeCache, seen_dirs: set[str]) -> Iterator[list[FileEntry]]:
    """Yield batches of ``.md`` files in path order (one batch per run of files in a directory).

    Symlinks are skipped, never followed; directories that cannot lead to a
    path starting with ``prefix`` are pruned.  Directory listings come from
    the cache while the directory's mtime and inode are unchanged.
    """
    def visit(absdir: str, rel: str) -> Iterator[list[FileEntry]]:
        try:
            listing = cache.listing(absdir, walk.limits.scan_max_dir_entries)
        except OSError:
            return
        seen_dirs.add(absdir)
        if listing.truncated:
            walk.skip("directory entries")
        batch: list[FileEntry] = []
        for name, kind in listing.entries:
            walk.entries += 1
            if walk.entries > walk.limits.scan_max_total_entries:
                walk.stop("total entries")
                break
            logical = rel + name
            if kind == MARKDOWN:
                if logical.startswith(prefix):
                    batch.append((logical, absdir + "/" + name))
            elif kind == DIR:
                sub = logical + "/"
                if sub.startswith(prefix) or prefix.startswith(sub):
                    if batch:
                        yield batch
                        batch = []
                    yield from visit(absdir + "/" + name, sub)
        if batch:
            yield batch

    yield from visit(root, "")


def _valid_logical(path: str) -> bool:
    try:
        return normalize_path(path) == path
    except HubError:
        return False


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


def _best_line(hay: Haystack, index: int, matched: list[int], folded_kws: list[bytes]) -> tuple[int, int]:
    """``(0-based line, keyword index)`` for a match: of the lines where each matched keyword
    first occurs, the one holding the most distinct keywords (the earliest on a tie)."""
    blob, start = hay.blob, hay.starts[index]
    end = start + len(hay.docs[index].folded)
    firsts = sorted((blob.find(folded_kws[k], start, end), k) for k in matched)
    best_pos, best_kw, best_count = firsts[0][0], firsts[0][1], 0
    for pos, k in firsts:
        line_start = blob.rfind(b"\n", start, pos) + 1 or start
        line_end = blob.find(b"\n", pos, end)
        line = blob[line_start : line_end if line_end >= 0 else end]
        count = sum(1 for j in matched if folded_kws[j] in line)
        if count > best_count:
            best_pos, best_kw, best_count = pos, k, count
    return blob.count(b"\n", start, best_pos), best_kw


def _presence(hay: Haystack, folded_kws: list[bytes]) -> dict[int, list[int]]:
    """Which keywords each document contains: ``{document index: [keyword index, ...]}``.

    One pass per keyword over the joined haystack.  A keyword that looks
    frequent (dozens of hits in the first 64 KiB) is found with ``bytes.find``,
    jumping to the next document after each hit, so it costs about one short
    search per document.  Any other keyword is located with a single-pattern
    Aho-Corasick searcher (SIMD ``memmem`` underneath), which reports its few
    occurrences at memory speed.
    """
    blob, starts = hay.blob, hay.starts
    ends = starts[1:] + [len(blob)]
    found: dict[int, set[int]] = {}
    for ki, kw in enumerate(folded_kws):
        if blob.count(kw, 0, 65536) >= 32:
            pos = blob.find(kw)
            while pos >= 0:
                d = bisect_right(starts, pos) - 1
                found.setdefault(d, set()).add(ki)
                pos = blob.find(kw, ends[d])
        else:
            searcher = ahocorasick_rs.BytesAhoCorasick([kw])
            for _, start, _ in searcher.find_matches_as_indexes(blob):
                found.setdefault(bisect_right(starts, start) - 1, set()).add(ki)
    return {d: sorted(ks) for d, ks in found.items()}


def _collect(
    root: str, path_prefix: str, limits: Limits, walk: _Walk, should_stop: Callable[[], bool],
    reader: Reader, cache: ScopeCache,
) -> tuple[list[CachedDoc], int]:
    """Walk the scope within budget, refreshing cache entries that no longer match their file."""
    docs: list[CachedDoc] = []
    scanned_bytes = 0
    seen: set[str] = set()
    cached = cache.docs
    seen_dirs: set[str] = set()
    for batch in _walk(root, path_prefix, walk, cache, seen_dirs):
        for logical, abspath in batch:
            if len(docs) >= limits.scan_max_files:
                walk.stop("files")
                break
            try:
                st = os.lstat(abspath)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if scanned_bytes + st.st_size > limits.scan_max_bytes:
                # Too big for what is left of the budget: skip it, smaller files may still fit.
                walk.skip("bytes")
                continue
            doc = cached.get(logical)
            if doc is None or not doc.fresh(st):
                if should_stop():
                    walk.stop("time")
                    break
                if not _valid_logical(logical):
                    continue
                try:
                    data = reader(abspath)
                except OSError:
                    continue
                doc = CachedDoc.load(logical, st, data)
                cache.put(doc)
            elif len(docs) % 64 == 63 and should_stop():
                walk.stop("time")
                break
            seen.add(logical)
            docs.append(doc)
            scanned_bytes += len(doc.data)
        if walk.halted:
            break
    if not walk.incomplete:
        cache.prune(path_prefix, seen, seen_dirs)
    return docs, scanned_bytes


def search_scope(
    root: str,
    keywords: tuple[str, ...],
    path_prefix: str,
    limit: int,
    limits: Limits,
    should_stop: Callable[[], bool] = lambda: False,
    reader: Reader = read_file_nofollow,
    cache: ScopeCache | None = None,
) -> dict[str, Any]:
    """Scan ``root`` for documents containing any keyword and rank them.

    Ranking: number of distinct keywords matched (desc), then keywords found
    in the path or title (desc), then path (asc).  Returns ``{matches,
    candidates, incomplete, incomplete_reasons, scanned_files, scanned_bytes,
    truncated}``; each match is ``{path, line, snippet, truncated, revision,
    matched}`` with a 1-based ``line``.  The serialized result stays within
    ``limits.response_max_bytes``; matches cut for that or for ``limit`` set
    ``truncated``.  ``cache`` keeps unchanged documents between calls (see
    :mod:`hub.cache`); without one, every file is read.
    """
    cache = cache if cache is not None else ScopeCache()
    folded_str = [fold(k) for k in keywords]
    folded_kws = [k.encode("utf-8") for k in folded_str]
    walk = _Walk(limits)
    with cache.lock:
        docs, scanned_bytes = _collect(root, path_prefix, limits, walk, should_stop, reader, cache)
        hay = cache.haystack_for(docs)
    hits = _presence(hay, folded_kws)
    ranked = sorted(
        hits.items(),
        key=lambda item: (
            -len(item[1]),
            -sum(1 for k in item[1] if folded_str[k] in docs[item[0]].where),
            docs[item[0]].path,
        ),
    )
    result: dict[str, Any] = {
        "matches": [], "candidates": len(ranked), "incomplete": walk.incomplete,
        "incomplete_reasons": walk.reasons, "scanned_files": len(docs),
        "scanned_bytes": scanned_bytes, "truncated": len(ranked) > limit,
    }
    size = packed_size(result)
    for index, matched in ranked[:limit]:
        match = _match(hay, index, matched, keywords, folded_str, folded_kws, limits)
        grow = packed_size(match) + 2
        if size + grow > limits.response_max_bytes - limits.response_envelope_bytes:
            result["truncated"] = True
            break
        result["matches"].append(match)
        size += grow
    return result


def _match(hay: Haystack, index: int, matched: list[int], keywords: tuple[str, ...], folded_str: list[str],
           folded_kws: list[bytes], limits: Limits) -> dict[str, Any]:
    doc = hay.docs[index]
    line_index, kw = _best_line(hay, index, matched, folded_kws)
    text = doc.data.decode("utf-8", "replace")
    line = text.split("\n")[line_index] if line_index >= 0 else ""
    snippet, cut = _snippet(line, folded_str[kw], limits.snippet_max_bytes)
    return {
        "path": doc.path,
        "line": line_index + 1 if line_index >= 0 else 0,
        "snippet": snippet,
        "truncated": cut,
        "revision": doc.revision,
        "matched": [keywords[i] for i in matched],
    }
