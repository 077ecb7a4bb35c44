"""The destructive-rewrite guard: refuse an upsert that looks like a lossy rewrite.

Agents that regenerate a whole note sometimes write a placeholder such as
"[rest of the content remains unchanged]" instead of the text they meant to
keep, or silently drop most of a long note.  Since an upsert replaces the
whole document, that text would be gone.  The Hub (so the CLI and MCP share
it) rejects such a replacement with ``destructive_rewrite`` unless the caller
passes ``allow_shrink`` — for a deliberate cut or rewrite.

Rules (issue #7, item 7), applied only when a document is replaced:

* the new content has an elision placeholder that the old content did not
  have (a note that already discussed such a phrase can still be edited);
* the new content keeps less than half of the old line count, and the drop
  is more than :data:`MIN_DROPPED_LINES` lines.
"""

from __future__ import annotations

import re
from typing import Final

from protocol.errors import ErrorCode, HubError

MIN_DROPPED_LINES: Final = 20
"""A shrink by this many lines or fewer never trips the guard (small notes are rewritten freely)."""

_WORDS = r"(?:content|contents|text|file|document|note|notes|section|sections|code|lines?|body|entries|items)"
_KEEP = r"(?:unchanged|the same|as before|as is|as-is|untouched|omitted|not shown|preserved|kept)"
_ELIDED = r"(?:unchanged|untouched|omitted|not shown|same as before)"

PLACEHOLDERS: Final = tuple(re.compile(p, re.IGNORECASE) for p in (
    # "rest of the content remains unchanged", "remaining sections are unchanged"
    rf"\b(?:the\s+)?(?:rest|remainder)\s+of\s+(?:the\s+|this\s+)?{_WORDS}?\s*(?:remains?|is|are|stays?)\s+{_KEEP}",
    rf"\b(?:remaining|other|existing|previous|earlier)\s+{_WORDS}\s+(?:remains?|is|are|stays?)\s+{_KEEP}",
    # "... existing content ...", "…rest unchanged…", "// ... existing code ..."
    rf"(?:\.\.\.|…)\s*(?:the\s+)?(?:existing|previous|rest|remaining|same|unchanged|other|original|earlier)\b[^\n]{{0,40}}?(?:\.\.\.|…)",
    # "[unchanged]", "[rest unchanged]", "[... omitted ...]", "(unchanged)"
    rf"[\[(]\s*(?:\.\.\.|…)?\s*(?:rest\s+(?:of\s+\w+\s+)?)?{_ELIDED}\s*(?:\.\.\.|…)?\s*[\])]",
    rf"[\[(]\s*(?:\.\.\.|…)?\s*(?:rest|remainder)\s+of\s+[^\]\n)]{{0,40}}[\])]",
    # "<!-- unchanged -->", "<!-- rest of file -->"
    rf"<!--\s*(?:\.\.\.|…)?\s*(?:{_ELIDED}|rest\s+of\b[^>]{{0,40}})\s*-->",
    rf"\b{_WORDS}\s+(?:above|below)\s+(?:remains?|is|are|stays?)?\s*{_KEEP}",
))
"""Patterns of elision placeholders (case-insensitive)."""


def _placeholder(text: str) -> str | None:
    for pattern in PLACEHOLDERS:
        found = pattern.search(text)
        if found is not None:
            return found.group(0)
    return None


def _lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def check_rewrite(path: str, old: bytes, new: bytes) -> None:
    """Raise ``destructive_rewrite`` if replacing ``old`` by ``new`` looks lossy.

    ``old``/``new`` are the whole documents (UTF-8 bytes).  The error's data
    names what looked wrong: ``reason`` is ``placeholder`` (with the matched
    ``text``) or ``shrink`` (with ``old_lines``/``new_lines``).
    """
    new_text = new.decode("utf-8", "replace")
    found = _placeholder(new_text)
    if found is not None and _placeholder(old.decode("utf-8", "replace")) is None:
        raise HubError(
            ErrorCode.DESTRUCTIVE_REWRITE,
            f"{path}: the new content contains the elision placeholder {found[:80]!r}; an upsert replaces the "
            "whole document, so the text it stands for would be lost. Write the complete document, or pass "
            "allow_shrink (--allow-shrink) if the placeholder is really meant to be there",
            {"path": path, "reason": "placeholder", "text": found[:80]},
        )
    old_lines, new_lines = _lines(old), _lines(new)
    if old_lines - new_lines > MIN_DROPPED_LINES and new_lines * 2 < old_lines:
        raise HubError(
            ErrorCode.DESTRUCTIVE_REWRITE,
            f"{path}: the new content has {new_lines} lines where the document has {old_lines}; more than half "
            "would be dropped. Write the complete document, or pass allow_shrink (--allow-shrink) for a "
            "deliberate cut",
            {"path": path, "reason": "shrink", "old_lines": old_lines, "new_lines": new_lines},
        )
