"""Terminal renderers of what reading memory returns (DESIGN.md §17): ``search``, ``show``, ``list``, and the
bytes of ``export`` and ``diff``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amux_memory.protocol.params import ABSENT
from amux_memory.tools.cli.output.pieces import command, group, new_table, notice, short_revision, text
from amux_memory.tools.client.inert import inert
from amux_memory.tools.client.wording import counted

if TYPE_CHECKING:
    from rich.console import RenderableType


def render_search(r: dict[str, Any], words: list[str] | None = None) -> RenderableType:
    """A search result: one line per ranked document (path, line, matched keywords), its snippet below.

    Says plainly when the scan was incomplete (a missing match is no proof
    of absence) and when more matches were left out; ``words`` are
    highlighted in the snippets, ignoring case.
    """
    matches = r.get("matches") or []
    lines: list[RenderableType] = []
    scanned = f"scanned {counted(int(r.get('scanned_files') or 0), 'file')}"
    if not matches:
        lines.append(text(("no matches", "bold"), f" ({scanned})"))
    else:
        candidates = int(r.get("candidates", len(matches)) or 0)
        lines.append(text((f"{len(matches)} of {counted(candidates, 'matching document')}", "bold"),
                          f" ({scanned})"))
    for rank, m in enumerate(matches, 1):
        matched = ", ".join(inert(word) for word in m.get("matched") or [])
        lines.append(text(f"{rank:>2}. ", (inert(m.get("path")), "bold cyan"), (f":{m.get('line')}", "cyan"),
                          (f"  rev {short_revision(m.get('revision'))}", "dim"), (f"  matched: {matched}", "dim")))
        snippet = text("    ", inert(m.get("snippet", "")), ("…" if m.get("truncated") else ""))
        if words:
            snippet.highlight_words([inert(word) for word in words], style="bold yellow", case_sensitive=False)
        lines.append(snippet)
    if r.get("incomplete"):
        reasons = ", ".join(inert(x) for x in r.get("incomplete_reasons") or []) or "a scan limit"
        cut = [p for p in r.get("parts") or [] if p.get("incomplete_reasons")]
        where = ""
        if cut:  # a search over mounts (DESIGN.md §7.8): say which scope was cut, so the person can narrow to it
            where = " in " + ", ".join(
                f"{inert(p.get('mount')) or 'your own memory'} ({', '.join(inert(x) for x in p['incomplete_reasons'])}"
                f", {counted(int(p.get('scanned_files') or 0), 'file')} scanned)" for p in cut)
        lines.append(notice(f"incomplete: the scan stopped early ({reasons}){where}; a missing match is not proof "
                            "of absence: narrow --path-prefix (a mount: --path-prefix @TEAM/) or change the keywords"))
        for name in r.get("unreadable") or []:
            lines.append(notice(f"unreadable: {inert(name)} (file permissions on the Hub's host)"))
    if r.get("truncated"):
        lines.append(notice("more matches were left out: raise --limit (at most 20), narrow --path-prefix or add "
                            "keywords"))
    if matches:
        lines.append(text(("read one with: ", "dim"), (command("amux", "memory", "show", matches[0].get("path")),
                                                       "dim")))
    return group(lines)


def fragment_lines(content: str, start_line: int, offset: int) -> str:
    """The ``lines A-B`` (or ``from byte N``) part of a ``show`` header, from the request and the content."""
    first = max(start_line, 1)
    count = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    if offset:
        return f"continued from byte {offset}"
    if count == 0:
        return "no lines"
    return f"lines {first}-{first + count - 1}"


def render_get(r: dict[str, Any], *, start_line: int = 0, end_line: int = 0, offset: int = 0,
               revision: str | None = None) -> RenderableType:
    """A ``show`` result: one header line (path, line range of total, short revision, bytes), then the fragment.

    A missing document says how to create it; a cut fragment ends with the
    exact command that continues it (``--offset``, same lines, same
    ``--revision``); a stored version (``revision``) says so in the header.
    """
    path = r.get("path")
    if not r.get("exists"):
        return text((inert(path), "bold cyan"), " does not exist (revision \"absent\"); create it with: ",
                    (command("amux", "memory", "upsert", path, "--expected-revision", ABSENT), "bold"))
    content = str(r.get("content", ""))
    head = text((inert(path), "bold cyan"),
                f"  {fragment_lines(content, start_line, offset)} of {r.get('total_lines')}",
                ("  rev ", "dim"), (short_revision(r.get("revision")), "bold"),
                (f"  {counted(int(r.get('total_bytes') or 0), 'byte')}", "dim"),
                ("  (a stored version, from the history)" if revision is not None else "", "yellow"))
    parts: list[RenderableType] = [head, text(inert(content.removesuffix("\n"), multiline=True))]
    if r.get("truncated"):
        again = ["amux", "memory", "show", path]
        if start_line:
            again += ["--start-line", str(start_line)]
        if end_line:
            again += ["--end-line", str(end_line)]
        if revision is not None:
            again += ["--revision", revision]
        again += ["--offset", str(r.get("next_offset"))]
        parts.append(notice(f"cut at the response limit; continue with: {command(*again)}"))
    return group(parts)


def render_list(r: dict[str, Any]) -> RenderableType:
    """A ``list`` result: an aligned table of path and bytes, a total, and whether the walk was incomplete."""
    entries = r.get("entries") or []
    table = new_table(("path", "left"), ("bytes", "right"))
    for entry in entries:
        table.add_row(text((inert(entry.get("path")), "cyan")), text(str(entry.get("bytes"))))
    total = sum(int(entry.get("bytes") or 0) for entry in entries)
    summary = f"{counted(len(entries), 'document')}, {counted(total, 'byte')}"
    parts: list[RenderableType] = [table, text((summary, "dim"))]
    if r.get("incomplete"):
        reasons = ", ".join(inert(x) for x in r.get("incomplete_reasons") or []) or "a bound"
        parts.append(notice(f"incomplete: the listing stopped early ({reasons}); narrow --path-prefix"))
    for name in r.get("unreadable") or []:
        parts.append(notice(f"unreadable: {inert(name)} (file permissions on the Hub's host)"))
    return group(parts)


def render_document(data: bytes) -> RenderableType:
    """A whole document (``export`` to a terminal): its text, decoded, control sequences made visible."""
    return text(inert(data.decode("utf-8", "replace").removesuffix("\n"), multiline=True))


DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))
"""How a unified diff line is coloured, by its first characters (the first match wins)."""


def render_diff(data: bytes) -> RenderableType:
    """A unified diff (``diff`` to a terminal): headers bold, hunk heads cyan, added green, removed red; inert."""
    out = text()
    for line in data.decode("utf-8", "replace").splitlines():
        style = next((s for prefix, s in DIFF_STYLES if line.startswith(prefix)), "")
        if len(out):
            out.append("\n")
        out.append(inert(line.replace("\t", "  ")), style=style)
    return out
