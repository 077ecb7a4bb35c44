"""Typed memories: the four types, their frontmatter schema, and topic files as text.

A *topic* is a Markdown document ``<type>/<name>.md`` whose YAML frontmatter
says what it is (``name``, ``description``, ``type``, ``created``, ``tags``,
and ``expires`` for feedback).  This module is pure: it parses, validates and
renders text and never touches storage (see :mod:`tools.typed.library`).
DESIGN.md §11 (types and caps, frontmatter, body sections, name slugs).

Heavy libraries (PyYAML, python-frontmatter, jsonschema) are imported inside
the functions that use them, so importing this module costs nothing.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
import unicodedata
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from amux_memory.protocol.limits import ENTRY_NAME
from amux_memory.tools.client.project import project_path

TYPES = ("user", "feedback", "project", "reference")
"""The four memory types, in the order the index lists them."""

CAPS = {"user": 10, "feedback": 30, "project": 20, "reference": 50}
"""Most topics of each type one library may hold (DESIGN.md §11)."""

FEEDBACK_DEFAULT_DAYS = 90
"""Feedback without an explicit ``expires`` lapses this many days after ``created``."""

def cap_advice(type_: str) -> str:
    """What to do when ``type_`` is at its cap (only feedback can be archived)."""
    if type_ == "feedback":
        return ("archive expired feedback ('amux memory archive'), merge two, or delete one with "
                "'amux memory remove NAME'")
    return "merge two, or delete one with 'amux memory remove NAME' (it updates the index)"


ARCHIVE_DIR = "feedback/_archive"
"""Where expired feedback goes; never indexed, never counted against the cap."""

ENTRY_PATH = ENTRY_NAME
"""The scope's entry document ``MEMORY.md``: a project library's index; in a Hub scope it holds a pointer."""

HUB_INDEX_PATH = "index.md"
"""A Hub scope's index document: an ordinary document (the 64 KiB document limit), so ``MEMORY.md``
stays within its entry limit of a few preferences and pointers (DESIGN.md §11)."""

INDEX_POINTER = f"Typed memory index: [{HUB_INDEX_PATH}]({HUB_INDEX_PATH}) (topics: user, feedback, project, reference)"
"""The line ``amux memory index`` keeps in a Hub scope's ``MEMORY.md`` while the scope has typed topics."""

INDEX_POINTER_LINE = re.compile(r"^Typed memory index: ")
"""Recognises the pointer line (whatever follows), so a rebuild replaces it in place."""

FIELD_ORDER = ("name", "description", "type", "project", "created", "expires", "tags", "source", "related", "metadata")
"""Frontmatter keys in the order :func:`render_topic` writes them; any other key follows."""

KNOWN_FIELDS = frozenset(FIELD_ORDER)

# \Z, not $: Python's $ also matches before a final newline, and "a\n" is not a slug.
SLUG_RE = re.compile(r"^[a-z0-9_-]+\Z")
SLUG_MAX = 64
_DATE_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
MAX_NESTING = 32
"""Deepest nesting of lists and maps frontmatter may use (real frontmatter needs a handful)."""
_DELIMITER = re.compile(r"^---[ \t]*\r?$")
WHY_SECTION = re.compile(r"\*\*\s*Why\s*(?:[:：]\s*\*\*|\*\*\s*[:：])", re.IGNORECASE)
"""A feedback/project body's ``**Why:**`` section marker (also ``**Why**:``, a full-width colon, any case)."""
HOW_SECTION = re.compile(r"\*\*\s*How to apply\s*(?:[:：]\s*\*\*|\*\*\s*[:：])", re.IGNORECASE)
"""The ``**How to apply:**`` section marker, matched like :data:`WHY_SECTION`."""


@dataclass(frozen=True)
class Problem:
    """One finding about a library: what is wrong, where, and how bad.

    ``severity`` is ``"error"`` (lint fails), ``"warning"`` or ``"info"``;
    ``code`` a short slug (``schema``, ``cap``, ``index_missing_file``, ...);
    ``path`` the logical path of the document concerned; ``line`` 1-based, or
    None when the problem is about the whole document; ``field`` the
    frontmatter field path for schema problems (e.g. ``tags/3``).
    """

    severity: str
    code: str
    path: str
    line: int | None
    message: str
    field: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The problem as a plain JSON-ready map."""
        return asdict(self)

    def render(self) -> str:
        """``path:line: severity: message`` (``path: severity: message`` without a line)."""
        where = self.path or "-"
        if self.line is not None:
            where = f"{where}:{self.line}"
        return f"{where}: {self.severity}: {self.message}"


class TopicError(ValueError):
    """A topic file whose frontmatter cannot be read; ``line`` is 1-based (None if unknown)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


# -- schema ------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _schema_text() -> str:
    from importlib import resources

    return resources.files("amux_memory.tools.typed").joinpath("memory.schema.json").read_text("utf-8")


def load_schema() -> dict[str, Any]:
    """The frontmatter JSON Schema (Draft 2020-12) shipped as package data ``memory.schema.json``."""
    schema: dict[str, Any] = json.loads(_schema_text())
    return schema


@lru_cache(maxsize=1)
def _validator() -> Any:
    from jsonschema import Draft202012Validator, validators

    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    # JSON Schema patterns are ECMA-262 regexes, whose '$' is the end of the input; Python's
    # re (which jsonschema uses) lets '$' match before a final newline, so "a\n" would pass.
    # (types-jsonschema declares extend() without annotations, hence the ignore.)
    ecma = validators.extend(Draft202012Validator, {"pattern": _ecma_pattern_keyword})  # type: ignore[no-untyped-call]
    # Formats are not asserted by default in 2020-12; ask for them so 2026-02-30 is refused.
    return ecma(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _ecma_pattern_keyword(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not ecma_regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@lru_cache(maxsize=64)
def ecma_regex(pattern: str) -> re.Pattern[str]:
    """Compile a JSON Schema (ECMA-262) ``pattern`` for Python with ``$`` meaning end of input.

    Every unescaped ``$`` outside a character class becomes ``\\Z``; the rest
    of the syntax our schema uses is the same in both dialects.
    """
    out: list[str] = []
    escaped = in_class = False
    for ch in pattern:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "$":
            out.append("\\Z")
            continue
        out.append(ch)
    return re.compile("".join(out))


def _field_path(error: Any) -> str:
    parts = [str(p) for p in error.absolute_path]
    if error.validator == "required":
        # The missing property is the interesting part, not the object that lacks it.
        match = re.search(r"'([^']+)' is a required property", error.message)
        if match:
            parts.append(match.group(1))
    return "/".join(parts)


def validate_meta(meta: dict[str, Any], *, path: str = "", line: int | None = None) -> list[Problem]:
    """Check a frontmatter mapping against the schema: one ``error`` Problem per offending field.

    ``meta`` should already be normalised (:func:`normalize_meta`: dates as ISO
    strings).  Each Problem has code ``schema``, the given ``path`` and
    ``line``, ``field`` set to the JSON path of the offending value
    (``tags/2``; ``""`` for the whole mapping) and a message that starts with
    it.  A value that breaks several rules gets the most telling one (wrong
    type, then missing, enum, pattern, format, the rest).  Unknown fields are
    not errors here (see :func:`unknown_fields`).  Problems come sorted by
    field, so output is stable.
    """
    best: dict[str, tuple[int, str]] = {}
    for err in _validator().iter_errors(meta):
        field = _field_path(err)
        found = (_RANK.get(err.validator, len(_RANK)), f"{field or 'frontmatter'}: {_message(err)}")
        if field not in best or found < best[field]:
            best[field] = found
    return [Problem("error", "schema", path, line, message, field) for field, (_, message) in sorted(best.items())]


_RANK = {"type": 0, "required": 1, "enum": 2, "pattern": 3, "format": 4}


def _message(error: Any) -> str:
    # jsonschema's messages repeat a whole instance; keep them short and say what is wanted.
    from amux_memory.tools.client.wording import counted

    v = error.validator
    if v == "required":
        return "is required"
    if v == "maxLength":
        return f"is {counted(len(error.instance), 'character')}; at most {error.validator_value} allowed"
    if v == "minLength":
        return f"must have at least {counted(int(error.validator_value), 'character')}"
    if v == "maxItems":
        return f"has {counted(len(error.instance), 'item')}; at most {error.validator_value} allowed"
    if v == "minItems":
        return f"needs at least {counted(int(error.validator_value), 'item')}"
    if v == "pattern":
        return f"{short_repr(error.instance)} does not match {error.validator_value}"
    if v == "enum":
        return f"{short_repr(error.instance)} is not one of {', '.join(map(str, error.validator_value))}"
    if v == "format":
        return f"{short_repr(error.instance)} is not a valid {error.validator_value} (YYYY-MM-DD)"
    if v == "uniqueItems":
        return "has duplicate items"
    if v == "type":
        return f"must be of type {error.validator_value}, not {type(error.instance).__name__}"
    text = str(error.message)
    return text if len(text) <= 160 else text[:157] + "..."


def short_repr(value: Any) -> str:
    """``repr(value)`` cut to at most 60 characters (57 and ``...``), for messages about a bad value."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def unknown_fields(meta: dict[str, Any]) -> list[str]:
    """Frontmatter keys the schema does not define (kept, reported by lint as warnings)."""
    return [str(k) for k in meta if k not in KNOWN_FIELDS]


def normalize_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """A copy with string keys and every YAML date/datetime (at any depth) as an ISO string.

    YAML reads ``created: 2026-01-02`` as a ``datetime.date``; the schema wants text.
    """
    return {str(k): _iso(v) for k, v in meta.items()}


def _iso(value: Any) -> Any:
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    if isinstance(value, list):
        return [_iso(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _iso(v) for k, v in value.items()}
    return value


def parse_date(text: object) -> _dt.date | None:
    """``YYYY-MM-DD`` as a date, or None when ``text`` is not one (any other type, ``2026-02-30``)."""
    if isinstance(text, _dt.date) and not isinstance(text, _dt.datetime):
        return text
    if not isinstance(text, str) or not _DATE_RE.match(text):
        return None
    try:
        return _dt.date.fromisoformat(text)
    except ValueError:
        return None


def feedback_expiry_of(meta: dict[str, Any]) -> tuple[_dt.date | None, str]:
    """When a feedback topic stops being live: ``(date, basis)``, or ``(None, reason)``.

    ``basis`` is ``"expires"``, or ``"created+90"`` when there is no
    ``expires`` at all.  An ``expires`` that is present but not a date gives
    ``(None, reason)``: guessing created + 90 would hide the mistake.
    """
    if "expires" in meta:
        expires = parse_date(meta["expires"])
        if expires is None:
            return None, f"expires {short_repr(meta['expires'])} is not a date (YYYY-MM-DD)"
        return expires, "expires"
    created = parse_date(meta.get("created"))
    if created is None:
        return None, "neither expires nor created is a date (YYYY-MM-DD)"
    return created + _dt.timedelta(days=FEEDBACK_DEFAULT_DAYS), f"created+{FEEDBACK_DEFAULT_DAYS}"


# -- topic text ----------------------------------------------------------------------


def split_frontmatter(text: str) -> tuple[str | None, int, int]:
    """Locate the YAML frontmatter: ``(yaml text or None, first yaml line, body start line)``.

    Frontmatter is a first line ``---`` and the next line ``---``; lines are
    1-based.  Raises :class:`TopicError` when the opening ``---`` is never closed.
    """
    lines = text.split("\n")
    if not lines or not _DELIMITER.match(lines[0].lstrip("\ufeff")):
        return None, 0, 1
    for i in range(1, len(lines)):
        if _DELIMITER.match(lines[i]):
            return "\n".join(lines[1:i]), 2, i + 2
    raise TopicError("the frontmatter opened by '---' on line 1 is never closed by another '---' line", 1)


def parse_topic(text: str) -> tuple[dict[str, Any], str, int]:
    """Split a topic into ``(frontmatter mapping, body, body_start_line)``.

    The mapping is normalised (:func:`normalize_meta`).  A document without
    frontmatter gives ``({}, text, 1)``.  Raises :class:`TopicError` (with the
    1-based line) for YAML that does not parse, a value its tag cannot hold
    (``!!int abc``), aliases, nesting deeper than :data:`MAX_NESTING`, or
    frontmatter that is not a mapping; never any other exception.  YAML is
    read with python-frontmatter's YAML handler and a SafeLoader (no arbitrary
    objects) that keeps timestamps as the text written: ``created:
    2026-02-30`` is the string ``"2026-02-30"``, which the schema then refuses
    with its line, instead of a date that cannot be built.
    """
    yaml_text, yaml_line, body_line = split_frontmatter(text)
    if yaml_text is None:
        return {}, text, 1
    import yaml
    from frontmatter.default_handlers import YAMLHandler

    try:
        _check_tokens(yaml_text, yaml_line)
        data = YAMLHandler().load(yaml_text, Loader=_text_dates_loader()) if yaml_text.strip() else {}
    except TopicError:
        raise
    except yaml.YAMLError as exc:
        line = _yaml_error_line(exc, yaml_text, yaml_line)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise TopicError(f"frontmatter is not valid YAML: {problem}", line) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # a constructor's own error
        raise TopicError(f"frontmatter is not valid YAML: {exc}", yaml_line) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise TopicError(f"frontmatter must be a mapping of fields, not a {type(data).__name__}", yaml_line)
    body = "\n".join(text.split("\n")[body_line - 1 :])
    return normalize_meta(data), body, body_line


def _check_tokens(yaml_text: str, yaml_line: int) -> None:
    """Refuse aliases and deep nesting before anything is built (raises :class:`TopicError`)."""
    import yaml

    depth = 0
    opening = (yaml.BlockMappingStartToken, yaml.BlockSequenceStartToken, yaml.FlowMappingStartToken,
               yaml.FlowSequenceStartToken)
    closing = (yaml.BlockEndToken, yaml.FlowMappingEndToken, yaml.FlowSequenceEndToken)
    for token in yaml.scan(yaml_text, Loader=yaml.SafeLoader):
        if isinstance(token, yaml.AliasToken):
            # Aliases let a few lines expand into an exponentially large value ("billion laughs")
            # that normalising and validating would walk; frontmatter has no use for them.
            raise TopicError("frontmatter uses a YAML alias (*name); write the value out instead",
                             yaml_line + token.start_mark.line)
        if isinstance(token, opening):
            depth += 1
            if depth > MAX_NESTING:
                raise TopicError(f"frontmatter nests lists and maps deeper than {MAX_NESTING} levels",
                                 yaml_line + token.start_mark.line)
        elif isinstance(token, closing):
            depth -= 1


@lru_cache(maxsize=1)
def _text_dates_loader() -> Any:
    """PyYAML's SafeLoader (the C one when built) without the timestamp type: dates stay text.

    A value whose tag cannot hold it (``!!int abc``) raises a YAML error at
    its own line instead of a bare ``ValueError``.
    """
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    timestamp = "tag:yaml.org,2002:timestamp"

    class TextDatesLoader(base):  # type: ignore[misc, valid-type]
        yaml_implicit_resolvers = {
            first: [(tag, rx) for tag, rx in resolvers if tag != timestamp]
            for first, resolvers in base.yaml_implicit_resolvers.items()
        }

        def construct_object(self, node: Any, deep: bool = False) -> Any:
            try:
                return super().construct_object(node, deep)
            except (ValueError, TypeError, OverflowError) as exc:
                raise yaml.constructor.ConstructorError(None, None, str(exc), node.start_mark) from None

    # An explicit '!!timestamp' is kept as its text too.
    TextDatesLoader.add_constructor(timestamp, lambda loader, node: loader.construct_scalar(node))
    return TextDatesLoader


def _yaml_error_line(exc: Any, yaml_text: str, first_line: int) -> int:
    """The document line a YAML error points at.

    A problem found only at the end of the frontmatter (an unclosed ``[``)
    is reported where its construct began (the context mark) instead.
    """
    last = yaml_text.count("\n")
    problem, context = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
    mark = problem
    if context is not None and (mark is None or mark.line >= last and context.line < mark.line):
        mark = context
    if mark is None:
        return first_line
    return first_line + min(int(mark.line), last)


def field_lines(text: str) -> dict[str, int]:
    """1-based line of each top-level frontmatter key (``{}`` without frontmatter), for reporting."""
    try:
        yaml_text, yaml_line, _ = split_frontmatter(text)
    except TopicError:
        return {}
    if yaml_text is None:
        return {}
    found: dict[str, int] = {}
    for i, line in enumerate(yaml_text.split("\n")):
        match = re.match(r"^([A-Za-z0-9_-]+)\s*:", line)
        if match and match.group(1) not in found:
            found[match.group(1)] = yaml_line + i
    return found


def render_topic(meta: dict[str, Any], body: str) -> str:
    """A topic file: ``---`` YAML frontmatter ``---`` then ``body``, ending in exactly one newline.

    Keys come in :data:`FIELD_ORDER`, unknown keys after them in their given
    order; ISO date strings of ``created``/``expires`` are written as bare
    YAML dates.  ``parse_topic(render_topic(m, b))`` gives ``m`` back and the
    body with its trailing newlines reduced to one.
    """
    import yaml

    ordered: dict[str, Any] = {}
    for key in FIELD_ORDER:
        if key in meta:
            ordered[key] = meta[key]
    for key, value in meta.items():
        if key not in ordered:
            ordered[key] = value
    for key in ("created", "expires"):
        day = parse_date(ordered.get(key))
        if day is not None and isinstance(ordered[key], str):
            ordered[key] = day
    dumped = yaml.safe_dump(ordered, sort_keys=False, allow_unicode=True, width=4096) if ordered else ""
    text = f"---\n{dumped}---\n{body}"
    return text.rstrip("\n") + "\n"


# -- names ---------------------------------------------------------------------------


def slugify(text: str) -> str:
    """A name slug (``^[a-z0-9_-]+$``, at most 64 characters) for any text.

    NFKC + casefold, accents dropped from Latin letters, every other run of
    characters becomes one ``-``.  Text with letters outside Latin (e.g. Chinese
    or Korean) gets a short SHA-256-based suffix so different titles stay
    different; text with nothing usable becomes ``note-<hash>``.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    ascii_part = "".join(c for c in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(c))
    kept = re.sub(r"[^a-z0-9_-]+", "-", ascii_part)
    kept = re.sub(r"-{2,}", "-", kept).strip("-_")
    dropped = any(c.isalnum() and not c.isascii() for c in ascii_part)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    if not kept:
        return f"note-{digest}"
    if dropped:
        return f"{_cut(kept, SLUG_MAX - 9)}-{digest}"
    return _cut(kept, SLUG_MAX)


def _cut(slug: str, limit: int) -> str:
    if len(slug) <= limit:
        return slug
    cut = slug[:limit]
    # Prefer ending at a word boundary when one is not too far back.
    dash = cut.rfind("-")
    if dash >= limit // 2:
        cut = cut[:dash]
    return cut.strip("-_") or cut


def is_slug(text: str) -> bool:
    """Whether ``text`` is a valid name/tag slug."""
    return bool(SLUG_RE.match(text)) and len(text) <= SLUG_MAX


def topic_path(type: str, name: str, repository: str = "") -> str:
    """The logical path of a topic: ``"<type>/<name>.md"``; a ``project`` topic of a ``repository`` (its identity,
    :mod:`tools.client.project`) lives with that repository's notes, ``"projects/<repository>/<name>.md"``
    (DESIGN.md §24)."""
    if type == "project" and repository:
        return project_path(repository) + f"{name}.md"
    return f"{type}/{name}.md"


def feedback_expiry(created: str, days: int = FEEDBACK_DEFAULT_DAYS) -> str:
    """``created`` (ISO date) plus ``days`` as an ISO date."""
    day = parse_date(created)
    if day is None:
        raise ValueError(f"not an ISO date: {created!r}")
    return (day + _dt.timedelta(days=days)).isoformat()
