"""An MCP session on a Hub connection: MCP frames in, the SDK server, MCP frames out (DESIGN.md §9.2).

After ``hello`` and ``mcp_open`` (:meth:`hub.serve.hub.Hub.mcp_open`) every frame
on the connection carries one JSON-RPC message (``{"mcp": text}``,
:func:`protocol.messages.encode_mcp`).  :class:`McpBridge` feeds them to an
SDK server (:func:`hub.mcp.server.build_server`) through anyio memory object
streams, as the SDK's stdio transport does, and writes the server's messages
back as MCP frames.  It runs in the connection's nursery, so the connection's
bounds hold: a request counts in ``in_flight`` until its answer is sent (at
most ``MAX_IN_FLIGHT``; one more is answered with a JSON-RPC ``busy`` error
without reaching the server), an answer the peer does not take within the
send timeout closes the connection (slow reader), and the idle timeout runs
only while nothing is in flight.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp.types import (
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)

from amux_memory.hub.mcp.continuations import DEFAULT_PAGE_TTL
from amux_memory.hub.mcp.server import Mounts, Review, build_server
from amux_memory.hub.mcp.tools import Backend, Rights
from amux_memory.protocol.errors import HubError
from amux_memory.protocol.limits import MAX_IN_FLIGHT
from amux_memory.protocol.messages import decode_mcp, encode_mcp

if TYPE_CHECKING:
    from amux_memory.hub.serve.connection import Connection

log = logging.getLogger("amux.mcp")

INBOX = 16
"""JSON-RPC messages read from the connection and not yet taken by the server; the read loop waits beyond it."""
BUSY_CODE = -32000
"""The JSON-RPC error code of a request refused because too many are in flight (implementation-defined range)."""


def json_text(message: Any) -> str:
    """One JSON-RPC message as the SDK's stdio transport writes it (by alias, unset fields left out)."""
    text: str = message.model_dump_json(by_alias=True, exclude_unset=True)
    return text


class McpBridge:
    """One MCP session on one Hub connection (see the module docstring).

    ``backend`` runs the session's tool calls (the caller's identity and scope
    are fixed in it); ``instructions``, ``page_ttl`` (seconds), ``review``, ``mounts`` (the caller's team
    mounts at ``mcp_open``) and ``rights`` (asked before every page) as in :func:`hub.mcp.server.build_server`.
    :meth:`run` serves until :meth:`close_input` (the peer closed, or the Hub stops reading).
    """

    def __init__(self, conn: Connection, backend: Backend, *, instructions: bool = True,
                 page_ttl: float = DEFAULT_PAGE_TTL, review: Review = False, mounts: Mounts = (),
                 rights: Rights | None = None) -> None:
        self.conn = conn
        self.server = build_server(backend, instructions=instructions, page_ttl=page_ttl, review=review,
                                   mounts=mounts, rights=rights)
        self._inbox_send: MemoryObjectSendStream[SessionMessage | Exception]
        self._inbox: MemoryObjectReceiveStream[SessionMessage | Exception]
        self._inbox_send, self._inbox = anyio.create_memory_object_stream[SessionMessage | Exception](INBOX)
        self._outbox_send: MemoryObjectSendStream[SessionMessage]
        self._outbox: MemoryObjectReceiveStream[SessionMessage]
        self._outbox_send, self._outbox = anyio.create_memory_object_stream[SessionMessage](0)
        self._pending: set[int | str] = set()  # request ids fed to the server and not yet answered

    async def run(self) -> None:
        """Serve the session until its input is closed; then the server finishes and the writer drains."""
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._write_out)
                try:
                    await self.server.run(self._inbox, self._outbox_send, self.server.create_initialization_options())
                finally:
                    self._outbox_send.close()
        finally:
            self.conn.in_flight -= len(self._pending)
            self._pending.clear()

    async def feed(self, body: bytes) -> None:
        """Pass one MCP frame body to the server; waits while :data:`INBOX` messages are queued.

        Raises ``bad_request`` for a frame that is not an MCP frame (the connection answers it with a Hub
        error frame).  Text that is not a JSON-RPC message is answered with a JSON-RPC parse error (id null).
        """
        text = decode_mcp(body)
        try:
            message = jsonrpc_message_adapter.validate_json(text, by_name=False)
        except ValueError:  # pydantic's ValidationError is one; the SDK's stdio transport would not answer at all
            await self._send(json_text(JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(
                code=PARSE_ERROR, message="Parse error: not a JSON-RPC 2.0 message"))))
            return
        if isinstance(message, JSONRPCRequest):
            if self.conn.in_flight >= MAX_IN_FLIGHT:
                await self._send(json_text(JSONRPCError(jsonrpc="2.0", id=message.id, error=ErrorData(
                    code=BUSY_CODE,
                    message=f"busy: more than {MAX_IN_FLIGHT} requests in flight on this connection; "
                            "wait for answers"))))
                return
            self._pending.add(message.id)
            self.conn.in_flight += 1
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            # A cancelled request gets no answer (MCP): it stops counting now, or 32 of them would block the session.
            rid = (message.params or {}).get("requestId")
            if isinstance(rid, int | str) and rid in self._pending:
                self._pending.discard(rid)
                self.conn.in_flight -= 1
        await self._inbox_send.send(SessionMessage(message))

    def close_input(self) -> None:
        """No more messages from the peer: the server stops once it has answered what it was given."""
        self._inbox_send.close()

    async def _write_out(self) -> None:
        async with self._outbox:
            async for item in self._outbox:
                message = item.message
                await self._send(json_text(message))
                if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id in self._pending:
                    self._pending.discard(message.id)
                    self.conn.in_flight -= 1

    async def _send(self, text: str) -> None:
        try:
            frame = encode_mcp(text)
        except HubError:  # over the frame limit: nothing the server sends comes near it (pages are 6 KiB)
            log.error("dropping an MCP message of %d characters: over the frame limit", len(text))
            return
        await self.conn.send(frame)
