"""A small Trio Hub client: one long-lived connection, reconnected once when it is lost.

Used by the MCP server (:mod:`tools.mcp_server`).  It speaks the same frames,
``hello`` and error codes as the blocking :class:`tools.client.HubClient` and
finds the Hub the same way (:func:`tools.client.resolve_socket`).

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
retried only when it cannot change anything (``search``, ``get``); for a write
whose answer was lost the error says the outcome is uncertain, because a
compare-and-swap retry would misreport a write that did happen as a conflict
(design record §2: an uncertain result requires rereading).
"""

from __future__ import annotations

import itertools
import os
import select
from pathlib import Path
from typing import Any

import trio

from protocol.errors import ErrorCode, HubError
from protocol.framing import FrameDecoder
from protocol.messages import Response, decode_response, encode_request
from tools.client import Endpoint, hello_params, parse_endpoint, resolve_endpoint, resolve_socket

DEFAULT_TIMEOUT = 30.0
"""Seconds one call may take before the connection is given up as dead."""

CONNECT_TIMEOUT = 5.0
"""Seconds to connect and complete ``hello``: a Hub that takes longer is treated as unavailable."""

RETRY_SAFE = frozenset({"search", "get", "export"})
"""Methods that change nothing: resending one whose answer was lost is harmless."""


class _Lost(Exception):
    """The connection failed; ``sent`` tells whether the request may have reached the Hub."""

    def __init__(self, reason: str, *, sent: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.sent = sent


class AsyncHubClient:
    """One connection to the Hub for a long-lived Trio process.

    ``connect()`` opens the socket and says ``hello`` (with ``binding``, by
    default ``$AMUX_MEMORY_BINDING``, and ``token``, by default
    ``$AMUX_TOKEN``); ``call()`` connects on demand, returns the result map
    or raises :class:`HubError`; connection failures raise ``unavailable``.
    ``hello`` keeps the Hub's last hello reply.  The Hub is found like the
    blocking client finds it: ``$AMUX_HUB`` as a socket path, ``tls://`` (CA
    from ``$AMUX_HUB_CA``) or loopback ``tcp://``, else the home's socket.
    """

    def __init__(self, socket_path: Path | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 binding: str | None = None, token: str | None = None, client_name: str = "amux-mcp",
                 endpoint: Endpoint | str | None = None, ca_file: str | None = None) -> None:
        # Where the Hub is: as the blocking client finds it (AMUX_HUB may be a socket, tls:// or tcp://).
        self._refusal: HubError | None = None
        if isinstance(endpoint, str):
            endpoint = parse_endpoint(endpoint)
        if endpoint is None:
            try:
                endpoint = Endpoint("unix", socket_path) if socket_path is not None else resolve_endpoint()
            except HubError as exc:  # a malformed AMUX_HUB: every call says so
                self._refusal = HubError(ErrorCode.UNAVAILABLE, exc.message, exc.data)
                endpoint = Endpoint("unix", resolve_socket())
        self.endpoint = endpoint
        self.socket_path = endpoint.path if endpoint.kind == "unix" else None
        self.ca_file = ca_file if ca_file is not None else (os.environ.get("AMUX_HUB_CA") or None)
        self.timeout = timeout
        self.binding = binding if binding is not None else (os.environ.get("AMUX_MEMORY_BINDING") or None)
        self.token = token if token is not None else (os.environ.get("AMUX_TOKEN") or None)
        self.client_name = client_name
        self.hello: dict[str, Any] = {}
        self.connects = 0
        """Connections opened so far (for tests and logs)."""
        self._stream: trio.abc.Stream | None = None
        self._raw: trio.SocketStream | None = None  # the socket under TLS, for the idle-EOF check
        self._decoder = FrameDecoder()
        self._ids = itertools.count(1)
        self._lock = trio.Lock()

    def _where(self) -> dict[str, str]:
        """Error data naming the Hub: ``hub``, plus ``socket`` for a local one."""
        where = {"hub": str(self.endpoint)}
        if self.socket_path is not None:
            where["socket"] = str(self.socket_path)
        return where

    @property
    def connected(self) -> bool:
        return self._stream is not None

    # -- connection ------------------------------------------------------------

    async def connect(self) -> dict[str, Any]:
        """(Re)connect and say hello; returns the Hub's hello reply."""
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
            raise HubError(ErrorCode.UNAVAILABLE,
                           f"the Hub at {self.endpoint} did not answer hello within {limit:g} s",
                           {**self._where()}) from None

    async def _open(self) -> tuple[trio.abc.Stream, trio.SocketStream]:
        ep = self.endpoint
        try:
            if ep.kind == "unix":
                assert ep.path is not None
                sock = await trio.open_unix_socket(os.fspath(ep.path))
                return sock, sock
            tcp = await trio.open_tcp_stream(ep.host, ep.port)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise HubError(
                ErrorCode.UNAVAILABLE,
                f"no Hub is listening at {ep} ({exc.strerror}); start one with 'amux hub serve' "
                "or point AMUX_HOME / AMUX_HUB at a running Hub",
                self._where(),
            ) from None
        except OSError as exc:
            raise HubError(ErrorCode.UNAVAILABLE, f"cannot reach the Hub at {ep}: {exc}", self._where()) from None
        if ep.kind == "tcp":
            return tcp, tcp
        import ssl  # only remote callers pay for it

        try:
            ctx = ssl.create_default_context(cafile=self.ca_file)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            tls = trio.SSLStream(tcp, ctx, server_hostname=ep.host)
            await tls.do_handshake()
        except (ssl.SSLError, OSError, trio.BrokenResourceError) as exc:
            await tcp.aclose()
            raise HubError(ErrorCode.UNAVAILABLE, f"TLS with the Hub at {ep} failed: {exc} "
                           "(is AMUX_HUB_CA the CA that signed the Hub's certificate?)", {"hub": str(ep)}) from None
        return tls, tcp

    async def _open_and_hello(self) -> dict[str, Any]:
        stream, raw = await self._open()
        self._raw = raw
        self._stream = stream
        self._decoder = FrameDecoder()
        self.connects += 1
        try:
            self.hello = await self._exchange("hello", hello_params(self.client_name, self.binding, self.token))
        except _Lost as lost:
            await self._drop()
            raise HubError(ErrorCode.UNAVAILABLE, f"the Hub at {self.endpoint} {lost.reason}",
                           {**self._where()}) from None
        except BaseException:
            await self._drop()
            raise
        return self.hello

    async def _drop(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def aclose(self) -> None:
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
        the request may have reached the Hub and could change something.
        """
        async with self._lock:
            if self._stream is not None and self._stale():
                await self._drop()
            for attempt in (1, 2):
                if self._stream is None:
                    await self._connect()
                try:
                    return await self._exchange(method, params)
                except _Lost as lost:
                    await self._drop()
                    if lost.sent and method not in RETRY_SAFE:
                        raise HubError(
                            ErrorCode.UNAVAILABLE,
                            f"the connection to the Hub was lost during {method} ({lost.reason}); whether it "
                            "took effect is unknown: read the document again before retrying",
                            {**self._where(), "method": method, "uncertain": True},
                        ) from None
                    if attempt == 2:
                        raise HubError(ErrorCode.UNAVAILABLE, f"the Hub at {self.endpoint} {lost.reason}",
                                       {**self._where(), "method": method}) from None
            raise AssertionError("unreachable")

    async def _exchange(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request/response on the open connection; raises :class:`_Lost` when it breaks.

        A Hub error answer leaves the connection usable.  Any other failure
        (cancellation, a timeout, a malformed frame) leaves the stream in an
        unknown state, so the connection is dropped.
        """
        assert self._stream is not None
        stream = self._stream
        rid = next(self._ids)
        try:
            frame = encode_request(rid, method, params)  # frame_too_large is raised before anything is sent
        except UnicodeEncodeError as exc:
            raise HubError(ErrorCode.BAD_REQUEST, f"the {method} request holds text that is not valid UTF-8 "
                           f"(a lone surrogate at character {exc.start})", {"method": method}) from None
        sent = False
        try:
            with trio.fail_after(self.timeout):
                try:
                    await stream.send_all(frame)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    # A broken Unix-socket write delivered nothing a Hub could act on.
                    raise _Lost(f"closed the connection ({exc.__cause__ or exc})", sent=False) from None
                sent = True
                response = await self._receive(stream, rid)
        except trio.TooSlowError:
            await self._drop()
            raise HubError(ErrorCode.UNAVAILABLE, f"the Hub did not answer {method} within {self.timeout:g} s",
                           {**self._where(), "method": method, "uncertain": sent}) from None
        except _Lost:
            raise
        except BaseException:
            await self._drop()
            raise
        return response.unwrap()

    async def _receive(self, stream: trio.abc.Stream, rid: int) -> Response:
        while True:
            body = self._decoder.next_frame()
            if body is not None:
                response = decode_response(body)
                if response.id in (rid, None):
                    return response
                continue
            try:
                data = await stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise _Lost(f"closed the connection ({exc.__cause__ or exc})", sent=True) from None
            if not data:
                raise _Lost("closed the connection", sent=True)
            self._decoder.feed(bytes(data))
