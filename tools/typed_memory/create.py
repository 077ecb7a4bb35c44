"""``amux memory new``: create one typed topic, then its index line (seed 004 §3, §4, §4.5).

Order (§4.5): check the input without touching the library; refuse a name
that exists (any type, archived too: the name is the identity) and a type at
its cap; warn about likely duplicates found by a keyword search; write the
topic (create-only: ``absent``), then rebuild ``MEMORY.md`` (compare-and-swap).
If the index step fails the topic stays and the error says so.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import dataclass
from typing import Any

from protocol.errors import ErrorCode, HubError
from tools.typed_memory.catalog import Catalog, load_catalog
from tools.typed_memory.index import update_index
from tools.typed_memory.library import ABSENT, Library
from tools.typed_memory.model import (
    CAPS, FEEDBACK_DEFAULT_DAYS, INDEX_PATH, TYPES, feedback_expiry, parse_date, render_topic, topic_path,
    validate_meta,
)

WHY_PLACEHOLDER = "**Why:** TODO: why this holds (the reason, or the incident behind it)."
HOW_PLACEHOLDER = "**How to apply:** TODO: what to do, or watch for, next time."
_WHY = re.compile(r"\*\*\s*Why\s*(?:[:：]\s*\*\*|\*\*\s*[:：])", re.IGNORECASE)
_HOW = re.compile(r"\*\*\s*How to apply\s*(?:[:：]\s*\*\*|\*\*\s*[:：])", re.IGNORECASE)

STOPWORDS = frozenset(
    "the and for with that this from into when what which where will would should could have has had not "
    "are was were been being its it's our your their them they you use used using than then also only "
    "about after before over under more most some any all each every very just can may must".split()
)
MAX_KEYWORDS = 8


@dataclass(frozen=True)
class NewTopic:
    """A validated request: the topic's path, frontmatter and full text."""

    type: str
    name: str
    path: str
    meta: dict[str, Any]
    text: str


def _bad(message: str, **data: Any) -> HubError:
    return HubError(ErrorCode.BAD_REQUEST, message, data)


def build_topic(type_: str, name: str, description: str, tags: list[str], *, today: _dt.date,
                expires: str | None = None, body: str | None = None) -> NewTopic:
    """Check the input and render the topic; raises ``bad_request`` (data ``problems``) for bad input.

    ``created`` is ``today``; feedback gets ``expires`` = created + 90 days
    unless given.  Feedback and project bodies get ``**Why:**`` and ``**How to
    apply:**`` placeholder sections for whichever of them ``body`` lacks; a
    missing body is the description.
    """
    if type_ not in TYPES:
        raise _bad(f"type {type_!r} is not one of {', '.join(TYPES)}", field="type", allowed=list(TYPES))
    meta: dict[str, Any] = {"name": name, "description": description, "type": type_, "created": today.isoformat()}
    if expires is not None:
        if parse_date(expires) is None:
            raise _bad(f"--expires {expires!r} is not a date (YYYY-MM-DD)", field="expires")
        if parse_date(expires) < today:  # type: ignore[operator]
            raise _bad(f"--expires {expires} is before created ({today.isoformat()})", field="expires")
        meta["expires"] = expires
    elif type_ == "feedback":
        meta["expires"] = feedback_expiry(meta["created"], FEEDBACK_DEFAULT_DAYS)
    meta["tags"] = tags
    problems = validate_meta(meta, path=topic_path(type_, name) if isinstance(name, str) else "")
    if problems:
        raise _bad("invalid topic: " + "; ".join(p.message for p in problems),
                   problems=[p.as_dict() for p in problems])
    text = render_topic(meta, "\n" + _body(type_, description, body))
    return NewTopic(type_, name, topic_path(type_, name), meta, text)


def _body(type_: str, description: str, body: str | None) -> str:
    text = (body if body is not None and body.strip() else description).strip("\n")
    if type_ in ("feedback", "project"):
        if not _WHY.search(text):
            text += "\n\n" + WHY_PLACEHOLDER
        if not _HOW.search(text):
            text += "\n\n" + HOW_PLACEHOLDER
    return text + "\n"


def parse_tags(text: str) -> list[str]:
    """``a, b,c`` → ``["a", "b", "c"]`` (empty items dropped; order kept)."""
    return [t.strip() for t in text.split(",") if t.strip()]


def keywords(text: str) -> list[str]:
    """Up to 8 distinctive words of ``text`` (case-folded, no short words or stop words), in order."""
    words = []
    for word in re.findall(r"\w+", text.casefold()):
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
        if topic is None or path in (new.path, INDEX_PATH) or topic.archived:
            continue
        tags = (topic.meta or {}).get("tags") or []
        haystack = " ".join([topic.name, topic.description, *map(str, tags)]).casefold()
        own = set(re.findall(r"\w+", haystack))
        if sum(1 for w in words if w in own or (not w.isascii() and w in haystack)) >= needed:
            found.append(path)
    return found


def create(lib: Library, new: NewTopic) -> dict[str, Any]:
    """Write ``new`` and its index line; returns ``{created, revision, index, warnings}``.

    Raises ``conflict`` (``data.existing``) for a name in use, ``quota_exceeded``
    when the type is at its cap (nothing written in either case); when the
    index step fails after the topic was written, the index's error with a
    message saying so and ``data.created``/``data.revision``.
    """
    catalog = load_catalog(lib, everything=False)
    same = catalog.with_name(new.name)
    if same:
        existing = same[0]
        raise HubError(ErrorCode.CONFLICT,
                       f"a topic named {new.name!r} exists: {existing.path}; update it instead of creating another",
                       {"path": new.path, "existing": existing.path, "observed_revision": existing.revision})
    count = catalog.counts()[new.type]
    if count >= CAPS[new.type]:
        raise HubError(ErrorCode.QUOTA_EXCEEDED,
                       f"{new.type} already has {count} topics, its cap; archive, merge or delete one first",
                       {"current": count + 1, "maximum": CAPS[new.type], "unit": "topics", "limit": f"{new.type} cap"})
    warnings = []
    similar = likely_duplicates(lib, catalog, new)
    if similar:
        warnings.append({"code": "likely_duplicate", "paths": similar,
                         "message": f"similar topics exist: {', '.join(similar)}; "
                                    "if one says the same, update it and forget this one"})
    revision = lib.write(new.path, new.text.encode("utf-8"), ABSENT)
    try:
        index = update_index(lib)
    except HubError as exc:
        raise HubError(exc.code, f"created {new.path}, but updating {INDEX_PATH} failed: {exc.message} — "
                       "the topic exists; fix that and run 'amux memory index'",
                       {**exc.data, "created": new.path, "revision": revision, "step": "index"}) from None
    return {"created": new.path, "revision": revision,
            "index": {"path": INDEX_PATH, "revision": index["revision"], "changed": index["changed"]},
            "warnings": warnings}
