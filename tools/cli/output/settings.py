"""The terminal renderer of ``amux system config list`` (DESIGN.md §13.2, §17): the settings and where each
value comes from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amux_memory.tools.cli.output.pieces import group, new_table, text
from amux_memory.tools.client.inert import inert

if TYPE_CHECKING:
    from rich.console import RenderableType


def setting_shown(value: Any) -> str:
    """A setting's value as a person types it: ``true``/``false``, a number, a bare string, ``''`` for empty."""
    if value == "":
        return "''"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render_settings(r: dict[str, Any]) -> RenderableType:
    """A ``system config list`` result (DESIGN.md §13.2): the file, a table of key, value, source and default,
    then each setting's description."""
    rows = r.get("settings") or []
    table = new_table(("key", "left"), ("value", "left"), ("from", "left"), ("default", "left"))
    for row in rows:
        table.add_row(text((inert(row["key"]), "cyan")), text(inert(setting_shown(row["value"]))),
                      text(inert(row["source"])), text((inert(setting_shown(row["default"])), "dim")))
    return group([
        text((f"settings of {inert(r.get('file'))}", "bold"), " (applied when the Hub starts)"),
        table, text(""),
        *(text((f"{inert(row['key'])}: ", "bold"), inert(row["description"])) for row in rows)])
