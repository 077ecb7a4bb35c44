"""Length-prefixed frames: a 4-byte big-endian unsigned length, then that many bytes.

Sans-I/O in the style of h11/wsproto: the caller feeds received bytes into a
:class:`FrameDecoder` and pulls complete frame bodies out; it owns the socket.
The length is checked against the maximum *before* any body byte is buffered,
so a hostile 4 GiB prefix costs four bytes of memory, not four gigabytes.
"""

from __future__ import annotations

import struct

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.limits import LIMITS

HEADER = struct.Struct(">I")
HEADER_BYTES = HEADER.size


class FrameTooLarge(HubError):
    """A frame header announced more than the maximum; the stream cannot be resynchronised."""

    def __init__(self, announced: int, maximum: int) -> None:
        super().__init__(
            ErrorCode.FRAME_TOO_LARGE,
            f"frame of {announced} bytes exceeds the maximum of {maximum} bytes",
            {"current": announced, "maximum": maximum, "unit": "bytes"},
        )


def encode_frame(body: bytes, max_frame_bytes: int = LIMITS.max_frame_bytes) -> bytes:
    """Prefix ``body`` with its length.

    Raises :class:`FrameTooLarge` when ``len(body)`` exceeds ``max_frame_bytes``.
    """
    if len(body) > max_frame_bytes:
        raise FrameTooLarge(len(body), max_frame_bytes)
    return HEADER.pack(len(body)) + body


class FrameDecoder:
    """Incremental decoder: ``feed()`` bytes, then ``next_frame()`` until it returns None.

    After :class:`FrameTooLarge` is raised the decoder is poisoned (every later
    call raises again): the peer must be answered and the connection closed.
    """

    def __init__(self, max_frame_bytes: int = LIMITS.max_frame_bytes) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._need: int | None = None  # body length of the frame being read
        self._error: FrameTooLarge | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buffer)

    @property
    def in_frame(self) -> bool:
        """True when part of a frame (header or body) has arrived but not all of it."""
        return bool(self._buffer) or self._need is not None

    def feed(self, data: bytes) -> None:
        """Append received bytes; raises :class:`FrameTooLarge` if a header is over the limit."""
        if self._error is not None:
            raise self._error
        self._buffer += data
        self._check_header()

    def _check_header(self) -> None:
        if self._need is None and len(self._buffer) >= HEADER_BYTES:
            (length,) = HEADER.unpack_from(self._buffer)
            if length > self.max_frame_bytes:
                self._error = FrameTooLarge(length, self.max_frame_bytes)
                self._buffer.clear()
                raise self._error
            self._need = length
            del self._buffer[:HEADER_BYTES]

    def next_frame(self) -> bytes | None:
        """Return the next complete frame body, or None if more bytes are needed."""
        if self._error is not None:
            raise self._error
        self._check_header()
        if self._need is None or len(self._buffer) < self._need:
            return None
        body = bytes(self._buffer[: self._need])
        del self._buffer[: self._need]
        self._need = None
        # The next header is checked on the next call, not here: raising now
        # would throw away the complete frame just taken out of the buffer.
        return body
