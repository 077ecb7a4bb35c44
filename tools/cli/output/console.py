"""The rich consoles the CLI prints readable output on (DESIGN.md §17).

One set-up for stdout and stderr: no rich markup, emoji codes or
highlighting of our text (renderers build :class:`rich.text.Text` objects),
colour as rich decides it (none with ``NO_COLOR``, no escape sequence at all
with ``TERM=dumb``), and a stream whose encoding cannot show a character
gets a backslash escape instead of an error.  Imports rich only when a
console is made, so importing this module costs nothing on the JSON path.
"""

from __future__ import annotations

import io
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console, RenderableType


def console(*, stderr: bool = False) -> Console:
    """A rich console for stdout (or stderr): no markup, emoji codes or highlighting of our text.

    rich decides colour: none with ``NO_COLOR`` set, and no escape sequence
    at all with ``TERM=dumb``.  A stream whose encoding cannot show a
    character gets a backslash escape for it instead of an error.
    """
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    if isinstance(stream, io.TextIOWrapper):
        stream.reconfigure(errors="backslashreplace")  # a terminal that is not UTF-8 gets escapes, not a crash
    return Console(stderr=stderr, highlight=False, markup=False, emoji=False)


def print_out(renderable: RenderableType) -> None:
    """Print a renderer's result on stdout.  Raises ``BrokenPipeError`` when the reader went away."""
    console().print(renderable, soft_wrap=True)


def print_err(renderable: RenderableType) -> None:
    """Print ``renderable`` on stderr (the terminal form of an error)."""
    console(stderr=True).print(renderable, soft_wrap=True)
