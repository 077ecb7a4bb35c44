"""Readable text or JSON for the operating commands (``hub start|stop|restart|status``, ``hub service``,
``doctor``, ``system config list``): DESIGN.md §19.

In a terminal these commands print short plain lines for a person; with
``--json``, ``AMUX_OUTPUT=json``, or whenever stdout is not a terminal (a
pipe, a file, a test), they print the JSON document
:func:`tools.cli.output.contract.emit` prints, so scripts always get JSON: the one
decision is :func:`tools.cli.output.contract.human_output`, as for the data commands.
Errors always go through :func:`tools.cli.output.contract.fail`.  Text shown here may
hold values from files people or agents wrote (a setting, a path): it goes
through :func:`tools.client.inert.inert`, the one sanitizer of DESIGN.md §17.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any

from cyclopts import Parameter

from amux_memory.tools.cli.output.contract import emit, human_output, write_bytes

Json = Annotated[bool, Parameter(name="--json", negative="", help="Print JSON even in a terminal (it is always "
                                 "JSON when stdout is not a terminal).")]
"""``--json``: print JSON even when stdout is a terminal."""


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
    """``rows`` as left-aligned columns separated by two spaces (every cell made :func:`~tools.client.inert.inert`)."""
    from amux_memory.tools.client.inert import inert

    cells = [[inert(c) for c in row] for row in rows]
    if not cells:
        return []
    widths = [max(len(row[i]) for row in cells if i < len(row)) for i in range(max(len(r) for r in cells))]
    return ["  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in cells]


def show(document: Any, lines: Iterable[str] | Callable[[], Iterable[str]], *, json_flag: bool) -> None:
    """Print ``document`` as JSON unless :func:`~tools.cli.output.contract.human_output` says a person reads it; then
    ``lines`` (already readable text, its values made inert), one per line.

    ``lines`` may be a function that makes them, called only for a person, so a JSON call does not import
    the terminal renderers (DESIGN.md §17)."""
    if not human_output(json_flag):
        emit(document)
        return
    if callable(lines):
        lines = lines()
    write_bytes("".join(f"{line}\n" for line in lines).encode("utf-8", "backslashreplace"))
