"""Request-param builders: the one place a frontend turns its arguments into a request's ``params`` map.

The CLI, the MCP server and the typed-memory library all build their Hub
requests here, so an optional field is sent (or left out) the same way by
every frontend: ``allow_shrink`` only when true, ``path_prefix`` only when
non-empty, ``expected_revision`` on an export page only once the first page
pinned it.  The builders do not validate: the Hub does, with
:mod:`protocol.params` (``bad_request`` naming the field).  DESIGN.md §3 (the
methods and their params).

Every builder returns a new ``dict[str, Any]`` of plain msgpack values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amux_memory.protocol.messages import PROTOCOL_VERSION

ABSENT = "absent"
"""The ``expected_revision`` that means "create; the document must not exist" (DESIGN.md §3).  Defined here,
with the builders, so that ``amux mcp`` (which imports this module) does not import :mod:`protocol.params`,
the Hub's parsers: ~14 ms of its start (measured with ``-X importtime``); that module takes it from here."""


def mcp_open_params(*, instructions: bool = True, page_ttl: int | None = None) -> dict[str, Any]:
    """``mcp_open``: ``{"instructions"}`` plus ``page_ttl`` (seconds) when set (DESIGN.md §9.2)."""
    params: dict[str, Any] = {"instructions": instructions}
    if page_ttl is not None:
        params["page_ttl"] = page_ttl
    return params


def hello_params(client_name: str, binding: str | None = None, token: str | None = None,
                 *, session: str | None = None, protocol: int = PROTOCOL_VERSION) -> dict[str, Any]:
    """``hello``: ``{"protocol", "client"}`` plus ``binding``, ``token`` and ``session`` when set (non-empty).

    ``binding`` is the frozen scope of the conversation (``$AMUX_MEMORY_BINDING``);
    ``token`` the bearer secret (``$AMUX_TOKEN``), DESIGN.md §7; ``session``
    the ``amux launch`` session id (``$AMUX_SESSION_ID``, 1-128 printable
    ASCII characters, checked by the Hub), which the Hub records as the
    actor's session of every change the connection makes (DESIGN.md §10).
    """
    params: dict[str, Any] = {"protocol": protocol, "client": client_name}
    if binding:
        params["binding"] = binding
    if token:
        params["token"] = token
    if session:
        params["session"] = session
    return params


def search_params(query: str, *, path_prefix: str = "", limit: int | None = None) -> dict[str, Any]:
    """``search``: ``{"query"}`` plus ``limit`` when given and ``path_prefix`` when non-empty.

    ``query`` is the keywords joined by spaces (the Hub allows 1-16 keywords,
    512 bytes of UTF-8 in all; DESIGN.md §5).
    """
    params: dict[str, Any] = {"query": query}
    if limit is not None:
        params["limit"] = limit
    if path_prefix:
        params["path_prefix"] = path_prefix
    return params


def get_params(path: str, *, start_line: int = 0, end_line: int = 0, offset: int = 0,
               revision: str | None = None) -> dict[str, Any]:
    """``get``: ``{"path", "start_line", "end_line", "offset"}`` (lines 1-based inclusive, 0 = open end;
    ``offset`` in bytes, the previous fragment's ``next_offset``), DESIGN.md §5; plus ``revision`` when
    given: read that stored version from the history instead of the live document (DESIGN.md §15)."""
    params: dict[str, Any] = {"path": path, "start_line": start_line, "end_line": end_line, "offset": offset}
    if revision is not None:
        params["revision"] = revision
    return params


def upsert_params(path: str, content: bytes | str, expected_revision: str, *,
                  allow_shrink: bool = False, allow_empty: bool = False,
                  allow_secret: bool = False) -> dict[str, Any]:
    """``upsert``: ``{"path", "content", "expected_revision"}`` plus ``"allow_shrink": True``,
    ``"allow_empty": True`` and ``"allow_secret": True`` when set.

    ``content`` is the whole new document (UTF-8 ``bytes``, or ``str``);
    ``expected_revision`` is the revision last read (or its first 12 or more
    hex digits), or ``"absent"`` to create (DESIGN.md §4).  ``allow_shrink``
    lets a deliberate cut through the rewrite guard (DESIGN.md §12);
    ``allow_empty`` lets a 0-byte document through (DESIGN.md §18);
    ``allow_secret`` is a person's write of content holding a credential
    (DESIGN.md §16; the CLI only, never MCP).  Each is left out when false.
    """
    params: dict[str, Any] = {"path": path, "content": content, "expected_revision": expected_revision}
    if allow_shrink:
        params["allow_shrink"] = True
    if allow_empty:
        params["allow_empty"] = True
    if allow_secret:
        params["allow_secret"] = True
    return params


def forget_params(path: str, expected_revision: str) -> dict[str, Any]:
    """``forget``: ``{"path", "expected_revision"}`` (compare-and-swap delete, DESIGN.md §4)."""
    return {"path": path, "expected_revision": expected_revision}


def export_params(path: str, *, offset: int = 0, expected_revision: str | None = None,
                  revision: str | None = None) -> dict[str, Any]:
    """``export``: one page, ``{"path", "offset"}`` (bytes) plus ``expected_revision`` when pinned and
    ``revision`` when reading a stored version.

    Every page of the live document after the first passes the first page's
    revision, so the pages join into one version of the document or the Hub
    answers ``conflict`` (DESIGN.md §5).  A stored version (``revision``, from
    the history, DESIGN.md §15) never changes, so its pages need no pin.
    """
    params: dict[str, Any] = {"path": path, "offset": offset}
    if expected_revision is not None:
        params["expected_revision"] = expected_revision
    if revision is not None:
        params["revision"] = revision
    return params


def list_params(path_prefix: str = "", cursor: str = "") -> dict[str, Any]:
    """``list``: ``{"path_prefix", "cursor"}``; ``cursor`` is ``""`` for the first page, then the previous
    page's ``next_cursor`` (DESIGN.md §5)."""
    return {"path_prefix": path_prefix, "cursor": cursor}


def history_params(path: str, *, limit: int | None = None, cursor: str = "") -> dict[str, Any]:
    """``history``: ``{"path"}`` plus ``limit`` (1-100) when given and ``cursor`` when non-empty.  DESIGN.md §15."""
    params: dict[str, Any] = {"path": path}
    if limit is not None:
        params["limit"] = limit
    if cursor:
        params["cursor"] = cursor
    return params


def log_params(*, path_prefix: str = "", since: str | None = None, limit: int | None = None,
               cursor: str = "") -> dict[str, Any]:
    """``log``: ``path_prefix`` when non-empty, ``since`` (ISO 8601 UTC string) when given, ``limit``
    (1-200) when given, ``cursor`` when non-empty.  DESIGN.md §15."""
    params: dict[str, Any] = {}
    if path_prefix:
        params["path_prefix"] = path_prefix
    if since is not None:
        params["since"] = since
    if limit is not None:
        params["limit"] = limit
    if cursor:
        params["cursor"] = cursor
    return params


def restore_params(path: str, revision: str, expected_revision: str, *, allow_secret: bool = False) -> dict[str, Any]:
    """``restore``: ``{"path", "revision", "expected_revision"}`` (a compare-and-swap write of a stored
    version; ``absent`` re-creates a forgotten document), plus ``"allow_secret": True`` when set (a person's
    override of the credential check, DESIGN.md §16).  DESIGN.md §15."""
    params: dict[str, Any] = {"path": path, "revision": revision, "expected_revision": expected_revision}
    if allow_secret:
        params["allow_secret"] = True
    return params


def scan_params(*, history: bool = False) -> dict[str, Any]:
    """``scan``: ``{}``, or ``{"history": True}`` to look in stored versions too.  DESIGN.md §16."""
    return {"history": True} if history else {}


def health_params(*, path_prefix: str = "") -> dict[str, Any]:
    """``health``: ``{}``, or ``{"path_prefix"}`` when non-empty.  DESIGN.md §23."""
    return {"path_prefix": path_prefix} if path_prefix else {}


def purge_params(path: str, *, revision: str | None = None, all_versions: bool = False) -> dict[str, Any]:
    """``purge``: ``{"path", "revision"}`` for one stored version, or ``{"path", "all": True}`` for every
    stored version and tombstone of ``path``.  DESIGN.md §15."""
    params: dict[str, Any] = {"path": path}
    if revision is not None:
        params["revision"] = revision
    if all_versions:
        params["all"] = True
    return params


def review_list_params(*, path_prefix: str = "", cursor: str = "") -> dict[str, Any]:
    """``review_list``: ``path_prefix`` and ``cursor`` (the previous page's ``next_cursor``) when non-empty.
    DESIGN.md §21."""
    params: dict[str, Any] = {}
    if path_prefix:
        params["path_prefix"] = path_prefix
    if cursor:
        params["cursor"] = cursor
    return params


def review_run_params(session: str, *, end: bool = False, token_id: str | None = None) -> dict[str, Any]:
    """``review_run``: ``{"session"}`` plus ``"end": True`` to end the run and ``token_id`` (the agent's delegated
    token) when given.  DESIGN.md §21."""
    params: dict[str, Any] = {"session": session}
    if token_id is not None:
        params["token_id"] = token_id
    if end:
        params["end"] = True
    return params


def review_show_params(proposal: str, *, text: str = "proposed", offset: int = 0) -> dict[str, Any]:
    """``review_show``: ``{"id"}`` plus ``text`` (``base`` or ``current``; ``proposed`` is the default and left
    out) and ``offset`` (bytes) when non-zero.  DESIGN.md §21."""
    params: dict[str, Any] = {"id": proposal}
    if text != "proposed":
        params["text"] = text
    if offset:
        params["offset"] = offset
    return params


def review_decide_params(proposal: str, decision: str, *, expected_revision: str | None = None,
                         content: bytes | None = None, reason: str | None = None) -> dict[str, Any]:
    """``review_decide``: ``{"id", "decision"}`` (``approve`` | ``reject``) plus ``expected_revision`` (the
    document's revision, required to approve), ``content`` (the edited text to approve instead) and
    ``reason`` when given.  DESIGN.md §21."""
    params: dict[str, Any] = {"id": proposal, "decision": decision}
    if expected_revision is not None:
        params["expected_revision"] = expected_revision
    if content is not None:
        params["content"] = content
    if reason:
        params["reason"] = reason
    return params


def copy_params(source: str, destination: str, expected_revision: str = ABSENT, *,
                source_revision: str | None = None, move: bool = False, allow_secret: bool = False) -> dict[str, Any]:
    """``copy``: ``{"source", "destination", "expected_revision"}`` plus ``source_revision`` when given and
    ``"move": True`` / ``"allow_secret": True`` when set.

    ``source`` and ``destination`` are document paths, either of them mounted (``@web/deploy.md``, DESIGN.md
    §7.8); ``expected_revision`` is the destination's (``"absent"``, the default: create it, never overwrite);
    ``source_revision`` (the revision last read, or its first 12 or more hex digits) makes the copy refuse a
    source that changed since.  ``move`` forgets the source once the destination is written.
    """
    params: dict[str, Any] = {"source": source, "destination": destination, "expected_revision": expected_revision}
    if source_revision is not None:
        params["source_revision"] = source_revision
    if move:
        params["move"] = True
    if allow_secret:
        params["allow_secret"] = True
    return params


def backup_stage_params() -> dict[str, Any]:
    """``backup_stage`` (an operator's method, DESIGN.md §15.8): no parameters."""
    return {}


def scope_copy_params(source: str, destination: str, *, cursor: str = "", move: bool = False,
                      path_prefixes: Sequence[str] = ()) -> dict[str, Any]:
    """``scope_copy`` (an operator's method, DESIGN.md §7.8): ``{"source", "destination"}``, each a scope's
    binding (``global``, ``principal:NAME``, ``team:NAME``), plus ``cursor`` (the previous page's
    ``next_cursor``) when non-empty, ``"move": True`` (forget each source document the destination now
    holds) when set and ``path_prefixes`` (only documents under one of them) when given."""
    params: dict[str, Any] = {"source": source, "destination": destination}
    if cursor:
        params["cursor"] = cursor
    if move:
        params["move"] = True
    if path_prefixes:
        params["path_prefixes"] = list(path_prefixes)
    return params


def tls_ca_params() -> dict[str, Any]:
    """``tls_ca``: no parameters; answered before ``hello`` (DESIGN.md §7.4)."""
    return {}


def redeem_params(code: str, *, device: str | None = None) -> dict[str, Any]:
    """``redeem``: an invitation's one-time ``code`` and the ``device`` redeeming it (for the token's label)."""
    params: dict[str, Any] = {"code": code}
    if device:
        params["device"] = device
    return params


def logout_params(token: str) -> dict[str, Any]:
    """``logout``: the ``token`` to revoke (``amux logout``, DESIGN.md §7.4)."""
    return {"token": token}
