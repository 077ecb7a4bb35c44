"""Memory health: what rots in a caller's view of memory, as findings a person or their agent acts on (DESIGN.md §23).

:func:`check_parts` looks at the documents of one or more parts (the caller's
own scope and its team mounts, :mod:`hub.access.mounts`) and returns the ``health``
answer::

    {"findings": [{"code", "paths": [shown path, ...], "lines": [[start, end], ...] (1-based, one per path, or []),
                   "message", "next"}],
     "counts": {code: n}, "documents": n, "elapsed_ms": float}

``counts`` counts every finding; ``findings`` lists them in :data:`CODES`
order, at most :data:`HEALTH_MAX_FINDINGS` and :data:`HEALTH_MAX_BYTES` packed
(a sum of ``counts`` above ``len(findings)`` says some were left out).  Paths
are shown as the caller sees them (``@NAME/`` for a mount).  No finding holds
a credential: a ``secret`` finding gives the rule and redacted preview
(:mod:`hub.methods.scan_report`, as ``amux memory scan``), a document whose *path*
holds one is shown redacted and only as a ``secret``, and link targets in
messages are scrubbed.  Paragraph texts are never quoted.

Codes (thresholds here; why they are what they are: DESIGN.md §23):

* ``duplicate``: one paragraph (blank-line separated; compared with whitespace
  collapsed and case folded) in two or more documents, when it has at least
  :data:`PARAGRAPH_MIN_LINES` lines or :data:`PARAGRAPH_MIN_CHARS` characters.
* ``near_duplicate``: two such paragraphs in different documents whose
  RapidFuzz ``fuzz.ratio`` (normalised Indel similarity, 0-100) is at least
  :data:`NEAR_DUPLICATE_SCORE`, unless one of them is already in every
  document the finding would name (``duplicate`` says it).  Not every pair is compared: each distinct
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
  for the keys alone, on a loaded two-core machine.  On the
  shared corpus :data:`NEAR_DUPLICATE_SCORE` 85 gives 201 ``near_duplicate``
  findings, 90 gives 134, 95 gives 60: 90 keeps one-word edits and drops
  looser resemblance.
* ``dangling_link``: a relative Markdown link (``[t](x.md)``, ``[t]: x.md``),
  ``[[name]]`` or a plain path pointer (``see notes/x.md``) outside code to a
  document of the same scope that does not exist; ``[[name]]`` matches a file name without ``.md`` or a path.  Links
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

Speed (DESIGN.md §23; bench row k): each document's paragraphs, anchors,
links and ``scan`` entries are derived once and kept on its entry in the
Hub's content cache (:mod:`hub.storage.cache`, checked against the walk's ``lstat``
as a search checks it), the duplicate answer is kept with the documents'
revisions it was for, and each candidate bucket's scored pairs with its
texts (:func:`_duplicates`), so a call re-derives only what changed.
``stale`` asks the history's in-memory index (one lookup a document, no
read of history).  Figures, the bench's corpus scope (1,024 documents, 7.9
MiB), load average 10-12 on two cores: in-process 2.4-3.4 s before, 0.10-0.18
s now (0.07-0.10 s on the synthetic scope, 1.0 s before); over the Hub p50
2.7 s before, 176 ms now; after one document edited by hand 0.57 s; a cold
first call (nothing cached) 4.2 s.

The typed-memory lint findings are folded in by the frontends
(``tools/typed/health.py``), since the Hub knows nothing of typed memories
(DESIGN.md §11).  Blocking: the service runs :func:`check_parts` in a worker
thread.
"""

from __future__ import annotations

import contextlib
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

from amux_memory.hub.methods.scan_report import document_entries, shell_command
from amux_memory.hub.methods.secrets import scrub
from amux_memory.hub.storage.cache import CachedDoc, ScopeCache
from amux_memory.hub.storage.history import ScopeHistory
from amux_memory.hub.storage.rewrite_guard import count_lines
from amux_memory.hub.storage.walk import Walked, walk_documents
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
MEMO_KEY = "health.duplicates"
"""Where :func:`check_parts` keeps its duplicate memo in the caller's :attr:`ScopeCache.derived`."""
SECONDS_A_DAY = 86_400
"""Seconds in a day, for ``memory.stale_days`` (s)."""

PARAGRAPH = re.compile(r"(?:^[^\S\n]*\S[^\n]*(?:\n|\Z))+", re.MULTILINE)
"""Consecutive lines holding something other than whitespace."""
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
CODE_SPAN = re.compile(r"`+[^`]*`+")
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'(][^)]*)?\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
WIKI_LINK = re.compile(r"\[\[([^\[\]|#]+)(?:[|#][^\[\]]*)?\]\]")
PLAIN_POINTER = re.compile(r"(?:^\(?|(?<=\s)|(?<=[^\]]\())((?:[\w.-]+/)+[\w.-]+\.md)(?=$|[\s,;:.!?)\]])")
"""A path written as plain text, as people point at notes (``- testing: see notes/testing.md``): at least one
folder, ending in ``.md``, after a space, a ``(`` or at a line's start (never inside a URL or a link's target);
a path from the scope's root, as ``amux memory show`` takes it."""
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class HealthPart:
    """One part to check: ``label`` (``""`` or ``@NAME/``), its scope folder ``root``, the ``prefix`` inside it
    whose documents are checked, its history (None: none is kept, the files' mtimes decide) and the Hub's
    content cache of the scope (None: every file is read and split again)."""

    label: str
    root: str
    prefix: str
    history: ScopeHistory | None
    cache: ScopeCache | None = None


@dataclass
class _Facts:
    """What ``health`` derives from one document's bytes, kept on its cache entry while they are fresh."""

    paragraphs: list[tuple[int, int, str, str, str]]
    links: list[tuple[int, str, str, bool]]
    """``(line, what must exist, target as written, wiki)`` of each link checked (:func:`_checked_links`)."""
    secrets: dict[tuple[str, frozenset[str]], list[Result]] = field(default_factory=dict)
    """``scan``'s entries per (shown path, ``memory.secret_allow``)."""

    @classmethod
    def of(cls, data: bytes, path: str) -> _Facts:
        """The facts of document ``path`` holding ``data``."""
        text = data.decode("utf-8", "replace")
        return cls(_paragraphs(text), _checked_links(path, text) if "[" in text or ".md" in text else [])

    @property
    def size(self) -> int:
        """Bytes this keeps alive, roughly (for the cache's bound)."""
        return sum(len(p[2]) + 200 for p in self.paragraphs) + sum(2 * len(t) + 80 for _, _, t, _ in self.links)


@dataclass
class _Doc:
    shown: str
    inner: str
    data: bytes
    revision: str
    facts: _Facts
    mtime_ns: int
    part: HealthPart


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
        part_docs = _collect(part, sorted(p for p in known if p.startswith(part.prefix)), walked, allowed, stop)
        secret_entries = [e for d in part_docs for e in d.facts.secrets[(d.shown, allowed)]]
        findings += [_secret(entry) for entry in secret_entries]
        # A document whose path holds a credential is shown only (redacted) as a secret finding.
        clean = [d for d in part_docs if not any(e["revision"] is None for e in d.facts.secrets[(d.shown, allowed)])]
        findings += _links(clean, known)
        findings += [f for d in clean for f in _entry(d, limits) + _stale(d, stale_days, now)]
        docs += clean
    findings += _duplicates(docs, parts[0].cache.derived if parts and parts[0].cache is not None else None)
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


def _collect(part: HealthPart, paths: list[str], walked: Walked, allowed: frozenset[str],
             stop: Callable[[], bool]) -> list[_Doc]:
    """The documents ``paths`` of ``part`` with their facts: from the scope's content cache while an entry is
    fresh for the walk's ``lstat`` (:meth:`CachedDoc.fresh`), else read (and cached); a file that cannot be
    read is left out.  Holds the cache's lock, as a search does."""
    cache = part.cache
    with cache.lock if cache is not None else contextlib.nullcontext():
        out = []
        for path in paths:
            if stop():
                break
            st = walked.stats[path]
            entry = cache.docs.get(path) if cache is not None else None
            if entry is None or not entry.fresh(st):
                try:
                    entry = CachedDoc.load(path, st, _read(os.path.join(part.root, path)))
                except OSError:
                    continue
                if cache is not None:
                    cache.put(entry)
            facts = entry.derived
            if not isinstance(facts, _Facts):
                facts = entry.derived = _Facts.of(entry.data, path)
                if cache is not None:
                    entry.derived_bytes = facts.size
                    cache.put(entry)  # counts the facts' bytes
            shown = part.label + path
            if (shown, allowed) not in facts.secrets:
                facts.secrets[(shown, allowed)] = document_entries([shown], {shown: entry.data}.get, allowed)
            out.append(_Doc(shown, path, entry.data, entry.revision, facts, st.st_mtime_ns, part))
    return out


def _entry_first(f: Result) -> int:
    """0 for a finding in a ``MEMORY.md`` (its pointers are read first, so they are fixed first), else 1."""
    return 0 if any(p.rsplit("/", 1)[-1] == ENTRY_NAME and not p.startswith("@", 1) for p in f["paths"][:1]) else 1


def _read(abspath: str) -> bytes:
    """A whole regular file, never through a symlink (``O_NOFOLLOW``) nor blocking on a FIFO."""
    from amux_memory.hub.methods.search import read_file_nofollow

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
    # In the order a person runs them (scan's ``advice`` speaks of "the first command" beside its list).
    next_step = entry["advice"] if not commands else (
        f"{commands[0]}; remove the credential from doc.md (store where it lives instead); then {commands[1]}; "
        "then amux memory scan --history for the stored versions")
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
        if newest is not None and newest.revision == doc.revision:
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


def _targets(text: str) -> list[tuple[int, str, bool | None]]:
    """``(line, target, wiki)`` of every link outside fenced code and code spans; ``wiki`` is ``None`` for a plain
    path pointer (:data:`PLAIN_POINTER`), a path from the scope's root."""
    found: list[tuple[int, str, bool | None]] = []
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or ("[" not in line and ".md" not in line):
            continue
        line = CODE_SPAN.sub("", line)
        here: list[tuple[int, str, bool | None]] = [(number, m.group(1), False) for m in INLINE_LINK.finditer(line)]
        here += [(number, m.group(1), False) for m in REFERENCE_LINK.finditer(line)]
        here += [(number, m.group(1).strip(), True) for m in WIKI_LINK.finditer(line)]
        linked = {target for _, target, _ in here}  # a reference link's target is no second, plain pointer
        here += [(number, m.group(1), None) for m in PLAIN_POINTER.finditer(line) if m.group(1) not in linked]
        found += here
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


def _checked_links(source: str, text: str) -> list[tuple[int, str, str, bool]]:
    """The links of document ``source`` (its ``text``) that are checked: ``(line, what must exist, target as
    written, wiki)``, what must exist being a ``[[name]]``'s name or a relative link's scope path."""
    out = []
    for line, target, wiki in _targets(text):
        if wiki:
            name = target[:-3] if target.endswith(".md") else target
            if name and not name.startswith("@"):
                out.append((line, name, target, True))
        else:
            resolved = _resolve(source if wiki is False else "", target)
            if resolved is not None:
                out.append((line, resolved, target, False))
    return out


def _links(docs: list[_Doc], known: set[str]) -> list[Result]:
    names = {posixpath.basename(p)[:-3] for p in known} | {p[:-3] for p in known}
    findings = []
    for doc in docs:
        for line, needed, target, wiki in doc.facts.links:
            if needed in (names if wiki else known):
                continue
            if wiki:
                shown = f"[[{scrub(target)}]]"
            else:
                shown = scrub(target) if needed == target else f"{scrub(target)} ({doc.part.label}{scrub(needed)})"
            findings.append(_finding("dangling_link", [doc.shown], [[line, line]],
                                     f"line {line} links to {shown}, which does not exist",
                                     f"point the link at the document that holds it now, or drop it: "
                                     f"{_edit(doc.shown)}"))
    return findings


# -- duplicates -------------------------------------------------------------------------------------


def _paragraphs(text: str) -> list[tuple[int, int, str, str, str]]:
    """``(first line, last line, normalised text, head, tail)`` of each paragraph long enough to compare; head
    and tail are its near-duplicate buckets' keys (the tail's marked with ``$``)."""
    out = []
    line = 1
    at = 0
    for match in PARAGRAPH.finditer(text):
        line += text.count("\n", at, match.start())
        block = match.group()
        breaks = block.count("\n", 0, len(block) - 1) if block.endswith("\n") else block.count("\n")
        norm = " ".join(block.split()).casefold()
        if breaks + 1 >= PARAGRAPH_MIN_LINES or len(norm) >= PARAGRAPH_MIN_CHARS:
            out.append((line, line + breaks, norm, norm[:NEAR_ANCHOR_CHARS], "$" + norm[-NEAR_ANCHOR_CHARS:]))
        at = match.start()
    return out


Places = list[tuple[int, int, int]]
"""``(document index, first line, last line)`` of each occurrence of one paragraph."""


def _duplicates(docs: list[_Doc], memo: dict[str, Any] | None = None) -> list[Result]:
    """``duplicate`` and ``near_duplicate`` findings of ``docs``.  ``memo`` (the caller's scope cache's
    ``derived``) keeps the last answer with the documents' revisions it was for, and each candidate bucket's
    scored pairs by the bucket's texts: unchanged documents cost a comparison, a changed one rescoring only
    the buckets its paragraphs fall in.  Only that caller's own checks use it (it holds what it may read)."""
    key = tuple((d.shown, d.revision) for d in docs)
    last = memo.get(MEMO_KEY) if memo is not None else None
    if last is not None and last[0] == key:
        return list(last[1])
    places: dict[str, Places] = {}
    buckets: dict[str, list[str]] = defaultdict(list)
    for index, doc in enumerate(docs):
        for first, end, norm, head, tail in doc.facts.paragraphs:
            found = places.get(norm)
            if found is None:
                places[norm] = [(index, first, end)]
                buckets[head].append(norm)
                buckets[tail].append(norm)
            else:
                found.append((index, first, end))
    findings = []
    for norm, found in places.items():
        if len(found) > 1 and any(p[0] != found[0][0] for p in found):
            paths, lines = _places(docs, [found])
            findings.append(_finding("duplicate", paths, lines, f"the same paragraph ({len(norm)} characters) is "
                                     f"in {len(paths)} documents", _merge_step(paths)))
    scored: dict[tuple[str, ...], list[tuple[int, int]]] = {}
    findings += _near_duplicates(docs, places, buckets, last[2] if last is not None else {}, scored)
    if memo is not None:
        memo[MEMO_KEY] = (key, findings, scored)
    return list(findings)


def _places(docs: list[_Doc], groups: list[Places]) -> tuple[list[str], list[list[int]]]:
    """The documents of ``groups``' occurrences, each once (its first occurrence's lines), in path order."""
    first: dict[str, list[int]] = {}
    for found in groups:
        for index, start, end in found:
            first.setdefault(docs[index].shown, [start, end])
    paths = sorted(first)
    return paths, [first[p] for p in paths]


def _merge_step(paths: list[str]) -> str:
    return (f"keep one wording in one document and remove the others ({'; '.join(_edit(p) for p in paths)}), "
            "then fix the pointers to what moved")


def _near_duplicates(docs: list[_Doc], places: dict[str, Places], buckets: dict[str, list[str]],
                     known: dict[tuple[str, ...], list[tuple[int, int]]],
                     scored: dict[tuple[str, ...], list[tuple[int, int]]]) -> list[Result]:
    """``near_duplicate`` findings from the candidate ``buckets`` (anchor → distinct paragraphs); each bucket's
    pairs ``(i, j)`` at or above the score come from ``known`` when it holds the same texts, else are scored;
    all go into ``scored`` (the next call's ``known``)."""
    parent: dict[str, str] = {}
    joined: dict[str, None] = {}  # in the order found, so the answer is the same every time

    def root(norm: str) -> str:
        while parent.get(norm, norm) != norm:
            parent[norm] = parent.get(parent[norm], parent[norm])
            norm = parent[norm]
        return norm

    for members in buckets.values():
        if not 1 < len(members) <= NEAR_BUCKET_MAX:
            continue
        texts = tuple(members)
        pairs = known.get(texts)
        if pairs is None:
            # One C++ pass per member over the rest of its bucket; the score's own length bound skips most.
            pairs = [(n, n + 1 + at) for n in range(len(texts) - 1)
                     for _, _, at in process.extract(texts[n], texts[n + 1:], scorer=fuzz.ratio,
                                                     score_cutoff=NEAR_DUPLICATE_SCORE, limit=None)]
        scored[texts] = pairs
        for n, m in pairs:
            a, b = places[texts[n]], places[texts[m]]
            if len(a) == 1 and len(b) == 1 and a[0][0] == b[0][0]:
                continue  # within one document: a repetition there, not two documents saying it
            parent[root(texts[n])] = root(texts[m])
            joined.update(((texts[n], None), (texts[m], None)))
    groups: dict[str, list[str]] = defaultdict(list)
    for norm in joined:
        groups[root(norm)].append(norm)
    findings = []
    for norms in groups.values():
        if len(norms) < 2:
            continue
        group = [places[norm] for norm in norms]
        paths, lines = _places(docs, group)
        if len(paths) < 2 or any({docs[i].shown for i, _, _ in found} >= set(paths) for found in group):
            continue  # one paragraph is in every one of these documents: the duplicate finding says it already
        findings.append(_finding("near_duplicate", paths, lines, f"{len(group)} paragraphs say nearly the same "
                                 f"(similarity {NEAR_DUPLICATE_SCORE} % or more) in {len(paths)} "
                                 f"{plural(len(paths), 'document')}", _merge_step(paths)))
    return findings
