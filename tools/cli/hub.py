"""``amux hub serve`` and ``amux hub status``: run the Hub, and ask it who you are.

``serve`` is the only command that imports the Hub (and so Trio); it runs in
the foreground until SIGINT/SIGTERM (DESIGN.md §13).
"""

from __future__ import annotations

from protocol.errors import ErrorCode, ExitStatus, HubError
from tools.cli.options import Home, resolve_home
from tools.cli.output import emit, fail


def serve(*, home: Home = None, listen: str | None = None) -> int:
    """Run the Hub in the foreground until SIGINT/SIGTERM.

    It listens on HOME/hub.sock (mode 0600) unless hub.socket_path is set,
    and refuses to start if another Hub already serves the same home.
    With --listen (or hub.listen) it also accepts remote callers on TCP:
    TLS with hub.tls_cert/hub.tls_key, plaintext only on a loopback address;
    network callers authenticate with a token (amux hub token issue).
    Exit status 0 after a clean stop, 21 when it cannot start (the log says
    why; unreadable settings also print the JSON error), 2 for a bad --listen.

    Parameters
    ----------
    listen
        HOST:PORT to listen on besides the Unix socket, e.g. 0.0.0.0:7070 or
        127.0.0.1:7070 (overrides hub.listen; '' turns it off).
    """
    import dataclasses

    from hub import config as hub_config
    from hub.run import run
    from protocol.limits import LIMITS

    try:
        cfg = hub_config.load(resolve_home(home).resolve())
    except HubError as exc:
        fail(exc)
        return ExitStatus.HUB_START_FAILED
    if listen is not None:
        try:
            cfg = dataclasses.replace(cfg, listen=hub_config.SETTINGS["hub.listen"].parse(listen))
        except ValueError as exc:
            return fail(HubError(ErrorCode.BAD_REQUEST, f"--listen {listen!r} is invalid: {exc}"))
    # run() returns 0 after a clean stop; anything else means the Hub did not start (its log says why).
    return 0 if run(cfg, LIMITS) == 0 else ExitStatus.HUB_START_FAILED


def status() -> int:
    """Show what the Hub says about this caller: principal, scope, memory enabled, limits."""
    from tools.client.blocking import HubClient

    try:
        with HubClient() as client:
            emit(client.hello)
    except HubError as exc:
        return fail(exc)
    return 0
