"""Validation of request parameters, shared by the Hub and its clients.

Each ``parse_*`` function takes the raw ``params`` map of a request and
returns a frozen dataclass, or raises :class:`HubError` (``bad_request`` or
``invalid_path``) naming the offending field.  Unknown fields are rejected so
a typo never silently changes a call's meaning.  DESIGN.md §3.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from amux_memory.protocol.errors import ErrorCode, HubError, names_for_error
from amux_memory.protocol.invitation import check_code
from amux_memory.protocol.limits import LIMITS, MCP_MAX_PAGE_TTL
from amux_memory.protocol.paths import normalize_path, normalize_prefix
from amux_memory.protocol.requests import ABSENT as ABSENT  # re-exported: defined with the request builders
from amux_memory.protocol.wording import plural

REVISION_PREFIX_MIN = 12
"""The fewest hex digits of a revision accepted in its place (the 12 that messages show), DESIGN.md §4.3."""

REVISION_DIGITS = 64
"""Hex digits of a full revision (a SHA-256)."""

_REVISION = re.compile(rf"^[0-9a-f]{{{REVISION_PREFIX_MIN},{REVISION_DIGITS}}}$")


def _bad(message: str, **data: Any) -> HubError:
    return HubError(ErrorCode.BAD_REQUEST, message, data)


def _only(params: dict[str, Any], allowed: set[str]) -> None:
    extra = set(params) - allowed
    if extra:
        raise _bad(f"unknown {plural(len(extra), 'parameter')}: {names_for_error(extra)}", allowed=sorted(allowed))


def _int(params: dict[str, Any], name: str, default: int, lo: int, hi: int) -> int:
    value = params.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(f"{name} must be an integer", field=name)
    if not lo <= value <= hi:
        raise _bad(f"{name} must be between {lo} and {hi}", field=name, minimum=lo, maximum=hi)
    return value


def parse_revision(value: object, field: str = "expected_revision") -> str:
    """``absent``, or a revision or its first 12-63 hex digits (returned lowercase, stripped).

    A prefix stands for the revision it starts (:func:`revision_matches`);
    ``absent`` is never abbreviated.  Raises ``bad_request`` (``data.field``)
    otherwise.  DESIGN.md §4.3.
    """
    if not isinstance(value, str):
        raise _bad(f"{field} is required: the document's current revision, or 'absent' to create", field=field)
    low = value.strip().lower()
    if low == ABSENT or _REVISION.match(low):
        return low
    raise _bad(f"{field} must be 'absent', or a revision: 64 hex digits or at least their first "
               f"{REVISION_PREFIX_MIN}", field=field, minimum=REVISION_PREFIX_MIN, maximum=REVISION_DIGITS)


def revision_matches(expected: str, observed: str) -> bool:
    """Whether the revision ``observed`` (full, or ``absent``) is the one ``expected`` names.

    ``expected`` comes from :func:`parse_revision`: ``absent`` matches only
    ``absent``; a full revision matches itself; a prefix (12-63 hex digits)
    matches every full revision that starts with it.  DESIGN.md §4.4.
    """
    if expected == observed:
        return True
    return expected != ABSENT and observed != ABSENT and len(expected) < REVISION_DIGITS \
        and observed.startswith(expected)


@dataclass(frozen=True)
class McpOpenParams:
    """``mcp_open``: turn a connection into one MCP session (DESIGN.md §9.2).

    ``instructions`` False: ``initialize`` carries no protocol text;
    ``page_ttl``: seconds the session's paged results stay readable, or None
    for the server's default.
    """

    instructions: bool
    page_ttl: int | None


def parse_mcp_open(params: dict[str, Any]) -> McpOpenParams:
    """Validate ``mcp_open`` params: ``instructions`` a boolean (default true), ``page_ttl`` 0-86400 seconds."""
    _only(params, {"instructions", "page_ttl"})
    instructions = params.get("instructions", True)
    if not isinstance(instructions, bool):
        raise _bad("instructions must be true or false", field="instructions")
    page_ttl = None if params.get("page_ttl") is None else _int(params, "page_ttl", 0, 0, MCP_MAX_PAGE_TTL)
    return McpOpenParams(instructions, page_ttl)


@dataclass(frozen=True)
class HelloParams:
    """``hello``: protocol version, free-form client name, optional frozen binding and bearer token (DESIGN.md §7)."""

    protocol: int
    client: str
    binding: str | None
    token: str | None = None
    session: str | None = None
    """The launcher's session id (``$AMUX_SESSION_ID``), recorded in history as ``actor.session`` (DESIGN.md §15)."""


_SESSION = re.compile(r"^[\x21-\x7e]{1,128}$")


def check_session(session: object, field: str = "session") -> str:
    """``session`` if it is a valid launcher session id (1-128 printable ASCII characters, no spaces: the value
    of ``AMUX_SESSION_ID``), as ``hello.session`` and the MCP HTTP header ``Amux-Session`` need it; else raises
    ``bad_request`` naming ``field`` (DESIGN.md §3.3, §15)."""
    if not isinstance(session, str) or not _SESSION.fullmatch(session):
        raise _bad(f"{field} must be 1-128 printable ASCII characters (the value of AMUX_SESSION_ID)",
                   field=field)
    return session


def parse_hello(params: dict[str, Any]) -> HelloParams:
    """Validate ``hello`` params; ``session`` is 1-128 printable ASCII characters, no spaces."""
    _only(params, {"protocol", "client", "binding", "token", "session"})
    session = params.get("session")
    if session is not None:
        check_session(session)
    protocol = _int(params, "protocol", 1, 0, 2**31)
    client = params.get("client", "")
    binding = params.get("binding")
    if not isinstance(client, str) or len(client) > 200:
        raise _bad("client must be a short string", field="client")
    if binding is not None and (not isinstance(binding, str) or not 0 < len(binding) <= 1200):
        raise _bad("binding must be a non-empty string (the value of AMUX_MEMORY_BINDING)", field="binding")
    token = params.get("token")
    if token is not None and (not isinstance(token, str) or not 0 < len(token) <= 256):
        # Never echo the value: it is a secret.
        raise _bad("token must be a non-empty string of at most 256 characters (the value of AMUX_TOKEN)",
                   field="token")
    return HelloParams(protocol, client, binding or None, token, session)


@dataclass(frozen=True)
class SearchParams:
    """``search``: 1–16 literal keywords (≤ 512 bytes in all), optional prefix, 1–20 results."""

    query: str
    keywords: tuple[str, ...]
    path_prefix: str
    limit: int


def split_keywords(query: object) -> tuple[str, ...]:
    """Split a query on whitespace into literal keywords (NFC, duplicates dropped, order kept).

    Raises ``bad_request`` for a non-string, empty, over-512-byte or over-16-keyword query.
    """
    if not isinstance(query, str):
        raise _bad("query must be a string of 1-16 keywords", field="query")
    if len(query.encode("utf-8", "surrogatepass")) > LIMITS.query_max_bytes:
        raise _bad(
            f"query is longer than {LIMITS.query_max_bytes} bytes",
            field="query",
            current=len(query.encode("utf-8", "surrogatepass")),
            maximum=LIMITS.query_max_bytes,
        )
    words = unicodedata.normalize("NFC", query).split()
    if not words:
        raise _bad("query needs at least one keyword", field="query")
    if len(words) > LIMITS.query_max_keywords:
        raise _bad(
            f"query has {len(words)} keywords; at most {LIMITS.query_max_keywords} are allowed",
            field="query",
            current=len(words),
            maximum=LIMITS.query_max_keywords,
        )
    return tuple(dict.fromkeys(words))


def parse_search(params: dict[str, Any]) -> SearchParams:
    """Validate ``search`` params: ``query``, optional ``path_prefix`` and ``limit``."""
    _only(params, {"query", "path_prefix", "limit"})
    keywords = split_keywords(params.get("query"))
    prefix = normalize_prefix(params.get("path_prefix"))
    limit = _int(params, "limit", LIMITS.search_default_limit, 1, LIMITS.search_max_limit)
    return SearchParams(str(params["query"]), keywords, prefix, limit)


@dataclass(frozen=True)
class GetParams:
    """``get``: 1-based inclusive lines (0 = open end) or a byte ``offset`` continuation."""

    path: str
    start_line: int
    end_line: int
    offset: int
    revision: str | None = None
    """A stored version to read instead of the current document (DESIGN.md §15)."""


def parse_stored_revision(value: object, field: str = "revision") -> str | None:
    """An optional stored revision: None, or 64 hex digits or at least their first 12 (lowercase).

    A prefix must name exactly one stored version of the document; the
    history resolves it (:meth:`hub.storage.history.ScopeHistory.resolve`).  Raises
    ``bad_request`` (``data.field``).  DESIGN.md §15.
    """
    if value is None:
        return None
    if isinstance(value, str) and _REVISION.match(value.strip().lower()):
        return value.strip().lower()
    raise _bad(f"{field} must be the revision of a stored version: 64 hex digits or at least their first "
               f"{REVISION_PREFIX_MIN}", field=field, minimum=REVISION_PREFIX_MIN, maximum=REVISION_DIGITS)


def parse_get(params: dict[str, Any]) -> GetParams:
    """Validate ``get`` params; a nonzero ``start_line`` with an ``offset`` is ``bad_request``."""
    _only(params, {"path", "start_line", "end_line", "offset", "revision"})
    path = normalize_path(params.get("path"))
    start = _int(params, "start_line", 0, 0, 2**31)
    end = _int(params, "end_line", 0, 0, 2**31)
    offset = _int(params, "offset", 0, 0, 2**62)
    if start and offset:
        raise _bad("give either start_line or offset, not both: offset continues a truncated fragment")
    if start and end and end < start:
        raise _bad("end_line must not be before start_line", field="end_line")
    return GetParams(path, start, end, offset, parse_stored_revision(params.get("revision")))


@dataclass(frozen=True)
class UpsertParams:
    """``upsert``: the complete new document (UTF-8 bytes) and the expected revision."""

    path: str
    content: bytes
    expected_revision: str
    allow_shrink: bool = False
    allow_empty: bool = False
    allow_secret: bool = False
    """Write even though the content holds a credential (a person's override, DESIGN.md §16)."""


EMPTY_CONTENT = ("content is empty (0 bytes); nothing was written. A document needs some text: to delete one, "
                 "forget it; to store an empty document on purpose, pass allow_empty (--allow-empty)")
"""The ``bad_request`` message for a 0-byte upsert without ``allow_empty`` (DESIGN.md §18)."""


def parse_upsert(params: dict[str, Any]) -> UpsertParams:
    """Validate ``upsert`` params; ``content`` may be str or bin but must be valid UTF-8.

    ``allow_shrink`` (bool, default false) lets a write through the
    destructive-rewrite guard (:mod:`hub.storage.rewrite_guard`); ``allow_secret``
    (bool, default false) through the credential check (DESIGN.md §16).  Empty content
    (0 bytes) is ``bad_request`` (``data.field`` ``content``) unless
    ``allow_empty`` (bool, default false), DESIGN.md §18.
    """
    _only(params, {"path", "content", "expected_revision", "allow_shrink", "allow_empty", "allow_secret"})
    allow_shrink = params.get("allow_shrink", False)
    if not isinstance(allow_shrink, bool):
        raise _bad("allow_shrink must be true or false", field="allow_shrink")
    allow_empty = params.get("allow_empty", False)
    if not isinstance(allow_empty, bool):
        raise _bad("allow_empty must be true or false", field="allow_empty")
    allow_secret = params.get("allow_secret", False)
    if not isinstance(allow_secret, bool):
        raise _bad("allow_secret must be true or false", field="allow_secret")
    path = normalize_path(params.get("path"))
    revision = parse_revision(params.get("expected_revision"))
    content = params.get("content")
    if isinstance(content, str):
        try:
            raw = content.encode("utf-8")
        except UnicodeEncodeError:
            raise _bad("content is not valid UTF-8", field="content") from None
    elif isinstance(content, bytes):
        raw = content
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _bad(f"content is not valid UTF-8 (byte {exc.start})", field="content", byte=exc.start) from None
    else:
        raise _bad("content is required: the complete UTF-8 Markdown document", field="content")
    if not raw and not allow_empty:
        raise _bad(EMPTY_CONTENT, field="content", path=path)
    return UpsertParams(path, raw, revision, allow_shrink, allow_empty, allow_secret)


@dataclass(frozen=True)
class ForgetParams:
    """``forget``: the document and the revision it must still have."""

    path: str
    expected_revision: str


def parse_forget(params: dict[str, Any]) -> ForgetParams:
    """Validate ``forget`` params (``absent`` is accepted: forgetting a missing document succeeds)."""
    _only(params, {"path", "expected_revision"})
    path = normalize_path(params.get("path"))
    revision = parse_revision(params.get("expected_revision"))
    return ForgetParams(path, revision)


@dataclass(frozen=True)
class ExportParams:
    """``export``: one page from byte ``offset``; ``expected_revision`` pins later pages."""

    path: str
    offset: int
    expected_revision: str | None
    revision: str | None = None
    """A stored version to export instead of the current document (DESIGN.md §15)."""


def parse_export(params: dict[str, Any]) -> ExportParams:
    """Validate ``export`` params."""
    _only(params, {"path", "offset", "expected_revision", "revision"})
    path = normalize_path(params.get("path"))
    offset = _int(params, "offset", 0, 0, 2**62)
    rev = params.get("expected_revision")
    return ExportParams(path, offset, None if rev is None else parse_revision(rev),
                        parse_stored_revision(params.get("revision")))


@dataclass(frozen=True)
class ListParams:
    """``list``: documents whose path starts with ``path_prefix``, after ``cursor`` (a path)."""

    path_prefix: str
    cursor: str


def parse_list(params: dict[str, Any]) -> ListParams:
    """Validate ``list`` params: optional ``path_prefix`` and ``cursor`` (the previous page's ``next_cursor``)."""
    _only(params, {"path_prefix", "cursor"})
    prefix = normalize_prefix(params.get("path_prefix"))
    cursor = normalize_prefix(params.get("cursor"))
    return ListParams(prefix, cursor)


def _cursor(params: dict[str, Any]) -> int:
    """A history/log cursor: ``""`` (first page) or the previous page's ``next_cursor`` (a decimal sequence)."""
    value = params.get("cursor", "")
    if value in ("", None):
        return 0
    if not isinstance(value, str) or not value.isdigit() or not value.isascii() or len(value) > 18:
        raise _bad("cursor must be the next_cursor of the previous page", field="cursor")
    return int(value)


@dataclass(frozen=True)
class HistoryParams:
    """``history``: the stored versions of one document, newest first; ``cursor`` 0 = from the newest."""

    path: str
    limit: int
    cursor: int


def parse_history(params: dict[str, Any]) -> HistoryParams:
    """Validate ``history`` params: ``path``, ``limit`` (1-100, default 20), ``cursor``.  DESIGN.md §15."""
    _only(params, {"path", "limit", "cursor"})
    path = normalize_path(params.get("path"))
    return HistoryParams(path, _int(params, "limit", 20, 1, 100), _cursor(params))


@dataclass(frozen=True)
class LogParams:
    """``log``: the scope's recorded changes, newest first; ``since`` is an ISO 8601 time (None = all)."""

    path_prefix: str
    since: str | None
    limit: int
    cursor: int


def parse_log(params: dict[str, Any]) -> LogParams:
    """Validate ``log`` params: ``path_prefix``, ``since`` (ISO 8601 string), ``limit`` (1-200, default 50),
    ``cursor``.  A ``since`` that is not ISO 8601 is ``bad_request``.  DESIGN.md §15."""
    _only(params, {"path_prefix", "since", "limit", "cursor"})
    prefix = normalize_prefix(params.get("path_prefix"))
    since = params.get("since")
    if since is not None:
        import datetime

        if not isinstance(since, str) or len(since) > 64:
            raise _bad("since must be an ISO 8601 date or time", field="since")
        try:
            when = datetime.datetime.fromisoformat(since.replace("Z", "+00:00"))
        except ValueError:
            raise _bad("since must be an ISO 8601 date or time, e.g. 2026-12-01T08:00:00Z", field="since") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.UTC)
        since = when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return LogParams(prefix, since, _int(params, "limit", 50, 1, 200), _cursor(params))


@dataclass(frozen=True)
class RestoreParams:
    """``restore``: write stored version ``revision`` of ``path`` back, compare-and-swap on ``expected_revision``."""

    path: str
    revision: str
    expected_revision: str
    allow_secret: bool = False
    """Restore even though the version holds a credential (a person's override, DESIGN.md §16)."""


def parse_restore(params: dict[str, Any]) -> RestoreParams:
    """Validate ``restore`` params (``revision`` a stored version, 64 hex digits or a prefix of at least 12;
    ``expected_revision`` as :func:`parse_revision`, ``absent`` included; ``allow_secret`` bool, default
    false)."""
    _only(params, {"path", "revision", "expected_revision", "allow_secret"})
    path = normalize_path(params.get("path"))
    revision = parse_stored_revision(params.get("revision"))
    if revision is None:
        raise _bad("revision is required: the stored version to restore (see history)", field="revision")
    allow_secret = params.get("allow_secret", False)
    if not isinstance(allow_secret, bool):
        raise _bad("allow_secret must be true or false", field="allow_secret")
    return RestoreParams(path, revision, parse_revision(params.get("expected_revision")), allow_secret)


@dataclass(frozen=True)
class CopyParams:
    """``copy``: ``source`` to ``destination`` (mounted paths, DESIGN.md §7.8), compare-and-swap on the
    destination's ``expected_revision`` and, when given, the source's ``source_revision``; ``move`` forgets the
    source once the destination is written."""

    source: str
    destination: str
    expected_revision: str
    source_revision: str | None
    move: bool
    allow_secret: bool


def parse_copy(params: dict[str, Any]) -> CopyParams:
    """Validate ``copy`` params: ``source`` and ``destination`` (document paths, not the same),
    ``expected_revision`` (as :func:`parse_revision`, ``absent`` to create), optional ``source_revision`` (a
    revision or prefix), ``move`` and ``allow_secret`` (bools, default false)."""
    _only(params, {"source", "destination", "expected_revision", "source_revision", "move", "allow_secret"})
    source = normalize_path(params.get("source"))
    destination = normalize_path(params.get("destination"))
    if source == destination:
        raise _bad("source and destination are the same document", field="destination")
    flags = {}
    for name in ("move", "allow_secret"):
        flags[name] = params.get(name, False)
        if not isinstance(flags[name], bool):
            raise _bad(f"{name} must be true or false", field=name)
    given = params.get("source_revision")
    source_revision = None if given is None else parse_revision(given, "source_revision")
    if source_revision == ABSENT:
        raise _bad("source_revision names the source's current revision; it cannot be 'absent'",
                   field="source_revision")
    return CopyParams(source, destination, parse_revision(params.get("expected_revision")), source_revision,
                      flags["move"], flags["allow_secret"])


SCOPE_KINDS = ("global", "principal", "team")
"""How an operator names a scope (DESIGN.md §7.8): ``global``, ``principal:NAME``, ``team:NAME`` (its binding)."""


def parse_scope_name(value: object, field: str) -> str:
    """A scope named as its binding: ``global``, ``principal:NAME`` or ``team:NAME`` (``NAME`` non-empty; the
    Hub checks it against the registry's rules).  Raises ``bad_request`` (``data.field``) otherwise."""
    if isinstance(value, str) and (value == SCOPE_KINDS[0] or (
            value.partition(":")[0] in SCOPE_KINDS[1:] and value.partition(":")[2]
            and len(value) <= LIMITS.max_segment_bytes)):
        return value
    shown = repr(value[:80]) if isinstance(value, str) else "missing"
    raise _bad(f"{field} must name a scope: 'global', 'principal:NAME' or 'team:NAME' (got {shown})", field=field)


@dataclass(frozen=True)
class ScopeCopyParams:
    """``scope_copy``: every document of scope ``source`` into scope ``destination`` (bindings), the page after
    ``cursor`` (``""``: from the first document); ``move`` forgets each source document the destination holds;
    ``path_prefixes`` keeps the documents whose path starts with one of them (empty: every document)."""

    source: str
    destination: str
    cursor: str
    move: bool
    path_prefixes: tuple[str, ...] = ()


def parse_backup_stage(params: dict[str, Any]) -> None:
    """Validate ``backup_stage`` params (DESIGN.md §15.8): there are none."""
    _only(params, set())


def parse_scope_copy(params: dict[str, Any]) -> ScopeCopyParams:
    """Validate ``scope_copy`` params: ``source`` and ``destination`` (:func:`parse_scope_name`, not the same
    scope), optional ``cursor`` (the previous page's ``next_cursor``: a document path, or ``""``), ``move``
    (bool, default false: forget each source document the destination now holds) and ``path_prefixes`` (a list
    of non-empty path prefixes, :func:`protocol.paths.normalize_prefix`; default none: the whole scope)."""
    _only(params, {"source", "destination", "cursor", "move", "path_prefixes"})
    source = parse_scope_name(params.get("source"), "source")
    destination = parse_scope_name(params.get("destination"), "destination")
    if source == destination:
        raise _bad("source and destination are the same scope; nothing to copy", field="destination")
    cursor = params.get("cursor", "")
    if cursor != "":
        try:
            cursor = normalize_path(cursor)
        except HubError:
            raise _bad("cursor must be the next_cursor of the previous page", field="cursor") from None
    move = params.get("move", False)
    if not isinstance(move, bool):
        raise _bad("move must be true or false", field="move")
    prefixes = params.get("path_prefixes", [])
    if not isinstance(prefixes, list) or not all(isinstance(x, str) and x for x in prefixes):
        raise _bad("path_prefixes must be a list of non-empty path prefixes", field="path_prefixes")
    return ScopeCopyParams(source, destination, cursor, move, tuple(normalize_prefix(x) for x in prefixes))


@dataclass(frozen=True)
class ScanParams:
    """``scan``: look for credentials in the scope's documents, and in its stored versions when ``history``."""

    history: bool


def parse_scan(params: dict[str, Any]) -> ScanParams:
    """Validate ``scan`` params: ``history`` (bool, default false).  DESIGN.md §16."""
    _only(params, {"history"})
    history = params.get("history", False)
    if not isinstance(history, bool):
        raise _bad("history must be true or false", field="history")
    return ScanParams(history)


@dataclass(frozen=True)
class HealthParams:
    """``health``: the findings of the documents under ``path_prefix`` ("" = the caller's whole view)."""

    path_prefix: str


def parse_health(params: dict[str, Any]) -> HealthParams:
    """Validate ``health`` params: ``path_prefix`` (optional, as ``search``'s).  DESIGN.md §23."""
    _only(params, {"path_prefix"})
    return HealthParams(normalize_prefix(params.get("path_prefix")))


@dataclass(frozen=True)
class PurgeParams:
    """``purge``: erase one stored version (``revision``) or every stored version of ``path`` (``all``)."""

    path: str
    revision: str | None
    all: bool


def parse_purge(params: dict[str, Any]) -> PurgeParams:
    """Validate ``purge`` params: exactly one of ``revision`` and ``all: true``; else ``bad_request``."""
    _only(params, {"path", "revision", "all"})
    path = normalize_path(params.get("path"))
    every = params.get("all", False)
    if not isinstance(every, bool):
        raise _bad("all must be true or false", field="all")
    revision = parse_stored_revision(params.get("revision"))
    if (revision is None) == (not every):
        raise _bad("give exactly one of revision and all=true", field="revision")
    return PurgeParams(path, revision, every)


_PROPOSAL_ID = re.compile(r"^p[0-9a-f]{12}$")


def _proposal_id(params: dict[str, Any]) -> str:
    value = params.get("id")
    if not isinstance(value, str) or not _PROPOSAL_ID.fullmatch(value.strip().lower()):
        raise _bad("id must be a proposal id: 'p' and 12 hex digits, as 'amux memory review' lists them", field="id")
    return value.strip().lower()


@dataclass(frozen=True)
class ReviewRunParams:
    """``review_run``: begin (or ``end``) the review-forced tidy run of ``session`` (DESIGN.md §21)."""

    session: str
    end: bool
    token_id: str | None


def parse_review_run(params: dict[str, Any]) -> ReviewRunParams:
    """Validate ``review_run`` params: ``session`` (a launcher session id, as ``hello``'s), ``end`` (bool,
    default false) and ``token_id`` (the id of the delegated token the launch issued for the agent, 12 hex
    digits)."""
    _only(params, {"session", "end", "token_id"})
    end = params.get("end", False)
    if not isinstance(end, bool):
        raise _bad("end must be true or false", field="end")
    token_id = params.get("token_id")
    if token_id is not None and (not isinstance(token_id, str) or not re.fullmatch(r"[0-9a-f]{12}", token_id)):
        raise _bad("token_id must be a token id: 12 hex digits, as 'amux hub token list' shows it", field="token_id")
    return ReviewRunParams(check_session(params.get("session")), end, token_id)


@dataclass(frozen=True)
class ReviewListParams:
    """``review_list``: pending proposals whose path starts with ``path_prefix``, after ``cursor`` (DESIGN.md §21)."""

    path_prefix: str
    cursor: str


def parse_review_list(params: dict[str, Any]) -> ReviewListParams:
    """Validate ``review_list`` params: ``path_prefix`` and ``cursor`` (the previous page's ``next_cursor``, a
    proposal id, or ``""``)."""
    _only(params, {"path_prefix", "cursor"})
    cursor = params.get("cursor", "") or ""
    if cursor:
        cursor = _proposal_id({"id": cursor})
    return ReviewListParams(normalize_prefix(params.get("path_prefix")), cursor)


REVIEW_TEXTS = ("proposed", "base", "current")
"""The texts ``review_show`` pages: what the agent proposed, the document it saw, the document now."""


@dataclass(frozen=True)
class ReviewShowParams:
    """``review_show``: one proposal, with a page (from byte ``offset``) of one of its :data:`REVIEW_TEXTS`."""

    id: str
    text: str
    offset: int


def parse_review_show(params: dict[str, Any]) -> ReviewShowParams:
    """Validate ``review_show`` params: ``id``, ``text`` (``proposed`` default, ``base`` or ``current``),
    ``offset`` (bytes, the previous page's ``next_offset``)."""
    _only(params, {"id", "text", "offset"})
    text = params.get("text", "proposed")
    if text not in REVIEW_TEXTS:
        raise _bad(f"text must be one of {', '.join(REVIEW_TEXTS)}", field="text")
    return ReviewShowParams(_proposal_id(params), str(text), _int(params, "offset", 0, 0, 2**62))


@dataclass(frozen=True)
class ReviewDecideParams:
    """``review_decide``: approve or reject one proposal (DESIGN.md §21).

    ``expected_revision`` (approve: required) is the document's revision the person saw, compared
    and swapped like an upsert's; ``content`` (approve of an upsert only) the person's edited text to
    write instead of the proposed one; ``reason`` a short note kept with the decision.
    """

    id: str
    decision: str
    expected_revision: str | None
    content: bytes | None
    reason: str | None


def parse_review_decide(params: dict[str, Any]) -> ReviewDecideParams:
    """Validate ``review_decide`` params: ``id``, ``decision`` (``approve`` | ``reject``),
    ``expected_revision`` (required to approve), ``content`` (str or bin, valid UTF-8, approve only),
    ``reason`` (at most 500 characters)."""
    _only(params, {"id", "decision", "expected_revision", "content", "reason"})
    pid = _proposal_id(params)
    decision = params.get("decision")
    if decision not in ("approve", "reject"):
        raise _bad("decision must be approve or reject", field="decision")
    rev = params.get("expected_revision")
    if decision == "approve" and rev is None:
        raise _bad("expected_revision is required to approve: the document's current revision "
                   "(review_show's current_revision)", field="expected_revision")
    content = params.get("content")
    raw: bytes | None = None
    if content is not None:
        if decision != "approve":
            raise _bad("content is only for approve (the edited text to write)", field="content")
        raw = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
        if not isinstance(raw, bytes):
            raise _bad("content must be the complete UTF-8 document", field="content")
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _bad("content is not valid UTF-8", field="content") from None
    reason = params.get("reason")
    if reason is not None and (not isinstance(reason, str) or len(reason) > 500):
        raise _bad("reason must be a string of at most 500 characters", field="reason")
    return ReviewDecideParams(pid, str(decision), None if rev is None else parse_revision(rev), raw, reason or None)


def parse_tls_ca(params: dict[str, Any]) -> None:
    """Validate ``tls_ca`` params (DESIGN.md §7.4): there are none."""
    _only(params, set())


@dataclass(frozen=True)
class RedeemParams:
    """``redeem``: an invitation's one-time code (``ID.SECRET``) and, optionally, the device redeeming it (a short
    description for the token's label, such as ``ana@laptop``)."""

    code: str
    device: str | None


def parse_redeem(params: dict[str, Any]) -> RedeemParams:
    """Validate ``redeem`` params: ``code`` (:func:`protocol.invitation.check_code`; never echoed) and ``device``
    (1-40 printable characters)."""
    _only(params, {"code", "device"})
    code = check_code(params.get("code"))
    device = params.get("device")
    if device is not None and (not isinstance(device, str) or not 0 < len(device) <= 40 or not device.isprintable()):
        raise _bad("device must be 1-40 printable characters", field="device")
    return RedeemParams(code, device)


def parse_logout(params: dict[str, Any]) -> str:
    """Validate ``logout`` params: ``token``, the token to revoke (at most 256 characters; never echoed)."""
    _only(params, {"token"})
    token = params.get("token")
    if not isinstance(token, str) or not 0 < len(token) <= 256:
        raise _bad("token must be a non-empty string of at most 256 characters", field="token")
    return token
