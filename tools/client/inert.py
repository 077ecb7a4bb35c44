"""The one sanitizer for text shown to a person: terminal controls made visible (DESIGN.md §17).

Everything a frontend shows from memory (paths, snippets, content, actors,
error messages and data) was written by an agent and is hostile: a terminal
would act on an ``ESC[2J``, an OSC 52 clipboard write or an OSC 8 link, and
a right-to-left override makes a path read differently.  :func:`inert`
turns every such character into a visible escape.  A pure helper with no
dependency but :mod:`protocol`, so the CLI's renderers, its plain operating
output and any other frontend share it without importing the CLI or rich.
"""

from __future__ import annotations

from typing import Any

from amux_memory.protocol.errors import encodable

_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROLS = (*range(0x20), 0x7F, *range(0x80, 0xA0), *_BIDI, 0x2028, 0x2029)
_INERT = {code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" for code in _CONTROLS}
_INERT_MULTILINE = {code: escape for code, escape in _INERT.items() if code not in (0x09, 0x0A)}


def inert(text: Any, *, multiline: bool = False) -> str:
    """``text`` (made a string) with every terminal control character replaced by a visible escape.

    C0 controls (ESC, BEL, CR, backspace...), DEL, C1 controls (including
    the 8-bit CSI and OSC), the bidirectional overrides, embeddings, isolates
    and marks (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C) and the
    Unicode line and paragraph separators become ``\\x1b``-style or
    ``\\u202e``-style text, so ``ESC[2J``, an OSC 52 clipboard write or an
    OSC 8 link is shown, never acted on.  With ``multiline`` newline and tab
    are kept (a document's content); otherwise they are escaped too (a path,
    a snippet, a table cell).  Lone surrogates become ``\\udcff``.  Never
    raises.  DESIGN.md §17.
    """
    table = _INERT_MULTILINE if multiline else _INERT
    return encodable(str(text)).translate(table)
