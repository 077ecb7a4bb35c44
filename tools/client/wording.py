"""Wording for people: counts (``1 document``, ``2 documents``, never ``1 documents`` or ``document(s)``) and
how a child process ended (``was killed by signal 15 (SIGTERM)``, never ``exited with status -15``).

A pure helper every frontend shares (the CLI's renderers and messages, the
web page's templates, the typed-memory tools), as :mod:`tools.client.inert`
is; DESIGN.md §17.  The count helpers are :mod:`protocol.wording`'s, the one
inflection the Hub's messages use too.
"""

from __future__ import annotations

import signal

from amux_memory.protocol.wording import IRREGULAR, counted, plural

__all__ = ["IRREGULAR", "counted", "ended", "plural"]


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
