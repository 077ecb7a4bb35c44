"""``amux ui``: bind the page's socket, print its URL, open the browser, serve until interrupted (DESIGN.md §20).

:func:`serve_ui` binds the listening socket itself (so port 0 gives a free
port whose number is known before the URL is printed, and a taken port is a
clear ``bad_request`` before anything starts), then hands it to Hypercorn's
Trio worker (``fd://``).  By default it binds a loopback address of the user's
own (:func:`own_loopback`), so the session cookie's host is one no other local
service answers on.  The browser is opened on a private ``file://`` page that
redirects to the URL (:func:`redirect_page`), never with the token in a
command line.  Ctrl-C or SIGTERM stop it: Hypercorn finishes the open requests
and returns (``shutdown_trigger``), and the command exits 0.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
from functools import partial
from pathlib import Path

from markupsafe import escape

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.client.settings import ClientSettings
from amux_memory.tools.ui.security import Guard, host_names, loopback


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
                       {"field": "host", "host": host, "errno": exc.errno}) from None
    return sock


def own_loopback(uid: int, home: Path) -> str:
    """A loopback address ``127.X.Y.Z`` of this user and home: stable (bookmarks keep working), and
    not ``127.0.0.1``, where dev servers and other local services listen.

    Browsers send a host's cookies to every port of it, so the page's cookie
    is only safe on a host nobody else serves (DESIGN.md §20.2).  Derived from
    SHA-256 of ``uid`` and the absolute ``home``: ``X`` in 1..254, ``Z`` in
    1..254.  All of 127/8 is loopback on Linux; elsewhere (macOS) binding it
    fails and :func:`bind_default` falls back to ``127.0.0.1``.
    """
    digest = hashlib.sha256(f"{uid}\0{os.path.abspath(home)}".encode()).digest()
    return f"127.{1 + digest[0] % 254}.{digest[1]}.{1 + digest[2] % 254}"


def bind_default(home: Path, port: int) -> tuple[str, socket.socket]:
    """``(host, socket)`` on :func:`own_loopback`, or on ``127.0.0.1`` where that address cannot be
    bound (``EADDRNOTAVAIL``: no 127/8 beyond ``127.0.0.1``).  Raises ``bad_request`` as :func:`bind_socket`."""
    host = own_loopback(os.getuid(), home)
    try:
        return host, bind_socket(host, port)
    except HubError as exc:
        if exc.data.get("errno") != errno.EADDRNOTAVAIL:
            raise
    return "127.0.0.1", bind_socket("127.0.0.1", port)


def redirect_page(url: str) -> Path:
    """A ``file://`` page that sends the browser to ``url``, in a new private directory (0700, the file
    0600, like Jupyter's), so the token is never in a command line (``/proc/PID/cmdline`` is readable
    by every local user).  The caller removes the directory (``path.parent``) when it stops."""
    folder = Path(tempfile.mkdtemp(prefix="amux-ui-"))
    page = folder / "open.html"
    shown = escape(url)
    html = (f"<!doctype html><html lang=en><head><meta charset=utf-8><meta http-equiv=refresh "
            f"content=\"0;url={shown}\"><title>amux ui</title></head><body><p><a href=\"{shown}\">Open "
            "amux ui</a></p></body></html>")
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(html)
    return page


def tls_files(home: Path, host: str) -> tuple[str, str] | None:
    """``(cert, key)`` from ``hub.tls_cert``/``hub.tls_key`` for a non-loopback ``host``; ``None`` on loopback.

    Raises ``bad_request`` when ``host`` is not loopback and TLS is not set up.
    """
    if loopback(host):
        return None
    from amux_memory.protocol.settings import get_value

    cert, key = str(get_value(home, "hub.tls_cert")), str(get_value(home, "hub.tls_key"))
    if not cert or not key:
        raise HubError(ErrorCode.BAD_REQUEST, f"--host {host} is not a loopback address: the page would be "
                       "reachable from the network, so it needs TLS. Set hub.tls_cert and hub.tls_key ('amux "
                       "system config set hub.tls_cert FILE', likewise hub.tls_key), or leave --host out",
                       {"field": "host", "host": host})
    return cert, key


def client_settings(home: Path | None) -> tuple[ClientSettings, Path | None]:
    """``(settings, local home)`` of the Hub the page talks to.

    ``home`` (``--home``): that home's Hub through its own socket (``hub.socket_path`` of its
    ``config.toml``, else ``<home>/hub.sock``), as ``amux hub`` does, whatever ``AMUX_HUB`` says;
    raises ``bad_request`` when the directory does not exist (nothing is created).  ``None``: the
    environment's Hub, as the CLI (``AMUX_HUB``, ``AMUX_HOME``); its local home is ``None`` when
    ``AMUX_HUB`` names a remote Hub (its settings are on its machine).
    """
    from amux_memory.tools.client.settings import HOME_ENV, HUB_ENV, default_home, resolve_socket

    if home is None:
        settings = ClientSettings.from_env()
        return settings, (None if settings.endpoint.kind != "unix" else default_home())
    home = home.expanduser()
    if not home.is_dir():
        raise HubError(ErrorCode.BAD_REQUEST, f"--home {home}: no such directory. Pass the home of a Hub "
                       "(default ~/.amux, where 'amux hub start' keeps its files)", {"field": "home"})
    socket_path = resolve_socket({**os.environ, HOME_ENV: str(home), HUB_ENV: ""})
    return ClientSettings.from_env(socket_path=socket_path), home


def serve_ui(host: str | None, port: int, *, open_browser: bool, home: Path | None) -> None:
    """Serve the page on ``host``:``port`` until interrupted; prints ``amux ui: open URL`` on stdout.

    ``host`` ``None``: :func:`bind_default`.  ``home`` is ``--home`` (``None``: the environment's
    Hub; :func:`client_settings`).  Raises ``bad_request`` for a taken port, a network ``--host``
    without TLS, or a missing ``--home``.
    """
    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from amux_memory.tools.client.blocking import HubClient
    from amux_memory.tools.ui.app import UiApp

    settings, local_home = client_settings(home)
    from amux_memory.tools.client.settings import default_home

    tls = tls_files(local_home or default_home(), host or "127.0.0.1")
    if host is None:
        host, sock = bind_default(local_home or default_home(), port)
    else:
        sock = bind_socket(host, port)
    bound = sock.getsockname()[1]
    token = secrets.token_urlsafe(24)
    scheme = "https" if tls else "http"
    hosts = host_names(host, bound)
    origins = frozenset(f"{scheme}://{name}" for name in hosts)
    ui = UiApp(lambda: HubClient(client_name="amux-ui", settings=settings), local_home)
    guard = Guard(ui.starlette(), token=token, hosts=hosts, origins=origins, port=bound, tls=tls is not None)
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
    opener: Path | None = None
    if open_browser:
        import webbrowser

        opener = redirect_page(url)
        webbrowser.open(opener.as_uri())

    async def until_signalled() -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                return

    try:
        trio.run(partial(serve, guard, config, shutdown_trigger=until_signalled))  # type: ignore[arg-type]
    finally:
        if opener is not None:
            shutil.rmtree(opener.parent, ignore_errors=True)
    print("amux ui: stopped", file=sys.stderr)
