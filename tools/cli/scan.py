"""``amux memory scan [--history]``: the documents and stored versions that hold credentials (DESIGN.md §16).

One Hub ``scan`` call, printed as JSON like every data command, or as tables
in a terminal (:mod:`tools.cli.output.contract`, renderer ``scan``); only the blocking
client is imported.
"""

from __future__ import annotations

from amux_memory.tools.cli.memory import call_hub
from amux_memory.tools.cli.options import AsJson
from amux_memory.tools.cli.output.renderer_choice import RendererChoice


def scan(*, history: bool = False, as_json: AsJson = False) -> int:
    """List the documents (and with --history the stored versions) that hold credentials.

    The Hub checks them with the rules it applies to every write, and each
    document's path too. In a terminal it prints tables and the clean-up
    commands; piped (or with --json) it prints {"documents": [{"path",
    "revision", "findings", "commands", "advice"}], "versions": [{"path",
    "revision", "time", "action", "findings", "commands"}], "truncated",
    "rules"}; each finding is {"rule", "line", "preview", "sha256"}, the
    preview redacted (never the credential), sha256 the digest that
    memory.secret_allow takes to let that exact value through ("in": "path"
    and line 0 when the path holds it). commands are shell-quoted, ready to
    paste: export the document, remove the credential from doc.md, upsert it
    back (advice says so); then purge each stored version that still holds
    it ('amux memory purge --revision REV PATH'). Exit status 0 whether or
    not something was found.

    Parameters
    ----------
    history
        Also look in the stored versions of the history.
    """
    from amux_memory.protocol.requests import scan_params

    return call_hub("scan", scan_params(history=history), RendererChoice("scan"), as_json=as_json)
