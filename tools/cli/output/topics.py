"""Terminal renderers of the typed memory commands (DESIGN.md §11, §17): ``memory new``, ``memory index`` and
``memory remove``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amux_memory.tools.cli.output.pieces import command, group, short_revision, text
from amux_memory.tools.client.inert import inert
from amux_memory.tools.client.wording import counted

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.text import Text


def _index_outcome(index: dict[str, Any]) -> Text:
    """``; index PATH updated|unchanged (revision …)``, or ``… proposed for review (pID)``."""
    if index.get("proposal"):
        return text(f"; index {inert(index.get('path'))} proposed for review (", (inert(index["proposal"]), "bold"),
                    ")")
    how = "updated" if index.get("changed") else "unchanged"
    return text(f"; index {inert(index.get('path'))} {how}",
                (f" (revision {short_revision(index.get('revision'))})" if index.get("revision") else "", "dim"))


def _proposed(r: dict[str, Any], removal: bool) -> RenderableType:
    """A typed command the Hub kept for review (DESIGN.md §21): what waits, and what a person does next."""
    outcome = ": pending review, nothing deleted yet" if removal else ": pending review, not yet in memory"
    return group([text(("proposed ", "yellow"), (inert(r.get("proposal")), "bold"),
                       " to delete " if removal else " for ", (inert(r.get("proposed")), "bold cyan"), outcome),
                  text("next: ", (command("amux", "memory", "review", "show", r.get("proposal")), "bold"),
                       "; once it is decided, ", (command("amux", "memory", "index"), "bold"),
                       " brings the index up to date")])


def render_typed_new(r: dict[str, Any]) -> RenderableType:
    """A ``memory new`` result, one line: the topic created, its short revision, and the index's update
    (or, kept for review, the proposal and the next step)."""
    if r.get("proposed"):
        return _proposed(r, removal=False)
    return text("created ", (inert(r.get("created")), "bold cyan"), "; revision now ",
                (short_revision(r.get("revision")), "bold"), _index_outcome(r.get("index") or {}))


def render_typed_index(r: dict[str, Any]) -> RenderableType:
    """A ``memory index`` result, one line: rebuilt, already up to date, or (``--check``) out of date."""
    path = (inert(r.get("path")), "bold cyan")
    topics = ", ".join(f"{inert(kind)} {count}" for kind, count in (r.get("topics") or {}).items()) or "no topics"
    proposal = r.get("proposal") or (r.get("pointer") or {}).get("proposal")
    if proposal:
        return text("rebuild of ", path, f" ({topics}) proposed for review (", (inert(proposal), "bold"),
                    "); a person approves it with: ", (command("amux", "memory", "review"), "bold"))
    if not r.get("up_to_date"):
        return text(path, (" is out of date", "yellow"), f" ({topics}); rebuild it with: ",
                    (command("amux", "memory", "index"), "bold"))
    if not r.get("changed"):
        return text(path, f" is up to date ({topics}); nothing written")
    size = f"{counted(int(r.get('bytes') or 0), 'byte')}, {counted(int(r.get('lines') or 0), 'line')}"
    return text("rebuilt ", path, f" ({size}; {topics}); revision now ",
                (short_revision(r.get("revision")), "bold"))


def render_typed_remove(r: dict[str, Any]) -> RenderableType:
    """A ``memory remove`` result, one line: the topic deleted and what became of the index (or, kept
    for review, the proposal)."""
    if r.get("proposed"):
        return _proposed(r, removal=True)
    return text("removed ", (inert(r.get("removed")), "bold cyan"), _index_outcome(r.get("index") or {}))
