"""What a tool result looks like on the wire: its JSON text, its size, its text for a model (DESIGN.md §9).

Every tool result carries the Hub's result map, unchanged, as
``structuredContent`` and a short text rendering of it for a model that reads
text only.  A tool error (``isError``) carries
``{"error": {code, message, data, next_step}}`` and a text that says the same:
``data`` is the Hub's (observed revision on conflict, current and maximum on
quota), ``next_step`` tells a model what to do (``protocol.errors.ERRORS``,
DESIGN.md §8).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp.types import CallToolResult, TextContent

from amux_memory.protocol.errors import HubError


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise TypeError(f"not JSON-serializable: {type(value).__name__}")


def result_json(result: dict[str, Any]) -> str:
    """The canonical JSON text of a result map: compact, UTF-8 (not ASCII-escaped), keys in the Hub's order.

    ``bytes`` values are decoded as UTF-8 (invalid bytes replaced); any other
    non-JSON value raises ``TypeError``.  The pages of a paged result join to
    exactly this text.
    """
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=_jsonable)


def result_size(result: CallToolResult) -> int:
    """Serialized size of a ``CallToolResult`` in bytes (UTF-8 JSON, by alias, as it goes on the wire)."""
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode("utf-8"))


def text_result(text: str, structured: dict[str, Any], *, is_error: bool = False) -> CallToolResult:
    """A ``CallToolResult`` with one text block and ``structuredContent``."""
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured,
                          is_error=is_error)


def cut_parts(r: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The parts a search over team mounts cut short (DESIGN.md §7.8), from its ``parts``: ``(mount, reasons)``,
    ``mount`` ``""`` for the caller's own memory; ``[]`` for a search of one part or one that was complete."""
    return [(str(part.get("mount") or ""), [str(x) for x in part["incomplete_reasons"]])
            for part in r.get("parts") or [] if isinstance(part, dict) and part.get("incomplete_reasons")]


def render_search(r: dict[str, Any]) -> str:
    """The text of a ``search`` result: counts, whether the scan was complete (over team mounts: which mount it
    cut short, from ``parts``), one entry per match."""
    matches = r.get("matches") or []
    candidates, scanned = r.get("candidates", len(matches)), r.get("scanned_files", 0)
    lines = [f"Matching documents: {candidates}; shown: {len(matches)}; files scanned: {scanned}."]
    if r.get("incomplete"):
        parts = cut_parts(r)
        if parts:
            where = ", ".join(f"{mount or 'your own memory'} ({', '.join(reasons)})" for mount, reasons in parts)
            mount = next((m for m, _ in parts if m), "")
            narrow = f'search it alone (path_prefix="{mount}")' if mount else "narrow path_prefix"
            lines.append(f"The scan stopped early in {where}: a missing match there is not proof of absence; "
                         f"{narrow} or change keywords.")
        else:
            reasons = ", ".join(str(x) for x in r.get("incomplete_reasons") or []) or "a scan limit"
            lines.append(f"The scan stopped early ({reasons}): a missing match is not proof of absence; "
                         "narrow path_prefix or change keywords.")
        unreadable = r.get("unreadable") or []
        if unreadable:
            lines.append("The Hub may not read: " + ", ".join(str(x) for x in unreadable)
                         + " (file permissions on the Hub's host; tell the user if it matters).")
    if r.get("truncated"):
        lines.append("More matches were left out: raise limit, narrow path_prefix or add keywords.")
    for m in matches:
        cut = " [snippet cut]" if m.get("truncated") else ""
        matched = ", ".join(map(str, m.get("matched") or []))
        lines.append(f"- {m.get('path')} line {m.get('line')} (matched: {matched}){cut}")
        lines.append(f"  {m.get('snippet', '')}")
    if matches:
        lines.append("Read what is relevant with memory_get.")
    return "\n".join(lines)


def render_get(r: dict[str, Any]) -> str:
    """The text of a ``get`` result: a one-line head (revision, size, how to continue), ``---``, the fragment."""
    path = r.get("path")
    if not r.get("exists"):
        return (f'{path} does not exist (revision "absent"); '
                'create it with memory_upsert expected_revision="absent".')
    head = f"{path}: revision {r.get('revision')}, a {r.get('total_lines')}-line, {r.get('total_bytes')}-byte document."
    if r.get("truncated"):
        head += (f" This fragment is cut: continue with memory_get offset={r.get('next_offset')} "
                 "(same path and end_line).")
    return head + "\n---\n" + str(r.get("content", ""))


def render_proposal(r: dict[str, Any]) -> str:
    """The text of an ``upsert`` or ``forget`` the Hub kept for review (``proposed: true``, DESIGN.md §21):
    not saved, waiting for the user; what to tell them; reads still show memory without it."""
    what = "deletion of" if r.get("action") == "forget" else "change to"
    return (f"Not saved yet: your {what} {r.get('path')} is proposal {r.get('proposal')}, pending the user's "
            "review. Do not say it is saved; tell the user it awaits their approval (amux memory review). "
            "Memory reads show the current text without it; a newer proposal for this path replaces this one.")


def render_upsert(r: dict[str, Any]) -> str:
    """The text of an ``upsert`` result: created or replaced, size in bytes, the new revision, and a warning
    when the Hub found credentials it wrote anyway (``secret_findings``, DESIGN.md §16); a proposal kept
    for review is :func:`render_proposal`."""
    if r.get("proposed"):
        return render_proposal(r)
    how = "Created" if r.get("created") else "Replaced"
    text = f"{how} {r.get('path')} (a {r.get('bytes')}-byte document); its revision is now {r.get('revision')}."
    if r.get("secret_findings"):  # memory.secret_scan = warn (DESIGN.md §16): written, but say so
        rules = ", ".join(sorted({str(f.get("rule")) for f in r["secret_findings"]}))
        text += (f" Warning: it holds credentials ({rules}); remove them and say where they live instead "
                 "(e.g. 'the deploy token is in 1Password, item X').")
    return text


def render_forget(r: dict[str, Any]) -> str:
    """The text of a ``forget`` result: deleted, or already absent (or a proposal, :func:`render_proposal`)."""
    if r.get("proposed"):
        return render_proposal(r)
    if r.get("already_absent"):
        return f"{r.get('path')} was already absent; nothing was deleted."
    return f"Deleted {r.get('path')}."


RENDERERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "memory_search": render_search,
    "memory_get": render_get,
    "memory_upsert": render_upsert,
    "memory_forget": render_forget,
}
"""Tool name → the text rendering of its Hub result."""


def error_result(exc: HubError) -> CallToolResult:
    """A tool error (``isError``) carrying the code, message and data of ``exc``, and what to do next.

    ``structuredContent`` is ``{"error": {code, message, data, next_step}}``
    (``next_step`` from :attr:`HubError.next_step`); the text is
    ``Error CODE: MESSAGE``, the next step, and ``data: JSON`` when there is data.
    """
    next_step = exc.next_step
    error = {**exc.to_wire(), "next_step": next_step}
    text = f"Error {exc.code.value}: {exc.message}\n{next_step}"
    if exc.data:
        text += "\ndata: " + result_json(exc.data)
    return text_result(text, {"error": error}, is_error=True)
