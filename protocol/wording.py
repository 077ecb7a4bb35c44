"""Counts for people: ``1 document``, ``2 documents``, never ``1 documents`` or ``document(s)`` (DESIGN.md §17).

The one inflection of a count's noun for every message both ends print: the
Hub's errors and log lines, the MCP server's texts, and every frontend (the
CLI's renderers and messages, the web page's templates, the typed-memory
tools, through :mod:`tools.client.wording`).  Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

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


def did_you_mean(name: str, names: Iterable[str]) -> str:
    """``"; did you mean 'NEAR'?"`` when one of ``names`` is a likely misspelling of ``name`` (DESIGN.md §17), else
    ``""``: the closest by optimal-string-alignment distance (a swap of two neighbours counts once; case ignored),
    at most 1 edit for names up to 7 characters, 2 up to 11, 3 beyond; ties go to the first in sorted order.

    Callers pass only names the asker may learn (a caller's own mounts, never every team).
    """
    from rapidfuzz.distance import OSA

    wanted = name.lower()
    cutoff = 1 if len(wanted) <= 7 else 2 if len(wanted) <= 11 else 3
    best: tuple[int, str] | None = None
    for candidate in sorted(set(names)):
        if candidate == name:
            continue
        distance = OSA.distance(wanted, candidate.lower(), score_cutoff=cutoff)
        if distance <= cutoff and (best is None or distance < best[0]):
            best = (distance, candidate)
    return f"; did you mean {best[1]!r}?" if best is not None else ""
