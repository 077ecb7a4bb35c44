"""Turn discovered host memories into typed topics: normalise, plan, and (on ``--apply``) write.

DESIGN.md §11: host memory is a cache its host owns; the reusable facts in
it are normalised into the shared library, each topic written first and its
index line second, after checking for duplicates.

**Normalisation** (:func:`normalize`): ``type`` is the candidate's suggestion
(host frontmatter or host convention) or the ``--type`` default; ``name`` the
slug of the host's name or file name; ``description`` the host's description,
else the body's first heading, else its first sentence, cut to 200
characters; ``tags`` the host's tags/keywords as slugs (at most 10), else
``[type, host]``; ``created`` from the host file; feedback gets ``expires``
(the host's, else ``created`` + 90 days); ``source`` is ``"<host>:<path>"``;
a host ``metadata`` map and ``related`` list are kept.  The body is kept as
written.  No ``**Why:**`` / ``**How to apply:**`` placeholders are added to
feedback or project bodies: an importer cannot know the reason, and an empty
placeholder would silence ``amux memory lint``'s warning about the missing
sections, which is the honest signal that someone should fill them in.

**Duplicates** (:func:`plan_import`), checked against every topic already in
the library (archived feedback included) and against candidates planned
earlier in the same run, in this order (the similarity check, the only
costly one, comes after the limits below):

* ``source``: a topic with the same ``source`` was imported before;
* exact: the same body after normalisation (Unicode NFC, case-folded,
  Markdown emphasis/heading marks removed, whitespace collapsed);
* name: a topic with the same name slug (names are unique across types);
* similar: word-set overlap (Jaccard) of at least 0.9 with 8 or more
  distinct words on each side, or a ``difflib`` ratio of at least 0.9
  between the normalised texts as word sequences (first 1,000 words, after
  cheap upper-bound checks).

**Limits**: per-type caps (10/30/20/50) count existing plus planned topics;
a topic over the library's document size, the scope's document count or
bytes, or one whose index line would push the index (``index.md`` in a Hub
scope, ``MEMORY.md`` in a project) over the library's index limits is skipped
with that reason.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from amux_memory.hub.methods.secrets import find_secrets
from amux_memory.protocol.errors import HubError
from amux_memory.protocol.params import ABSENT
from amux_memory.tools.client.wording import counted
from amux_memory.tools.typed.catalog import Catalog, Topic, load_catalog, topic_from_doc
from amux_memory.tools.typed.hosts import Candidate, Discovery
from amux_memory.tools.typed.library import Doc, Library
from amux_memory.tools.typed.model import (
    CAPS,
    TYPES,
    feedback_expiry,
    is_slug,
    parse_date,
    render_topic,
    slugify,
    topic_path,
    validate_meta,
)

DESCRIPTION_MAX = 200
TAGS_MAX = 10
SIMILAR_RATIO = 0.9
"""Body similarity at or above which two topics count as near duplicates."""
SIMILAR_MIN_WORDS = 8
_COMPARE_WORDS = 1000

_MARKS = re.compile(r"[*_`#>|~]+")
_WORD = re.compile(r"\w+")


@dataclass
class PlanItem:
    """One candidate's fate: ``action`` is ``create`` or ``skip``; ``reason`` says why.

    ``target`` is the logical path the topic would get; ``duplicate_of`` the
    library path or host source it duplicates; ``content`` the rendered topic
    (None when it could not be built).
    """

    source: str
    action: str
    reason: str
    type: str | None = None
    name: str | None = None
    target: str | None = None
    description: str | None = None
    duplicate_of: str | None = None
    content: bytes | None = None
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view (without the content)."""
        out: dict[str, Any] = {"action": self.action, "reason": self.reason, "source": self.source,
                               "type": self.type, "name": self.name, "target": self.target}
        if self.description is not None:
            out["description"] = self.description
        if self.duplicate_of is not None:
            out["duplicate_of"] = self.duplicate_of
        if self.problems:
            out["problems"] = self.problems
        return out


@dataclass
class Plan:
    """What an import would do: the items in discovery order, plus what the discovery reported."""

    discovery: Discovery
    library: str
    items: list[PlanItem] = field(default_factory=list)

    @property
    def creates(self) -> list[PlanItem]:
        """The items that will create a topic, in plan order."""
        return [i for i in self.items if i.action == "create"]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{from, library, roots, summary, items, host_skipped, notes}``."""
        reasons: dict[str, int] = {}
        for item in self.items:
            if item.action == "skip":
                key = item.reason.split(":")[0]
                reasons[key] = reasons.get(key, 0) + 1
        return {
            "from": self.discovery.host, "library": self.library, "roots": self.discovery.roots,
            "summary": {"candidates": len(self.items), "create": len(self.creates),
                        "skip": len(self.items) - len(self.creates), "skip_reasons": reasons,
                        "host_files_skipped": len(self.discovery.skipped)},
            "items": [i.as_dict() for i in self.items],
            "host_skipped": [s.as_dict() for s in self.discovery.skipped],
            "notes": self.discovery.notes,
        }


# -- normalisation ---------------------------------------------------------------------------------


def normalize_text(text: str) -> str:
    """Body text for comparisons: NFC, case-folded, Markdown marks dropped, whitespace collapsed."""
    folded = unicodedata.normalize("NFC", text).casefold()
    return " ".join(_MARKS.sub(" ", folded).split())


def describe(body: str) -> str:
    """A one-line description from a body: its first heading, else its first sentence."""
    for line in body.split("\n"):
        stripped = line.strip()
        if stripped.startswith("#"):
            heading = stripped.lstrip("#").strip()
            if heading:
                return _clip(heading)
    plain = " ".join(_MARKS.sub(" ", body).split())
    sentence = re.split(r"(?<=[.!?。！？])\s", plain, maxsplit=1)[0] if plain else ""
    return _clip(sentence)


def _clip(text: str, limit: int = DESCRIPTION_MAX) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"


def _tags(cand: Candidate, kind: str) -> list[str]:
    tags = list(dict.fromkeys(slugify(t) for t in cand.tags if t.strip()))[:TAGS_MAX]
    if tags:
        return tags
    host = cand.host if cand.host != "dir" else "imported"
    return list(dict.fromkeys([kind, slugify(host)]))


def normalize(cand: Candidate, *, default_type: str = "reference") -> tuple[dict[str, Any], str]:
    """The frontmatter and body of the topic a candidate becomes (see the module docstring).

    Returns ``(meta, body)``; the caller validates ``meta`` (it is valid for
    every candidate whose ``created`` is a date).
    """
    kind = cand.type if cand.type in TYPES else default_type
    name = slugify(cand.name)
    description = _clip(cand.description) if cand.description.strip() else describe(cand.body)
    meta: dict[str, Any] = {
        "name": name,
        "description": description or name,
        "type": kind,
        "created": cand.created,
        "tags": _tags(cand, kind),
        "source": f"{cand.host}:{cand.source}",
    }
    if kind == "feedback":
        given = parse_date(cand.meta.get("expires"))
        if given is not None:
            meta["expires"] = given.isoformat()
        elif parse_date(cand.created) is not None:
            meta["expires"] = feedback_expiry(cand.created)
    related = cand.meta.get("related")
    if isinstance(related, list) and all(isinstance(r, str) for r in related):
        meta["related"] = related
    if isinstance(cand.meta.get("metadata"), dict):
        meta["metadata"] = cand.meta["metadata"]
    body = cand.body.lstrip("\n")
    return meta, body


# -- duplicates ---------------------------------------------------------------------------------------


@dataclass
class KnownTopics:
    """What the library (plus this run's plan so far) already holds, for duplicate checks.

    Maps from ``source``, normalised body and name slug to the logical path
    holding it, and every normalised body with its word set for the
    similarity check.  Build one with :meth:`from_catalog`.
    """

    sources: dict[str, str] = field(default_factory=dict)
    bodies: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    texts: list[tuple[str, str, frozenset[str]]] = field(default_factory=list)

    @classmethod
    def from_catalog(cls, catalog: Catalog) -> KnownTopics:
        """Every topic of ``catalog`` (archived feedback included), by source, body and name."""
        known = cls()
        for topic in catalog.topics:
            meta = topic.meta or {}
            known.add(topic.path, topic.name, meta.get("source"), topic.body)
            known.names.setdefault(topic.stem, topic.path)
        return known

    def add(self, where: str, name: str | None, source: Any, body: str) -> None:
        """Record that the document at ``where`` holds ``body`` (and ``name``/``source`` when given)."""
        norm = normalize_text(body)
        if isinstance(source, str) and source:
            self.sources.setdefault(source, where)
        if norm:
            self.bodies.setdefault(norm, where)
        if name:
            self.names.setdefault(name, where)
        self.texts.append((where, norm, frozenset(_WORD.findall(norm))))

    def duplicate(self, name: str, source: str, body: str) -> tuple[str, str] | None:
        """``(reason, where)`` when the candidate has a known source, body or name, else None (cheap)."""
        if source in self.sources:
            return "duplicate: already imported from this source", self.sources[source]
        norm = normalize_text(body)
        if norm in self.bodies:
            return "duplicate: same body", self.bodies[norm]
        if name in self.names:
            return "near duplicate: same name", self.names[name]
        return None

    def similar(self, body: str) -> tuple[str, str] | None:
        """``(reason, where)`` when the candidate's body is close to a known one, else None (costly)."""
        norm = normalize_text(body)
        words = frozenset(_WORD.findall(norm))
        for where, other, other_words in self.texts:
            if similar_bodies(norm, words, other, other_words):
                return "near duplicate: similar body", where
        return None


def similar_bodies(a: str, a_words: frozenset[str], b: str, b_words: frozenset[str]) -> bool:
    """Whether two normalised bodies (:func:`normalize_text`) with their word sets are near duplicates.

    True for a word-set overlap (Jaccard) of at least :data:`SIMILAR_RATIO`
    with :data:`SIMILAR_MIN_WORDS` or more distinct words on each side, or a
    ``difflib`` ratio of at least :data:`SIMILAR_RATIO` between the first
    words of each as word sequences.  The one costly duplicate check.
    """
    if (len(a_words) >= SIMILAR_MIN_WORDS and len(b_words) >= SIMILAR_MIN_WORDS
            and len(a_words & b_words) / len(a_words | b_words) >= SIMILAR_RATIO):
        return True
    # Compare word sequences, not characters: faster, and a changed word counts once.
    x, y = a.split()[:_COMPARE_WORDS], b.split()[:_COMPARE_WORDS]
    if not x or not y or 2 * min(len(x), len(y)) / (len(x) + len(y)) < SIMILAR_RATIO:
        return False  # the ratio can never reach the threshold: skip the expensive part
    matcher = difflib.SequenceMatcher(None, x, y)
    return matcher.quick_ratio() >= SIMILAR_RATIO and matcher.ratio() >= SIMILAR_RATIO


# -- limits --------------------------------------------------------------------------------------------


@dataclass
class _Room:
    """The library's remaining room: documents, bytes, per-type counts, and the index."""

    document_max_bytes: int
    documents_left: int
    bytes_left: int
    counts: dict[str, int]


def library_limits(lib: Library) -> tuple[int, int, int]:
    """``(document_max_bytes, scope_max_documents, scope_max_bytes)`` of a library.

    From the Hub's ``hello`` limits for a Hub library; the project library's
    document limit and the Hub's scope limits (the same store code) otherwise.
    """
    from amux_memory.protocol.limits import LIMITS

    hello = getattr(getattr(lib, "client", None), "hello", None) or {}
    limits = hello.get("limits") or {}
    if limits:
        return (int(limits.get("document_max_bytes", LIMITS.document_max_bytes)),
                int(limits.get("scope_max_documents", LIMITS.scope_max_documents)),
                int(limits.get("scope_max_bytes", LIMITS.scope_max_bytes)))
    from amux_memory.tools.typed.library import PROJECT_DOCUMENT_MAX_BYTES

    return PROJECT_DOCUMENT_MAX_BYTES, LIMITS.scope_max_documents, LIMITS.scope_max_bytes


def _room(lib: Library, catalog: Catalog) -> _Room:
    doc_max, max_docs, max_bytes = library_limits(lib)
    docs = len(catalog.topics) + 1 + (catalog.pointer is not None)  # the index (and pointer) an import may create
    used = sum(len(t.content) for t in catalog.topics) + len(catalog.index.content or b"") \
        + len(catalog.pointer.content or b"" if catalog.pointer is not None else b"")
    return _Room(doc_max, max_docs - docs, max_bytes - used, catalog.counts())


# -- planning ----------------------------------------------------------------------------------------------


def plan_import(lib: Library, discovery: Discovery, *, default_type: str = "reference",
                catalog: Catalog | None = None) -> Plan:
    """Decide, for every candidate of ``discovery``, whether it is created and where.

    Reads the whole library once (``catalog`` may be passed in); writes
    nothing.  Raises :class:`HubError` when the library cannot be read.
    """
    from amux_memory.tools.typed.index import build_index, check_index_size

    catalog = catalog if catalog is not None else load_catalog(lib)
    known = KnownTopics.from_catalog(catalog)
    room = _room(lib, catalog)
    plan = Plan(discovery, lib.label)
    planned: list[Topic] = []
    for cand in discovery.candidates:
        item = _plan_one(cand, default_type, known, room)
        if item.action == "create":
            assert item.target is not None and item.content is not None
            topic = topic_from_doc(Doc(item.target, item.content, "planned"))
            trial = Catalog(catalog.index, catalog.topics + planned + [topic], catalog.pointer)
            try:
                check_index_size(build_index(trial), lib)
            except HubError as exc:
                item.action, item.reason = "skip", f"index full: {exc.data.get('limit', lib.index_path)} " \
                                                   f"would exceed {exc.data.get('maximum')}"
            else:
                planned.append(topic)
                _reserve(room, known, item, cand)
        plan.items.append(item)
    return plan


def _plan_one(cand: Candidate, default_type: str, known: KnownTopics, room: _Room) -> PlanItem:
    meta, body = normalize(cand, default_type=default_type)
    kind, name = meta["type"], meta["name"]
    item = PlanItem(source=meta["source"], action="skip", reason="", type=kind, name=name,
                    target=topic_path(kind, name), description=meta["description"])
    problems = validate_meta(meta, path=item.target or "")
    if problems or not is_slug(name):
        item.reason = "invalid: frontmatter would not validate"
        item.problems = [p.message for p in problems]
        return item
    dup = known.duplicate(name, meta["source"], body)
    if dup is not None:
        item.reason, item.duplicate_of = dup
        return item
    if room.counts.get(kind, 0) >= CAPS[kind]:
        item.reason = f"cap: {kind} already has {room.counts.get(kind, 0)} of {CAPS[kind]} topics"
        return item
    content = render_topic(meta, body).encode("utf-8")
    found = find_secrets(content) or find_secrets((item.target or "").encode("utf-8", "surrogatepass"))
    if found:  # the write would be refused (DESIGN.md §16): skip it, so the rest is imported
        item.reason = "credential: " + "; ".join(f"line {f.line} {f.rule} {f.preview}" for f in found[:3]) + \
            " (remove it from the host's file and import again)"
    elif len(content) > room.document_max_bytes:
        item.reason = f"too large: {len(content)} bytes; a document may have {room.document_max_bytes}"
    elif room.documents_left <= 0:
        item.reason = "scope full: no document left in the library's quota"
    elif len(content) > room.bytes_left:
        item.reason = f"scope full: {counted(room.bytes_left, 'byte')} left in the library's quota"
    elif (near := known.similar(body)) is not None:
        item.reason, item.duplicate_of = near
    else:
        item.action, item.reason, item.content = "create", "new", content
    return item


def _reserve(room: _Room, known: KnownTopics, item: PlanItem, cand: Candidate) -> None:
    assert item.type is not None and item.content is not None and item.target is not None
    room.counts[item.type] = room.counts.get(item.type, 0) + 1
    room.documents_left -= 1
    room.bytes_left -= len(item.content)
    known.add(item.target, item.name, item.source, normalize(cand)[1])


# -- applying ----------------------------------------------------------------------------------------------


def apply_plan(lib: Library, plan: Plan, *, on_step: Callable[[str, str], None] | None = None) -> dict[str, Any]:
    """Write the planned topics (each created with expected revision ``absent``), then the index.

    Returns ``{created: [paths], index: update_index's result, error: None}``.
    On the first failure it stops: ``error`` is ``{step, path, code, message,
    data}``, ``created`` lists what was written before it, ``not_attempted``
    the rest; when a topic write failed the index is left alone (``amux memory
    index`` lists the created topics later).  ``on_step(step, path)`` runs
    before each write (a seam for tests).  Topics the Hub keeps for review
    (DESIGN.md §21) are listed in ``proposed`` (``{proposal, path, action}``
    each), not ``created``.
    """
    from amux_memory.tools.typed.index import update_index

    report: dict[str, Any] = {"created": [], "not_attempted": [], "index": None, "error": None}
    creates = plan.creates
    for n, item in enumerate(creates):
        assert item.target is not None and item.content is not None
        try:
            if on_step is not None:
                on_step("create", item.target)
            kept = len(lib.proposals)
            lib.write(item.target, item.content, ABSENT)
        except HubError as exc:
            report["error"] = _error("create", item.target, exc)
            report["not_attempted"] = [i.target for i in creates[n + 1:]]
            return report
        if len(lib.proposals) > kept:  # kept for review (DESIGN.md §21): written once a person approves it
            report.setdefault("proposed", []).append(lib.proposals[-1])
        else:
            report["created"].append(item.target)
    if not report["created"]:
        return report
    try:
        if on_step is not None:
            on_step("index", lib.index_path)
        report["index"] = update_index(lib)
    except HubError as exc:
        report["error"] = _error("index", lib.index_path, exc)
    return report


def _error(step: str, path: str, exc: HubError) -> dict[str, Any]:
    return {"step": step, "path": path, "code": exc.code.value, "message": exc.message, "data": exc.data}
