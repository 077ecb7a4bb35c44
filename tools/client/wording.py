"""Wording for people: counts (``1 document``, ``2 documents``, never ``1 documents`` or ``document(s)``) and
how a child process ended (``was killed by signal 15 (SIGTERM)``, never ``exited with status -15``).

A pure helper every frontend shares (the CLI's renderers and messages, the
typed-memory tools), as :mod:`tools.client.inert` is; DESIGN.md §17.
"""

from __future__ import annotations

import signal

IRREGULAR = {"entry": "entries", "info": "infos", "match": "matches", "alias": "aliases", "was": "were",
             "is": "are", "has": "have"}
"""Plurals that are not the word plus ``s``; other words get an ``s``."""


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


def ended(returncode: int) -> str:
    """How a child process ended, for people: ``exited with status 3`` or, for a negative ``returncode``
    (``subprocess``' spelling of a signal), ``was killed by signal 15 (SIGTERM)``."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    number = -returncode
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"was killed by signal {number}"
    return f"was killed by signal {number} ({name})"
