"""What every terminal renderer builds with (DESIGN.md §17): rich text from parts, groups, notices, tables,
short revisions and commands a person can paste.

Each helper imports rich when it runs, so importing this module costs nothing on the JSON path.  Text
from memory goes through :func:`tools.client.inert.inert` before it is shown.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from amux_memory.protocol.params import ABSENT
from amux_memory.tools.client.inert import inert

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table
    from rich.text import Text


SHORT_REVISION = 12
"""Hex digits of a revision shown in tables and headers (the full one is in ``--json``)."""


def short_revision(revision: Any) -> str:
    """The first :data:`SHORT_REVISION` characters of a revision; ``absent`` (or a non-string) as it is."""
    text = inert(revision)
    return text if text == ABSENT else text[:SHORT_REVISION]


def command(*words: Any) -> str:
    """A command line a user can paste: each word made inert and shell-quoted (``'a b.md'``)."""
    return " ".join(shlex.quote(inert(word)) for word in words)


def text(*parts: str | Text | tuple[str, str]) -> Text:
    """A :class:`rich.text.Text` from plain parts, ``Text`` pieces and ``(text, style)`` pairs (used as is)."""
    from rich.text import Text

    out = Text()
    for part in parts:
        if isinstance(part, tuple):
            out.append(part[0], style=part[1])
        else:
            out.append(part)
    return out


def group(items: Iterable[RenderableType]) -> RenderableType:
    """Several renderables printed one after the other."""
    from rich.console import Group

    return Group(*items)


def notice(message: str) -> Text:
    """A warning line (yellow): incomplete results, cut fragments, how to go on."""
    return text((message, "yellow"))


def new_table(*columns: tuple[str, str]) -> Table:
    """A borderless aligned table with a bold header row: ``(header, "left"|"right")`` per column."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for header, justify in columns:
        table.add_column(header, justify="right" if justify == "right" else "left", no_wrap=header != "path",
                         overflow="fold")
    return table
