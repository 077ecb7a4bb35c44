"""A raw connection to a Hub socket: exactly the bytes a test wants, whole response frames back.

Not :class:`tools.client.HubClient`: a test can send requests before ``hello``,
garbage bodies, oversized length prefixes or half frames (DESIGN.md §3).  Every
socket has a timeout, so a Hub that stops answering fails the test instead of
hanging it.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from amux_memory.protocol.errors import ErrorCode
from amux_memory.protocol.framing import FrameDecoder
from amux_memory.protocol.messages import PROTOCOL_VERSION, Response, decode_response, encode_request

RAW_TIMEOUT = 5.0
"""Seconds a :class:`Raw` socket waits for any one send or receive before ``TimeoutError``."""


class Closed(Exception):
    """The Hub closed the connection."""


class Raw:
    """One raw ``AF_UNIX`` connection: send bytes, read whole response frames.

    Use as a context manager (closes the socket).  ``timeout`` is seconds per socket operation.
    """

    def __init__(self, path: Path, timeout: float = RAW_TIMEOUT) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.decoder = FrameDecoder()

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()

    def send(self, data: bytes) -> None:
        """Send ``data`` as is (any bytes, whole frames or not)."""
        self.sock.sendall(data)

    def request(self, rid: int, method: str, params: dict[str, Any] | None = None) -> None:
        """Send one well-formed request frame without waiting for its answer."""
        self.send(encode_request(rid, method, params or {}))

    def response(self) -> Response:
        """The next response; raises :class:`Closed` on EOF, ``TimeoutError`` if none comes."""
        return decode_response(self.frame())

    def frame(self) -> bytes:
        """The next frame's body, undecoded (an MCP frame after ``mcp_open``); :class:`Closed` on EOF."""
        while True:
            body = self.decoder.next_frame()
            if body is not None:
                return body
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                data = b""
            if not data:
                raise Closed
            self.decoder.feed(data)

    def call(self, rid: int, method: str, params: dict[str, Any] | None = None) -> Response:
        """Send one request and return the next response, asserted to carry the same id."""
        self.request(rid, method, params)
        resp = self.response()
        assert resp.id == rid, resp
        return resp

    def hello(self, rid: int = 1, **params: Any) -> dict[str, Any]:
        """Open the session (``hello`` with the current protocol version and ``params``); its result."""
        return self.call(rid, "hello", {"protocol": PROTOCOL_VERSION, "client": "test", **params}).unwrap()

    def wait_closed(self) -> list[Response]:
        """Read until the Hub closes the connection (within the socket timeout); the responses seen."""
        seen: list[Response] = []
        while True:
            try:
                seen.append(self.response())
            except Closed:
                return seen


def error_of(resp: Response) -> tuple[ErrorCode, dict[str, Any]]:
    """``(code, data)`` of an error response (asserted to be an error)."""
    assert resp.error is not None, f"expected an error, got {resp.result!r}"
    return resp.error.code, resp.error.data
