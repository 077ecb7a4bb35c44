"""The Trio Hub client: one long-lived connection, reconnected once when it is lost (DESIGN.md §3, §9).

Used by the MCP server.  Thin I/O over :class:`protocol.connection.ClientConnection`
and :class:`tools.client.settings.ClientSettings`, like the blocking client
(:mod:`tools.client.blocking`): same frames, ``hello``, settings and failure
wording (:mod:`tools.client.failures`).

Why a native Trio client rather than the blocking client on a worker thread:
a Trio call can be cancelled (an MCP ``notifications/cancelled``, a timeout,
shutdown) and the cancellation lands on a checkpoint we control, so the
connection is dropped cleanly instead of a thread being left blocked in
``recv`` with a half-read response on a socket another call may reuse.

Calls are sent one at a time under a lock.  Memory calls are short and bounded
by the Hub (a search stops at 250 ms), and agents call tools one after another,
so multiplexing would add a reader task and buy nothing measurable.

Reconnecting: before each call an idle connection is checked for EOF (the Hub
closes connections idle for 10 minutes, or restarts); a lost connection is
reopened once per call.  A request that may already have reached the Hub is
retried only when it cannot change anything (:data:`RETRY_SAFE`); for a write
whose answer was lost the error says the outcome is uncertain, because a
compare-and-swap retry would misreport a write that did happen as a conflict
(DESIGN.md §4: an uncertain result requires rereading).

Cancellation: a call cancelled while its request or response is in flight
drops the connection (the stream's state is unknown); the next call
reconnects.  Closing the stream is shielded, so it completes even then.
"""

from __future__ import annotations

import select
from pathlib import Path
from typing import Any

import trio

from protocol.connection import ClientConnection, ConnectionClosed
from protocol.endpoint import Endpoint, parse_endpoint
from protocol.errors import ErrorCode, HubError
from protocol.limits import ASYNC_CONNECT_TIMEOUT_SECONDS
from protocol.messages import Response
from tools.client.base import DEFAULT_TIMEOUT, RECEIVE_BYTES, ClientBase
from tools.client.failures import RETRY_SAFE, connect_failed, lost, no_answer, tls_failed
from tools.client.settings import ClientSettings, resolve_socket

__all__ = ["CONNECT_TIMEOUT", "AsyncHubClient"]

CONNECT_TIMEOUT = ASYNC_CONNECT_TIMEOUT_SECONDS
"""Seconds to connect and complete ``hello``: a Hub that takes longer is treated as unavailable."""

class _Lost(Exception):
    """The connection failed; ``sent`` tells whether the request may have reached the Hub."""

    def __init__(self, reason: str, *, sent: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.sent = sent


class AsyncHubClient(ClientBase):
    """One connection to the Hub for a long-lived Trio process.

    Where the Hub is and what ``hello`` carries are found like the blocking
    client finds them: ``endpoint`` (an :class:`~protocol.endpoint.Endpoint`
    or ``AMUX_HUB``-style text), else ``socket_path``, else the environment
    (:meth:`ClientSettings.from_env`); ``binding``, ``token`` and ``ca_file``
    override the environment when not ``None``; ``settings`` replaces it.  A
    malformed ``$AMUX_HUB`` does not raise here: every call then fails with
    ``unavailable`` saying why (a long-lived server must start and explain).

    :meth:`connect` opens the stream and says ``hello`` (within
    ``min(timeout, CONNECT_TIMEOUT)`` seconds); :meth:`call` connects on
    demand, returns the result map or raises :class:`HubError`; connection
    failures raise ``unavailable``.  ``timeout`` is seconds per call.
    :attr:`hello` keeps the Hub's last hello reply; :attr:`connects` counts
    connections opened.
    """

    def __init__(self, socket_path: Path | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 binding: str | None = None, token: str | None = None, client_name: str = "amux-mcp",
                 endpoint: Endpoint | str | None = None, ca_file: str | None = None,
                 settings: ClientSettings | None = None) -> None:
        self._refusal: HubError | None = None
        if isinstance(endpoint, str):
            endpoint = parse_endpoint(endpoint)
        if settings is None:
            try:
                settings = ClientSettings.from_env(endpoint=endpoint, socket_path=socket_path)
            except HubError as exc:  # a malformed AMUX_HUB: every call says so
                self._refusal = HubError(ErrorCode.UNAVAILABLE, exc.message, exc.data,
                                         next_step="AMUX_HUB is malformed: tell the user to fix it (the message "
                                         "says how); carry on without memory meanwhile.")
                settings = ClientSettings.from_env(endpoint=Endpoint("unix", resolve_socket()))
        self.settings = settings.override(token=token, binding=binding, ca_file=ca_file)
        self.endpoint = self.settings.endpoint
        self.socket_path = self.endpoint.path if self.endpoint.kind == "unix" else None
        self.timeout = timeout
        self.client_name = client_name
        self.hello: dict[str, Any] = {}
        self.connects = 0
        """Connections opened so far (for tests and logs)."""
        self._stream: trio.abc.Stream | None = None
        self._raw: trio.SocketStream | None = None  # the socket under TLS, for the idle-EOF check
        self._conn = ClientConnection()
        self._lock = trio.Lock()

    @property
    def connected(self) -> bool:
        """True while a connection is open (it may still turn out to be closed by the Hub)."""
        return self._stream is not None

    # -- connection ------------------------------------------------------------

    async def connect(self) -> dict[str, Any]:
        """(Re)connect and say hello; returns the Hub's hello reply.

        Raises ``unavailable`` when the Hub cannot be reached or does not
        answer ``hello`` within ``min(timeout, CONNECT_TIMEOUT)`` seconds, and
        the Hub's own error for a refused hello.  On cancellation the
        half-open connection is closed (shielded) and ``Cancelled`` propagates.
        """
        async with self._lock:
            return await self._connect()

    async def _connect(self) -> dict[str, Any]:
        await self._drop()
        if self._refusal is not None:
            raise self._refusal
        limit = min(self.timeout, CONNECT_TIMEOUT)
        try:
            with trio.fail_after(limit):
                return await self._open_and_hello()
        except trio.TooSlowError:
            await self._drop()
            raise no_answer(self.endpoint, "hello", limit) from None

    async def _open(self) -> tuple[trio.abc.Stream, trio.SocketStream]:
        ep = self.endpoint
        try:
            if ep.kind == "unix":
                assert ep.path is not None
                sock = await trio.open_unix_socket(str(ep.path))
                return sock, sock
            tcp = await trio.open_tcp_stream(ep.host, ep.port)
        except OSError as exc:
            raise connect_failed(ep, exc) from None
        if ep.kind == "tcp":
            return tcp, tcp
        import ssl  # only remote callers pay for it

        try:
            tls = trio.SSLStream(tcp, self.settings.ssl_context(), server_hostname=ep.host)
            await tls.do_handshake()
        except (ssl.SSLError, OSError, trio.BrokenResourceError) as exc:
            await tcp.aclose()
            raise tls_failed(ep, exc) from None
        return tls, tcp

    async def _open_and_hello(self) -> dict[str, Any]:
        stream, raw = await self._open()
        self._raw = raw
        self._stream = stream
        self._conn = ClientConnection()
        self.connects += 1
        try:
            rid, frame = self._conn.hello_request(self.client_name, self.binding, self.token,
                                                   session=self.settings.session)
            await self._send(stream, frame)
            self.hello = (await self._receive(stream, rid)).unwrap()
        except _Lost as gone:
            await self._drop()
            raise lost(self.endpoint, "hello", gone.reason, sent=gone.sent) from None
        except BaseException:  # a refused hello, a timeout, cancellation: the connection is not usable
            await self._drop()
            raise
        return self.hello

    async def _drop(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def aclose(self) -> None:
        """Close the connection (a no-op when not connected); shielded from cancellation."""
        await self._drop()

    def _stale(self) -> bool:
        """True when the idle connection has been closed by the Hub (or holds unexpected bytes)."""
        assert self._stream is not None
        try:
            assert self._raw is not None
            readable, _, _ = select.select([self._raw.socket.fileno()], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    # -- calls -----------------------------------------------------------------

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return its result.

        Connects when there is no (live) connection; when the connection is
        lost during the call it reconnects once and resends the request, unless
        the request may have reached the Hub and could change something (then
        ``unavailable`` with ``data.uncertain``).  Raises ``bad_request`` for
        params that are not valid UTF-8 text and ``frame_too_large`` before
        anything is sent (the connection stays usable), ``unavailable`` after
        ``timeout`` seconds without an answer, and the Hub's own errors.  On
        cancellation mid-call the connection is dropped.
        """
        async with self._lock:
            if self._stream is not None and self._stale():
                await self._drop()
            for attempt in (1, 2):
                if self._stream is None:
                    await self._connect()
                try:
                    return await self._exchange(method, params)
                except _Lost as gone:
                    await self._drop()
                    if (gone.sent and method not in RETRY_SAFE) or attempt == 2:
                        raise lost(self.endpoint, method, gone.reason, sent=gone.sent) from None
            raise AssertionError("unreachable")

    async def _exchange(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request/response on the open connection; raises :class:`_Lost` when it breaks.

        A Hub error answer leaves the connection usable.  Any other failure
        (cancellation, a timeout, a malformed frame) leaves the stream in an
        unknown state, so the connection is dropped.
        """
        assert self._stream is not None
        stream = self._stream
        try:
            # bad_request (not UTF-8) and frame_too_large are raised before anything is sent.
            rid, frame = self._conn.send_request(method, params)
        except ConnectionClosed:
            raise _Lost("closed the connection", sent=False) from None
        sent = False
        try:
            with trio.fail_after(self.timeout):
                await self._send(stream, frame)
                sent = True
                response = await self._receive(stream, rid)
        except trio.TooSlowError:
            await self._drop()
            raise no_answer(self.endpoint, method, self.timeout, sent=sent) from None
        except _Lost:
            raise
        except BaseException:
            await self._drop()
            raise
        return response.unwrap()

    @staticmethod
    async def _send(stream: trio.abc.Stream, frame: bytes) -> None:
        """Send one request frame; raises :class:`_Lost` (``sent=False``) when the stream is broken."""
        try:
            await stream.send_all(frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            # A broken Unix-socket write delivered nothing a Hub could act on.
            raise _Lost(f"closed the connection ({exc.__cause__ or exc})", sent=False) from None

    async def _receive(self, stream: trio.abc.Stream, rid: int) -> Response:
        """Read until the response to ``rid`` (or an error the Hub could not address) arrives.

        Raises :class:`_Lost` (``sent=True``) when the stream breaks or ends.
        """
        while True:
            try:
                response = self._conn.next_response()
            except ConnectionClosed:
                raise _Lost("closed the connection", sent=True) from None
            if response is not None:
                if response.id in (rid, None):
                    return response
                continue
            try:
                data = await stream.receive_some(RECEIVE_BYTES)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise _Lost(f"closed the connection ({exc.__cause__ or exc})", sent=True) from None
            self._conn.receive_data(bytes(data))
