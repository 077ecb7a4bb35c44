"""Renderer name → renderer: the one table :func:`tools.cli.output.contract.emit` looks a result's renderer up
in (DESIGN.md §17).

:func:`tools.cli.output.contract.emit` imports this module and calls :func:`render` only when stdout is a
terminal and no ``--json`` was given; piped output never comes here.  Each renderer imports rich when it
runs and returns a rich renderable built from :class:`rich.text.Text` objects (never markup strings, so
``[red]`` in a note is just text); :mod:`tools.cli.output.console` prints it.

Everything shown from memory (paths, snippets, content, actors, error messages) was written by an agent
and is hostile: the renderers put it through :func:`tools.client.inert.inert` first, which makes terminal
control sequences visible instead of letting the terminal act on them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from amux_memory.tools.cli.output.credentials import render_scan
from amux_memory.tools.cli.output.reading import render_diff, render_document, render_get, render_list, render_search
from amux_memory.tools.cli.output.renderer_choice import Renderer, RendererChoice
from amux_memory.tools.cli.output.settings import render_settings
from amux_memory.tools.cli.output.topics import render_typed_index, render_typed_new, render_typed_remove
from amux_memory.tools.cli.output.versions import render_history, render_log
from amux_memory.tools.cli.output.writes import render_copy, render_edit, render_forget, render_purge, render_upsert

if TYPE_CHECKING:
    from rich.console import RenderableType


RENDERERS: dict[Renderer, Callable[..., RenderableType]] = {
    "document": render_document,
    "diff": render_diff,
    "search": render_search,
    "get": render_get,
    "list": render_list,
    "history": render_history,
    "log": render_log,
    "upsert": render_upsert,
    "edit": render_edit,
    "forget": render_forget,
    "copy": render_copy,
    "purge": render_purge,
    "scan": render_scan,
    "settings": render_settings,
    "typed_new": render_typed_new,
    "typed_index": render_typed_index,
    "typed_remove": render_typed_remove,
}
"""Renderer name (a :class:`~tools.cli.output.renderer_choice.RendererChoice`'s) → the function: result map and
options in, renderable out.

Keyed by the :data:`~tools.cli.output.renderer_choice.Renderer` literal, so mypy refuses a key
that is not a renderer's name; ``tests/test_human_output.py`` checks that
every name has one and that each runs on a sample."""


def render(view: RendererChoice, result: Any) -> RenderableType:
    """``result`` rendered as ``view`` says.  Raises ``KeyError`` for a name not in :data:`RENDERERS` (a bug)."""
    return RENDERERS[view.renderer](result, **view.options)
