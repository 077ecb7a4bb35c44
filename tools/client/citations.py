"""Citations of code in notes, as ordinary Markdown text (DESIGN.md §24).

A note cites the lines it relies on as ``PATH#LSTART-LEND@COMMIT`` (``deploy/Makefile#L12-L14@3f9c2e1``): the path
relative to the repository's root, 1-based inclusive lines (``#L12`` is one line), and the commit at which they
were read, 7 to 64 hex digits (64 in a SHA-256 repository); ``PATH@COMMIT`` cites a whole file.
:func:`find_citations` reads them out of a note, :func:`path_problem` says when a path can name no file;
:func:`tools.client.cite.cite` writes one for lines of the work tree at ``HEAD``.  Checking them is
:mod:`tools.client.source_check`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

CITATION = re.compile(
    r"(?<![\w./~+@#-])(?P<path>[\w.~+-][^\s`'\"<>()\[\]{}#@|*]*?)"
    r"(?:#L(?P<start>[1-9][0-9]{0,8})(?:-L?(?P<end>[1-9][0-9]{0,8}))?)?"
    r"@(?P<commit>[0-9a-f]{7,64})(?![0-9A-Za-z_])")
"""A citation in a note's text; a path holds no blank, quote, bracket, ``#``, ``@``, ``|`` or ``*``, and does not
follow a ``#`` (``a.py#Lx@C`` is no citation, not one of a path ``Lx``)."""
ACTIONS_STEP = re.compile(r"""(?:^|[\s{,])["']?uses["']?\s*:\s*["']?$""")
"""What precedes a GitHub Actions step's ``uses: OWNER/REPO@SHA`` on its line: a pinned action, not a citation."""


@dataclass(frozen=True)
class Citation:
    """One citation: ``path`` in the repository, lines ``start``-``end`` (both 0 for a whole file), ``commit`` as
    written, ``line``, the 1-based line of the note it is on (0 when not from a note), and ``written``, its text in
    the note when that differs from the normal form (``./a.py#L9-L3@C``; not compared)."""

    path: str
    start: int
    end: int
    commit: str
    line: int = 0
    written: str = field(default="", compare=False)

    @property
    def whole_file(self) -> bool:
        """Whether it cites the whole file (no line range)."""
        return self.start == 0

    @property
    def text(self) -> str:
        """The citation as the note writes it (what a finding tells to replace)."""
        return self.written or citation_text(self.path, self.start, self.end, self.commit)


def citation_text(path: str, start: int, end: int, commit: str) -> str:
    """``PATH#LSTART-LEND@COMMIT`` (``#LSTART`` for one line), or ``PATH@COMMIT`` when ``start`` is 0."""
    if not start:
        return f"{path}@{commit}"
    lines = f"#L{start}" if end == start else f"#L{start}-L{end}"
    return f"{path}{lines}@{commit}"


def find_citations(text: str) -> list[Citation]:
    """Every citation in ``text``, in order, each with its line; a range whose end is before its start is read as
    written backwards (``#L14-L12`` is lines 12-14).  A URL (``git+https://host/lib@C``) and a GitHub Actions
    step's pin (``uses: actions/checkout@C``) are not citations."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if "@" not in line:
            continue
        for m in CITATION.finditer(line):
            path = m["path"].removeprefix("./")
            if not path or path.strip(".") == "" or "://" in path or ACTIONS_STEP.search(line, 0, m.start()):
                continue  # nothing, dots, a URL or an Actions step pinned to another repository's commit
            start = int(m["start"] or 0)
            end = int(m["end"] or start)
            start, end = min(start, end), max(start, end)
            normal = citation_text(path, start, end, m["commit"])
            found.append(Citation(path, start, end, m["commit"], number, "" if m[0] == normal else m[0]))
    return found


def path_problem(path: str) -> str:
    """Why a citation's ``path`` names no file of a repository (``""`` when it may): a cited path is written from the
    root, without an empty, ``.`` or ``..`` segment.  A note's text is an agent's: git fails on a path that climbs
    out of the root (``../x``), so such a path is judged before git sees it (DESIGN.md §24)."""
    if any(segment in ("", ".", "..") for segment in path.split("/")):
        return f"{path} is not a path from the repository's root (it has a '.', '..' or empty segment)"
    return ""
