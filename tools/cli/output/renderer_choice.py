"""How a command asks for readable output: a :class:`RendererChoice` naming one renderer (DESIGN.md §17).

A command passes a :class:`RendererChoice` to :func:`tools.cli.output.contract.emit` (or
:func:`~tools.cli.output.contract.write_shown`); only when a person reads the output
does ``emit`` import :mod:`tools.cli.output.renderers` (and with it rich) and call the
renderer :data:`tools.cli.output.renderers.RENDERERS` holds for :attr:`RendererChoice.renderer`.
The name is a :data:`Renderer` literal, so mypy refuses a name no renderer
has, and ``tests/test_human_output.py`` checks that the mapping has a
renderer for every name and that each runs on a sample.  This module
imports nothing, so both :mod:`tools.cli.output.contract` and the renderers
depend on it and not on each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Renderer = Literal["document", "diff", "search", "get", "list", "history", "log", "upsert", "edit", "forget",
                   "copy", "purge", "scan", "settings", "typed_new", "typed_index", "typed_remove"]
"""The name of each result shape's renderer in :data:`tools.cli.output.renderers.RENDERERS`."""


@dataclass(frozen=True)
class RendererChoice:
    """How a result is shown in a terminal: a :data:`Renderer` name and the renderer's keyword options.

    A name, not the function, so a JSON call imports neither
    :mod:`tools.cli.output.renderers` nor rich (DESIGN.md §13.6).  ``options`` are the
    renderer's keyword arguments (e.g. the search words to highlight).
    """

    renderer: Renderer
    options: dict[str, Any] = field(default_factory=dict)
