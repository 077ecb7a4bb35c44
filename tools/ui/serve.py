"""``amux ui``: bind the page's socket, print its URL, open the browser, serve until interrupted (DESIGN.md §20).

:func:`serve_ui` binds the listening socket itself (so port 0 gives a free
port whose number is known before the URL is printed, and a taken port is a
clear ``bad_request`` before anything starts), then hands it to Hypercorn's
Trio worker (``fd://``).  Ctrl-C or SIGTERM stop it: Hypercorn finishes the
open requests and returns (``shutdown_trigger``), and the command exits 0.
"""

from __future__ import annotations

import errno
import secrets
import signal
import socket
import sys
from functools import partial
from pathlib import Path

from protocol.errors import ErrorCode, HubError
from tools.ui.security import Guard, host_names, loopback


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: a free port).

    Raises ``bad_request`` naming the address when the port is taken or the
    address cannot be bound (``data.field`` ``port`` or ``host``).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise HubError(ErrorCode.BAD_REQUEST, f"port {port} on {host} is already in use: pick another with "
                           "--port N, or --port 0 for a free one", {"field": "port", "port": port}) from None
        raise HubError(ErrorCode.BAD_REQUEST, f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                       {"field": "host", "host": host}) from None
    return sock


def tls_files(home: Path, host: str) -> tuple[str, str] | None:
    """``(cert, key)`` from ``hub.tls_cert``/``hub.tls_key`` for a non-loopback ``host``; ``None`` on loopback.

    Raises ``bad_request`` when ``host`` is not loopback and TLS is not set up.
    """
    if loopback(host):
        return None
    from hub import config as hub_config

    cert, key = str(hub_config.get_value(home, "hub.tls_cert")), str(hub_config.get_value(home, "hub.tls_key"))
    if not cert or not key:
        raise HubError(ErrorCode.BAD_REQUEST, f"--host {host} is not a loopback address: the page would be "
                       "reachable from the network, so it needs TLS. Set hub.tls_cert and hub.tls_key ('amux "
                       "system config set hub.tls_cert FILE', likewise hub.tls_key), or leave --host out",
                       {"field": "host", "host": host})
    return cert, key


def serve_ui(host: str, port: int, *, open_browser: bool, home: Path) -> None:
    """Serve the page on ``host``:``port`` until interrupted; prints ``amux ui: open URL`` on stdout.

    ``home`` is the local Hub's home (for TLS files and the settings page).
    Raises ``bad_request`` for a taken port or a network ``--host`` without TLS.
    """
    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from tools.client.blocking import HubClient
    from tools.client.settings import ClientSettings
    from tools.ui.app import UiApp

    tls = tls_files(home, host)
    sock = bind_socket(host, port)
    bound = sock.getsockname()[1]
    token = secrets.token_urlsafe(24)
    scheme = "https" if tls else "http"
    hosts = host_names(host, bound)
    origins = frozenset(f"{scheme}://{name}" for name in hosts)
    remote = ClientSettings.from_env().endpoint.kind != "unix"
    ui = UiApp(lambda: HubClient(client_name="amux-ui"), None if remote else home)
    guard = Guard(ui.starlette(), token=token, hosts=hosts, origins=origins, tls=tls is not None)
    ui.guard = guard
    config = Config()
    config.bind = [f"fd://{sock.detach()}"]
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"
    if tls:
        config.certfile, config.keyfile = tls
    shown = f"[{host}]" if ":" in host else host
    url = f"{scheme}://{shown}:{bound}/?token={token}"
    print(f"amux ui: open {url}", flush=True)
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    async def until_signalled() -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                return

    trio.run(partial(serve, guard, config, shutdown_trigger=until_signalled))  # type: ignore[arg-type]
    print("amux ui: stopped", file=sys.stderr)
