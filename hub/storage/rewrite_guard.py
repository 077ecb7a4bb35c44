"""The destructive-rewrite guard: refuse an upsert that looks like a lossy rewrite.

Agents that regenerate a whole note sometimes write a placeholder such as
"[rest of the content remains unchanged]" instead of the text they meant to
keep, or silently drop most of a long note.  Since an upsert replaces the
whole document, that text would be gone.  The Hub (so the CLI and MCP share
it) rejects such a replacement with ``destructive_rewrite`` unless the caller
passes ``allow_shrink`` — for a deliberate cut or rewrite.

Rules (DESIGN.md §12), applied only when a document is replaced:

* **placeholder**: the new content holds an elision placeholder more often
  than the old content did (so a note that already quoted such a phrase can
  still be edited, but a new one cannot be slipped in).  A placeholder is
  a short bracketed, parenthesised or HTML-comment aside, or a short line of
  its own, that says text is unchanged, omitted, the same, or "the rest";
  or a ``[...]`` / ``<!-- ... -->`` line (a bare ``...`` line is not one:
  code examples are full of them).  A lone "(unchanged)" inside a
  sentence, as in "timeout: 30 s (unchanged)", is ordinary prose.
* **shrink**: the new content keeps less than half of the old lines and
  drops more than :data:`MIN_DROPPED_LINES` (20) lines, or keeps less than
  half of the old bytes and drops more than :data:`MIN_DROPPED_BYTES` (2,048)
  bytes (notes written as a few long paragraphs have few lines).  Below those
  floors a short note is rewritten freely.

Cost: a write's floor is the raw write loop plus one ``fdatasync``, so the
guard must stay small; its patterns cost about 15 µs a line (1.5 ms of a
2 KiB upsert, then half of its time), so it remembers each line's verdict
(:data:`LINE_MEMO_ENTRIES` lines of up to :data:`LINE_MEMO_MAX_CHARS`
characters).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Final

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.wording import counted

MIN_DROPPED_LINES: Final = 20
"""A cut of this many lines or fewer never trips the line rule (short notes are rewritten freely)."""

MIN_DROPPED_BYTES: Final = 2048
"""A cut of this many bytes or fewer never trips the byte rule."""

_ASIDE_MAX = 100  # characters of a bracketed aside or a placeholder line

# Words saying "this text was left out / is as before".
_KEPT = (r"unchanged|un-changed|omitted|elided|not\s+shown|(?:remains?|stays?|is|are|kept)\s+(?:the\s+)?same"
         r"|same\s+as\s+(?:before|above|previously)|as\s+before|for\s+brevity|truncated|snipped|\bsnip\b"
         r"|continues?\s+(?:as\s+before|below|unchanged)|no\s+changes?")
# Words naming what was left out.
_SCOPE = (r"rest|remainder|remaining|other|others|previous|existing|earlier|original|prior|above|below"
          r"|content|contents|text|file|document|note|notes|sections?|entries|items|lines?|code|body|parts?")

_KEPT_RE: Final = re.compile(rf"(?:{_KEPT})", re.IGNORECASE)
_SCOPE_RE: Final = re.compile(rf"\b(?:{_SCOPE})\b", re.IGNORECASE)
_REST_RE: Final = re.compile(r"\b(?:rest|remainder)\s+of\b|\b(?:everything|all)\s+else\b"
                             r"|\b(?:existing|previous|remaining|original)\s+"
                             r"(?:content|contents|code|text|sections?|entries|items|lines|notes?|body)\b",
                             re.IGNORECASE)
_ASIDE_RE: Final = re.compile(rf"\[([^\[\]\n]{{1,{_ASIDE_MAX}}})\]|\(([^()\n]{{1,{_ASIDE_MAX}}})\)"
                              rf"|<!--(.{{0,{_ASIDE_MAX}}}?)-->")
# Bare "..." lines are everywhere in code examples; only bracketed or commented dots count.
_BARE_RE: Final = re.compile(r"^(?:\[\s*(?:\.\.\.|…)\s*\]|<!--\s*(?:\.\.\.|…)?\s*-->)$")
_LEAD_RE: Final = re.compile(r"^(?:[-*+>#|]|//|/\*|\*/|--|;|%)+\s*")
_DOTS_RE: Final = re.compile(r"^(?:\.\.\.|…)|(?:\.\.\.|…)$")


def _kept_at_end(text: str) -> bool:
    """Whether the text ends with a "kept / left out" phrase ("Rest unchanged", "Lines 1-200 unchanged")."""
    tail = text.rstrip(" .…:;!")
    return any(m.end() >= len(tail) - 1 for m in _KEPT_RE.finditer(tail))


def _line_is_placeholder(bare: str) -> bool:
    """A short line of its own that stands for left-out content."""
    if len(bare) > _ASIDE_MAX:
        return False
    if _REST_RE.search(bare) and (_KEPT_RE.search(bare) or _DOTS_RE.search(bare)):
        return True
    words = len(bare.split())
    if _KEPT_RE.fullmatch(bare.rstrip(" .…:;!")):
        return True  # "Unchanged." on a line of its own
    return _kept_at_end(bare) and 3 <= words <= 6 and _SCOPE_RE.search(bare) is not None


def _aside_is_placeholder(match: re.Match[str], line: str) -> bool:
    """A bracketed, parenthesised or HTML-comment aside that stands for left-out content."""
    inner = next(g for g in match.groups() if g is not None).strip()
    alone = match.group(0) == line.rstrip(".")
    comment = match.group(0).startswith("<!--")
    if _KEPT_RE.search(inner):
        return alone or comment or _SCOPE_RE.search(inner) is not None
    return (alone or comment) and (_REST_RE.search(inner) is not None or _BARE_RE.match(match.group(0)) is not None)


def _line_placeholders(line: str) -> tuple[str, ...]:
    """The placeholders of one stripped, non-empty line (as :func:`placeholders` reports them)."""
    bare = _LEAD_RE.sub("", line).strip()
    found: list[str]
    if _BARE_RE.match(line):
        found = [line]
    elif _line_is_placeholder(bare):
        found = [bare.rstrip(".:; ")]
    else:
        found = [m.group(0) for m in _ASIDE_RE.finditer(line) if _aside_is_placeholder(m, line)]
    return tuple(" ".join(f.split()).lower() for f in found)


_line_memo: dict[str, tuple[str, ...]] = {}
""":func:`_line_placeholders` of lines seen before (at most :data:`LINE_MEMO_ENTRIES` lines of at most
:data:`LINE_MEMO_MAX_CHARS` characters, about 4 MiB): a document rewritten again keeps most of its lines,
and the regular expressions cost about 15 µs a line, so each write would otherwise pay ~1 ms for a 2 KiB
note (DESIGN.md §12).  The answer depends on the line alone, so the memo changes no verdict."""

LINE_MEMO_ENTRIES: Final = 8192
"""Lines :data:`_line_memo` holds before it is emptied and refilled."""

LINE_MEMO_MAX_CHARS: Final = 512
"""Longer lines are checked every time, not remembered (they are rare in notes; the memo stays small)."""


def placeholders(text: str) -> list[str]:
    """The elision placeholders in ``text`` (each as found, lower case, whitespace collapsed), in order."""
    found: list[str] = []
    memo = _line_memo
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        hit = memo.get(line)
        if hit is None:
            hit = _line_placeholders(line)
            if len(line) <= LINE_MEMO_MAX_CHARS:
                if len(memo) >= LINE_MEMO_ENTRIES:
                    memo.clear()
                memo[line] = hit
        found.extend(hit)
    return found


def count_lines(data: bytes) -> int:
    """Lines in ``data``: newlines, plus one for a last line without a newline."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def check_rewrite(path: str, old: bytes, new: bytes) -> None:
    """Raise ``destructive_rewrite`` if replacing ``old`` by ``new`` looks lossy.

    ``old``/``new`` are the whole documents (UTF-8 bytes).  The error's data
    names what looked wrong: ``reason`` is ``placeholder`` (with the matched
    ``text``) or ``shrink`` (with ``old_lines``/``new_lines`` and
    ``old_bytes``/``new_bytes``).
    """
    added = Counter(placeholders(new.decode("utf-8", "replace")))
    added.subtract(Counter(placeholders(old.decode("utf-8", "replace"))))
    fresh = [text for text, n in added.items() if n > 0]
    if fresh:
        raise HubError(
            ErrorCode.DESTRUCTIVE_REWRITE,
            f"{path}: the new content contains the elision placeholder {fresh[0][:80]!r}; an upsert replaces the "
            "whole document, so the text it stands for would be lost. Write the complete document, or pass "
            "allow_shrink (--allow-shrink) if the placeholder is really meant to be there",
            {"path": path, "reason": "placeholder", "text": fresh[0][:80]},
        )
    old_lines, new_lines = count_lines(old), count_lines(new)
    lines_cut = old_lines - new_lines > MIN_DROPPED_LINES and new_lines * 2 < old_lines
    bytes_cut = len(old) - len(new) > MIN_DROPPED_BYTES and len(new) * 2 < len(old)
    if lines_cut or bytes_cut:
        what = (f"{counted(new_lines, 'line')} where the document has {old_lines}" if lines_cut
                else f"{counted(len(new), 'byte')} where the document has {len(old)}")
        raise HubError(
            ErrorCode.DESTRUCTIVE_REWRITE,
            f"{path}: the new content has {what}; more than half would be dropped. Write the complete document, "
            "or pass allow_shrink (--allow-shrink) for a deliberate cut",
            {"path": path, "reason": "shrink", "old_lines": old_lines, "new_lines": new_lines,
             "old_bytes": len(old), "new_bytes": len(new)},
        )
