"""The output schemas the tools publish: each tool's result, a page of it, or a tool error (DESIGN.md §9).

Results are built by hand (the Hub's map, unchanged), so these schemas
describe them rather than drive them; the input schemas come from the
handlers' signatures (:class:`hub.mcp.tools.MemoryTools`).  With ``memory.review`` off,
:func:`output_schemas` leaves the proposal shapes and :data:`REVIEW_CODES` out, so ``tools/list`` is
what it was before review existed (DESIGN.md §21).
"""

from __future__ import annotations

from typing import Any

from amux_memory.protocol.errors import ErrorCode

_STR = {"type": "string"}
_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}

PAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One page of a result too large for one reply; join the data of pages 1..pages in order.",
    "properties": {
        "tool": {"type": "string", "description": "The tool that produced the result."},
        "page": {"type": "integer", "minimum": 1},
        "pages": {"type": "integer", "minimum": 2},
        "data": {"type": "string", "description": "This page's slice of the result's JSON text."},
        "continuation": {"type": ["string", "null"],
                         "description": "Token for result_continue to fetch the next page; null on the last page."},
        "total_bytes": {"type": "integer", "description": "UTF-8 size of the whole result's JSON text."},
    },
    "required": ["tool", "page", "pages", "data", "continuation", "total_bytes"],
}
"""The structured content of one page (:func:`hub.mcp.continuations.page_result`)."""


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or list(properties)}


SEARCH_SCHEMA = _obj({
    "matches": {"type": "array", "items": _obj({
        "path": _STR, "line": {"type": "integer", "description": "1-based line of the best match (0: path only)."},
        "snippet": _STR, "truncated": {"type": "boolean", "description": "The snippet was cut."},
        "revision": {"type": "string", "description": "Whole-file revision when scanned."},
        "matched": {"type": "array", "items": _STR, "description": "The keywords this document contains."},
    })},
    "candidates": {"type": "integer", "description": "Documents that matched any keyword."},
    "incomplete": {"type": "boolean", "description": "The scan stopped before covering memory: "
                   "a missing match is not proof of absence."},
    "incomplete_reasons": {"type": "array", "items": _STR},
    "unreadable": {"type": "array", "items": _STR,
                   "description": "Folders or files the Hub may not read (reason unreadable), at most 8."},
    "scanned_files": _INT, "scanned_bytes": _INT,
    "truncated": {"type": "boolean", "description": "Matches were left out (limit or reply size)."},
    "elapsed_ms": {"type": "number"},
}, ["matches", "candidates", "incomplete", "scanned_files", "truncated"])
"""The Hub's ``search`` result (DESIGN.md §5)."""

GET_SCHEMA = _obj({
    "path": _STR,
    "exists": _BOOL,
    "revision": {"type": "string", "description": 'Whole-file SHA-256, or "absent"; pass it as expected_revision.'},
    "content": {"type": "string", "description": "The fragment read."},
    "truncated": {"type": "boolean", "description": "The fragment ends before the range asked for."},
    "next_offset": {"type": ["integer", "null"], "description": "Pass as offset to continue a truncated read."},
    "total_bytes": _INT,
    "total_lines": _INT,
})
"""The Hub's ``get`` result (DESIGN.md §5)."""

UPSERT_SCHEMA = _obj({
    "path": _STR, "revision": {"type": "string", "description": "The document's new revision."},
    "created": _BOOL, "bytes": _INT,
})
"""The Hub's ``upsert`` result (DESIGN.md §4)."""

FORGET_SCHEMA = _obj({"path": _STR, "deleted": _BOOL, "already_absent": _BOOL, "revision": _STR})
"""The Hub's ``forget`` result (DESIGN.md §4)."""

PROPOSAL_SCHEMA = _obj({
    "proposed": {"type": "boolean", "const": True, "description": "Not written: kept for the user's review."},
    "proposal": {"type": "string", "description": "The proposal's id (the user approves it with amux memory review)."},
    "status": {"type": "string", "description": '"pending": waiting for the user.'},
    "path": _STR, "action": {"type": "string", "enum": ["upsert", "forget"]},
    "base_revision": _STR, "proposed_revision": _STR, "bytes": _INT,
}, ["proposed", "proposal", "status", "path"])
"""An ``upsert`` or ``forget`` kept for review instead of applied (``memory.review = agents``, DESIGN.md §21)."""

REVIEW_CODES: frozenset[ErrorCode] = frozenset({ErrorCode.REVIEW_BACKLOG})
"""Error codes only a Hub with review on answers (DESIGN.md §21): left out of the published enum when review is
off, so that with ``memory.review = off`` the ``tools/list`` answer is what it was before review existed."""


def error_schema(review: bool = True) -> dict[str, Any]:
    """The structured content of a tool error (``isError``), DESIGN.md §8; ``review`` False leaves out
    :data:`REVIEW_CODES`.  It is part of every output schema because some clients (the TypeScript SDK's, in the
    MCP Inspector) validate error results against it too."""
    codes = [code.value for code in ErrorCode if review or code not in REVIEW_CODES]
    return _obj({"error": _obj({
        "code": {"type": "string", "enum": codes},
        "message": {"type": "string"},
        "data": {"type": "object", "description": "What the caller needs to recover, e.g. observed_revision on "
                 "conflict, current and maximum on quota_exceeded."},
        "next_step": {"type": "string", "description": "What to do about it."},
    })})


ERROR_SCHEMA: dict[str, Any] = error_schema()
"""Every error a tool can answer (review codes included), DESIGN.md §8."""


def result_or_page(schema: dict[str, Any], *also: dict[str, Any], review: bool = True) -> dict[str, Any]:
    """A tool's output schema: its result (``schema``, or one of ``also``), a page of it, or an error."""
    return {"type": "object", "anyOf": [schema, *also, PAGE_SCHEMA, error_schema(review)]}


def output_schemas(review: bool) -> dict[str, dict[str, Any]]:
    """Tool name → its published output schema.  With ``review`` (``memory.review = agents``) an upsert or forget
    may answer a proposal (:data:`PROPOSAL_SCHEMA`) and errors include :data:`REVIEW_CODES`; without it the
    schemas are exactly those of a Hub without review (DESIGN.md §21: off changes nothing)."""
    proposal = (PROPOSAL_SCHEMA,) if review else ()
    return {
        "memory_search": result_or_page(SEARCH_SCHEMA, review=review),
        "memory_get": result_or_page(GET_SCHEMA, review=review),
        "memory_upsert": result_or_page(UPSERT_SCHEMA, *proposal, review=review),
        "memory_forget": result_or_page(FORGET_SCHEMA, *proposal, review=review),
        "result_continue": {"type": "object", "anyOf": [PAGE_SCHEMA, error_schema(review)]},
    }


OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = output_schemas(review=False)
"""Tool name → its published output schema with review off."""
REVIEW_OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = output_schemas(review=True)
"""Tool name → its published output schema with review on."""
