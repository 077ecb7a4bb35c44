"""``amux ui``: the local web page over the caller's memory (DESIGN.md §20); the work is in :mod:`tools.ui`."""

from __future__ import annotations

from typing import Annotated

from cyclopts import Parameter

from amux_memory.protocol.errors import HubError
from amux_memory.tools.cli.options import Home
from amux_memory.tools.cli.output.contract import fail

NoOpen = Annotated[bool, Parameter(negative="")]


def ui(*, port: int = 8787, host: str | None = None, no_open: NoOpen = False, home: Home = None) -> int:
    """Serve a web page to see, search, edit and undo your memory, and open it in the browser.

    Prints one line with the URL to open (it holds a token that signs in one
    browser, once). The page acts as you, like the CLI (AMUX_HUB and
    AMUX_TOKEN for a remote Hub; --home for that home's Hub), and runs until
    Ctrl-C.

    Parameters
    ----------
    port
        TCP port (0: a free one).
    host
        Address to listen on. Default: a loopback address of your own
        (127.X.Y.Z, fixed for your user and home; 127.0.0.1 where the system
        has no other). Any non-loopback address needs TLS (hub.tls_cert and
        hub.tls_key).
    no_open
        Print the URL without opening a browser.
    """
    from amux_memory.tools.ui.serve import serve_ui

    try:
        serve_ui(host, port, open_browser=not no_open, home=home)
    except HubError as exc:
        return fail(exc)
    return 0
