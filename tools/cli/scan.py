"""``amux memory scan [--history]``: the documents and stored versions that hold credentials (DESIGN.md §16).

One Hub ``scan`` call, printed as JSON like every data command
(:mod:`tools.cli.output`); only the blocking client is imported.
"""

from __future__ import annotations

from tools.cli.memory import call_hub


def scan(*, history: bool = False) -> int:
    """List the documents (and with --history the stored versions) that hold credentials.

    The Hub checks them with the rules it applies to every write. Prints
    {"documents": [{"path", "revision", "findings", "commands"}], "versions":
    [{"path", "revision", "time", "action", "findings", "commands"}],
    "truncated", "rules"}; each finding is {"rule", "line", "preview"}, the
    preview redacted (never the credential). commands say how to clean up:
    export the document, remove the credential, upsert it back; then purge
    each stored version that still holds it ('amux memory purge PATH
    --revision REV'). Exit status 0 whether or not something was found.

    Parameters
    ----------
    history
        Also look in the stored versions of the history.
    """
    from protocol.requests import scan_params

    return call_hub("scan", scan_params(history=history))
