"""``amux memory new``: create one typed topic, then its index line (DESIGN.md §11).

Order (topic first, index second): check the input without touching the library; refuse a name
that exists (any type, archived too: the name is the identity), a type at
its cap, and a topic whose line would push the index over the library's
index limit; warn about likely duplicates found by a keyword search; write
the topic (create-only: ``absent``), then rebuild the index
(compare-and-swap).  A ``conflict`` on the index (another writer, often a
concurrent ``new``, changed it) is retried on a fresh read, since the index
is rebuilt whole; if the index step still fails the topic stays and the
error says so.
"""

from __future__ import annotations

import datetime as _dt
import math
import random
import re
import time
import unicodedata
from dataclasses import dataclass
from typing import Any

from amux_memory.hub.storage.cache import fold
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.params import ABSENT
from amux_memory.tools.typed.catalog import Catalog, load_catalog, topic_from_doc
from amux_memory.tools.typed.index import build_index, build_pointer, check_index_size, check_size, update_index
from amux_memory.tools.typed.library import Doc, Library
from amux_memory.tools.typed.model import (
    CAPS,
    FEEDBACK_DEFAULT_DAYS,
    HOW_SECTION,
    TYPES,
    WHY_SECTION,
    cap_advice,
    feedback_expiry,
    parse_date,
    render_topic,
    topic_path,
    validate_meta,
)

WHY_PLACEHOLDER = "**Why:** TODO: why this holds (the reason, or the incident behind it)."
HOW_PLACEHOLDER = "**How to apply:** TODO: what to do, or watch for, next time."

STOPWORDS = frozenset((
    "the", "and", "for", "with", "that", "this", "from", "into", "when", "what", "which", "where", "will",
    "would", "should", "could", "have", "has", "had", "not", "are", "was", "were", "been", "being", "its", "it's",
    "our", "your", "their", "them", "they", "you", "use", "used", "using", "than", "then", "also", "only",
    "about", "after", "before", "over", "under", "more", "most", "some", "any", "all", "each", "every", "very",
    "just", "can", "may", "must",
))
MAX_KEYWORDS = 8
INDEX_ATTEMPTS = 8
"""How often ``create`` rebuilds the index when other writers keep changing it meanwhile."""


@dataclass(frozen=True)
class NewTopic:
    """A validated request: the topic's path, frontmatter and full text."""

    type: str
    name: str
    path: str
    meta: dict[str, Any]
    text: str


def is_encodable(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _bad(message: str, **data: Any) -> HubError:
    return HubError(ErrorCode.BAD_REQUEST, message, data)


def build_topic(type_: str, name: str, description: str, tags: list[str], *, today: _dt.date,
                expires: str | None = None, body: str | None = None, repository: str = "") -> NewTopic:
    """Check the input and render the topic; raises ``bad_request`` (data ``problems``) for bad input.

    ``created`` is ``today``; feedback gets ``expires`` = created + 90 days
    unless given.  Feedback and project bodies get ``**Why:**`` and ``**How to
    apply:**`` placeholder sections for whichever of them ``body`` lacks; a
    missing body is the description.  The description must be one line: no
    line breaks or other control characters.  Text that is not valid UTF-8
    (a lone surrogate from a non-UTF-8 argument) is refused as ``bad_request``
    naming the field (``data.field``), before anything else is checked.  ``repository``: a ``project`` topic's
    repository identity (:mod:`tools.client.project`); it lives at ``projects/<repository>/<name>.md`` with
    ``project: <repository>`` in its frontmatter (DESIGN.md §24).
    """
    fields = {"type": type_, "name": name, "description": description, "expires": expires, "body": body,
              **{f"tags[{i}]": tag for i, tag in enumerate(tags)}}
    for field, value in fields.items():
        if value is not None and not is_encodable(value):
            raise _bad(f"--{field.split('[')[0]} is not valid UTF-8 text", field=field)
    if type_ not in TYPES:
        raise _bad(f"type {type_!r} is not one of {', '.join(TYPES)}", field="type", allowed=list(TYPES))
    odd = next((c for c in description if unicodedata.category(c) in ("Cc", "Zl", "Zp")), None)
    if odd is not None:
        raise _bad(f"--description must be one line without control characters; it has U+{ord(odd):04X}",
                   field="description")
    if repository and type_ != "project":
        raise _bad(f"--repo files a project topic with its repository's notes; a {type_} topic has no repository",
                   field="repo")
    meta: dict[str, Any] = {"name": name, "description": description, "type": type_, "created": today.isoformat()}
    if repository:
        meta["project"] = repository
    if expires is not None:
        day = parse_date(expires)
        if day is None:
            raise _bad(f"--expires {expires!r} is not a date (YYYY-MM-DD)", field="expires")
        if day < today:
            raise _bad(f"--expires {expires} is before created ({today.isoformat()})", field="expires")
        meta["expires"] = expires
    elif type_ == "feedback":
        meta["expires"] = feedback_expiry(meta["created"], FEEDBACK_DEFAULT_DAYS)
    meta["tags"] = tags
    path = topic_path(type_, name, repository) if isinstance(name, str) else ""
    problems = validate_meta(meta, path=path)
    if problems:
        raise _bad("invalid topic: " + "; ".join(p.message for p in problems),
                   problems=[p.as_dict() for p in problems])
    text = render_topic(meta, "\n" + _body(type_, description, body))
    return NewTopic(type_, name, path, meta, text)


def _body(type_: str, description: str, body: str | None) -> str:
    text = (body if body is not None and body.strip() else description).strip("\n")
    if type_ in ("feedback", "project"):
        if not WHY_SECTION.search(text):
            text += "\n\n" + WHY_PLACEHOLDER
        if not HOW_SECTION.search(text):
            text += "\n\n" + HOW_PLACEHOLDER
    return text + "\n"


def parse_tags(text: str) -> list[str]:
    """``a, b,c`` → ``["a", "b", "c"]`` (empty items dropped; order kept)."""
    return [t.strip() for t in text.split(",") if t.strip()]


def keywords(text: str) -> list[str]:
    """Up to 8 distinctive words of ``text`` (folded like a Hub search: NFC, then casefold; no short words or
    stop words), in order."""
    words = []
    for word in re.findall(r"\w+", fold(text)):
        if (len(word) >= 3 or not word.isascii()) and word not in STOPWORDS and not word.isdigit():
            words.append(word)
    return list(dict.fromkeys(words))[:MAX_KEYWORDS]


def likely_duplicates(lib: Library, catalog: Catalog, new: NewTopic) -> list[str]:
    """Topics a keyword search finds that share most of the new description's keywords.

    A candidate counts when its name, description and tags hold at least half
    of the keywords (and at least two, when there are two or more).
    """
    words = keywords(new.meta["description"])
    if not words:
        return []
    by_path = {t.path: t for t in catalog.topics}
    needed = max(min(2, len(words)), math.ceil(len(words) / 2))
    found = []
    for path in lib.search(words, limit=10):
        topic = by_path.get(path)
        if topic is None or path in (new.path, catalog.index.path) or topic.archived:
            continue
        haystack = fold(" ".join([topic.name, topic.description, *topic.tags]))
        own = set(re.findall(r"\w+", haystack))
        if sum(1 for w in words if w in own or (not w.isascii() and w in haystack)) >= needed:
            found.append(path)
    return found


def create(lib: Library, new: NewTopic) -> dict[str, Any]:
    """Write ``new`` and its index line; returns ``{created, revision, index, warnings}``.

    Raises, with nothing written: ``conflict`` (``data.existing``) for a name
    in use; ``quota_exceeded`` when the type is at its cap, or when the
    rebuilt index would pass the library's limit (``data`` as in
    :func:`~tools.typed.index.check_size`); ``bad_request`` for an
    index that is not UTF-8.  An index ``conflict`` after the topic was
    written is retried (up to :data:`INDEX_ATTEMPTS` rebuilds); when the
    index step still fails, raises its error with a message saying the topic
    exists and ``data.created``/``data.revision``/``data.step``.  When the
    Hub keeps the topic for review (DESIGN.md §21) nothing is written and
    the result is ``{proposed: path, proposal: id, index: None, warnings}``;
    the index is rebuilt after approval (``amux memory index``).
    """
    catalog = load_catalog(lib, everything=False)
    _check_room(lib, catalog, new)
    warnings = []
    similar = likely_duplicates(lib, catalog, new)
    if similar:
        warnings.append({"code": "likely_duplicate", "paths": similar,
                         "message": f"similar topics exist: {', '.join(similar)}; "
                                    "if one says the same, update it and forget this one"})
    revision = lib.write(new.path, new.text.encode("utf-8"), ABSENT)
    if lib.proposals:  # kept for review (DESIGN.md §21): the index lists the topic once a person approves it
        return {"proposed": new.path, "proposal": lib.proposals[0]["proposal"], "index": None,
                "warnings": warnings}
    try:
        index = update_index_retrying(lib)
    except HubError as exc:
        raise HubError(exc.code, f"created {new.path}, but updating {lib.index_path} failed: {exc.message} — "
                       "the topic exists; fix that and run 'amux memory index'",
                       {**exc.data, "created": new.path, "revision": revision, "step": "index"}) from None
    return {"created": new.path, "revision": revision,
            "index": index_summary(index),
            "warnings": warnings}


def index_summary(index: dict[str, Any]) -> dict[str, Any]:
    """``{path, revision, changed}`` of an :func:`~tools.typed.index.update_index` result, plus
    ``proposal`` when the Hub kept the index's rewrite for review (DESIGN.md §21)."""
    summary = {"path": index["path"], "revision": index["revision"], "changed": index["changed"]}
    if index.get("proposal"):
        summary["proposal"] = index["proposal"]
    return summary


def _check_room(lib: Library, catalog: Catalog, new: NewTopic) -> None:
    """Refuse (before anything is written) a name in use, a full type, or an index that would overflow."""
    same = catalog.with_name(new.name)
    if same:
        existing = same[0]
        advice = ("names stay unique, archived ones included: choose another name" if existing.archived
                  else "update it instead of creating another")
        raise HubError(ErrorCode.CONFLICT, f"a topic named {new.name!r} exists: {existing.path}; {advice}",
                       {"path": new.path, "existing": existing.path, "observed_revision": existing.revision},
                       next_step="Update the existing topic (data.existing) with 'amux memory edit PATH', or choose "
                       "another name.")
    count = catalog.counts()[new.type]
    if count >= CAPS[new.type]:
        raise HubError(ErrorCode.QUOTA_EXCEEDED,
                       f"{new.type} already has {count} topics, its cap; {cap_advice(new.type)} first",
                       {"current": count + 1, "maximum": CAPS[new.type], "unit": "topics", "limit": f"{new.type} cap"},
                       next_step="Nothing was written. Archive or remove topics of this type ('amux memory archive', "
                       "'amux memory remove NAME'), then create it again.")
    planned = topic_from_doc(Doc(new.path, new.text.encode("utf-8"), "planned"))
    try:
        trial = Catalog(catalog.index, [*catalog.topics, planned], catalog.pointer)
        index = build_index(trial)
        check_index_size(index, lib)
        pointer = build_pointer(trial, index)
        if pointer is not None and lib.pointer_path is not None:  # the first topic adds MEMORY.md's pointer
            check_size(pointer, lib.pointer_path, lib.pointer_max_bytes, lib.pointer_max_lines, lib.label)
    except HubError as exc:
        raise HubError(exc.code, f"{new.path} was not created: {exc.message}",
                       {**exc.data, "topic": new.path}) from None


def update_index_retrying(lib: Library) -> dict[str, Any]:
    """:func:`update_index` on a fresh read, again after each ``conflict`` (the index is rebuilt whole).

    Returns :func:`update_index`'s result; raises its errors (``conflict``
    only when :data:`INDEX_ATTEMPTS` rebuilds all met another writer).
    """
    for attempt in range(1, INDEX_ATTEMPTS + 1):
        try:
            return update_index(lib)
        except HubError as exc:
            if exc.code is not ErrorCode.CONFLICT or attempt == INDEX_ATTEMPTS:
                raise
            # Concurrent 'new's rebuild the same file: a short random pause lets one of them finish.
            time.sleep(random.uniform(0, 0.02 * attempt))
    raise AssertionError("unreachable")
