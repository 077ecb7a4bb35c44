"""Readable text or JSON for the operating commands (``hub start|stop|restart|status``, ``hub service``,
``doctor``, ``system config list``): DESIGN.md §19.

In a terminal these commands print short plain lines for a person; with
``--json``, or whenever stdout is not a terminal (a pipe, a file, a test), they
print the JSON document :func:`tools.cli.output.emit` prints, so scripts
always get JSON.  Errors always go through :func:`tools.cli.output.fail`.
Text shown here may hold values from files people or agents wrote (a
setting, a path): :func:`clean` strips terminal control characters from it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Annotated, Any

from cyclopts import Parameter

from tools.cli.output import emit, write_bytes

Json = Annotated[bool, Parameter(name="--json", negative="", help="Print JSON even in a terminal (it is always "
                                 "JSON when stdout is not a terminal).")]
"""``--json``: print JSON even when stdout is a terminal."""


def wants_json(json_flag: bool) -> bool:
    """True when the command should print JSON: ``--json`` given, or stdout is not a terminal."""
    if json_flag:
        return True
    try:
        return not sys.stdout.isatty()
    except (AttributeError, ValueError):
        return True


def clean(text: object) -> str:
    """``str(text)`` with control characters (ESC, CR, BEL, ...) shown as ``\\xNN``, so it cannot drive the
    terminal; tabs stay."""
    out = []
    for ch in str(text):
        code = ord(ch)
        out.append(ch if ch == "\t" or (code >= 32 and code != 127 and not 0x80 <= code < 0xA0) else f"\\x{code:02x}")
    return "".join(out)


def duration(seconds: float) -> str:
    """``seconds`` as a short duration for people: ``42 s``, ``5 min 3 s``, ``2 h 5 min``, ``3 d 4 h``."""
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def table(rows: Sequence[Sequence[object]]) -> list[str]:
    """``rows`` as left-aligned columns separated by two spaces (every cell :func:`clean`-ed)."""
    cells = [[clean(c) for c in row] for row in rows]
    if not cells:
        return []
    widths = [max(len(row[i]) for row in cells if i < len(row)) for i in range(max(len(r) for r in cells))]
    return ["  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in cells]


def show(document: Any, lines: Iterable[str], *, json_flag: bool) -> None:
    """Print ``document`` as JSON (:func:`wants_json`), else ``lines`` (already readable text), one per line."""
    if wants_json(json_flag):
        emit(document)
        return
    write_bytes("".join(f"{line}\n" for line in lines).encode("utf-8", "backslashreplace"))
