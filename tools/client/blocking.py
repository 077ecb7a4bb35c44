"""The blocking Hub client: plain sockets, no event loop, fast to start (DESIGN.md §3).

Used by the ``amux`` CLI, the typed-memory library, ``amux launch`` and the
tests.  It is thin I/O over :class:`protocol.connection.ClientConnection`
(ids, frames, response matching) and :class:`tools.client.settings.ClientSettings`
(where the Hub is, token, binding, CA, connect deadline); failures are worded
by :mod:`tools.client.failures`.  Trio is not imported
on this path: the CLI's start-up time depends on it.

Timeouts: ``timeout`` bounds each socket operation (connect, TLS handshake,
one send, one receive), in seconds.  ``connect_deadline`` (default
``$AMUX_CONNECT_DEADLINE``) additionally bounds :meth:`HubClient.connect` as a
whole, so a Hub that trickles one byte at a time cannot hold a client
forever.  A call that times out leaves the connection open; the late answer
is skipped by the next call.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from amux_memory.protocol.connection import ClientConnection, ConnectionClosed
from amux_memory.protocol.endpoint import Endpoint, parse_endpoint
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.tools.client.base import DEFAULT_TIMEOUT, RECEIVE_BYTES, ClientBase
from amux_memory.tools.client.failures import connect_failed, lost, no_answer, tls_failed, where
from amux_memory.tools.client.settings import ClientSettings


class HubClient(ClientBase):
    """One connection to the Hub; requests are sent one at a time.

    Where the Hub is: ``endpoint`` (an :class:`~protocol.endpoint.Endpoint`
    or ``AMUX_HUB``-style text), else ``socket_path`` (a Unix socket), else
    the environment (:meth:`ClientSettings.from_env`).  ``binding``, ``token``,
    ``ca_file`` and ``connect_deadline`` (seconds) override the environment
    when not ``None`` (``""`` sends no binding or token at all); ``settings``
    replaces the environment altogether.  ``timeout`` is seconds per socket
    operation.

    Raises ``bad_request`` at construction for a malformed ``AMUX_HUB``.
    :meth:`connect` opens the connection and says ``hello``; :meth:`call`
    returns a result map or raises :class:`HubError`: the Hub's error, or
    ``unavailable`` when the Hub cannot be reached, does not answer in time or
    drops the connection (:mod:`tools.client.failures`).  Use it as a context
    manager to connect and close.
    """

    def __init__(self, socket_path: Path | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 binding: str | None = None, client_name: str = "amux-cli",
                 endpoint: Endpoint | str | None = None, token: str | None = None,
                 ca_file: str | None = None, connect_deadline: float | None = None,
                 settings: ClientSettings | None = None) -> None:
        if isinstance(endpoint, str):
            endpoint = parse_endpoint(endpoint)
        if settings is None:
            settings = ClientSettings.from_env(endpoint=endpoint, socket_path=socket_path)
        self.settings = settings.override(token=token, binding=binding, ca_file=ca_file,
                                          connect_deadline=connect_deadline)
        self.endpoint = self.settings.endpoint
        self.socket_path = self.endpoint.path  # None for a network Hub
        self.timeout = timeout
        self.client_name = client_name
        self.hello: dict[str, Any] = {}
        """The Hub's hello reply (principal, scope, binding, limits, memory_enabled) after :meth:`connect`."""
        self._sock: socket.socket | None = None
        self._conn = ClientConnection()
        self._deadline: float | None = None  # monotonic time connect() must finish by, while it runs

    @property
    def connect_deadline(self) -> float | None:
        """Seconds for the whole of :meth:`connect`, or ``None``."""
        return self.settings.connect_deadline

    def __enter__(self) -> HubClient:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _op_timeout(self) -> float:
        """The timeout for the next socket operation: ``timeout``, cut to what is left of the connect deadline.

        Raises ``TimeoutError`` when the deadline has passed.
        """
        if self._deadline is None:
            return self.timeout
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return min(self.timeout, left)

    def _open(self) -> socket.socket:
        """A connected (and for ``tls://`` handshaken) socket; raises ``unavailable`` or ``TimeoutError``."""
        ep = self.endpoint
        if ep.kind == "unix":
            assert ep.path is not None
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(self._op_timeout())
                sock.connect(os.fspath(ep.path))
            except TimeoutError:
                sock.close()
                raise
            except OSError as exc:
                sock.close()
                raise connect_failed(ep, exc, self.settings.via_login) from None
            return sock
        try:
            sock = socket.create_connection((ep.host, ep.port), timeout=self._op_timeout())
        except TimeoutError:
            raise
        except OSError as exc:
            raise connect_failed(ep, exc, self.settings.via_login) from None
        if ep.kind == "tcp":
            return sock
        try:
            ctx = self.settings.ssl_context()
            sock.settimeout(self._op_timeout())
            return ctx.wrap_socket(sock, server_hostname=ep.host)
        except TimeoutError:
            sock.close()
            raise
        except OSError as exc:  # ssl.SSLError is an OSError, and so is an unreadable CA file
            sock.close()
            raise tls_failed(ep, exc, self.settings.via_login) from None

    def connect(self, *, hello: bool = True) -> dict[str, Any]:
        """Connect and say hello; returns the Hub's hello reply (principal, scope, limits, memory_enabled).

        Raises ``unavailable`` when the Hub cannot be reached or does not
        answer within ``timeout`` per operation (or ``connect_deadline`` in
        all), and the Hub's own error for a refused hello (``unauthorized``,
        ``binding_mismatch``, ``busy``, ...).  With ``hello`` false it only
        connects (and returns ``{}``): for the methods a caller with no
        identity may call (``tls_ca``, ``redeem``, ``logout``; DESIGN.md §7.4).
        """
        self.close()
        limit = self.connect_deadline
        self._deadline = time.monotonic() + limit if limit is not None else None
        try:
            try:
                self._sock = self._open()
            except TimeoutError:
                raise no_answer(self.endpoint, "hello", limit if limit is not None else self.timeout) from None
            self._conn = ClientConnection()
            if hello:
                rid, frame = self._conn.hello_request(self.client_name, self.binding, self.token,
                                                       session=self.settings.session)
                self.hello = self._exchange("hello", rid, frame)
        finally:
            self._deadline = None
            if self._sock is not None:
                self._sock.settimeout(self.timeout)
        return self.hello

    def detach(self) -> socket.socket:
        """Hand the connected socket over to the caller, who then owns it (and must close it); this client is left
        unconnected.

        For a connection that changes protocol after an answer, as ``mcp_open`` does (DESIGN.md §9.2): the Hub
        sends nothing unasked after that answer, so no byte of what follows is left buffered here.  Raises
        ``unavailable`` when not connected.
        """
        if self._sock is None:
            raise HubError(ErrorCode.UNAVAILABLE, "not connected to the Hub", where(self.endpoint))
        sock, self._sock = self._sock, None
        return sock

    def close(self) -> None:
        """Close the connection (a no-op when not connected)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and wait for its response; returns the result map.

        Raises ``bad_request`` (text that is not valid UTF-8, an integer over
        64 bits) or ``frame_too_large`` before anything is sent, the Hub's
        error for a refused request, and ``unavailable`` when not connected,
        on a timeout (``data.uncertain``: whether the request had been sent)
        or when the connection breaks.
        """
        if self._sock is None:
            raise HubError(ErrorCode.UNAVAILABLE, "not connected to the Hub", where(self.endpoint))
        try:
            rid, frame = self._conn.send_request(method, params)
        except ConnectionClosed:
            raise lost(self.endpoint, method, "closed the connection", sent=False) from None
        return self._exchange(method, rid, frame)

    def _exchange(self, method: str, rid: int, frame: bytes) -> dict[str, Any]:
        assert self._sock is not None
        sent = False
        try:
            self._sock.settimeout(self._op_timeout())
            self._sock.sendall(frame)
            sent = True
            while True:
                response = self._conn.next_response()
                if response is not None:
                    if response.id in (rid, None):
                        return response.unwrap()
                    continue  # an answer to an earlier request that timed out
                self._sock.settimeout(self._op_timeout())
                self._conn.receive_data(self._sock.recv(RECEIVE_BYTES))
        except TimeoutError:
            self._conn.abandon(rid)
            limit = self.connect_deadline if self._deadline is not None else None
            raise no_answer(self.endpoint, method, limit if limit is not None else self.timeout,
                            sent=sent) from None
        except ConnectionClosed:
            raise lost(self.endpoint, method, "closed the connection", sent=True) from None
        except OSError as exc:  # reset, broken pipe, a TLS alert
            raise lost(self.endpoint, method, f"closed the connection ({exc})", sent=sent) from None
