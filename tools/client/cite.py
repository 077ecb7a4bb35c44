"""``amux memory cite``: the citation of a file, or lines of it, at ``HEAD`` (DESIGN.md §24).

The lines a person sees are the work tree's, and a citation names a commit's: :func:`cite` maps them back through
the uncommitted changes (:func:`tools.client.source_check.map_range`) and warns when those lines differ from
``HEAD``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.client.citations import citation_text
from amux_memory.tools.client.project import git, work_tree_root
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
    """The citation of ``location`` (``PATH[:START-END]``, PATH relative to ``directory``) at ``HEAD``:
    ``{citation, path, start, end, commit, root, warning}``.

    ``warning`` is non-empty when the work tree's text of those lines (the whole file, without a range) differs
    from ``HEAD``'s: the citation names ``HEAD``'s lines, so commit first.  When uncommitted lines above only
    shift the range, the citation gives ``HEAD``'s numbers and the warning says so.  Raises ``not_found`` outside a
    repository, for a file ``HEAD`` does not hold (an untracked or new file: commit it first) or a range past its
    end, ``bad_request`` for a bad range.
    """
    path, start, end = parse_location(location)
    root = work_tree_root(directory)
    absolute = (Path(directory) / path).resolve()
    try:
        rel = absolute.relative_to(root.resolve()).as_posix()
    except ValueError:
        raise HubError(ErrorCode.BAD_REQUEST, f"{path} is outside the work tree {root}",
                       {"path": path, "root": str(root)}) from None
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
