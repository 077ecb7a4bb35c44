"""``amux memory cite``: the citation of a file, or lines of it, at ``HEAD`` (DESIGN.md §24).

The lines a person sees are the work tree's, and a citation names a commit's: :func:`cite` maps them back through
the uncommitted changes (:func:`tools.client.source_check.map_range`) and warns when those lines differ from
``HEAD``.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.client.citations import citation_text, find_citations
from amux_memory.tools.client.project import NotARepository, git, work_tree_root
from amux_memory.tools.client.source_check import file_hunks, map_range


def parse_location(spec: str) -> tuple[str, int, int]:
    """``PATH``, ``PATH:N`` or ``PATH:START-END`` as ``(path, start, end)`` (0, 0 for a whole file); raises
    ``bad_request`` for a range that is not ``START-END`` of positive numbers with START ≤ END."""
    path, colon, lines = spec.rpartition(":")
    if not colon or not re.fullmatch(r"[0-9]+(?:-[0-9]+)?", lines):
        return spec, 0, 0
    first, _, last = lines.partition("-")
    start, end = int(first), int(last or first)
    if start < 1 or end < start:
        raise HubError(ErrorCode.BAD_REQUEST, f"{spec}: lines are START-END, 1-based, START at most END",
                       {"location": spec})
    return path, start, end


def cite(location: str, directory: Path | str = ".") -> dict[str, Any]:
    """The citation of ``location`` (``PATH[:START-END]``, PATH relative to ``directory``; an absolute PATH outside
    any repository's work tree names its own) at ``HEAD``:
    ``{citation, path, start, end, commit, root, warning}``.

    ``warning`` is non-empty when the work tree's text of those lines (the whole file, without a range) differs
    from ``HEAD``'s: the citation names ``HEAD``'s lines, so commit first.  When uncommitted lines above only
    shift the range, the citation gives ``HEAD``'s numbers and the warning says so.  Raises ``not_found`` outside a
    repository, for a file ``HEAD`` does not hold (an untracked or new file: commit it first) or a range past its
    end, ``bad_request`` for a bad range.
    """
    path, start, end = parse_location(location)
    absolute = (Path(directory) / path).resolve()
    try:
        root = work_tree_root(directory)
    except NotARepository:
        if not Path(path).is_absolute() or not absolute.parent.is_dir():
            raise
        root = work_tree_root(absolute.parent)  # cite /srv/web/app.py from anywhere: the file's own repository
    try:
        rel = absolute.relative_to(root.resolve()).as_posix()
    except ValueError:
        raise HubError(ErrorCode.BAD_REQUEST, f"{path} is outside the work tree {root}",
                       {"path": path, "root": str(root)}) from None
    refuse_uncheckable(root, absolute, rel, start, end, Path(directory))
    head = git(root, ["rev-parse", "--short", "--verify", "HEAD^{commit}"])
    if head.returncode != 0:
        raise HubError(ErrorCode.NOT_FOUND, f"the repository at {root} has no commit yet: commit {rel} first",
                       {"root": str(root)}, next_step=f"Commit {rel} with git, then cite it again.")
    commit = head.stdout.decode().strip()
    blob = git(root, ["cat-file", "-p", f"HEAD:{rel}"])
    if blob.returncode != 0:
        raise HubError(ErrorCode.NOT_FOUND, f"{rel} is not in HEAD ({commit}): commit it first, then cite it",
                       {"path": rel, "commit": commit}, next_step=f"Commit {rel} with git, then cite it again.")
    count = len(blob.stdout.splitlines())
    warning = ""
    hunks = file_hunks(root, "HEAD", rel)
    if start:
        # The lines a person sees are the work tree's; the citation names HEAD's.
        back = map_range(hunks, start, end, reverse=True)
        if back.gone:
            raise HubError(ErrorCode.NOT_FOUND, f"lines {start}-{end} of {rel} are not in HEAD ({commit}): they are "
                           "uncommitted; commit them, then cite them", {"path": rel, "commit": commit},
                           next_step=f"Commit those lines of {rel} with git, then cite them again.")
        if back.changed:
            warning = (f"lines {start}-{end} of {rel} have uncommitted changes: the citation names HEAD's lines "
                       f"{back.start}-{back.end}; commit, then cite again")
        elif back.start != start:
            warning = (f"{rel} has uncommitted lines above {start}: HEAD's lines are {back.start}-{back.end}, "
                       "which the citation names")
        start, end = back.start, back.end
        if end > count:
            raise HubError(ErrorCode.NOT_FOUND, f"{rel} has {count} lines at HEAD ({commit}); lines {start}-{end} "
                           "are past its end", {"path": rel, "lines": count},
                           next_step=f"Cite lines within 1-{count} of {rel} (PATH:START-END), as the file has them.")
    elif hunks:
        warning = f"{rel} has uncommitted changes: the citation names HEAD's version; commit, then cite again"
    return {"citation": citation_text(rel, start, end, commit), "path": rel, "start": start, "end": end,
            "commit": commit, "root": str(root), "warning": warning}


UNCARRIED = frozenset("`'\"<>()[]{}#@|*")
"""Characters a citation's path cannot hold (:data:`tools.client.citations.CITATION`), besides blanks."""


def refuse_uncheckable(root: Path, absolute: Path, rel: str, start: int, end: int, here: Path) -> None:
    """Raise ``bad_request`` for what a note could cite but nothing could check: a file of another repository (a
    submodule: cite it from there), a directory (it has no lines and its citation never changes), or a path a note
    would not read back whole (a blank, a quote, a bracket, ``#``, ``@``, ``|``, ``*``).  ``here``: where the person
    is, whom the next step tells where to go."""
    lines = (f":{start}" if start == end else f":{start}-{end}") if start else ""
    folder = absolute if absolute.is_dir() else absolute.parent
    inner = work_tree_root(folder) if folder.is_dir() else root
    if inner.resolve() != root.resolve():
        sub = inner.resolve().relative_to(root.resolve()).as_posix()
        there = absolute.relative_to(inner.resolve()).as_posix() if absolute != inner.resolve() else "FILE"
        raise HubError(ErrorCode.BAD_REQUEST, f"{rel} is in another repository, {sub} (a submodule or a nested "
                       "clone): its citations and notes are that repository's", {"path": rel, "repository": sub},
                       next_step=f"Cite it from there: cd {shlex.quote(os.path.relpath(inner, here.resolve()))} && "
                       f"amux memory cite {shlex.quote(there + lines)}")
    if absolute.is_dir():
        raise HubError(ErrorCode.BAD_REQUEST, f"{rel} is a directory: a citation names a file (PATH@COMMIT) or "
                       "lines of one, and a directory's would never change", {"path": rel},
                       next_step=f"Cite a file in it: amux memory cite {'' if rel == '.' else rel + '/'}FILE"
                       "[:START-END]")
    if [c.path for c in find_citations(citation_text(rel, 0, 0, "0" * 7))] != [rel]:
        odd = sorted({ch for ch in rel if ch in UNCARRIED})
        what = "a blank" if any(ch.isspace() for ch in rel) else (
            " and ".join(f"'{ch}'" for ch in odd) if odd else "a character a citation cannot start with")
        raise HubError(ErrorCode.BAD_REQUEST, f"{rel} holds {what}, which a citation cannot carry: a note would read "
                       "only part of the path, and nothing would check it", {"path": rel},
                       next_step="Say which file you mean in the note's words, or rename it (no blank, quote, bracket, "
                       "'#', '@', '|' or '*') and cite it then.")
