"""Terminal renderers of what changing memory returns (DESIGN.md §17): ``upsert`` (and ``restore``), ``edit``,
``forget``, ``copy`` and ``move``, ``purge``, and a write kept for review (§21).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amux_memory.protocol.params import ABSENT
from amux_memory.tools.cli.output.pieces import command, group, notice, short_revision, text
from amux_memory.tools.client.inert import inert
from amux_memory.tools.client.wording import counted

if TYPE_CHECKING:
    from rich.console import RenderableType


def render_proposed(r: dict[str, Any]) -> RenderableType:
    """A write kept for review (``proposed: true``, DESIGN.md §21), one line: nothing is in memory yet.

    ``proposed p1a2b3c4d5e6f for MEMORY.md: pending review, not yet in memory ('amux memory review show ID')``;
    a deletion says the deletion is proposed.  The path is an agent's and made :func:`inert`.
    """
    pid = inert(r.get("proposal"))
    path = (inert(r.get("path")), "bold cyan")
    again = (command("amux", "memory", "review", "show", r.get("proposal")), "dim")
    if r.get("action") == "forget":
        return text(f"proposed {pid} to delete ", path, ": pending review, nothing deleted yet (", again, ")")
    return text(f"proposed {pid} for ", path, ": pending review, not yet in memory (", again, ")")


def render_upsert(r: dict[str, Any]) -> RenderableType:
    """An ``upsert`` (or ``restore``) result, one line: created/replaced/restored, bytes, the new short revision;
    a write kept for review says so instead (:func:`render_proposed`)."""
    if r.get("proposed"):
        return render_proposed(r)
    if r.get("restored_from"):
        how = f"restored {short_revision(r.get('restored_from'))} as"
    else:
        how = "created" if r.get("created") else "replaced"
    return text(f"{how} ", (inert(r.get("path")), "bold cyan"), f" ({counted(int(r.get('bytes') or 0), 'byte')}); "
                "revision now ",
                (short_revision(r.get("revision")), "bold"))


def render_edit(r: dict[str, Any]) -> RenderableType:
    """An ``edit`` result, one line: saved (created or updated) with the new short revision, or no change; a
    write kept for review says so instead (:func:`render_proposed`)."""
    if r.get("proposed"):
        return render_proposed(r)
    path = (inert(r.get("path")), "bold cyan")
    if not r.get("changed"):
        if r.get("revision") == ABSENT:
            return text("no change: ", path, " does not exist and was not created; nothing written")
        return text("no change: nothing written (", path, " stays at revision ",
                    (short_revision(r.get("revision")), "bold"), ")")
    how = "created" if r.get("created") else "saved"
    return text(f"{how} ", path, f" ({counted(int(r.get('bytes') or 0), 'byte')}); revision now ",
                (short_revision(r.get("revision")), "bold"))


def render_forget(r: dict[str, Any]) -> RenderableType:
    """A ``forget`` result, one line: deleted (undo with restore), or already absent; a deletion kept for review
    says so instead (:func:`render_proposed`)."""
    if r.get("proposed"):
        return render_proposed(r)
    path = r.get("path")
    if r.get("already_absent"):
        return text((inert(path), "bold cyan"), " was already absent; nothing was deleted")
    return text("deleted ", (inert(path), "bold cyan"), ("; its versions stay in the history (",
                                                         "dim"), (command("amux", "memory", "history", path), "dim"),
                (")", "dim"))


def render_copy(r: dict[str, Any], *, move: bool = False) -> RenderableType:
    """A ``copy`` result (``amux memory copy`` or, ``move``, ``amux memory move``; DESIGN.md §7.8): one line saying
    what went where, with the new short revision and the source's revision read; a destination kept for review
    names the proposal; a move that kept its source says why (``source_kept``); the Hub's warnings follow.  Every
    path comes from memory and is made :func:`inert`."""
    source, destination = (inert(r.get("source")), "bold cyan"), (inert(r.get("path")), "bold cyan")
    read = (f" (source revision {short_revision(r.get('source_revision'))})", "dim")
    if r.get("proposed"):
        pid = r.get("proposal")
        again = (command("amux", "memory", "review", "show", pid), "dim")
        lines: list[RenderableType] = [text(("proposed ", "yellow"), (inert(pid), "bold"), ": a copy of ", source,
                                            " to ", destination, read, ": pending review, not yet in memory (", again,
                                            ")")]
    else:
        how = "moved" if r.get("moved") else "copied"
        lines = [text(f"{how} ", source, " to ", destination, f" ({r.get('bytes')} bytes); revision now ",
                      (short_revision(r.get("revision")), "bold"), read)]
        if r.get("moved"):
            lines.append(text((f"{inert(r.get('source'))} was forgotten; its versions stay in the history (", "dim"),
                              (command("amux", "memory", "history", r.get("source")), "dim"), (")", "dim")))
    if move and not r.get("moved"):
        lines.append(notice(f"{inert(r.get('source'))} was kept: {inert(r.get('source_kept') or 'not moved')}"))
    lines.extend(notice(inert(warning)) for warning in r.get("warnings") or [])
    return group(lines)


def render_purge(r: dict[str, Any]) -> RenderableType:
    """A ``purge`` result: how many stored versions were erased for good, with their short revisions."""
    erased = r.get("erased") or []
    revisions = ", ".join(short_revision(v.get("revision")) for v in erased)
    line = text(f"erased {counted(len(erased), 'stored version')} of ", (inert(r.get("path")), "bold cyan"),
                " from the history", (f" ({revisions})" if revisions else ""),
                ("; the live document was not touched", "dim"))
    return line
