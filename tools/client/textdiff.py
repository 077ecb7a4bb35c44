"""Unified diffs of two versions of a document, as text and as data, computed on the client (DESIGN.md §15).

``amux memory diff`` exports two versions and compares them here, line by
line on the raw bytes (documents are UTF-8, but nothing here needs to decode
them to compare).  Lines end at ``\\n`` only, as ``patch`` reads them; a last
line without one is marked ``\\ No newline at end of file``, as GNU ``diff``
marks it, so the text applies with ``patch`` to give the newer version
exactly.  Pure: bytes in, bytes or plain values out.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

CONTEXT_LINES = 3
"""Unchanged lines shown around each change (``diff -u``'s default)."""

NO_NEWLINE = b"\\ No newline at end of file"
"""The marker line after a diff line whose document line has no final newline."""


@dataclass(frozen=True)
class Hunk:
    """One hunk of a unified diff.

    ``old_start``/``new_start`` are the 1-based first lines as the ``@@``
    header shows them (for an empty side: the line before, possibly 0);
    ``old_lines``/``new_lines`` are how many lines each side covers;
    ``lines`` are the hunk's lines, each ``b" "``, ``b"-"`` or ``b"+"``
    followed by the document line with its ``\\n`` (if it had one).
    """

    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    lines: list[bytes] = field(default_factory=list)

    def header(self) -> bytes:
        """``@@ -old +new @@`` with ``start,count`` ranges (a count of 1 left out, as ``diff -u`` writes)."""
        return b"@@ -%s +%s @@" % (_range(self.old_start, self.old_lines), _range(self.new_start, self.new_lines))


def _range(start: int, count: int) -> bytes:
    return b"%d" % start if count == 1 else b"%d,%d" % (start, count)


def split_lines(data: bytes) -> list[bytes]:
    """``data`` cut after every ``\\n`` (kept); the last line may lack one.  ``b""`` has no lines."""
    lines = data.split(b"\n")
    out = [line + b"\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def diff_hunks(old: bytes, new: bytes, *, context: int = CONTEXT_LINES) -> list[Hunk]:
    """The hunks turning ``old`` into ``new`` (none when they are equal), ``context`` lines around each change."""
    a, b = split_lines(old), split_lines(new)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    hunks: list[Hunk] = []
    for group in matcher.get_grouped_opcodes(context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        lines: list[bytes] = []
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                lines += [b" " + line for line in a[a1:a2]]
                continue
            lines += [b"-" + line for line in a[a1:a2]]
            lines += [b"+" + line for line in b[b1:b2]]
        hunks.append(Hunk(i1 + 1 if i2 > i1 else i1, i2 - i1, j1 + 1 if j2 > j1 else j1, j2 - j1, lines))
    return hunks


def render_unified(hunks: list[Hunk], old_label: str, new_label: str) -> bytes:
    """The unified diff text: ``--- old_label``, ``+++ new_label``, then each hunk; ``b""`` when no hunks.

    Labels are written as UTF-8 (conventionally ``a/PATH<TAB>REVISION``).
    Every line ends in ``\\n``; a line that had none is followed by
    :data:`NO_NEWLINE`.
    """
    if not hunks:
        return b""
    out = [b"--- " + old_label.encode("utf-8", "surrogateescape") + b"\n",
           b"+++ " + new_label.encode("utf-8", "surrogateescape") + b"\n"]
    for hunk in hunks:
        out.append(hunk.header() + b"\n")
        for line in hunk.lines:
            out.append(line if line.endswith(b"\n") else line + b"\n" + NO_NEWLINE + b"\n")
    return b"".join(out)


def hunks_as_data(hunks: list[Hunk]) -> list[dict[str, Any]]:
    """The hunks as JSON values: ``{"old_start", "old_lines", "new_start", "new_lines", "lines"}``.

    ``lines`` are text without their ``\\n`` (``" kept"``, ``"-removed"``,
    ``"+added"``), with ``"\\ No newline at end of file"`` after a line that
    had none, exactly the lines of :func:`render_unified` between headers.
    Bytes that are not UTF-8 show as U+FFFD.
    """
    data: list[dict[str, Any]] = []
    for hunk in hunks:
        lines: list[str] = []
        for line in hunk.lines:
            if line.endswith(b"\n"):
                lines.append(line[:-1].decode("utf-8", "replace"))
            else:
                lines += [line.decode("utf-8", "replace"), NO_NEWLINE.decode("ascii")]
        data.append({"old_start": hunk.old_start, "old_lines": hunk.old_lines, "new_start": hunk.new_start,
                     "new_lines": hunk.new_lines, "lines": lines})
    return data


def line_counts(hunks: list[Hunk]) -> tuple[int, int]:
    """``(added, removed)``: lines the hunks add and remove."""
    added = sum(1 for hunk in hunks for line in hunk.lines if line.startswith(b"+"))
    removed = sum(1 for hunk in hunks for line in hunk.lines if line.startswith(b"-"))
    return added, removed
