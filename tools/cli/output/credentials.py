"""The terminal renderer of ``amux memory scan`` (DESIGN.md §16.5, §17): the credentials found, and how to clean
them up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amux_memory.tools.cli.output.pieces import group, new_table, notice, short_revision, text
from amux_memory.tools.client.inert import inert
from amux_memory.tools.client.wording import counted

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.text import Text


def finding_cells(finding: dict[str, Any]) -> list[Text]:
    """A ``scan`` finding as table cells: where (line, or ``path``), rule, redacted preview."""
    where = "path" if finding.get("in") == "path" else f"line {finding.get('line')}"
    return [text(where), text((inert(finding.get("rule")), "bold red")), text(inert(finding.get("preview")))]


def render_scan(r: dict[str, Any]) -> RenderableType:
    """A ``scan`` result (DESIGN.md §16.5): a table of the documents, then of the stored versions, holding
    credentials (path, revision, where, rule, redacted preview), then each entry's clean-up commands (already
    shell-quoted by the Hub; made inert here) and each value's ``memory.secret_allow`` digest."""
    documents, versions = r.get("documents") or [], r.get("versions") or []
    rules = len(r.get("rules") or [])
    if not documents and not versions:
        return text(("no credentials found", "bold"), f" ({counted(rules, 'rule')})")
    parts: list[RenderableType] = []
    digests: list[Text] = []
    seen: set[Any] = set()
    for title, entries in (("document", documents), ("stored version", versions)):
        if not entries:
            continue
        parts.append(text((counted(len(entries), title, "holding credentials"), "bold")))
        table = new_table(("path", "left"), ("revision", "left"), ("where", "left"), ("rule", "left"),
                          ("preview", "left"))
        for entry in entries:
            for finding in entry.get("findings") or []:
                table.add_row(text((inert(entry.get("path")), "cyan")), text(short_revision(entry.get("revision"))),
                              *finding_cells(finding))
                if finding.get("sha256") and finding.get("sha256") not in seen:
                    seen.add(finding.get("sha256"))
                    digests.append(text(f"  {inert(finding.get('preview'))}: ", (inert(finding.get("sha256")),
                                                                                  "dim")))
        parts.append(table)
    steps: list[RenderableType] = [text(("to clean up:", "bold"))]
    for entry in [*documents, *versions]:
        if entry.get("advice"):
            steps.append(text(inert(entry.get("path")), ": ", (inert(entry.get("advice")), "dim")))
        steps.extend(text("  ", (inert(c), "bold")) for c in entry.get("commands") or [])
    parts.extend(steps)
    if digests:
        parts.append(text(("not a credential? let that exact value through with its digest "
                           "('amux system config set memory.secret_allow DIGEST,...'):", "dim")))
        parts.extend(digests)
    if r.get("truncated"):
        parts.append(notice("more entries were found than fit: clean these up and scan again"))
    return group(parts)
