"""Counts for people: ``1 document``, ``2 documents``, never ``1 documents`` or ``document(s)`` (DESIGN.md §17).

The one inflection of a count's noun for every message both ends print: the
Hub's errors and log lines, the MCP server's texts, and every frontend (the
CLI's renderers and messages, the web page's templates, the typed-memory
tools, through :mod:`tools.client.wording`).  Pure, no I/O.
"""

from __future__ import annotations

IRREGULAR = {"entry": "entries", "info": "infos", "match": "matches", "alias": "aliases", "was": "were",
             "is": "are", "has": "have"}
"""Plurals that are not the word plus ``s``; other words get an ``s``.  The verbs (``is`` → ``are``) let a
sentence agree with its count: ``f"{counted(n, 'part')} {plural(n, 'is')} marked"``."""


def plural(count: int, word: str) -> str:
    """``word`` for ``count`` things: itself for exactly 1, else its plural (:data:`IRREGULAR`, else ``word + 's'``).

    The last word of a phrase is the one inflected (``"stored version"`` → ``"stored versions"``).
    """
    if count == 1:
        return word
    head, _, last = word.rpartition(" ")
    many = IRREGULAR.get(last, last + "s")
    return f"{head} {many}" if head else many


def counted(count: int, word: str, rest: str = "") -> str:
    """``"COUNT WORD"`` with ``word`` singular or plural for ``count`` (:func:`plural`), then ``rest`` if given.

    ``counted(1, "document", "holding credentials")`` is ``"1 document holding credentials"``.
    """
    return f"{count} {plural(count, word)}" + (f" {rest}" if rest else "")
