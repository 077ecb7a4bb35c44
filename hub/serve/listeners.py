"""Where the Hub listens: the Unix socket, the optional TCP/TLS listener, and the accept loop.

The Unix socket (``hub.socket_path``, mode ``hub.socket_mode``) is always
there; the kernel names its callers.  ``hub.listen`` adds a TCP listener:
TLS 1.2+ with ``hub.tls_cert``/``hub.tls_key``, plaintext only on a loopback
address (DESIGN.md §7, §13).  Every setting is checked before anything is
created, and anything unsafe or unusable raises
:class:`protocol.errors.HubStartError`.

The accept loop hands each connection to the Hub
(:meth:`hub.serve.connection.ConnectionSet.handle`) in the connections' nursery; a
connection over :data:`MAX_CONNECTIONS` is told ``busy`` and closed
(DESIGN.md §6).
"""

from __future__ import annotations

import contextlib
import errno
import grp
import logging
import os
import socket as stdlib_socket
import ssl
import stat
from dataclasses import dataclass
from pathlib import Path

import trio

from amux_memory.hub.access.config import HubConfig, parse_listen
from amux_memory.hub.serve.connection import ConnectionSet
from amux_memory.hub.serve.home import start_step
from amux_memory.protocol.endpoint import is_loopback
from amux_memory.protocol.errors import ErrorCode, HubError, HubStartError
from amux_memory.protocol.limits import MAX_CONNECTIONS
from amux_memory.protocol.messages import encode_error

log = logging.getLogger("amux.hub")

ACCEPT_RETRY_SECONDS = 0.1
"""Pause before accepting again when the process is out of file descriptors or memory."""


@dataclass(frozen=True)
class NetworkSettings:
    """The TCP listener: where, and the TLS context (None: plaintext, loopback only)."""

    host: str
    port: int
    tls: ssl.SSLContext | None

    @property
    def transport(self) -> str:
        """``tls`` or ``tcp``: the connection's ``transport`` as ``hello`` reports it."""
        return "tls" if self.tls is not None else "tcp"


def network_settings(config: HubConfig) -> NetworkSettings | None:
    """Validate ``hub.listen`` / ``hub.tls_*``; None when the Hub listens on its Unix socket only.

    Raises :class:`HubStartError` for an invalid ``HOST:PORT``, only one of the
    two TLS files, plaintext on a non-loopback address, or TLS files that do
    not load.
    """
    if not config.listen:
        if (config.tls_cert or config.tls_key) and not config.mcp_listen:
            log.warning("hub.tls_cert/hub.tls_key are set but neither hub.listen nor hub.mcp_listen: TLS is unused")
        return None
    try:
        host, port = parse_listen(config.listen)
    except ValueError as exc:
        raise HubStartError(f"hub.listen {config.listen!r} is invalid: {exc}") from None
    if bool(config.tls_cert) != bool(config.tls_key):
        raise HubStartError("set both hub.tls_cert and hub.tls_key (or neither, for plaintext on loopback)")
    if not config.tls_cert:
        if not is_loopback(host):
            raise HubStartError(
                f"refusing plaintext TCP on {config.listen}: {host} is not a loopback address, and tokens "
                "would cross the network in clear text; set hub.tls_cert and hub.tls_key, or listen on "
                "127.0.0.1 / [::1]"
            )
        return NetworkSettings(host, port, None)
    return NetworkSettings(host, port, tls_server_context(config.tls_cert, config.tls_key))


@dataclass(frozen=True)
class HttpListenerSettings:
    """One of the Hub's HTTP listeners (``hub.mcp_listen``, ``hub.metrics_listen``): where, and the TLS files
    (``None``: plaintext, loopback only; DESIGN.md §22.3)."""

    host: str
    port: int
    tls: tuple[str, str] | None

    @property
    def scheme(self) -> str:
        """``https`` with TLS, else ``http``."""
        return "https" if self.tls is not None else "http"


def http_listener_settings(config: HubConfig, key: str, value: str, *, risk: str,
                           loopback_use: str) -> HttpListenerSettings | None:
    """Validate the HTTP listener setting ``key`` (its ``value``, ``HOST:PORT``) with ``hub.tls_cert``/
    ``hub.tls_key``; ``None`` when it is off (``""``).

    Raises :class:`HubStartError` (one line) for an invalid ``HOST:PORT``, only one of the TLS files, or a
    non-loopback address without TLS; that message names the ``risk`` of plaintext there and, as the way out
    besides TLS, ``loopback_use`` (how a loopback listener is reached).
    """
    if not value:
        return None
    try:
        host, port = parse_listen(value)
    except ValueError as exc:
        raise HubStartError(f"{key} {value!r} is invalid: {exc}") from None
    if bool(config.tls_cert) != bool(config.tls_key):
        raise HubStartError(f"set both hub.tls_cert and hub.tls_key (or neither, for {key} on loopback)")
    if not config.tls_cert:
        if not is_loopback(host):
            raise HubStartError(
                f"refusing plaintext HTTP on {key} {value}: {host} is not a loopback address{risk}; run 'amux hub "
                f"tls init' (or set hub.tls_cert and hub.tls_key), or listen on 127.0.0.1 / [::1] {loopback_use}")
        return HttpListenerSettings(host, port, None)
    return HttpListenerSettings(host, port, (config.tls_cert, config.tls_key))


def bind_http_socket(settings: HttpListenerSettings, key: str, backlog: int) -> stdlib_socket.socket:
    """A listening TCP socket for the listener ``key`` (port 0: a free one) with ``backlog``; checks the TLS
    pair loads first.  Raises :class:`HubStartError` when the TLS files do not load or the address cannot be
    bound."""
    if settings.tls is not None:
        tls_server_context(*settings.tls)
    family = stdlib_socket.AF_INET6 if ":" in settings.host else stdlib_socket.AF_INET
    sock = stdlib_socket.socket(family, stdlib_socket.SOCK_STREAM)
    try:
        sock.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_REUSEADDR, 1)
        sock.bind((settings.host, settings.port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise HubStartError(f"cannot listen on {key} {settings.host}:{settings.port}: {exc.strerror or exc}") from None
    return sock


def tls_server_context(cert: str, key: str) -> ssl.SSLContext:
    """A server context (TLS 1.2+) with the PEM chain ``cert`` and its key file ``key``.

    Warns (log) when the key is readable by other users.  Raises
    :class:`HubStartError` when the key cannot be stat-ed or the pair cannot load.
    """
    try:
        mode = os.stat(key).st_mode
    except OSError as exc:
        raise HubStartError(f"hub.tls_key {key}: {exc.strerror}") from None
    if mode & 0o077:
        log.warning("hub.tls_key %s is readable by other users (mode %04o); chmod 600 it", key, mode & 0o777)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise HubStartError(f"cannot load hub.tls_cert {cert} / hub.tls_key {key}: {exc}") from None
    return ctx


def clear_stale_socket(path: Path) -> None:
    """Remove a socket left by a dead Hub (nobody answers a connect within 1 s); refuse to touch anything else.

    Raises :class:`HubStartError` when ``path`` is not a socket, or another
    Hub answers on it.  Blocking.
    """
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise HubStartError(f"{path} exists and is not a socket; refusing to replace it (check hub.socket_path)")
    probe = stdlib_socket.socket(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM)
    try:
        probe.settimeout(1)
        probe.connect(os.fspath(path))
    except OSError:
        path.unlink()  # nobody answers: left by a Hub that died
        return
    finally:
        probe.close()
    raise HubStartError(f"another Hub is already listening on {path} (a different home with the same hub.socket_path?)")


def closed_parent(path: Path, gid: int, mode: int) -> Path | None:
    """The first folder above the socket ``path`` that the accounts ``mode`` admits cannot pass (no search
    permission for "other", or for the group ``gid`` when only the group is admitted), None when all can."""
    others = bool(mode & 0o006)
    for folder in path.parents:
        try:
            st = os.stat(folder)
        except OSError:
            return folder
        if st.st_mode & 0o001:
            continue
        if not others and st.st_mode & 0o010 and (gid < 0 or st.st_gid == gid):
            continue
        return folder
    return None


async def open_unix_listener(config: HubConfig) -> trio.SocketListener:
    """Bind and listen on ``hub.socket_path`` with ``hub.socket_mode`` and ``hub.socket_group``.

    The socket never exists with looser permissions than configured (bound
    under umask ``0177``, then chmod-ed).  Raises :class:`HubStartError` for
    an unknown group or a path in use (see :func:`clear_stale_socket`).
    Cancelled while binding, the socket object is dropped unlistened (a
    socket file may stay; the next start clears it as stale).
    """
    path = config.socket_path
    # Other users must be able to reach a socket meant for them; the memory root stays 0700 regardless.
    shared = bool(config.socket_mode & 0o077)
    gid = -1
    if config.socket_group:
        try:
            gid = grp.getgrnam(config.socket_group).gr_gid
        except KeyError:
            raise HubStartError(f"hub.socket_group {config.socket_group!r} is not a group on this machine") from None
    if not path.parent.exists():
        # A folder made for a group's socket is the group's (0750); for everyone's, 0755; else private.
        mode = (0o750 if gid >= 0 else 0o755) if shared else 0o700
        with start_step("create the socket's folder", path.parent):
            path.parent.mkdir(parents=True, mode=mode)
            if gid >= 0 and shared:
                os.chown(path.parent, -1, gid)
                os.chmod(path.parent, mode)
    if shared:
        blocked = closed_parent(path, gid, config.socket_mode)
        if blocked is not None:
            log.warning("hub.socket_mode %04o lets other accounts use %s, but they cannot pass %s (mode %04o): they "
                        "get 'Permission denied'. Set hub.socket_path to a folder outside the private home (e.g. "
                        "/run/amux/hub.sock) or open that folder to them; see docs/team-server.md",
                        config.socket_mode, path, blocked, os.stat(blocked).st_mode & 0o7777)
    clear_stale_socket(path)
    sock = trio.socket.socket(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # never let the socket exist with looser permissions
    try:
        with start_step("make the socket", path):
            await sock.bind(os.fspath(path))
    finally:
        os.umask(old_umask)
    if gid >= 0:
        os.chown(path, -1, gid)
    os.chmod(path, config.socket_mode)
    sock.listen(MAX_CONNECTIONS)  # a burst of clients connecting at once must not find the backlog full
    return trio.SocketListener(sock)


async def open_network_listeners(network: NetworkSettings, listen: str) -> list[trio.SocketListener]:
    """Listen on TCP ``network.host``:``network.port`` (every address it has); ``listen`` is the setting's text.

    Raises :class:`HubStartError` when the port cannot be bound.  Cancellation
    propagates from Trio's resolver; nothing is left listening.
    """
    try:
        return await trio.open_tcp_listeners(network.port, host=network.host)
    except OSError as exc:
        raise HubStartError(f"cannot listen on {listen}: {exc.strerror or exc}") from None


def listener_address(listener: trio.SocketListener, transport: str) -> str:
    """``tls://HOST:PORT`` or ``tcp://HOST:PORT`` a TCP listener is bound to (IPv6 hosts in brackets)."""
    host, port = listener.socket.getsockname()[:2]
    return f"{transport}://{f'[{host}]' if ':' in host else host}:{port}"


async def accept_loop(listener: trio.SocketListener, connections: ConnectionSet, nursery: trio.Nursery,
                      transport: str, tls: ssl.SSLContext | None) -> None:
    """Accept connections forever, serving each in ``nursery`` (or refusing it over :data:`MAX_CONNECTIONS`).

    Out of file descriptors or memory, it logs (at most every 10 s) and retries
    every :data:`ACCEPT_RETRY_SECONDS`; other ``OSError`` propagate.  Runs until
    cancelled; the connections already started are not affected.
    """
    last_complaint = -1e9
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                if trio.current_time() - last_complaint > 10:
                    log.error("accept failed (%s); retrying every %g ms", exc, ACCEPT_RETRY_SECONDS * 1000)
                    last_complaint = trio.current_time()
                await trio.sleep(ACCEPT_RETRY_SECONDS)
                continue
            raise
        if connections.count >= MAX_CONNECTIONS:
            nursery.start_soon(refuse, stream, tls)
        else:
            nursery.start_soon(connections.handle, stream, transport, tls)


async def refuse(stream: trio.SocketStream, tls: ssl.SSLContext | None = None) -> None:
    """Tell a connection over the limit it is ``busy`` (after a TLS handshake, for TLS), then close it.

    Gives the peer at most 1 s (2 s with TLS) to take the answer; the close is shielded from cancellation.
    """
    error = HubError(ErrorCode.BUSY, f"the Hub already serves {MAX_CONNECTIONS} connections; retry shortly",
                     {"maximum": MAX_CONNECTIONS},
                     next_step="Nothing was done: the Hub serves as many connections as it allows. Wait a moment and "
                     "call again.")
    out: trio.abc.Stream = trio.SSLStream(stream, tls, server_side=True) if tls is not None else stream
    with trio.move_on_after(2 if tls is not None else 1):
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await out.send_all(encode_error(None, error))
    with trio.CancelScope(shield=True):
        await stream.aclose()
