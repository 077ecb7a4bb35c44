"""Memory health: what rots in a caller's view of memory, as findings a person or their agent acts on (DESIGN.md §23).

:func:`check_parts` looks at the documents of one or more parts (the caller's
own scope and its team mounts, :mod:`hub.mounts`) and returns the ``health``
answer::

    {"findings": [{"code", "paths": [shown path, ...], "lines": [[start, end], ...] (1-based, one per path, or []),
                   "message", "next"}],
     "counts": {code: n}, "documents": n, "elapsed_ms": float}

``counts`` counts every finding; ``findings`` lists them in :data:`CODES`
order, at most :data:`HEALTH_MAX_FINDINGS` and :data:`HEALTH_MAX_BYTES` packed
(a sum of ``counts`` above ``len(findings)`` says some were left out).  Paths
are shown as the caller sees them (``@NAME/`` for a mount).  No finding holds
a credential: a ``secret`` finding gives the rule and redacted preview
(:mod:`hub.scan_report`, as ``amux memory scan``), a document whose *path*
holds one is shown redacted and only as a ``secret``, and link targets in
messages are scrubbed.  Paragraph texts are never quoted.

Codes (thresholds here; why they are what they are: DESIGN.md §23):

* ``duplicate``: one paragraph (blank-line separated; compared with whitespace
  collapsed and case folded) in two or more documents, when it has at least
  :data:`PARAGRAPH_MIN_LINES` lines or :data:`PARAGRAPH_MIN_CHARS` characters.
* ``near_duplicate``: two such paragraphs in different documents whose
  RapidFuzz ``fuzz.ratio`` (normalised Indel similarity, 0-100) is at least
  :data:`NEAR_DUPLICATE_SCORE`.  Not every pair is compared: each distinct
  paragraph is bucketed under its first and under its last
  :data:`NEAR_ANCHOR_CHARS` characters, and only paragraphs sharing a bucket
  (of at most :data:`NEAR_BUCKET_MAX`, else it is a common opening such as a
  heading) are scored, one C++ pass (``process.extract``) per paragraph over
  the rest of its bucket.  A copy edited in one place keeps its opening or its
  ending; one edited at both ends is missed.  The work grows with the text
  (two slices a paragraph), not with the square of the paragraphs.  On the
  shared corpus (11 MiB of text, 35,229 paragraphs) these buckets find 612
  of the pairs at 90 or more, and bucketing by each paragraph's four longest
  words 741 (565 in common) at five times the cost: 0.12 s against 1.6 s
  for the keys alone, on a loaded two-core machine.  Figures (one core, a
  1,024-document 8 MiB scope of the bench's data): the whole check, reads
  included, about 0.5 s; :data:`NEAR_DUPLICATE_SCORE` 90 flagged on the
  shared corpus only template boilerplate and true re-wordings (85 started to
  pair different steps of one procedure).
* ``dangling_link``: a relative Markdown link (``[t](x.md)``, ``[t]: x.md``) or
  ``[[name]]`` outside code to a document of the same scope that does not
  exist; ``[[name]]`` matches a file name without ``.md`` or a path.  Links
  leaving the scope (``../``), to mounts (``@``), absolute, with a scheme, or
  to anything but ``.md`` are not checked.  ``MEMORY.md`` comes first.
* ``stale``: no change for more than ``memory.stale_days``: the time of the
  newest version in history when it is the document's current bytes, else
  the file's modification time (a hand edit or a file placed by hand: when
  it was written, never when the Hub noticed it).
* ``entry_near_limit``: a ``MEMORY.md`` at :data:`NEAR_LIMIT_PERCENT` % of its
  bytes or lines; ``scope_near_quota``: a scope (looked at whole, without a
  prefix inside it) at that share of its documents or bytes.
* ``secret``: a document holding a credential, as ``scan`` finds it.

The typed-memory lint findings are folded in by the frontends
(``tools/typed/health.py``), since the Hub knows nothing of typed memories
(DESIGN.md §11).  Blocking: the service runs :func:`check_parts` in a worker
thread.
"""

from __future__ import annotations

import datetime
import os
import posixpath
import re
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import unquote

from rapidfuzz import fuzz, process

from amux_memory.hub.history import ScopeHistory
from amux_memory.hub.rewrite_guard import count_lines
from amux_memory.hub.scan_report import document_entries, shell_command
from amux_memory.hub.secrets import scrub
from amux_memory.hub.store import revision_of
from amux_memory.hub.walk import walk_documents
from amux_memory.protocol.limits import ENTRY_NAME, Limits
from amux_memory.protocol.messages import packed_size
from amux_memory.protocol.wording import plural

Result = dict[str, Any]

CODES: Final = ("secret", "dangling_link", "duplicate", "near_duplicate", "entry_near_limit", "scope_near_quota",
                "stale")
"""The Hub's finding codes, in the order findings are listed (the most harmful first)."""

PARAGRAPH_MIN_LINES = 2
"""A paragraph of at least this many lines counts for ``duplicate`` and ``near_duplicate`` (lines)."""
PARAGRAPH_MIN_CHARS = 80
"""... or of at least this many characters, whitespace collapsed (characters)."""
NEAR_DUPLICATE_SCORE = 90
"""RapidFuzz ``fuzz.ratio`` (0-100) from which two paragraphs are near duplicates."""
NEAR_ANCHOR_CHARS = 24
"""A paragraph is bucketed by its first and by its last this many characters, normalised (characters)."""
NEAR_BUCKET_MAX = 64
"""A bucket with more paragraphs is a common phrase, not a candidate group, and is skipped (paragraphs)."""
NEAR_LIMIT_PERCENT = 90
"""``entry_near_limit`` and ``scope_near_quota`` from this share of the limit (percent)."""
HEALTH_MAX_FINDINGS = 500
"""Most findings listed in one answer (count); ``counts`` counts them all."""
HEALTH_MAX_BYTES = 512 * 1024
"""Most packed bytes of the listed findings (bytes), well inside the 1 MiB frame (DESIGN.md §3.1)."""
SECONDS_A_DAY = 86_400
"""Seconds in a day, for ``memory.stale_days`` (s)."""

PARAGRAPH = re.compile(r"(?:^[^\S\n]*\S[^\n]*(?:\n|\Z))+", re.MULTILINE)
"""Consecutive lines holding something other than whitespace."""
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
CODE_SPAN = re.compile(r"`+[^`]*`+")
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'(][^)]*)?\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
WIKI_LINK = re.compile(r"\[\[([^\[\]|#]+)(?:[|#][^\[\]]*)?\]\]")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class HealthPart:
    """One part to check: ``label`` (``""`` or ``@NAME/``), its scope folder ``root``, the ``prefix`` inside it
    whose documents are checked, and its history (None: none is kept, the files' mtimes decide)."""

    label: str
    root: str
    prefix: str
    history: ScopeHistory | None


@dataclass
class _Doc:
    shown: str
    inner: str
    data: bytes
    text: str
    mtime_ns: int
    part: HealthPart


@dataclass
class _Paragraph:
    norm: str
    places: list[tuple[int, int, int]] = field(default_factory=list)
    """``(document index, first line, last line)`` of each occurrence."""


def _finding(code: str, paths: list[str], lines: list[list[int]], message: str, next_step: str) -> Result:
    return {"code": code, "paths": paths, "lines": lines, "message": message, "next": next_step}


def _edit(path: str) -> str:
    return shell_command(["memory", "edit"], path)


def check_parts(parts: list[HealthPart], limits: Limits, stale_days: int, allowed: frozenset[str],
                now: float | None = None, stop: Callable[[], bool] = lambda: False) -> Result:
    """The ``health`` answer for ``parts`` (the caller's root first), as the module docstring says.

    ``limits`` are the Hub's (quotas, walk bounds); ``stale_days`` is ``memory.stale_days``; ``allowed`` is
    ``memory.secret_allow``; ``now`` the epoch seconds staleness is judged at (default: now).  ``stop`` is
    polled between documents: when it says so the answer covers the documents read so far.  Never raises for
    the tree's contents: an unreadable folder or file is left out (as ``list`` leaves it out).
    """
    started = time.perf_counter()
    now = time.time() if now is None else now
    findings: list[Result] = []
    docs: list[_Doc] = []
    for part in parts:
        walked = walk_documents(part.root, "", limits)
        known = {path for path, _ in walked.found}
        if part.prefix == "":
            findings += _quota(part, len(known), sum(size for _, size in walked.found), limits)
        part_docs: list[_Doc] = []
        for path in sorted(known):
            if not path.startswith(part.prefix):
                continue
            if stop():
                break
            try:
                data = _read(os.path.join(part.root, path))
            except OSError:
                continue
            part_docs.append(_Doc(part.label + path, path, data, data.decode("utf-8", "replace"),
                                  walked.mtimes.get(path, 0), part))
        secret_entries = document_entries([d.shown for d in part_docs], {d.shown: d.data for d in part_docs}.get,
                                          allowed)
        findings += [_secret(entry) for entry in secret_entries]
        # A document whose path holds a credential is shown only (redacted) as a secret finding.
        clean = [d for d in part_docs if d.shown not in {e["path"] for e in secret_entries if e["revision"] is None}]
        findings += _links(clean, known)
        findings += [f for d in clean for f in _entry(d, limits) + _stale(d, stale_days, now)]
        docs += clean
    findings += _duplicates(docs)
    order = {code: n for n, code in enumerate(CODES)}
    findings.sort(key=lambda f: (order[f["code"]], _entry_first(f), f["paths"], f["lines"]))
    counts = dict(Counter(f["code"] for f in findings))
    listed: list[Result] = []
    room = HEALTH_MAX_BYTES
    for f in findings[:HEALTH_MAX_FINDINGS]:
        room -= packed_size(f)
        if room < 0:
            break
        listed.append(f)
    return {"findings": listed, "counts": counts, "documents": len(docs),
            "elapsed_ms": round((time.perf_counter() - started) * 1000, 3)}


def _entry_first(f: Result) -> int:
    """0 for a finding in a ``MEMORY.md`` (its pointers are read first, so they are fixed first), else 1."""
    return 0 if any(p.rsplit("/", 1)[-1] == ENTRY_NAME and not p.startswith("@", 1) for p in f["paths"][:1]) else 1


def _read(abspath: str) -> bytes:
    """A whole regular file, never through a symlink (``O_NOFOLLOW``) nor blocking on a FIFO."""
    from amux_memory.hub.search import read_file_nofollow

    return read_file_nofollow(abspath)


def _quota(part: HealthPart, documents: int, size: int, limits: Limits) -> list[Result]:
    whose = "your scope" if part.label == "" else f"team {part.label}"
    shares = []
    if documents * 100 >= limits.scope_max_documents * NEAR_LIMIT_PERCENT:
        shares.append(f"{documents} of {limits.scope_max_documents} documents")
    if size * 100 >= limits.scope_max_bytes * NEAR_LIMIT_PERCENT:
        shares.append(f"{size} of {limits.scope_max_bytes} bytes")
    if not shares:
        return []
    return [_finding("scope_near_quota", [], [], f"{whose} holds {' and '.join(shares)}: at {NEAR_LIMIT_PERCENT} % "
                     "of its quota, new documents will soon be refused",
                     "merge or forget documents that are no longer needed ('amux memory list' shows them with their "
                     "sizes; 'amux memory forget PATH --expected-revision REV')")]


def _secret(entry: Result) -> Result:
    found = entry["findings"]
    shown = ", ".join(f"{f['rule']} {f['preview']}" + (f" at line {f['line']}" if f.get("line") else "")
                      for f in found)
    lines = [[found[0]["line"], found[0]["line"]]] if found and found[0].get("line") else []
    commands = entry.get("commands") or []
    next_step = entry["advice"] if not commands else f"{commands[0]}; then {entry['advice']}; then {commands[1]}"
    return _finding("secret", [entry["path"]], lines, f"holds a stored credential ({shown}); rotate it as well",
                    next_step)


def _entry(doc: _Doc, limits: Limits) -> list[Result]:
    if doc.inner != ENTRY_NAME:
        return []
    size, lines = len(doc.data), count_lines(doc.data)
    if (size * 100 < limits.entry_max_bytes * NEAR_LIMIT_PERCENT
            and lines * 100 < limits.entry_max_lines * NEAR_LIMIT_PERCENT):
        return []
    return [_finding("entry_near_limit", [doc.shown], [], f"{doc.shown} has {size} of {limits.entry_max_bytes} bytes "
                     f"and {lines} of {limits.entry_max_lines} lines: at {NEAR_LIMIT_PERCENT} % of its limit, and "
                     "every conversation reads it",
                     f"move details into topic documents and keep one pointer line each: {_edit(doc.shown)}")]


def _last_change(doc: _Doc) -> float:
    """Epoch seconds of the document's last change: its newest version in history when that is its current
    bytes, else the file's modification time (DESIGN.md §23)."""
    if doc.part.history is not None:
        newest = doc.part.history.newest(doc.inner)
        if newest is not None and newest.revision == revision_of(doc.data):
            return datetime.datetime.fromisoformat(newest.time.replace("Z", "+00:00")).timestamp()
    return doc.mtime_ns / 1e9


def _stale(doc: _Doc, stale_days: int, now: float) -> list[Result]:
    last = _last_change(doc)
    days = int((now - last) // SECONDS_A_DAY)
    if now - last <= stale_days * SECONDS_A_DAY:
        return []
    when = datetime.datetime.fromtimestamp(last, datetime.UTC).date().isoformat()
    return [_finding("stale", [doc.shown], [], f"unchanged for {days} days (since {when}; memory.stale_days is "
                     f"{stale_days})",
                     f"check it still holds: {shell_command(['memory', 'show'], doc.shown)}; update it "
                     f"({_edit(doc.shown)}) or forget it, asking the person before dropping a fact")]


# -- links ------------------------------------------------------------------------------------------


def _targets(text: str) -> list[tuple[int, str, bool]]:
    """``(line, target, wiki)`` of every link outside fenced code and code spans."""
    found: list[tuple[int, str, bool]] = []
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or ("[" not in line):
            continue
        line = CODE_SPAN.sub("", line)
        found += [(number, m.group(1), False) for m in INLINE_LINK.finditer(line)]
        found += [(number, m.group(1), False) for m in REFERENCE_LINK.finditer(line)]
        found += [(number, m.group(1).strip(), True) for m in WIKI_LINK.finditer(line)]
    return found


def _resolve(source: str, target: str) -> str | None:
    """The scope path a relative Markdown link in ``source`` names, or None when it is not one we check."""
    if target.startswith(("#", "/")) or SCHEME.match(target):
        return None
    target = unquote(target.split("#", 1)[0].split("?", 1)[0])
    if not target.endswith(".md"):
        return None
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
    if resolved == ".." or resolved.startswith(("../", "@")):
        return None
    return unicodedata.normalize("NFC", resolved)


def _links(docs: list[_Doc], known: set[str]) -> list[Result]:
    names = {posixpath.basename(p)[:-3] for p in known} | {p[:-3] for p in known}
    findings = []
    for doc in docs:
        if "[" not in doc.text:
            continue
        for line, target, wiki in _targets(doc.text):
            if wiki:
                name = target[:-3] if target.endswith(".md") else target
                if not name or name.startswith("@") or name in names:
                    continue
                shown = f"[[{scrub(target)}]]"
            else:
                resolved = _resolve(doc.inner, target)
                if resolved is None or resolved in known:
                    continue
                shown = scrub(target) if resolved == target else f"{scrub(target)} ({doc.part.label}{scrub(resolved)})"
            findings.append(_finding("dangling_link", [doc.shown], [[line, line]],
                                     f"line {line} links to {shown}, which does not exist",
                                     f"point the link at the document that holds it now, or drop it: "
                                     f"{_edit(doc.shown)}"))
    return findings


# -- duplicates -------------------------------------------------------------------------------------


def _paragraphs(text: str) -> list[tuple[int, int, str]]:
    """``(first line, last line, normalised text)`` of each paragraph long enough to compare."""
    out = []
    line = 1
    at = 0
    for match in PARAGRAPH.finditer(text):
        line += text.count("\n", at, match.start())
        block = match.group()
        breaks = block.count("\n", 0, len(block) - 1) if block.endswith("\n") else block.count("\n")
        norm = " ".join(block.split()).casefold()
        if breaks + 1 >= PARAGRAPH_MIN_LINES or len(norm) >= PARAGRAPH_MIN_CHARS:
            out.append((line, line + breaks, norm))
        at = match.start()
    return out


def _duplicates(docs: list[_Doc]) -> list[Result]:
    by_text: dict[str, _Paragraph] = {}
    for index, doc in enumerate(docs):
        for first, last, norm in _paragraphs(doc.text):
            by_text.setdefault(norm, _Paragraph(norm)).places.append((index, first, last))
    findings = []
    for para in by_text.values():
        paths, lines = _places(docs, [para])
        if len(paths) > 1:
            findings.append(_finding("duplicate", paths, lines, f"the same paragraph ({_size(para)}) is in "
                                     f"{len(paths)} documents", _merge_step(paths)))
    return findings + _near_duplicates(docs, list(by_text.values()))


def _size(para: _Paragraph) -> str:
    return f"{len(para.norm)} characters"


def _places(docs: list[_Doc], paras: list[_Paragraph]) -> tuple[list[str], list[list[int]]]:
    """The documents of ``paras``' occurrences, each once (its first occurrence's lines), in path order."""
    first: dict[str, list[int]] = {}
    for para in paras:
        for index, start, end in para.places:
            first.setdefault(docs[index].shown, [start, end])
    paths = sorted(first)
    return paths, [first[p] for p in paths]


def _merge_step(paths: list[str]) -> str:
    return (f"keep one wording in one document and remove the others ({'; '.join(_edit(p) for p in paths)}), "
            "then fix the pointers to what moved")


def _near_duplicates(docs: list[_Doc], paras: list[_Paragraph]) -> list[Result]:
    buckets: dict[str, list[int]] = defaultdict(list)
    for index, para in enumerate(paras):
        buckets[para.norm[:NEAR_ANCHOR_CHARS]].append(index)
        buckets["$" + para.norm[-NEAR_ANCHOR_CHARS:]].append(index)
    parent = list(range(len(paras)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for members in buckets.values():
        if not 1 < len(members) <= NEAR_BUCKET_MAX:
            continue
        texts = [paras[i].norm for i in members]
        for n in range(len(members) - 1):
            # One C++ pass per member over the rest of its bucket; the score's own length bound skips most.
            for _, _, at in process.extract(texts[n], texts[n + 1:], scorer=fuzz.ratio,
                                            score_cutoff=NEAR_DUPLICATE_SCORE, limit=None):
                a, b = members[n], members[n + 1 + at]
                if len(paras[a].places) == 1 and len(paras[b].places) == 1 \
                        and paras[a].places[0][0] == paras[b].places[0][0]:
                    continue  # within one document: a repetition there, not two documents saying it
                parent[root(a)] = root(b)
    groups: dict[int, list[_Paragraph]] = defaultdict(list)
    for index in range(len(paras)):
        groups[root(index)].append(paras[index])
    findings = []
    for group in groups.values():
        if len(group) < 2:
            continue
        paths, lines = _places(docs, group)
        if len(paths) < 2:
            continue
        findings.append(_finding("near_duplicate", paths, lines, f"{len(group)} paragraphs say nearly the same "
                                 f"(similarity {NEAR_DUPLICATE_SCORE} % or more) in {len(paths)} "
                                 f"{plural(len(paths), 'document')}", _merge_step(paths)))
    return findings
