"""One client connection to the Hub: read frames, answer ``hello``, run requests, write responses.

This is the first step of a request inside the Hub (DESIGN.md §2): a
listener (:mod:`hub.serve.listeners`) hands each accepted stream to
:meth:`ConnectionSet.handle`, which reads length-prefixed frames
(:class:`protocol.framing.FrameDecoder`), decodes each request
(:func:`protocol.messages.decode_request`) and passes it to the
:class:`Session` — the :class:`hub.serve.hub.Hub` — which authenticates
``hello`` and runs data methods through :mod:`hub.methods.memory`.

The wire rules (DESIGN.md §3): the first request must be ``hello``.  After
it, requests are read in a loop and each runs as its own task in the
connection's nursery, so several may be in flight; responses are written
under a per-connection lock and matched by ``id``.  A malformed frame is
answered with ``bad_request`` and the connection goes on; an oversized frame
is answered with ``frame_too_large`` and the connection is closed, since the
stream cannot be resynchronised.

Bounds (DESIGN.md §6), each answered with an error or a clean close, none
bringing the Hub down: requests in flight per connection
(:data:`MAX_IN_FLIGHT`), time to ``hello``, idle time, time to finish a
started frame (slow sender), time for the peer to take an answer (slow
reader) and TLS handshake time.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from amux_memory.hub.access.identity import Identity, Peer, Scope, peer_credentials
from amux_memory.hub.methods.calls import Kind, Route
from amux_memory.hub.storage.faults import STORAGE_CODES, from_os_error, log_fault
from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.framing import FrameDecoder
from amux_memory.protocol.limits import (
    FRAME_TIMEOUT_SECONDS,
    HELLO_TIMEOUT_SECONDS,
    IDLE_TIMEOUT_SECONDS,
    MAX_IN_FLIGHT,
    SEND_TIMEOUT_SECONDS,
    TLS_HANDSHAKE_TIMEOUT_SECONDS,
    Limits,
)
from amux_memory.protocol.messages import Request, decode_request, encode_error, encode_result

log = logging.getLogger("amux.hub")

Result = dict[str, Any]

RECEIVE_BYTES = 65536
"""Most bytes read from the stream at once."""


class McpPipe(Protocol):
    """An MCP session a connection has become after ``mcp_open`` (:class:`hub.mcp.session.McpBridge`)."""

    async def feed(self, body: bytes) -> None:
        """Take one MCP frame body from the peer; raises ``bad_request`` for a frame that is not one."""
        ...

    def close_input(self) -> None:
        """The peer sends no more: finish what was given, then stop."""
        ...


@dataclass
class Connection:
    """Per-connection state: transport, kernel peer (Unix only), identity and scope once ``hello`` succeeded.

    ``transport`` is ``unix``, ``tcp`` or ``tls``.  ``in_flight`` counts requests
    started and not yet answered.  ``closer`` cancels the whole connection (set
    by :meth:`ConnectionSet.handle`); :meth:`send` uses it when the peer stops reading.
    ``hello_deadline`` is the ``trio.current_time()`` by which ``hello`` must have
    succeeded (accept + :data:`HELLO_TIMEOUT_SECONDS`).
    """

    stream: trio.abc.Stream
    peer: Peer | None
    transport: str = "unix"
    identity: Identity | None = None
    scope: Scope | None = None
    helloed: bool = False
    in_flight: int = 0
    send_lock: trio.Lock = field(default_factory=trio.Lock)
    closer: trio.CancelScope | None = None
    hello_deadline: float = float("inf")
    mcp: McpPipe | None = None
    """Set by a successful ``mcp_open``: from then on every frame goes to this MCP session (DESIGN.md §9.2)."""

    @property
    def principal(self) -> str | None:
        """The authenticated principal's name, or None before a successful ``hello``."""
        return self.identity.principal if self.identity is not None else None

    async def send(self, frame: bytes) -> None:
        """Write one complete response frame, one writer at a time.

        A peer that has gone away is ignored (there is nobody to tell).  A peer
        that does not take the frame within :data:`SEND_TIMEOUT_SECONDS` (slow
        reader) has its connection cancelled through ``closer``.  Cancelled from
        outside, the frame may be partly written; the connection is then closing.
        """
        async with self.send_lock:
            with trio.move_on_after(SEND_TIMEOUT_SECONDS) as slow:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await self.stream.send_all(frame)  # a peer that went away has nothing to be told
            if slow.cancelled_caught:
                log.info("closing a connection that did not read its answers for %g s", SEND_TIMEOUT_SECONDS)
                if self.closer is not None:
                    self.closer.cancel()


class Session(Protocol):
    """What the connection loop needs from the Hub (:class:`hub.serve.hub.Hub` is the one implementation)."""

    limits: Limits
    routes: Mapping[str, Route]
    """The route table (:mod:`hub.methods.routes`): the methods a request may name, and each one's kind."""

    async def hello(self, conn: Connection, params: dict[str, Any]) -> Result:
        """Answer ``hello`` on ``conn`` (setting its identity and scope) or raise :class:`HubError`."""
        ...

    async def call(self, identity: Identity, scope: Scope, request: Request, transport: str = "unix") -> Result:
        """Run one data request for an authenticated caller (arrived over ``transport``) or raise
        :class:`HubError`."""
        ...

    async def mcp_open(self, conn: Connection, params: dict[str, Any], nursery: trio.Nursery) -> Result:
        """Make ``conn`` an MCP session (setting ``conn.mcp``, its task in ``nursery``) or raise :class:`HubError`."""
        ...

    async def enrol(self, conn: Connection, request: Request) -> Result:
        """Answer a method of a caller with no identity (``tls_ca``, ``redeem``, ``logout``) or raise a HubError."""
        ...


async def close_stream(stream: trio.abc.Stream) -> None:
    """Close a connection's stream; for TLS, close the transport without a ``close_notify`` exchange.

    A peer that may be gone or hostile gets no chance to make the Hub wait.
    Callers shield it from cancellation so the descriptor is always closed.
    """
    if isinstance(stream, trio.SSLStream):
        await stream.transport_stream.aclose()
    else:
        await stream.aclose()


class ConnectionSet:
    """The Hub's open connections: how many there are, and stopping them all reading at shutdown."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.count = 0
        """Connections being served now (the listeners refuse new ones over ``MAX_CONNECTIONS``)."""
        self._readers: set[trio.CancelScope] = set()  # cancelled at shutdown
        self._stopping = False

    def stop_reading(self) -> None:
        """Stop reading new requests on every connection, now and for any opened later.

        Requests already running still finish and are answered; each connection
        then closes.
        """
        self._stopping = True
        for reader in self._readers:
            reader.cancel()

    async def handle(self, stream: trio.SocketStream, transport: str = "unix",
                     tls: ssl.SSLContext | None = None) -> None:
        """Serve one connection until the peer closes it, it misbehaves, or the Hub stops.

        ``transport`` is ``unix`` (the kernel names the peer, ``SO_PEERCRED``),
        ``tcp`` or ``tls``; ``tls`` is the server context, and the handshake must
        finish within :data:`TLS_HANDSHAKE_TIMEOUT_SECONDS`; ``hello`` must then
        succeed within :data:`HELLO_TIMEOUT_SECONDS` of the accept.  Never raises: a
        failure is logged and the connection closed.  On cancellation the
        connection's tasks are cancelled and the stream is closed (shielded).
        """
        hello_deadline = trio.current_time() + HELLO_TIMEOUT_SECONDS  # one deadline from accept (DESIGN.md §6)
        self.count += 1
        conn_stream: trio.abc.Stream = stream
        try:
            peer = peer_credentials(stream.socket) if transport == "unix" else None  # type: ignore[arg-type]
            if tls is not None:
                ssl_stream = trio.SSLStream(stream, tls, server_side=True)
                conn_stream = ssl_stream
                with trio.move_on_after(TLS_HANDSHAKE_TIMEOUT_SECONDS) as handshake:
                    try:
                        await ssl_stream.do_handshake()
                    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                        log.info("TLS handshake failed: %s", exc.__cause__ or exc)
                        return
                if handshake.cancelled_caught:
                    log.info("closing a TLS connection that did not finish its handshake in %g s",
                             TLS_HANDSHAKE_TIMEOUT_SECONDS)
                    return
            conn = Connection(conn_stream, peer, transport, hello_deadline=hello_deadline)
            async with trio.open_nursery() as nursery:
                conn.closer = nursery.cancel_scope
                with trio.CancelScope() as reader:
                    self._readers.add(reader)
                    if self._stopping:
                        reader.cancel()
                    try:
                        await self._read_loop(conn, nursery)
                    finally:
                        self._readers.discard(reader)
                        if conn.mcp is not None:
                            conn.mcp.close_input()  # the session answers what it has, then ends
        except Exception:
            log.exception("connection failed")
        finally:
            self.count -= 1
            with trio.CancelScope(shield=True):
                await close_stream(conn_stream)

    async def _read_loop(self, conn: Connection, nursery: trio.Nursery) -> None:
        """Read frames until EOF, a timeout, or an oversized frame; start each request in ``nursery``."""
        decoder = FrameDecoder(self.session.limits.max_frame_bytes)
        frame_deadline = float("inf")  # when the frame now arriving must be complete
        while True:
            data = b""
            # After hello the idle wait restarts with every read; before it, the deadline stays fixed.
            wait_until = trio.current_time() + IDLE_TIMEOUT_SECONDS if conn.helloed else conn.hello_deadline
            with trio.move_on_at(min(wait_until, frame_deadline)) as idle:
                try:
                    data = bytes(await conn.stream.receive_some(RECEIVE_BYTES))  # no copy when it already is bytes
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
            if idle.cancelled_caught:
                if trio.current_time() >= frame_deadline:
                    log.info("closing a connection whose frame did not arrive within %g s", FRAME_TIMEOUT_SECONDS)
                    with trio.move_on_after(1):  # a courtesy: do not wait on a peer that does not read either
                        await conn.send(encode_error(None, HubError(
                            ErrorCode.BAD_REQUEST,
                            f"a frame must arrive complete within {FRAME_TIMEOUT_SECONDS:g} s of its first byte; "
                            "closing the connection", {"timeout_seconds": FRAME_TIMEOUT_SECONDS})))
                    return
                if conn.in_flight:
                    continue  # still working for this peer; it is waiting, not idle
                if conn.helloed:
                    log.info("closing a connection that was idle for %g s", IDLE_TIMEOUT_SECONDS)
                else:
                    log.info("closing a connection that did not complete hello within %g s", HELLO_TIMEOUT_SECONDS)
                return
            if not data:
                return
            frames = 0
            try:
                decoder.feed(data)
                while (body := decoder.next_frame()) is not None:
                    frames += 1
                    await self._on_frame(conn, body, nursery)
            except HubError as exc:  # oversized frame: answer, then close
                with trio.move_on_after(1):
                    await conn.send(encode_error(None, exc))
                return
            if not decoder.in_frame:
                frame_deadline = float("inf")
            elif frames or frame_deadline == float("inf"):
                frame_deadline = trio.current_time() + FRAME_TIMEOUT_SECONDS

    async def _on_frame(self, conn: Connection, body: bytes, nursery: trio.Nursery) -> None:
        """Decode one frame body against the route table: answer the handshake (``hello``), the methods of a caller
        with no identity (``tls_ca``, ``redeem``, ``logout``), the MCP switch (``mcp_open``) and refusals at once,
        start any other request as a task.

        On an MCP session every frame goes to it instead (a frame that is not an MCP frame is answered with
        ``bad_request`` and a null id).
        """
        if conn.mcp is not None:
            try:
                await conn.mcp.feed(body)
            except HubError as exc:
                await conn.send(encode_error(None, exc))
            return
        try:
            request = decode_request(body, self.session.routes)
        except HubError as exc:
            rid = exc.data.pop("id", None)
            await conn.send(encode_error(rid, exc))
            return
        kind = self.session.routes[request.method].kind
        if kind is Kind.HANDSHAKE:
            try:
                frame = encode_result(request.id, await self.session.hello(conn, request.params))
            except HubError as exc:
                frame = encode_error(request.id, exc)
            await conn.send(frame)
        elif kind is Kind.ENROL:
            try:
                frame = encode_result(request.id, await self.session.enrol(conn, request))
            except HubError as exc:
                frame = encode_error(request.id, exc)
            await conn.send(frame)
        elif not conn.helloed:
            await conn.send(encode_error(request.id, HubError(
                ErrorCode.BAD_REQUEST, "send 'hello' first: it opens the session and reports the caller's scope")))
        elif kind is Kind.SESSION:
            try:
                frame = encode_result(request.id, await self.session.mcp_open(conn, request.params, nursery))
            except HubError as exc:
                frame = encode_error(request.id, exc)
            await conn.send(frame)
        elif conn.in_flight >= MAX_IN_FLIGHT:
            await conn.send(encode_error(request.id, HubError(
                ErrorCode.BUSY, f"more than {MAX_IN_FLIGHT} requests in flight on this connection; wait for answers",
                {"maximum": MAX_IN_FLIGHT})))
        else:
            assert conn.identity is not None and conn.scope is not None
            conn.in_flight += 1
            # The identity and scope are taken now: a later hello on this connection does not change this request.
            nursery.start_soon(self._run_request, conn, request, conn.identity, conn.scope)

    async def _run_request(self, conn: Connection, request: Request, identity: Identity, scope: Scope) -> None:
        """Run one data request through the session and send its answer (an error for any failure)."""
        # A request counts as in flight until its answer is sent, so a peer that
        # pipelines without reading cannot pile up unsent responses in the Hub.
        try:
            try:
                frame = encode_result(request.id, await self.session.call(identity, scope, request, conn.transport))
            except HubError as exc:
                if exc.code in STORAGE_CODES:
                    log_fault(log, request.method, exc)  # the full OSError stays in the log, not the answer
                frame = encode_error(request.id, exc)
            except OSError as exc:
                # A file-system failure no step named (DESIGN.md §4.8): still a storage error, not a bug.
                log.exception("request %s failed", request.method)
                frame = encode_error(request.id, from_os_error(exc, request.method, ""))
            except Exception as exc:
                log.exception("request %s failed", request.method)
                frame = encode_error(request.id, HubError(ErrorCode.INTERNAL, f"internal error: {type(exc).__name__}"))
            await conn.send(frame)
        finally:
            conn.in_flight -= 1
